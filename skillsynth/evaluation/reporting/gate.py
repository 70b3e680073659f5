"""The CI gate over a sweep run: validity, floors, a committed baseline, and the verdict.

A baseline (``eval/baselines/NAME.json``) is committed KPI values with tolerances::

    {"description": "...",
     "entries": [{"match": {"strategy": "skillsynth", "similarity_tau": 0.8},
                  "kpis": {"recall_hit_rate": {"value": 0.5, "tolerance": 0.2,
                                               "better": "higher"}}}]}

Each entry applies to every point whose parameters (and protocol settings) include
``match``. :func:`gate` fails a run when format validity is below 100%, a floor
misbehaved, or a KPI is worse than its baseline by more than the tolerance; with
``verdict``, also when a #887 criterion's verdict is FAIL. An INCONCLUSIVE or INSENSITIVE
criterion does not fail the gate (it is evidence of nothing, either way) but its check is
marked ``warn`` so it is printed on every run, with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import read_config_file
from ...errors import ConfigError, EvaluationError
from ...pipeline.skill import PROFILES
from ..point.options import PointOptions
from ..sweeps.spec import PROTOCOL_KEYS
from ..sweeps.summary import PointEntry, SweepSummary
from .verdict import UNDECIDED, run_control, run_negative, verdict_points
from .verdict import verdict as verdict_rows

__all__ = ["PARAMS", "PROTOCOL_DEFAULTS", "GateCheck", "gate", "gate_checks", "settings_of",
           "write_baseline"]

#: The thresholds a sweep's grid varies (a baseline entry matches on them).
PARAMS = ("similarity_tau", "min_occurrences", "max_recall_body_chars")


@dataclass(frozen=True)
class GateCheck:
    """One check of :func:`gate`. ``warn``: passed without deciding anything (a verdict
    row INCONCLUSIVE or INSENSITIVE): to be shown even when passes are not."""

    point: str
    check: str
    value: float | None
    required: str
    ok: bool
    warn: bool = False


def _load_baseline(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    data = read_config_file(p, "baseline file")
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigError("a baseline has an 'entries' list", key="entries", source=str(p))
    for i, e in enumerate(entries):
        for key in ("match", "kpis"):
            if not isinstance(e.get(key), dict):
                raise ConfigError(f"entries[{i}].{key} must be an object",
                                  key=f"entries[{i}].{key}", source=str(p))
        for name, spec in e["kpis"].items():
            if not isinstance(spec, dict) or "value" not in spec or "tolerance" not in spec \
                    or spec.get("better", "higher") not in ("higher", "lower"):
                raise ConfigError(f"entries[{i}].kpis.{name} needs value, tolerance and "
                                  "better (higher|lower)", key=f"entries[{i}].kpis.{name}",
                                  source=str(p))
    return data


#: The protocol settings of a point (or a baseline entry) that does not name them.
PROTOCOL_DEFAULTS = {k: PointOptions.defaults()[k] for k in PROTOCOL_KEYS}


def settings_of(point: PointEntry) -> dict[str, Any]:
    """A point's strategy, thresholds and protocol settings, the protocol's defaults filled in
    (what baselines match on and what reports compare points by)."""
    return {"strategy": point.strategy, **point.params, **PROTOCOL_DEFAULTS, **point.protocol}


def _matches(point: PointEntry, match: Mapping[str, Any]) -> bool:
    """An entry that names no protocol settings holds the default protocol's points only."""
    have = settings_of(point)
    return all(have.get(k) == v for k, v in (PROTOCOL_DEFAULTS | dict(match)).items())


def gate(run_dir: str | Path, baseline: str | Path | None = None, *,
         verdict: bool = False) -> list[GateCheck]:
    """The CI gate's checks for a run (validity, floors, and the baseline's KPIs).

    ``verdict``: also hold the report's verdict table: each #887 criterion at the
    recommended point and at GAIA's defaults fails the gate when its status is FAIL
    (INCONCLUSIVE, INSENSITIVE and NOT MEASURED pass, and say so and why in ``required``;
    the first two are marked ``warn``).
    """
    summary = SweepSummary.load(run_dir)
    checks = gate_checks(summary, baseline)
    if verdict:
        for label, pt in verdict_points(summary.points):
            for row in verdict_rows(pt, run_control(summary.points, pt),
                                    run_negative(summary.points, pt)):
                why = f" ({row.why})" if row.why else ""
                checks.append(GateCheck(point=pt.id, check=f"verdict ({label}): {row.criterion}",
                                        value=row.value,
                                        required=f"{row.target}; status {row.status}{why}",
                                        ok=row.status != "FAIL", warn=row.status in UNDECIDED))
    return checks


