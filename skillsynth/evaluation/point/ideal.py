"""#887's scenario with a history that cannot be the reason for a null: ideal attempts.

GAIA's own tests plant three identical successful attempts of one goal and expect a procedure
on the fourth. :func:`ideal_history` builds that history for real tasks: for every task of a
labelled corpus, a *reference run* (the calls of the task's first successful recorded
session, else, or where those do not reach the goal state, the world's gold calls) is
executed in a fresh episode of the world, judged by the world, and written ``attempts``
times as GAIA writes a session (the calls with the world's own results to ``tool_history``,
the task's words to the agent as the first user turn), with a labels file beside it.
Attempts 1..k are then the history and attempt k+1 the probe, as for any corpus; a live
probe runs the task afresh, so the k+1-th recording only stands for it. Because the history
is the best run known, a probe that still gains nothing locates the loss in synthesis,
recall or the agent, not in what the agent did before (the issue's "ideal-history control").
Under the ``tools`` family rule each task is written once (:func:`ideal_attempts`): the
recurrence is then another task of the same kind, with other values, not the same task.

The reference is kept when the world's state checks pass (tau2's DB and environment
assertions; the communication check is not asked of it, as the run says nothing to the
customer); a task with no reference that passes them is left out with the reasons, never
written half.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import __version__
from ...corpora.importing import write_session
from ...corpora.labels import LabelStore, SessionLabel, labels_path_for
from ...corpora.records import SessionRecord, session_uuid
from ...errors import EvaluationError, WorldError
from ...pipeline.provenance import TracedCall, argument_sources, enum_values, source_counts
from ...store import MemoryStore, Turn, now_iso
from ...store.schema import TOOL_TEXT_LIMIT
from ..live.history import tool_rows
from ..live.worlds import World
from ..live.worlds.base import Turn as WorldTurn
from .gold_source import successful_runs
from .split import FamilyRule

__all__ = ["RESULT_LIMITS", "SOURCE", "IdealHistoryReport", "ideal_attempts", "ideal_history",
           "reached_goal_state"]

#: The labels' ``source`` of ideal attempts.
SOURCE = "ideal"
#: Evaluators that judge the world's state (the ones a reference run must pass).
STATE_CHECKS = ("DB", "ENV_ASSERTION", "ACTION")
#: Characters of a tool result kept at which the references' argument sources are traced
#: (GAIA's ``result_summary`` keeps the first), besides the whole result.
RESULT_LIMITS = (TOOL_TEXT_LIMIT, 1000, 2000, 4000, 8000)
#: The kinds of argument source (:class:`~skillsynth.pipeline.provenance.ArgSource`), in the
#: order they are shown.
SOURCE_KINDS = ("step", "customer", "constant", "unknown")


@dataclass
class IdealHistoryReport:
    """What :func:`ideal_history` wrote and left out.

    Attributes:
        tasks: tasks written (each ``attempts`` times).
        from_recorded, from_gold: of those, whose reference was a recorded successful run,
            and whose was the world's gold calls.
        calls: calls written (every attempt's).
        left_out: task -> why it has no ideal attempts.
        already_present: tasks of a finished build found at the path (kept as it is).
        sources_whole, sources_stored: the reference runs' argument values by source kind
            (:func:`~skillsynth.pipeline.provenance.argument_sources`, one attempt each),
            traced through the world's whole results and through the results as GAIA
            stores them (500 characters): what the cut hides from a distiller.
        sources_by_limit: the same at each of :data:`RESULT_LIMITS` characters kept of a
            result, and ``whole`` (how long GAIA's ``result_summary`` would have to be for a
            distiller to see where the arguments come from).
        stored_chars: at each of those limits, the characters the references' results
            (every call's, one attempt each) would take stored; ``results``: those calls.
    """

    world: str
    db_path: str
    attempts: int
    tasks: list[str] = field(default_factory=list)
    from_recorded: int = 0
    from_gold: int = 0
    calls: int = 0
    left_out: dict[str, str] = field(default_factory=dict)
    already_present: int = 0
    sources_by_limit: dict[str, dict[str, int]] = field(default_factory=dict)
    stored_chars: dict[str, int] = field(default_factory=dict)
    results: int = 0

    @property
    def sources_whole(self) -> dict[str, int]:
        """The sources traced through the world's whole results."""
        return self.sources_by_limit.get("whole", {})

    @property
    def sources_stored(self) -> dict[str, int]:
        """The sources traced through the results as GAIA stores them."""
        return self.sources_by_limit.get(str(TOOL_TEXT_LIMIT), {})

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (with the two curves' ends, whole and as stored)."""
        return asdict(self) | {"sources_whole": self.sources_whole,
                               "sources_stored": self.sources_stored}

    def sources_line(self) -> str:
        """The argument sources, whole against stored, in one line ("" before a build)."""
        whole, stored = self.sources_whole, self.sources_stored
        if not whole:
            return ""
        parts = [f"{k} {whole.get(k, 0)} / {stored.get(k, 0)}" for k in SOURCE_KINDS]
        return (f"argument values of the references by source, whole results / as stored "
                f"({TOOL_TEXT_LIMIT} characters): " + ", ".join(parts))

    def limit_rows(self) -> list[dict[str, Any]]:
        """One row per result limit (characters kept, ``whole`` last): the argument values
        by source kind, the share of all values found in an earlier result, and the mean
        characters a call's result takes stored (the cost)."""
        rows = []
        for limit, got in self.sources_by_limit.items():
            total = sum(got.values())
            rows.append({"result_chars": limit, **{k: got.get(k, 0) for k in SOURCE_KINDS},
                         "values": total,
                         "from_a_result": round(got.get("step", 0) / total, 4) if total
                         else None,
                         "mean_stored_chars": round(self.stored_chars.get(limit, 0)
                                                    / self.results) if self.results else None})
        return rows


def reached_goal_state(detail: Mapping[str, Any], success: bool | None) -> bool:
    """Whether a scored run passed every state check the task has (tau2's DB, environment
    and action checks; a task with none of them: the world's verdict)."""
    parts = detail.get("breakdown") or {}
    checks = [v for k, v in parts.items() if k in STATE_CHECKS]
    if "assertion_error" in detail:
        return False
    return all(v >= 1.0 - 1e-6 for v in checks) if checks else bool(success)


def _references(task: str, recorded: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
                world: Any) -> list[tuple[str, list[tuple[str, Mapping[str, Any]]]]]:
    """The task's candidate references in the order they are tried: its recorded success
    (where it has one), then the world's gold calls (where it has any)."""
    out = [("recorded", list(recorded[task]))] if task in recorded else []
    gold = list(world.gold_actions(task))
    return out + ([("gold", gold)] if gold else [])


def _executed(world: World, task: str, calls: Sequence[tuple[str, Mapping[str, Any]]]
              ) -> tuple[list[WorldTurn], Any]:
    """``calls`` executed in a fresh episode of the task, and the world's score of them."""
    episode = world.start(task)
    turns = []
    for name, args in calls:
        got = episode.execute(name, dict(args))
        turns.append(WorldTurn(kind="call", name=name, arguments=dict(args), result=got.result,
                               ok=got.ok))
    return turns, episode.score(turns, "agent-stop")


def _session(world: World, task: str, attempt: int, calls: Sequence[WorldTurn], prompt: str,
             at: datetime, base: SessionLabel | None, extra: dict[str, Any]) -> SessionRecord:
    """One ideal attempt as GAIA writes a session (timestamps a second apart from ``at``)."""
    sid = session_uuid(SOURCE, world.name, task, attempt)
    stamp = [(at + timedelta(seconds=i)).isoformat(timespec="microseconds")
             for i in range(len(calls) + 1)]
    rows = tool_rows(sid, (replace(c, timestamp=stamp[i + 1]) for i, c in enumerate(calls)))
    label = SessionLabel(session_id=sid, source=SOURCE, task_id=task, attempt=attempt,
                         success=True, reward=None,
                         essential_steps=None if base is None else base.essential_steps,
                         actions=None if base is None else base.actions,
                         started_at=stamp[0], extra=extra)
    turns = (Turn(session_id=sid, role="user", content=prompt, timestamp=stamp[0]),)
    return SessionRecord(session_id=sid, calls=rows, turns=turns, label=label)


def _labels_by_task(labels: Iterable[SessionLabel]) -> dict[str, SessionLabel]:
    """Each task's first label (by attempt): what an ideal attempt's label copies."""
    out: dict[str, SessionLabel] = {}
    for x in sorted(labels, key=lambda x: (x.attempt or 0, x.session_id)):
        if x.task_id is not None:
            out.setdefault(str(x.task_id), x)
    return out


def ideal_attempts(k: int, family: FamilyRule) -> int:
    """Attempts per task an ideal history needs: k+1 under family ``task`` (the probe's own
    task recurs: k in the history, one for the probe), one under ``tools`` (a kind's other
    tasks are its recurrence: the first k of the kind are the history, a later one the
    probe; k+1 copies of one task would make the kind's history that task alone)."""
    return 1 if family == "tools" else k + 1


def ideal_history(world: World, corpus: str | Path | None, db_path: str | Path, *,
                  attempts: int, tasks: Sequence[str] | None = None, progress: bool = False
                  ) -> IdealHistoryReport:
    """Write ``attempts`` ideal attempts of every task of ``corpus`` (or of ``tasks``).

    The database and its labels are built under temporary names and renamed when complete,
    so an existing ``db_path`` is a finished build and is kept as it is (its tasks are
    counted in ``already_present``).

    Args:
        world: the world the corpus was recorded in (the tasks are its tasks).
        corpus: a labelled corpus database (its successful sessions are the references),
            or None: every task of ``world``, each with its gold calls as the reference (a
            recurrence by kind needs more tasks than any recording has).
        db_path: the ideal corpus to write (its labels file beside).
        attempts: attempts per task (the protocol's k plus one for the probe).
        tasks: only these task ids, as the corpus's labels name them (None: every task).
        progress: show a progress bar.

    Raises:
        EvaluationError: ``attempts`` < 1, ``db_path`` is ``corpus`` or a finished build of
            another number of attempts, a task the corpus does not have, or no task has a
            reference that reaches its goal state.
        StoreError: ``corpus`` has no labels file.
    """
    if attempts < 1:
        raise EvaluationError(f"attempts must be >= 1, got {attempts}")
    db = Path(db_path)
    if corpus is not None and db.resolve() == Path(corpus).resolve():
        raise EvaluationError(f"the ideal corpus {db} would overwrite its source corpus")
    report = IdealHistoryReport(world=world.name, db_path=str(db), attempts=attempts)
    if db.exists():
        with LabelStore(labels_path_for(db)) as have:
            found = have.all()
        built = max((x.attempt or 0 for x in found), default=0)
        if built != attempts:
            raise EvaluationError(f"{db} holds an ideal history of {built} attempt(s) per "
                                  f"task, not {attempts}; remove it or write elsewhere")
        report.already_present = len({x.task_id for x in found})
        return report
    base, recorded = _world_labels(world) if corpus is None else _corpus_labels(corpus)
    everything = list(base) if corpus is None else sorted(base)  # the world's own order
    wanted = everything if tasks is None else [str(t) for t in tasks]
    if unknown := [t for t in wanted if t not in base]:
        raise EvaluationError(f"{world.name} has no task(s) {unknown}" if corpus is None else
                              f"{corpus} has no labelled session of task(s) {unknown}")
    tmp = db.with_name(db.name + ".building")
    for stale in (tmp, labels_path_for(tmp)):
        stale.unlink(missing_ok=True)
    db.parent.mkdir(parents=True, exist_ok=True)
    begun = now_iso()
    with MemoryStore.init(tmp) as store, LabelStore(labels_path_for(tmp), create=True) as out:
        for task in tqdm(wanted, desc=f"ideal history {world.name}", unit="task",
                         disable=not progress):
            recs = _one_task(world, task, attempts, recorded, base[task], report)
            for rec in recs:
                write_session(store, rec)
            out.add([r.label for r in recs])
        out.record_build("ideal-history", begun, now_iso(), {
            "world": world.name, "skillsynth": __version__, "attempts": attempts,
            "source_corpus": str(corpus or f"world:{world.name}"), "tasks": report.tasks,
            "left_out": report.left_out})
    if not report.tasks:
        raise EvaluationError(f"no task of {corpus or world.name} has a reference run that "
                              f"reaches its goal state in {world.name} (left out: "
                              f"{report.left_out})")
    labels_path_for(tmp).replace(labels_path_for(db))
    tmp.replace(db)
    return report


def _corpus_labels(corpus: str | Path) -> tuple[dict[str, SessionLabel],
                                                dict[str, list[tuple[str, Any]]]]:
    """A recorded corpus's first label per task, and its tasks' successful runs."""
    with LabelStore(labels_path_for(corpus)) as store_labels:
        labels = store_labels.all()
    recorded = successful_runs(corpus, [x.session_id for x in labels],
                               {x.session_id: x for x in labels})
    return _labels_by_task(labels), recorded


def _world_labels(world: Any) -> tuple[dict[str, SessionLabel], dict[str, list[Any]]]:
    """A label per task of the world, its gold calls as the ground truth (no recording)."""
    out = {}
    for t in world.tasks():
        gold = [{"name": n, "arguments": dict(a)} for n, a in world.gold_actions(t.task_id)]
        out[t.task_id] = SessionLabel(session_id="", source=SOURCE, task_id=t.task_id,
                                      attempt=None, success=True,
                                      essential_steps=tuple(g["name"] for g in gold),
                                      actions=tuple(gold))
    return out, {}


def _one_task(world: World, task: str, attempts: int,
              recorded: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]],
              base: SessionLabel, report: IdealHistoryReport) -> list[SessionRecord]:
    """One task's ideal attempts: the first of its references that reaches the goal state
    when executed in a fresh episode (none, with the reasons in ``report.left_out``, when
    no reference does)."""
    why = []
    try:
        wt = world.task(task)
        for origin, ref in _references(task, recorded, world):
            calls, score = _executed(world, task, ref)
            if reached_goal_state(score.detail, score.success):
                break
            why.append(f"its {origin} reference does not reach the goal state "
                       f"({dict(score.detail.get('breakdown') or {})})")
        else:
            report.left_out[task] = "; ".join(why) or "no recorded successful run and no " \
                                                      "gold calls"
            return []
    except WorldError as exc:
        report.left_out[task] = f"cannot be run: {exc}"
        return []
    t0 = datetime.now().astimezone().replace(microsecond=0)
    extra = {"world": world.name, "reference": origin,
             "reference_checks": dict(score.detail.get("breakdown") or {})}
    report.tasks.append(task)
    _count_sources(world, calls, wt.prompt, report)
    report.calls += len(calls) * attempts
    report.from_recorded += origin == "recorded"
    report.from_gold += origin == "gold"
    return [_session(world, task, a, calls, wt.prompt, t0 + timedelta(minutes=a), base, extra)
            for a in range(1, attempts + 1)]


def _count_sources(world: World, calls: Sequence[WorldTurn], customer: str,
                   report: IdealHistoryReport) -> None:
    """Add the reference's argument sources, whole, as stored and at each of
    :data:`RESULT_LIMITS`, to the report."""
    done = [c for c in calls if c.ok]
    enums = enum_values(world.tool_specs())
    report.results += len(calls)
    for cut in (*RESULT_LIMITS, None):
        traced = [TracedCall(name=c.name, arguments=c.arguments, result=c.result[:cut])
                  for c in done]
        key = "whole" if cut is None else str(cut)
        report.stored_chars[key] = report.stored_chars.get(key, 0) + sum(
            len(c.result[:cut]) for c in calls)
        into = report.sources_by_limit.setdefault(key, {})
        for kind, n in source_counts(argument_sources(traced, customer, enums=enums)).items():
            into[kind] = into.get(kind, 0) + n
