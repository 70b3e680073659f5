"""When a run folder may be resumed by a spec: the same sweep, or the same grown.

A sweep's identity is everything in its spec but how its points are executed (``workers``,
``point_timeout_s``), its prose (``description``), options at their defaults, the order of
its explicit points, and the order of each grid axis's values after the first (an explicit
point takes each axis's first value, so that one stays). A resumed spec may add points or
grid values (each finished point is still a point of the grown spec, with the same
settings); a spec that changes or drops anything else is another sweep.

A finished point is also refused when the skillsynth resuming it would distil or replay it
differently (:func:`stale_points`: its recorded distill prompt or replay rule is not the one
this code sends), so a sweep's figures never mix versions under one point id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ...errors import ConfigError, SkillsynthError
from ..point.estimate import RULE
from ..point.options import PointOptions
from ..point.summary import SUMMARY, PointSummary
from ..strategies import get_strategy
from .spec import RUN_ONLY_KEYS, Point, SweepSpec

__all__ = ["check_fresh", "check_resume", "extends", "identity", "stale_points"]


def check_resume(spec: SweepSpec, run_dir: Path) -> str:
    """The spec as ``spec.yaml`` will hold it; refuses a run folder of another spec (one that
    only adds points or grid values to the folder's, or rewords its description, resumes)."""
    spec_file = run_dir / "spec.yaml"
    spec_text = yaml.safe_dump(spec.as_dict(), sort_keys=True)
    if spec_file.exists() and not extends(identity(spec_file.read_text(encoding="utf-8")),
                                           identity(spec_text)):
        raise ConfigError(f"{run_dir} holds a run of a different spec (a resumed sweep may add "
                          "points or grid values, not change or drop them); give this sweep "
                          "another name or remove the folder", source=str(spec_file))
    return spec_text


def extends(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether the identity ``new`` is ``old`` with points or grid values added: every
    finished point of the old spec is a point of the new one, with the same settings."""
    def rest(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k not in ("points", "grid")}

    old_grid, new_grid = old.get("grid") or {}, new.get("grid") or {}
    return (rest(old) == rest(new) and set(old.get("points") or ()) <= set(new.get("points") or ())
            and old_grid.keys() == new_grid.keys()
            and all(v[:1] == new_grid[k][:1] and set(v) <= set(new_grid[k])
                    for k, v in old_grid.items()))


def identity(spec_yaml: str) -> dict[str, Any]:
    """What makes two specs the same sweep: everything but how the points are executed.

    An option at its default counts as absent, so a run folder written before an option
    existed (or before the spec file listed it) still resumes under the same spec; the
    description is prose. The order of ``points`` is the order they run in, not what they
    are, and so is the order of a grid axis's values after its first (which every explicit
    point takes): a resumed sweep may put the points it needs first.
    """
    defaults = PointOptions().to_json()
    same = {k: v for k, v in yaml.safe_load(spec_yaml).items()
            if k not in (*RUN_ONLY_KEYS, "description")
            and not (k in defaults and v == defaults[k])}
    if "points" in same:
        same["points"] = sorted(_unordered(same["points"]))
    if "grid" in same:
        same["grid"] = {k: _unordered(v) for k, v in same["grid"].items()}
    return same


def _unordered(values: Any) -> list[str]:
    """A list as the JSON texts of its items, the first in place and the rest sorted."""
    items = [json.dumps(v, sort_keys=True)
             for v in (values if isinstance(values, list) else [values])]
    return items[:1] + sorted(items[1:])


def stale_points(spec: SweepSpec, points: list[Point], run_dir: Path
                 ) -> dict[str, list[tuple[str, str, str]]]:
    """Finished points of ``run_dir`` this skillsynth would not run the same way: point id ->
    (what, recorded, now) for the distill prompt and the replay rule that differ. A point
    whose recorded versions this code cannot name (a design whose package is missing) is not
    judged here; running it would fail loudly anyway."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for p in points:
        summary = run_dir / "points" / p.id / SUMMARY
        if not summary.exists():
            continue
        recorded = PointSummary.load(summary).versions
        opts = p.point_options(spec)
        try:
            prompt = get_strategy(p.strategy).distill_prompt(opts.distill_args, opts.distiller)
        except SkillsynthError:
            continue
        differ = [(what, old, new) for what, old, new in
                  (("distill prompt", recorded.distill_prompt, prompt),
                   ("replay rule", recorded.replay_rule, RULE))
                  if old is not None and old != new]
        if differ:
            out[p.id] = differ
    return out


def check_fresh(spec: SweepSpec, points: list[Point], run_dir: Path) -> None:
    """Refuse to resume a run folder whose finished points :func:`stale_points` names."""
    stale = stale_points(spec, points, run_dir)
    if stale:
        said = "; ".join(f"{pid} ({', '.join(f'{w} {o}, now {n}' for w, o, n in d)})"
                         for pid, d in stale.items())
        raise ConfigError(f"{len(stale)} finished point(s) of {run_dir} were run by another "
                          f"version of skillsynth, so the sweep would mix versions: {said}. "
                          "Move each such point's folder out of points/ (it is kept as it is) "
                          "to run it again, or resume with the skillsynth that ran it",
                          source=str(run_dir / "points"))
