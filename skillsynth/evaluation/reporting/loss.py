"""Where a design loses what the gold arguments gain: recall, content, source or the agent.

The ladder's upper bound (oracle-args: the task's gold calls with their values) shows what a
recalled procedure *can* add over a wrong one (the mismatched control). For a design (and
for the ladder's prose rungs between them, :data:`PROSE_RUNGS`), each probe's shortfall from
that bound is put at the first stage that explains it:

* ``recall``: no procedure of the probe's own family was recalled;
* ``content``: one was, but what the agent was shown (the recalled bodies, each cut at the
  point's ``max_recall_body_chars``) does not name every gold action's tool in order and
  every one of its argument names;
* ``source``: it names them all, but does not state rightly where some judged argument's
  value comes from (the source, or the value; :mod:`.stated`, judged against the probe's own
  run in the corpus);
* ``agent``: the text carried all of that and the agent still did not do it.

Beside the stage, each probe's row says at which step the text puts the first gold write
(``write_step``), how many calls the agent made on average (``calls_made``) and in how many
of its live runs it made at least that many (``runs_reaching_write``): an agent that stops
before that step loses the write however well the text states it.

A probe's *lost gain* is (oracle-args - mismatched) - (design - mismatched) on graded progress
(the share of the task's gold actions executed, averaged over repeats), so the stages' lost
gains add up to the upper bound's gain minus the design's. This is a descriptive
decomposition of one run (counts and sums with n, no interval); the design's share of the
gain, with its interval, is the controls table's ``args_gain_over_mismatched``. The content
test reads names; the source test reads statements by a rule on words (:mod:`.stated`), and
judges only the gold actions the probe's run made (a probe with none judged cannot fail it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ...corpora.labels import LabelStore
from ...errors import EvaluationError
from ...pipeline.skill import Skill
from ...store import MemoryStore, ToolCall
from ..point.controls import ORACLE_PREFIX, GoldAction, GoldSource
from ..strategies import STRATEGIES, get_strategy
from .controls import per_probe
from .loaded import Run
from .stated import Flow, gold_flows, source_judgements, write_step

__all__ = ["PROSE_RUNGS", "STAGES", "WRITE_STAGES", "LossTable", "gold_in_text",
           "ladder_points", "loss_table", "loss_tables", "procedure_forms"]

#: The stages a probe's lost gain is put at, in pipeline order.
STAGES = ("recall", "content", "source", "agent")
#: The stages at which the report counts probes whose runs stopped before the write's step.
WRITE_STAGES = ("source", "agent")


@dataclass(frozen=True)
class LossTable:
    """One design point's loss table.

    Attributes:
        point, mismatched, upper: the design's, the mismatched control's and oracle-args'
            point ids (one run, the same probes).
        probes: one row per probe the three points share.
        stages: one row per stage: probes, their lost gain, and its share of the upper
            bound's gain over mismatched (None where that gain is not positive).
        upper_gain: the upper bound's gain over mismatched, summed over the probes.
    """

    point: str
    mismatched: str
    upper: str
    probes: pd.DataFrame
    stages: pd.DataFrame
    upper_gain: float

    def unstated_at_source(self) -> pd.Series:
        """Which arguments lose the probes put at ``source``: each ``tool.argument`` whose
        source their text does not state, with the number of those probes, most first."""
        at = self.probes.loc[self.probes["stage"] == "source", "sources_not_stated"]
        names = [n for cell in at for n in dict.fromkeys(str(cell).split("; ")) if n]
        return pd.Series(names, dtype=object).value_counts().rename("probes")

    def stopped_before_write(self, stage: str = "agent") -> tuple[int, int]:
        """(probes at ``stage`` none of whose runs made as many calls as the step at which
        their text puts the first gold write, probes at ``stage`` whose text numbers it).

        At ``source`` this says whether a better-stated source could have mattered: a run
        that stops before the write never reads what the text says of its arguments."""
        if stage not in STAGES:
            raise EvaluationError(f"no stage {stage!r}; the stages are {', '.join(STAGES)}")
        at = self.probes[(self.probes["stage"] == stage) & self.probes["write_step"].notna()
                         & self.probes["runs_reaching_write"].notna()]
        return int((at["runs_reaching_write"] == 0).sum()), len(at)


def gold_in_text(text: str, gold: Sequence[GoldAction]) -> tuple[int, int, int, int]:
    """(gold tools named in order, gold actions, argument names named, argument names).

    Tools are matched in order: each must appear after the previous one's first mention
    (a tool named twice counts where it fits). An argument name counts once per action."""
    low, at, steps = text.lower(), 0, 0
    for g in gold:
        i = low.find(g.name.lower(), at)
        if i >= 0:
            steps, at = steps + 1, i + len(g.name)
    names = [a for g in gold for a in g.arguments]
    named = sum(a.lower() in low for a in names)
    return steps, len(gold), named, len(names)


def _labels_of(run: Run, point: str) -> dict[str, Any]:
    """The point's labels (the file its record names, else every labels file in the run's
    corpus folder: a moved run folder)."""
    summary = run.point_summary(point)
    path = None if summary is None else \
        (summary.record.get("inputs", {}).get("labels") or {}).get("path")
    files = [Path(path)] if path and Path(path).exists() else \
        sorted((run.path / "corpus").glob("*.labels.sqlite"))
    out: dict[str, Any] = {}
    for f in files:
        with LabelStore(f) as store:
            out.update({x.session_id: x for x in store.all()})
    if not out:
        raise EvaluationError(f"point {point}: no labels (its record names {path!r}, and "
                              f"{run.path / 'corpus'} has none); the loss table needs the "
                              "gold actions")
    return out


def _bodies(run: Run, point: str) -> dict[str, str]:
    """Recalled id -> body: the point's stored procedures, and the control procedures it
    wrote under ``skills/controls/<strategy>/<probe>/`` (recalled as ``oracle:...`` ids)."""
    folder = run.path / "points" / point
    db = folder / "history.db"
    out: dict[str, str] = {}
    if db.exists():
        with MemoryStore.open(db, read_only=True) as store:
            out = {p.id: p.markdown_body for p in store.procedures() if p.id}
    for md in sorted((folder / "skills" / "controls").glob("*/*/*/SKILL.md")):
        control, probe = md.parent.parent.parent.name, md.parent.parent.name
        out[f"{ORACLE_PREFIX}{control}:{probe}"] = Skill.read(md.parent).body
    if not db.exists() and not out:
        raise EvaluationError(f"point {point} has no history.db and no control skills: the "
                              "loss table reads the recalled procedures' bodies from them")
    return out


def _probe_runs(run: Run, point: str, probes: Sequence[str]
                ) -> dict[str, tuple[list[ToolCall], str]]:
    """Each probe's own session in the corpus the point read: its calls with their results,
    and every user turn (empty where the corpus cannot be found or lacks the session)."""
    summary = run.point_summary(point)
    path = None if summary is None else \
        (summary.record.get("inputs", {}).get("corpus") or {}).get("path")
    files = [Path(path)] if path and Path(path).exists() else sorted(
        f for f in (run.path / "corpus").glob("*.db") if f.is_file())
    out: dict[str, tuple[list[ToolCall], str]] = {}
    for f in files:
        with MemoryStore.open(f, read_only=True) as store:
            for p in probes:
                calls = store.tool_calls(p) if p not in out else []
                if calls:
                    out[p] = (calls, "\n".join(t.content for t in store.turns(p, role="user")))
    return out


def _live_calls(mem: pd.DataFrame, step: int | None) -> tuple[float | None, int | None]:
    """The calls the agent made, averaged over the probe's live memory runs (replay rows
    count the recorded attempt's steps, not the agent's), and how many runs made ``step``."""
    live = mem[mem["steps_method"] == "live"] if "steps_method" in mem else mem
    steps = live["steps"].dropna() if "steps" in live else pd.Series(dtype=float)
    if not len(steps):
        return None, None
    return float(steps.mean()), None if step is None else int((steps >= step).sum())


def _probe_row(probe: str, mem: pd.DataFrame, gold: Sequence[GoldAction], flows: Sequence[Flow],
               bodies: Mapping[str, str], cap: int, values: tuple[float, float, float]
               ) -> dict[str, Any]:
    first = mem.iloc[0]
    ids = [str(i) for i in first["recalled_ids"]]
    recalled = bool(int(first["recalled_right"]) > 0)
    text = "\n".join(bodies.get(i, "")[:cap] for i in ids)
    steps, n_steps, named, n_args = gold_in_text(text, gold)
    said = source_judgements(text, gold, flows)
    right, judged = sum(ok for _, _, ok in said), len(said)
    at = write_step(text, gold)
    calls, reaching = _live_calls(mem, at)
    design, wrong, upper = values
    complete = n_steps > 0 and steps == n_steps and named == n_args
    stage = "recall" if not recalled else "content" if not complete else \
        "source" if right < judged else "agent"
    return {"probe": probe, "family": str(first.get("family", "")), "recalled": len(ids),
            "own_family_recalled": recalled, "gold_tools_named": f"{steps}/{n_steps}",
            "gold_args_named": f"{named}/{n_args}", "gold_sources_stated": f"{right}/{judged}",
            "sources_not_stated": "; ".join(f"{t}.{a}" for t, a, ok in said if not ok),
            "write_step": at, "calls_made": calls, "runs_reaching_write": reaching,
            "design": design, "mismatched": wrong, "oracle_args": upper,
            "lost": (upper - wrong) - (design - wrong), "stage": stage}


def loss_table(run: Run, point: str, *, mismatched: str, upper: str) -> LossTable:
    """The design ``point``'s loss table against the run's ``mismatched`` and ``upper``
    (oracle-args) points, on the probes all three ran live with gold actions.

    Raises:
        EvaluationError: the run has no graded live rows for the points, or the design
            point's history or labels cannot be read.
    """
    rows = run.rows
    if rows.empty or "gold_matched" not in rows:
        raise EvaluationError(f"{run.path}: no graded live rows (a loss table needs live "
                              "probes scored against gold actions)")
    design, wrong, best = (per_probe(rows, p, "memory", "progress")
                           for p in (point, mismatched, upper))
    probes = sorted(set(design) & set(wrong) & set(best))
    labels, bodies = _labels_of(run, point), _bodies(run, point)
    gold = GoldSource(labels=labels, families={})
    cap = int(run.points.set_index("point").loc[point, "max_recall_body_chars"])
    mem = rows[(rows["point"] == point) & (rows["arm"] == "memory")]
    sessions = _probe_runs(run, point, probes)
    recs = []
    for p in probes:
        acts = gold.actions(p)
        calls, customer = sessions.get(p, ([], ""))
        flows: list[Flow] = gold_flows(acts, calls, customer) if calls else [None] * len(acts)
        recs.append(_probe_row(p, mem[mem["probe_session"] == p], acts, flows, bodies, cap,
                               (design[p], wrong[p], best[p])))
    table = pd.DataFrame(recs, columns=["probe", "family", "recalled", "own_family_recalled",
                                        "gold_tools_named", "gold_args_named",
                                        "gold_sources_stated", "sources_not_stated",
                                        "write_step", "calls_made", "runs_reaching_write",
                                        "design", "mismatched",
                                        "oracle_args", "lost", "stage"])
    table = table.astype({"write_step": "Int64", "runs_reaching_write": "Int64"})
    upper_gain = float(sum(best[p] - wrong[p] for p in probes))
    stages = pd.DataFrame([{
        "stage": s, "probes": int((table["stage"] == s).sum()),
        "lost_gain": float(table.loc[table["stage"] == s, "lost"].sum()),
        "share_of_upper_gain": (float(table.loc[table["stage"] == s, "lost"].sum())
                                / upper_gain) if upper_gain > 0 else None}
        for s in STAGES])
    return LossTable(point=point, mismatched=mismatched, upper=upper, probes=table,
                     stages=stages, upper_gain=upper_gain)


def ladder_points(run: Run) -> tuple[list[tuple[str, str]], str | None, str | None]:
    """The run's design points (a strategy that synthesizes) with their ``procedure_form``,
    and its first mismatched and oracle-args points by id (None: the run has none, or no
    live rows graded against gold actions)."""
    pts = run.points
    if pts.empty:
        return [], None, None
    graded = not run.rows.empty and "gold_matched" in run.rows
    first = {s: min(pts.loc[pts["strategy"] == s, "point"], default=None) if graded else None
             for s in ("mismatched", "oracle-args")}
    forms = procedure_forms(run)
    designs = sorted((p, forms[p]) for p, s in zip(pts["point"], pts["strategy"], strict=True)
                     if s in STRATEGIES and get_strategy(s).method is not None)
    return designs, first["mismatched"], first["oracle-args"]


def procedure_forms(run: Run) -> dict[str, str]:
    """Point -> its ``procedure_form`` (prose where the run does not record one)."""
    pts = run.points
    forms = pts["procedure_form"] if "procedure_form" in pts else [None] * len(pts)
    return {str(p): str(f) if isinstance(f, str) and f else "prose"
            for p, f in zip(pts["point"], forms, strict=True)}


#: The control rungs whose recalled prose a loss table reads beside the designs'.
PROSE_RUNGS = ("oracle", "oracle-dataflow", "oracle-run")


def loss_tables(run: Run) -> dict[str, LossTable]:
    """A loss table for every design point (a strategy that synthesizes) and every prose
    rung of the ladder (:data:`PROSE_RUNGS`: the gold names, the run's sources, the run with
    its values) of a run that also holds a mismatched and an oracle-args point (the first of
    each, by id); empty otherwise. Points whose ``procedure_form`` offers plans as tools are left out: the
    content test reads the stored prose, and a plan tool the agent was shown is induced at
    recall, not stored."""
    designs, wrong, upper = ladder_points(run)
    if wrong is None or upper is None:
        return {}
    forms, pts = procedure_forms(run), run.points
    rungs = sorted(p for p, s in zip(pts["point"], pts["strategy"], strict=True)
                   if s in PROSE_RUNGS and forms[p] == "prose")
    return {p: loss_table(run, p, mismatched=wrong, upper=upper)
            for p in [*(p for p, form in designs if form == "prose"), *rungs]}
