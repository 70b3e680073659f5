"""Designs read against their controls: none, mismatched, synthesized, oracle, oracle-dataflow,
oracle-run, oracle-args.

An effect means something only beside the arms that bound it: the no-memory arm (every
point pairs with it), the mismatched control (a confidently wrong recall), and the positive
controls (the ideal procedure, without and with the gold arguments). :func:`controls_table`
puts a run's points side by side in that order; :func:`gain_recovered` is the share of the
oracle's gain a design recovers on the same probes (METHODS.md 2b), on live success (or the
replay estimate) and, where the runs were scored against gold actions, on graded progress;
:func:`over_mismatched` is what a procedure's content adds over the mismatched control's (a
plan's, over the control of its own form: :func:`form_control`), and
:func:`args_gain_over_mismatched` the share of the gold arguments' gain over it that a design
(the oracle-dataflow rung, a synthesized procedure) recovers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pandas as pd

from ..point.control_checks import oracle_gain_recovered
from ..point.metrics import KPI, SHARE_CHANGE, mean_kpi
from ..sweeps.summary import PointEntry, PointLike, as_entry
from .verdict import POSITIVE_CONTROLS

__all__ = ["ARM_ORDER", "args_gain_over_mismatched", "controls_table", "decoding",
           "form_control", "gain_recovered", "over_mismatched", "per_probe", "probe_families",
           "user_data_note"]

#: The side-by-side order: the lower bounds, the designs, the upper bounds, the inert check.
ARM_ORDER = ("none", "mismatched", "mismatched-plan", "skillsynth", "gaia-greedy",
             "gaia-shipped", "cortexprism", "pheron", "oracle", "oracle-dataflow", "oracle-plan",
             "oracle-run", "oracle-args", "inert")
#: What the table shows per point (where the point has it).
_SHOWN = ("live_success_change", "live_step_reduction", "live_decision_reduction",
          "live_share_made_worse", "live_share_success_lost",
          "live_gold_actions_matched_change", "live_gold_writes_matched_change",
          "live_failed_call_rate_change", "live_agent_decisions_change", "step_reduction",
          "recall_hit_rate", "inert_identical")


#: What a gain is measured on: live success, live graded progress (the share of the task's
#: gold actions executed; rows written before it have none), the same over the task's gold
#: writes only (``writes``), or the replay estimate.
Basis = Literal["success", "progress", "writes", "replay"]
_COLUMN = {"success": "success", "progress": "gold_matched", "writes": "gold_writes_matched"}


def per_probe(rows: pd.DataFrame, point: str, arm: str, basis: Basis) -> dict[str, float]:
    """Each probe's figure in one arm of one point: the live success rate or graded progress
    over its repeats, or the replay estimate's step reduction."""
    sel = rows[(rows["point"] == point) & (rows["arm"] == arm)]
    if basis != "replay":
        col = _COLUMN[basis]
        if col not in sel:
            return {}
        sel = sel[(sel["steps_method"] == "live") & sel[col].notna()]
        return {str(k): float(v) for k, v in sel.groupby("probe_session")[col].mean()
                .items()}
    sel = sel[(sel["steps_method"] != "live") & (sel["steps_recorded"] > 0)]
    red = (sel["steps_recorded"] - sel["steps"]) / sel["steps_recorded"]
    return {str(k): float(v) for k, v in red.groupby(sel["probe_session"]).mean().items()}


def gain_recovered(rows: pd.DataFrame, point: PointLike, control: PointLike, *,
                   basis: Basis, seed: int = 0) -> KPI:
    """(design - none) / (oracle - none) on the probes both points ran, paired per probe
    (on ``basis``), families resampled jointly; NOT MEASURED where the oracle's gain may be
    nothing."""
    pid, cid = as_entry(point).id, as_entry(control).id
    none = per_probe(rows, pid, "no-memory", basis)
    design = per_probe(rows, pid, "memory", basis)
    oracle = per_probe(rows, cid, "memory", basis)
    probes = sorted(set(none) & set(design) & set(oracle))
    return oracle_gain_recovered([none[p] for p in probes], [design[p] for p in probes],
                                 [oracle[p] for p in probes], probe_families(rows, probes),
                                 seed=seed, name=_GAIN_NAME[basis],
                                 bounds=(None, None) if basis == "replay" else SHARE_CHANGE)


