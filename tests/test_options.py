"""A point's options are declared once (PointOptions); every other surface derives from it."""

from __future__ import annotations

import argparse
import dataclasses

import nbformat
import pytest
import yaml

from skillsynth.errors import ConfigError
from skillsynth.evaluation import EvalConfig, PointOptions
from skillsynth.evaluation.point.options import add_cli_options, cli_values
from skillsynth.evaluation.reporting.gate import PROTOCOL_DEFAULTS
from skillsynth.evaluation.sweeps.notebooks import find_notebook
from skillsynth.evaluation.sweeps.spec import _SPEC_ONLY_KEYS, GRID_KEYS, SweepSpec

#: What a point takes besides its options: where its data and models are, and its folder.
NOT_OPTIONS = {"corpus", "thresholds", "labels", "user", "backend", "out_dir"}


def test_no_surface_declares_an_option_the_dataclass_lacks():
    names = set(PointOptions.names())
    # the sweep spec: its own keys, its fields, and nothing that shadows an option
    spec_fields = {f.name for f in dataclasses.fields(SweepSpec)}
    assert not (spec_fields | set(_SPEC_ONLY_KEYS)) & names
    assert set(GRID_KEYS) - {"similarity_tau", "min_occurrences", "max_recall_body_chars"} \
        == set(PointOptions.sweepable())
    # EvalConfig: the options plus corpus, thresholds and labels
    assert {f.name for f in dataclasses.fields(EvalConfig)} == names | {"corpus", "thresholds",
                                                                       "labels"}
    # the sweep-point notebook's parameters cell
    nb = nbformat.read(find_notebook("sweep_point.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", ()))
    assigned = {line.split("=")[0].strip() for line in cell.source.splitlines()
                if "=" in line and not line.startswith("#")}
    assert assigned == NOT_OPTIONS - {"labels"} | {"options"}
    # the gate's defaults for points that do not name their protocol settings
    assert PROTOCOL_DEFAULTS == {k: PointOptions.defaults()[k] for k in PROTOCOL_DEFAULTS}
    assert set(PROTOCOL_DEFAULTS) == set(PointOptions.sweepable()) - {"strategy"}


def test_the_eval_command_has_exactly_one_flag_per_option():
    from skillsynth.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    ev = sub.choices["eval"]
    dests = {a.dest for a in ev._actions if a.dest != "help"}
    option_dests = dests & set(PointOptions.names())
    assert option_dests == set(PointOptions.names())
    # whatever else `eval` takes is a model, threshold, user or output flag, never an option
    others = dests - option_dests
    assert all(not d.startswith(("protocol", "recall", "cadence", "step", "repeat"))
               for d in others), others


def test_cli_flags_parse_into_the_options():
    p = argparse.ArgumentParser()
    add_cli_options(p)
    args = p.parse_args(["--k", "2", "--no-policy", "--tasks", "5,9", "--recall-key", "goals",
                         "--live", "--world", "tau2:retail"])
    opts = PointOptions(**cli_values(args))
    assert (opts.k, opts.policy, opts.tasks, opts.recall_key, opts.live) == (
        2, False, ("5", "9"), "goals", True)
    assert PointOptions(**cli_values(p.parse_args([]))) == PointOptions()
    with pytest.raises(SystemExit):  # choices come from the dataclass
        p.parse_args(["--protocol", "sideways"])


def test_from_mapping_checks_names_and_types_naming_the_source():
    assert PointOptions.from_mapping({"k": "4", "tasks": [5, "9"]}) == PointOptions(
        k=4, tasks=("5", "9"))
    with pytest.raises(ConfigError, match="unknown option.*'kk'") as e:
        PointOptions.from_mapping({"kk": 1}, source="spec.yaml")
    assert e.value.key == "kk" and "spec.yaml" in str(e.value)
    with pytest.raises(ConfigError, match="live must be true or false"):
        PointOptions.from_mapping({"live": "yes"})
    with pytest.raises(ConfigError, match="k must be a whole number"):
        PointOptions.from_mapping({"k": 2.5})
    with pytest.raises(ConfigError, match="tasks must be a list"):
        PointOptions.from_mapping({"tasks": "5"})
    with pytest.raises(ConfigError, match="repeats must be >= 1") as e:
        PointOptions.from_mapping({"repeats": 0})
    assert e.value.key == "repeats"


def test_options_round_trip_through_json_and_the_notebook_parameters():
    opts = PointOptions(strategy="none", protocol="rolling", cadence=5, tasks=("1",))
    assert PointOptions.from_mapping(opts.to_json()) == opts
    cfg = EvalConfig("c.db", labels="l.sqlite", **opts.to_json())
    assert cfg.options == opts and cfg.replace(k=5).k == 5
    assert set(cfg.as_dict()) == set(PointOptions.names()) | {"corpus", "thresholds", "labels"}


def test_a_spec_takes_every_option_as_a_top_level_key(tmp_path):
    spec = {"name": "s", "corpus": {"synthetic": {"families": 2}}, "grid": {"strategy": ["none"]},
            "backend": "lemonade", "k": 2, "seed": 7, "cadence": 4, "n_boot": 50}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    s = SweepSpec.load(path)
    assert (s.options.k, s.options.seed, s.options.cadence, s.options.n_boot) == (2, 7, 4, 50)
    flat = s.as_dict()  # spec.yaml stays flat: the options are top-level keys
    assert flat["k"] == 2 and "options" not in flat
    path.write_text(yaml.safe_dump(spec | {"step_limt": 3}))
    with pytest.raises(ConfigError, match="unknown key.*step_limt"):
        SweepSpec.load(path)


