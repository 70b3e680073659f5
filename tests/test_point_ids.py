"""Point ids never change: committed results and resumed runs find their points by id.

``data/point-ids.json`` holds every point id of every shipped spec (``eval/sweeps/*.yaml``)
and of points that vary each sweepable option, as the code computed them when the file was
recorded. A spec with ``similarity_tau: calibrated`` is read with the file's fixed
calibration, so a refitted calibration (which rightly makes new points) does not fail this
test; a change to how ids are made does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillsynth.evaluation.sweeps import spec as spec_module
from skillsynth.evaluation.sweeps.spec import Point, SweepSpec, expand_points

ROOT = Path(__file__).resolve().parent.parent
RECORDED = json.loads((Path(__file__).parent / "data" / "point-ids.json").read_text())


def test_every_shipped_spec_is_recorded():
    assert set(RECORDED["specs"]) == {f.name for f in (ROOT / "eval" / "sweeps").glob("*.yaml")}


@pytest.mark.parametrize("name", sorted(RECORDED["specs"]))
def test_shipped_spec_point_ids_are_unchanged(name, monkeypatch):
    monkeypatch.setattr(spec_module, "calibration_for",
                        lambda *a, **k: dict(RECORDED["calibration"]))
    spec = SweepSpec.load(ROOT / "eval" / "sweeps" / name)
    assert [p.id for p in expand_points(spec)] == RECORDED["specs"][name]


def test_ids_of_points_varying_each_sweepable_option_are_unchanged():
    for case in RECORDED["points"]:
        p = Point(case["strategy"], case["values"], case["base"], case["calibration"],
                  case["options"])
        assert p.id == case["id"]