def probe_families(rows: pd.DataFrame, probes: Sequence[str]) -> list[str]:
    """Each probe's family (the unit intervals resample)."""
    fam = rows.drop_duplicates("probe_session").set_index("probe_session")["family"]
    return [str(fam.get(p, p)) for p in probes]


_GAIN_NAME = {"success": "oracle_gain_recovered_live", "replay": "oracle_gain_recovered_replay",
              "progress": "oracle_gain_recovered_progress",
              "writes": "oracle_gain_recovered_writes"}


def over_mismatched(rows: pd.DataFrame, point: PointLike, mismatched: PointLike, *,
                    basis: Basis = "progress", seed: int = 0) -> KPI:
    """A point's memory arm minus the mismatched control's, graded progress (or, ``writes``,
    progress on the gold writes alone), paired per probe (families resampled): what the
    procedure's *content* adds over being handed some procedure. For the oracle it is the
    specificity of the positive control: an oracle no better than another family's
    procedure shows the measure sees that a procedure was recalled, not what it said."""
    pid, mid = as_entry(point).id, as_entry(mismatched).id
    design = per_probe(rows, pid, "memory", basis)
    wrong = per_probe(rows, mid, "memory", basis)
    probes = sorted(set(design) & set(wrong))
    return mean_kpi(f"{basis}_over_mismatched", [design[p] - wrong[p] for p in probes],
                    unit="probes", clusters=probe_families(rows, probes), seed=seed,
                    bounds=SHARE_CHANGE)


def args_gain_over_mismatched(rows: pd.DataFrame, point: PointLike, mismatched: PointLike,
                              upper: PointLike, *, seed: int = 0) -> KPI:
    """(design - mismatched) / (oracle-args - mismatched), graded progress, paired per probe
    on the probes all three ran: the share of what the gold arguments add over a wrong
    procedure that a design's content recovers (the ladder's headline; NOT MEASURED where
    the upper bound's own gain over mismatched may be nothing)."""
    pid, mid, uid = as_entry(point).id, as_entry(mismatched).id, as_entry(upper).id
    wrong = per_probe(rows, mid, "memory", "progress")
    design = per_probe(rows, pid, "memory", "progress")
    best = per_probe(rows, uid, "memory", "progress")
    probes = sorted(set(wrong) & set(design) & set(best))
    return oracle_gain_recovered([wrong[p] for p in probes], [design[p] for p in probes],
                                 [best[p] for p in probes], probe_families(rows, probes),
                                 seed=seed, name="args_gain_over_mismatched",
                                 bounds=SHARE_CHANGE)


def _fmt(k: KPI | None) -> str:
    if k is None or k.value is None:
        return "-" if k is None else f"n/a (n={k.n})"
    ci = f" [{k.lo:.2f}, {k.hi:.2f}]" if k.lo is not None and k.hi is not None else ""
    return f"{k.value:.2f}{ci} n={k.n}"