def gate_checks(summary: SweepSummary, baseline: str | Path | None) -> list[GateCheck]:
    """The validity, floor and baseline checks of a run's summary (no verdict)."""
    checks: list[GateCheck] = []
    for pid, why in summary.failed.items():
        checks.append(GateCheck(point=pid, check="point finished", value=None,
                                required=why.splitlines()[0][:200], ok=False))
    unfinished = summary.n_points - summary.finished - len(summary.failed)
    if unfinished > 0:  # a sweep still running or stopped: its summary covers what finished
        checks.append(GateCheck(point="(sweep)", check="points finished",
                                value=float(summary.finished),
                                required=f"all {summary.n_points} ({unfinished} not "
                                         "finished: the sweep is running or was stopped; "
                                         "resume it)", ok=False))
    base = _load_baseline(baseline) if baseline else {"entries": []}
    for pt in summary.points:
        k = pt.kpis
        status = pt.pass_status
        if status is not None:  # a design with synthesis: a pass that did not run is no result
            checks.append(GateCheck(point=pt.id, check="synthesis pass ran", value=None,
                                    required=f"status {status!r}", ok=status == "ran"))
        for prof in PROFILES:
            v = k[f"validity_{prof}"].value
            checks.append(GateCheck(point=pt.id, check=f"validity_{prof}", value=v,
                                    required="= 1.0 (or no procedure)", ok=v is None or v == 1.0))
        for floor, ok in pt.floors.items():
            checks.append(GateCheck(point=pt.id, check=f"floor {floor}",
                                    value=None if ok is None else float(ok),
                                    required="behaves (or not exercised)", ok=ok is not False))
        for e in base["entries"]:
            if not _matches(pt, e["match"]):
                continue
            for name, spec in e["kpis"].items():
                if name not in k:
                    raise ConfigError(f"baseline names unknown KPI {name!r}", key=name,
                                      source=str(baseline))
                v = k[name].value
                ref, tol = float(spec["value"]), float(spec["tolerance"])
                higher = spec.get("better", "higher") == "higher"
                ok = v is not None and (v >= ref - tol if higher else v <= ref + tol)
                need = f">= {ref - tol:.3f}" if higher else f"<= {ref + tol:.3f}"
                checks.append(GateCheck(point=pt.id, check=name, value=v,
                                        required=f"{need} (baseline {ref:g} ± {tol:g})", ok=ok))
    return checks


def write_baseline(run_dir: str | Path, out: str | Path, *, kpis: Mapping[str, float],
                   better: Mapping[str, str] | None = None, description: str = "",
                   overwrite: bool = False) -> Path:
    """Commit a run's current KPI values as a baseline, one entry per point.

    Args:
        kpis: KPI name -> tolerance.
        better: KPI name -> ``higher`` or ``lower`` (default higher).
    """
    o = Path(out)
    if o.exists() and not overwrite:
        raise EvaluationError(f"{o} exists; pass overwrite to replace a committed baseline")
    summary = SweepSummary.load(run_dir)
    entries = []
    for pt in summary.points:
        vals = {name: {"value": pt.kpis[name].value, "tolerance": tol,
                       "better": (better or {}).get(name, "higher"), "n": pt.kpis[name].n}
                for name, tol in kpis.items() if pt.kpis[name].value is not None}
        entries.append({"match": {"strategy": pt.strategy,
                                  **{p: pt.params[p] for p in PARAMS}, **pt.protocol},
                        "kpis": vals})
    o.parent.mkdir(parents=True, exist_ok=True)
    o.write_text(json.dumps({"description": description, "run": summary.name,
                             "entries": entries}, indent=2) + "\n", encoding="utf-8")
    return o
