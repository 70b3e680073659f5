"""A sweep run's KPI summary in GitHub Markdown, to paste on a pull request or an issue.

The HTML report is the whole record; a maintainer reviewing a change to GAIA's memory wants
the headline in the thread: what ran, #887's verdict, each point against its controls, the
headline KPIs and the gate. The tables are the report's own (:mod:`.report`,
:mod:`.controls`), cut to the columns that say something; every figure keeps its interval
and n. Nothing here calls a model or executes a notebook.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .controls import controls_table, decoding, user_data_note
from .gate import GateCheck, gate_checks
from .loaded import load_run
from .report import describe_run, kpi_table, verdict_table
from .verdict import no_verdict_reason

__all__ = ["markdown_summary", "md_table"]

#: The controls table's columns a reader of a live design needs, in reading order.
CONTROL_COLUMNS = ("strategy", "point", "live_gold_actions_matched_change",
                   "live_gold_writes_matched_change", "live_success_change",
                   "live_share_made_worse", "live_share_success_lost",
                   "progress_over_mismatched", "writes_over_mismatched",
                   "args_gain_over_mismatched", "progress_over_form_control",
                   "oracle_gain_recovered")

#: The KPI table's headline columns (the rest stay in the HTML report).
KPI_COLUMNS = ("synthesis_fired_rate", "recall_hit_rate", "recall_precision", "step_reduction",
               "share_made_worse", "live_step_reduction", "live_success_change",
               "live_share_made_worse", "validity_gaia691", "validity_agentskills")

VERDICT_COLUMNS = ("configuration", "criterion", "target", "measured", "status", "why")


def _cell(value: object) -> str:
    """A table cell: one line, pipes escaped (a ``|`` would end the cell)."""
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def md_table(df: pd.DataFrame) -> str:
    """``df`` as a GitHub pipe table (its index dropped; reset it first to keep it)."""
    head = "| " + " | ".join(_cell(c) for c in df.columns) + " |"
    rule = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _said(df: pd.DataFrame, columns: Sequence[str], *, empty: Sequence[str]) -> pd.DataFrame:
    """``columns`` of ``df`` that exist, less those where no row says anything (every cell
    in ``empty`` or starting ``n/a (n=0)``)."""
    keep = [c for c in columns if c in df and not all(
        str(v) in empty or str(v).startswith("n/a (n=0)") for v in df[c])]
    return df[keep]


def _gate_lines(checks: Sequence[GateCheck]) -> list[str]:
    bad = [c for c in checks if not c.ok]
    warned = [c for c in checks if c.warn]
    head = (f"**Gate: {'FAIL' if bad else 'PASS'}**, {len(checks) - len(bad)} of "
            f"{len(checks)} check(s) passed"
            + (f"; {len(warned)} undecided (passed, not shown to hold)" if warned else "") + ".")
    shown = [c for c in checks if not c.ok or c.warn]
    if not shown:
        return [head]
    rows = pd.DataFrame([{"": "FAIL" if not c.ok else "WARN", "point": c.point,
                          "check": c.check,
                          "value": "n/a" if c.value is None else f"{c.value:.3f}",
                          "required": c.required} for c in shown])
    return [head, "", md_table(rows)]


def markdown_summary(run_dir: str | Path, *, baseline: str | Path | None = None,
                     command: str | None = None) -> str:
    """The run's summary as Markdown: the run, the verdict, the controls (when more than one
    point ran), the headline KPIs and the gate (against ``baseline`` when given).
    ``command``: the line that reproduces the run, shown last."""
    run = load_run(run_dir)
    out = [f"## skillsynth KPI summary: `{run.summary.name}`", "", describe_run(run), ""]
    verdict = verdict_table(run)
    out += ["### Verdict: #887's acceptance criteria", ""]
    out += [md_table(verdict[list(VERDICT_COLUMNS)]) if len(verdict)
            else no_verdict_reason(run.summary.points), ""]
    controls = controls_table(run.summary.points, run.rows)
    if len(controls) > 1:
        out += ["### Against the controls", ""]
        out += [line for line in (decoding(run.summary.spec), user_data_note(run.points))
                if line]
        out += ["", md_table(_said(controls, CONTROL_COLUMNS, empty=("-",))), ""]
    if len(run.points):
        kpis = kpi_table(run)
        index = list(kpis.index.names)
        out += ["### Headline KPIs", "",
                md_table(_said(kpis.reset_index(), [*index, *KPI_COLUMNS], empty=())), ""]
    out += [*_gate_lines(gate_checks(run.summary, baseline)), ""]
    if command:
        out += [f"Reproduce: `{command}`", ""]
    out.append("Every figure: value [95% interval] n; *est.* marks replay estimates. The whole "
               "record is the HTML report (`skillsynth report RUN`).")
    return "\n".join(out) + "\n"