def controls_table(points: Sequence[PointLike], rows: pd.DataFrame) -> pd.DataFrame:
    """One row per point, in :data:`ARM_ORDER`: the KPIs that show an effect, and for a
    design, the share of the positive control's gain it recovers on the same probes."""
    order = {s: i for i, s in enumerate(ARM_ORDER)}
    entries = [as_entry(p) for p in points]
    control = next((p for name in POSITIVE_CONTROLS for p in entries if p.strategy == name),
                   None)
    wrong = next((p for p in entries if p.strategy == "mismatched"), None)
    upper = next((p for p in entries if p.strategy == "oracle-args"), None)
    graded = not rows.empty and "gold_matched" in rows and "point" in rows
    recs = []
    for p in sorted(entries, key=lambda p: (order.get(p.strategy or "", len(order)), p.id)):
        rec: dict[str, Any] = {"strategy": p.strategy, "point": p.id}
        rec |= {name: _fmt(p.kpi(name)) for name in _SHOWN}
        gain = progress = "-"
        if control is not None and p.strategy not in (*POSITIVE_CONTROLS, "inert") \
                and not rows.empty and "point" in rows:
            change = p.kpi("live_success_change")
            live = bool(change is not None and change.n)
            gain = _gain(gain_recovered(rows, p, control, basis="success" if live else "replay"))
            if live and graded:
                progress = _gain(gain_recovered(rows, p, control, basis="progress"))
        rec["oracle_gain_recovered"] = gain
        rec["oracle_gain_recovered_progress"] = progress
        rec["progress_over_mismatched"] = "-" if wrong is None or not graded or \
            p.strategy in ("mismatched", "inert") else _fmt(over_mismatched(rows, p, wrong))
        rec["writes_over_mismatched"] = "-" if wrong is None or not graded or \
            "gold_writes_matched" not in rows or p.strategy in ("mismatched", "inert") else \
            _fmt(over_mismatched(rows, p, wrong, basis="writes"))
        rec["args_gain_over_mismatched"] = "-" if wrong is None or upper is None or \
            not graded or p.strategy in ("mismatched", "oracle-args", "inert") else \
            _gain(args_gain_over_mismatched(rows, p, wrong, upper))
        same_form = form_control(entries, p)
        rec["progress_over_form_control"] = "-" if same_form is None or not graded else \
            _fmt(over_mismatched(rows, p, same_form))
        recs.append(rec)
    return pd.DataFrame(recs, columns=["strategy", "point", *_SHOWN, "oracle_gain_recovered",
                                       "oracle_gain_recovered_progress",
                                       "progress_over_mismatched", "writes_over_mismatched",
                                       "args_gain_over_mismatched",
                                       "progress_over_form_control"])


def form_control(points: Sequence[PointLike], point: PointLike) -> PointEntry | None:
    """The negative control of a plan point's own form: the run's ``mismatched-plan`` point
    offering another family's plan the same way (``procedure_form``, ``plan_choices``).
    Against ``mismatched`` (prose) a plan design's gain mixes what its plan says with being
    handed a tool at all; against this control it is the plan's content alone. None for a
    prose point, for the control itself, or where the run has no such point."""
    p = as_entry(point)
    form = p.protocol.get("procedure_form") or "prose"
    if form == "prose" or p.strategy == "mismatched-plan":
        return None
    return next((q for q in map(as_entry, points) if q.strategy == "mismatched-plan"
                 and (q.protocol.get("procedure_form") or "prose") == form
                 and bool(q.protocol.get("plan_choices")) == bool(p.protocol.get("plan_choices"))),
                None)


def _gain(k: KPI) -> str:
    return _fmt(k) if k.value is not None else (k.note or "not measured")


def decoding(spec: Mapping[str, Any]) -> str:
    """How a run's live arms were decoded, to print beside its controls: a positive control
    seen in one greedy run per arm need not survive sampling (tau2 retail's upper bound, 7
    probes: gold actions matched +0.21 greedy and at 0.3, +0.02 at 0.7; docs/live.md).
    Empty for a run without live probes."""
    if not spec.get("live"):
        return ""
    n = int(spec.get("repeats") or 1)
    if n <= 1:
        return "live arms: one greedy run per arm per probe (one draw; `repeats` samples more)"
    return (f"live arms: {n} runs per arm per probe sampled at temperature "
            f"{spec.get('temperature', 0.7)} (seed = repeat), averaged per probe before pairing")


def user_data_note(points: pd.DataFrame) -> str:
    """A line naming the points whose distiller was shown the runs' argument values
    (``distill_args: values``): an upper bound whose procedures may hold user data, not a
    design to ship ("" where there is none)."""
    if points.empty or "distill_args" not in points:
        return ""
    ids = sorted(str(p) for p, a in zip(points["point"], points["distill_args"], strict=True)
                 if a == "values")
    if not ids:
        return ""
    return (f"user data: {', '.join(ids)} showed the distiller the runs' argument values "
            "(distill_args: values): an upper bound whose procedures may hold user data, not a "
            "design to ship; the point's own folder holds them (points/<id>/skills/, its "
            "validity check), and any other export refuses them unless asked "
            "(--allow-user-data)")