def test_an_old_run_folders_spec_still_matches_when_options_are_added():
    from skillsynth.evaluation.sweeps.resume import identity as _identity

    old = {"name": "s", "k": 3, "grid": {"strategy": ["none"]}}  # written before 'strategy'
    new = old | {"strategy": "skillsynth", "cadence": 20}         # both at their defaults
    assert _identity(yaml.safe_dump(old)) == _identity(yaml.safe_dump(new))
    assert _identity(yaml.safe_dump(old)) != _identity(yaml.safe_dump(old | {"k": 2}))


def test_a_resumed_sweep_may_reorder_its_points_but_not_change_them():
    from skillsynth.evaluation.sweeps.resume import identity as _identity

    spec = {"name": "s", "grid": {"strategy": ["none", "oracle", "inert"],
                                  "similarity_tau": [0.8, 0.9, 0.7]},
            "points": [{"strategy": "oracle"}, {"strategy": "skillsynth", "k": 2}]}
    reordered = spec | {"grid": {"similarity_tau": [0.8, 0.7, 0.9],
                                 "strategy": ["none", "inert", "oracle"]},
                        "points": [{"k": 2, "strategy": "skillsynth"}, {"strategy": "oracle"}]}
    assert _identity(yaml.safe_dump(spec)) == _identity(yaml.safe_dump(reordered))
    for changed in ({"points": [{"strategy": "oracle"}, {"strategy": "skillsynth", "k": 3}]},
                    {"points": [{"strategy": "oracle"}]},
                    {"grid": {"strategy": ["none", "oracle", "inert"], "similarity_tau": [0.8]}},
                    # an explicit point takes each axis's first value: a new first moves them
                    {"grid": {"strategy": ["none", "oracle", "inert"],
                              "similarity_tau": [0.9, 0.8, 0.7]}}):
        assert _identity(yaml.safe_dump(spec)) != _identity(yaml.safe_dump(spec | changed))


def test_a_resumed_sweep_may_add_points_but_not_change_or_drop_one(tmp_path):
    """A folder's finished points stay valid when the spec only grows; anything else is
    another sweep."""
    from skillsynth.errors import ConfigError
    from skillsynth.evaluation.sweeps.resume import check_resume as _check_resume
    from skillsynth.evaluation.sweeps.spec import SweepSpec

    def spec(**over):
        raw = {"name": "s", "corpus": {"db": "x.db"}, "description": "first",
               "grid": {"strategy": ["none"], "similarity_tau": [0.8]},
               "points": [{"strategy": "oracle"}]} | over
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(raw))
        return SweepSpec.load(path)

    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.yaml").write_text(_check_resume(spec(), run))
    grown = spec(description="reworded", points=[{"strategy": "oracle"}, {"strategy": "inert"}],
                 grid={"strategy": ["none"], "similarity_tau": [0.8, 0.9]})
    assert "inert" in _check_resume(grown, run)
    for other in (spec(points=[{"strategy": "inert"}]),                   # drops oracle
                  spec(grid={"strategy": ["none"], "similarity_tau": [0.9]}),  # drops 0.8
                  # 0.9 first: the explicit oracle point would run at 0.9, another point
                  spec(grid={"strategy": ["none"], "similarity_tau": [0.9, 0.8]}),
                  spec(k=2)):                                           # changes every point
        with pytest.raises(ConfigError, match="may add points or grid values"):
            _check_resume(other, run)


def test_each_option_declares_its_stage_and_derived_tables_follow_it():
    from skillsynth.config import Thresholds
    from skillsynth.evaluation.point.options import ROLES
    from skillsynth.evaluation.reporting.verification import VERIFY_KEYS
    from skillsynth.evaluation.sweeps.spec import Point

    assert {PointOptions.role(n) for n in PointOptions.names()} <= set(ROLES)
    assert sorted(sum((PointOptions.with_role(r) for r in ROLES), ())) \
        == sorted(PointOptions.names())
    assert VERIFY_KEYS == PointOptions.with_role("verify") and "verify" in VERIFY_KEYS
    assert {"max_recall_body_chars", "recall_top_k"} <= set(Thresholds.with_role("recall"))
    others = {"protocol": "rolling", "verify_min_success": 0.25}
    base = Point("skillsynth", {"similarity_tau": 0.5}, {}, {}, {})
    for name in set(PointOptions.sweepable()) - {"strategy"}:
        value = others.get(name, "x")
        point = Point("skillsynth", {"similarity_tau": 0.5}, {}, {}, {name: value})
        assert f"-{PointOptions.short(name)}{value}-" in point.id  # the declared abbreviation
        # a later stage's setting alone leaves the synthesis shared (its cache warm)
        same = point.synthesis_key == base.synthesis_key
        assert same == (PointOptions.role(name) not in ("synthesis", "verify")), name
    assert "-tau0.5-" in base.id and Thresholds.short("similarity_tau") == "tau"
    body = Point("skillsynth", {"similarity_tau": 0.5, "max_recall_body_chars": 9}, {}, {}, {})
    assert body.synthesis_key == base.synthesis_key and "-body9-" in body.id
