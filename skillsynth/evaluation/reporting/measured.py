"""A sweep run's headline KPIs as a measurement record, so the docs quote records, not edits.

A table of a sweep's figures typed into a page went stale the next time the sweep ran (the
calibrated point's thresholds were quoted from an older calibration for a session). ``skillsynth
report RUN --record eval/figures`` writes ``sweep-<name>.json`` with every finished point's
headline KPIs, each with its interval and n (and, for points that offered plans as tools, how
the agent used them), and the docs' Measured figures page renders it; a point that did not
finish is named in the note, never filled in.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...figures import Measurement, measure
from ..sweeps.summary import SweepSummary
from .controls import user_data_note
from .loaded import Run, load_run

__all__ = ["HEADLINE", "sweep_measurement"]

#: The KPIs a sweep's record carries per point (those a point has; replay estimates marked).
HEADLINE = ("synthesis_fired_rate", "recall_hit_rate", "recall_precision", "step_reduction",
            "share_made_worse", "live_step_reduction", "live_decision_reduction",
            "live_success_change", "live_gold_actions_matched_change",
            "live_gold_writes_matched_change", "live_failed_call_rate_change",
            "live_agent_decisions_change", "live_share_made_worse", "live_share_success_lost",
            "validity_gaia691", "validity_agentskills")


def _figure(k: Any) -> dict[str, Any]:
    fig: dict[str, Any] = {"value": None if k.value is None else round(float(k.value), 4),
                           "n": int(k.n or 0)}
    if k.lo is not None and k.hi is not None:
        fig["interval"] = f"[{k.lo:.2f}, {k.hi:.2f}]"
    if k.unit:
        fig["unit"] = k.unit
    if k.estimate:
        fig["estimate"] = "replay"
    return fig


def _ladder(run: Run) -> dict[str, Any]:
    """Per point of a live run with mismatched and oracle-args (the designs and the rungs
    between, such as the gold names or a plan): its share of the gold arguments' gain over
    mismatched, its (and oracle-args') gain on the gold writes alone over mismatched, and
    the share lost at each stage (the loss table, where the point has one)."""
    from .controls import args_gain_over_mismatched, over_mismatched
    from .loss import WRITE_STAGES, ladder_points, loss_tables

    _, wrong, upper = ladder_points(run)
    if wrong is None or upper is None:
        return {}
    rungs = sorted(p for p in run.points["point"] if p not in (wrong, upper))
    out: dict[str, Any] = {}
    for pid in rungs:
        k = args_gain_over_mismatched(run.rows, {"id": pid}, {"id": wrong}, {"id": upper})
        out[f"{pid}: args_gain_over_mismatched"] = _figure(k) | (
            {"note": k.note} if k.value is None and k.note else {})
    if "gold_writes_matched" in run.rows:  # the gold writes alone (rows since they were kept)
        for pid in [*rungs, upper]:
            out[f"{pid}: writes_over_mismatched"] = _figure(
                over_mismatched(run.rows, {"id": pid}, {"id": wrong}, basis="writes"))
    for pid, t in loss_tables(run).items():
        for st in t.stages.itertuples():
            out[f"{pid}: gain lost to {st.stage}"] = {
                "value": None if st.share_of_upper_gain is None
                else round(float(st.share_of_upper_gain), 4),
                "n": int(st.probes), "unit": "share of oracle-args' gain over mismatched "
                                             "(n: probes at the stage; descriptive)"}
        for stage in WRITE_STAGES:
            stopped, numbered = t.stopped_before_write(stage)
            out[f"{pid}: {stage} stopped before the write's step"] = {
                "value": stopped if numbered else None, "n": numbered,
                "unit": f"probes put at {stage} none of whose runs made as many calls as the "
                        "step at which their text puts the first gold write (count)"}
        at_source = int((t.probes["stage"] == "source").sum())
        for arg, probes in t.unstated_at_source().items():
            out[f"{pid}: source not stated, {arg}"] = {
                "value": int(probes), "n": at_source,
                "unit": "probes put at source whose text does not state it (count)"}
    return out


def _plan_use(run: Run) -> dict[str, Any]:
    """Per point that offered plans as tools: how its memory runs used them (counts; n: the
    memory runs)."""
    from .plans import PLAN_USE_COLUMNS, plan_use_table

    table = plan_use_table(run)
    return {f"{pid}: plan use, {col}": {"value": int(row[col]), "n": int(row["memory_runs"]),
                                        "unit": "count over the point's memory runs"}
            for pid, row in table.iterrows() for col in PLAN_USE_COLUMNS[1:]}


def _prompts(points: Sequence[Any]) -> str:
    """Which distill prompt wrote each point's procedures (a figure of a design names how its
    procedures were written: ``trace-v1`` against ``trace-v1-sources-v2``)."""
    by: dict[str, list[str]] = {}
    for pt in points:
        by.setdefault(str(pt.versions.distill_prompt), []).append(pt.id)
    if len(by) <= 1:
        return "".join(f" Distill prompt: {p}." for p in by)
    return " Distill prompts: " + "; ".join(f"{p} ({', '.join(ids)})"
                                             for p, ids in by.items()) + "."


def sweep_measurement(run_dir: str | Path, *, command: str | None = None,
                      kpis: Sequence[str] = HEADLINE) -> Measurement:
    """The record of a sweep run: ``<point id>: <kpi>`` -> value, interval, n (est. marked).

    Raises:
        FigureError: no point of the run has finished (nothing to record).
    """
    run = Path(run_dir)
    s = SweepSummary.load(run)
    figures = {f"{pt.id}: {name}": _figure(pt.kpis[name])
               for pt in s.points for name in kpis if name in pt.kpis}
    loaded = load_run(run)
    figures |= _ladder(loaded) | _plan_use(loaded)
    first = s.points[0] if s.points else None
    missing = [f"{pid} ({why.splitlines()[0][:120]})" for pid, why in s.failed.items()]
    note = (f"{s.finished} of {s.n_points} point(s) finished"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f". Models: chat {first.versions.chat_model}, embedder "
               f"{first.versions.embedder}; corpus sha256 {str(first.corpus.sha256)[:12]}."
               if first else ".")
            + _prompts(s.points)
            + (f" {leaks}." if (leaks := user_data_note(loaded.points)) else ""))
    return measure(f"sweep-{s.name}", f"Sweep {s.name}: headline KPIs per point",
                   command or f"skillsynth sweep <spec of {s.name}>", figures, note=note)
