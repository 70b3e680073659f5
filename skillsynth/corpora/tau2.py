"""tau2-bench results files: ``{info, tasks, simulations}``, one file per agent run (or a
bare list of simulations, as some published submissions are, with a tasks file).

Each simulation is one session. Its goal is its task's ``user_scenario.instructions
.reason_for_call``; the task comes from the file's own ``tasks`` (they take precedence,
since task versions differ between runs) or else from a tasks file given by the caller
(``tasks_*.json``, a list). Messages carry real timestamps and tool messages an ``error``
flag. Calls the user simulator makes (``requestor: user``) are not the agent's and are not
imported. Attempts are numbered per task by start time once every file is read. A
session's id is its simulation's content (:func:`session_id`), not its file's name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import CorpusFormatError
from ..store import Turn
from .jsonscan import ArrayReader, Gap, Item, byte_length, read_object, skip_ws
from .labels import SessionLabel
from .records import (
    BadRecord,
    Break,
    Call,
    FieldError,
    Reply,
    SessionRecord,
    SourceFile,
    check_text,
    content_digest,
    iso,
    need,
    pair_calls,
    session_uuid,
    synthetic_clock,
)

__all__ = ["is_simulation", "load_tasks", "read_tau2", "session_id"]

SOURCE = "tau2"


def load_tasks(path: str | Path) -> dict[str, dict[str, Any]]:
    """A tasks file (a JSON list of tasks, or an object with ``tasks``) by task id."""
    src = SourceFile(path)
    doc = src.load()
    tasks = doc.get("tasks") if isinstance(doc, Mapping) else doc
    if not isinstance(tasks, list):
        raise src.error("expected a list of tasks (or an object with 'tasks')", field="tasks")
    out: dict[str, dict[str, Any]] = {}
    for i, t in enumerate(tasks):
        try:
            out[str(need(t, "id", (str, int), ""))] = t
        except FieldError as exc:
            raise src.error(exc.message, record=f"tasks[{i}]", field=exc.field) from None
    return out


def read_tau2(path: str | Path, *, fallback_tasks: Mapping[str, dict[str, Any]] | None = None,
              first_index: int = 0) -> Iterator[SessionRecord | BadRecord]:
    """Parse one results file; ``first_index`` offsets synthetic clocks across files.

    The ``simulations`` list is read one simulation at a time: a malformed one is a bad
    record and reading resumes at the next (see :mod:`~skillsynth.corpora.jsonscan`).
    """
    src = SourceFile(path)
    doc, sims, broken = _document(src)
    if sims is None:
        yield broken or BadRecord(src.error("missing or not a list", field="simulations"),
                                  resumed=False)
        return
    own: dict[str, dict[str, Any]] = {}
    for t in doc.get("tasks") or []:
        if isinstance(t, Mapping) and "id" in t:
            own[str(t["id"])] = dict(t)
    raw_info = doc.get("info")
    info: Mapping[str, Any] = raw_info if isinstance(raw_info, Mapping) else {}
    values = [x.value for x in sims if isinstance(x, Item)]
    domain = (info.get("environment_info") or {}).get("domain_name") or \
        _task_domain(values, own, fallback_tasks or {}) or "unknown"
    agent = (info.get("agent_info") or {}).get("llm")
    for x in sims:
        record = f"simulations[{x.index}]"
        if isinstance(x, Gap):
            yield src.gap_record(x, record)
            continue
        try:
            yield _session(src, record, x.value, own, fallback_tasks or {}, str(domain), agent,
                           first_index + x.index)
        except FieldError as exc:
            yield BadRecord(src.error(exc.message, record=record, field=exc.field))
    if broken is not None:
        yield broken


def is_simulation(value: Any) -> bool:
    """Whether a parsed object is a simulation (where the reader may resume)."""
    return isinstance(value, dict) and "id" in value and "messages" in value


def session_id(sim_id: str, task_id: str, trial: Any, messages: Any) -> str:
    """The id of the session a simulation becomes: its own id, task and trial, and a
    digest of its messages. Nothing from the file around it (name, ``info``) takes part,
    so the full results file and a bare list of the same simulations agree; two agents'
    runs differ in their messages (and ids)."""
    return session_uuid(SOURCE, sim_id, task_id, json.dumps(trial), content_digest(messages))


def _document(src: SourceFile) -> tuple[dict[str, Any], list[Item | Gap] | None,
                                        BadRecord | None]:
    """The file's members other than ``simulations``, its simulations (None: none could
    be found), and a bad record for where the document broke outside that list."""
    text = src.text
    pos = skip_ws(text, 0)
    if text.startswith("[", pos):  # the bare list of simulations some submissions publish
        return {}, list(ArrayReader(text, pos, is_simulation)), None
    if not text.startswith("{", pos):
        try:  # not an object: say what json makes of it
            src.load()
        except CorpusFormatError as exc:
            return {}, None, BadRecord(exc, resumed=False)
        return {}, None, BadRecord(src.error(
            "expected a results object with 'simulations' (or a list of simulations)",
            field="document"), resumed=False)
    doc, sims, broke = read_object(text, pos, "simulations", is_simulation)
    bad = None
    if broke is not None:
        why, at = broke
        bad = BadRecord(src.error(why + "; nothing after it was read", field="document"),
                        records=0, bytes=byte_length(text, at, len(text)), resumed=False)
    elif sims is None and "simulations" in doc:
        bad = BadRecord(src.error("not a list", field="simulations"), resumed=False)
    return doc, sims, bad


def _task_domain(sims: list[Any], own: Mapping[str, Any], fallback: Mapping[str, Any]
                 ) -> str | None:
    """A file without ``info`` (a bare list): the domain its tasks' scenarios name."""
    for sim in sims:
        task = own.get(str(sim.get("task_id"))) or fallback.get(str(sim.get("task_id"))) \
            if isinstance(sim, Mapping) else None
        ins = ((task or {}).get("user_scenario") or {}).get("instructions")
        if isinstance(ins, Mapping) and isinstance(ins.get("domain"), str):
            return str(ins["domain"])
    return None


def _session(src: SourceFile, record: str, sim: Any, own: Mapping[str, Any],
             fallback: Mapping[str, Any], domain: str, agent: Any,
             clock_index: int) -> SessionRecord:
    check_text(sim)
    sim_id = need(sim, "id", str, "")
    task_id = str(need(sim, "task_id", (str, int), ""))
    task = own.get(task_id) or fallback.get(task_id)
    if task is None:
        raise FieldError("task_id", f"task {task_id!r} is neither in the file's tasks nor in "
                                    "the tasks file (pass one with --tasks)")
    check_text(task, f"tasks[{task_id}]")
    goal = _goal(task, f"tasks[{task_id}]")
    reward = need(need(sim, "reward_info", Mapping, ""), "reward", (int, float), "reward_info")
    messages = need(sim, "messages", list, "")
    events: list[tuple[Call, ...] | Reply | Break] = []
    stamps: list[str] = []
    for j, m in enumerate(messages):
        where = f"messages[{j}]"
        role = need(m, "role", str, where)
        if m.get("timestamp"):
            stamps.append(iso(str(m["timestamp"]), f"{where}.timestamp"))
        if m.get("tool_calls"):
            calls = need(m, "tool_calls", list, where)
            events.append(tuple(_call(c, f"{where}.tool_calls[{k}]", m, role)
                                for k, c in enumerate(calls)))
        elif role == "tool":
            events.append(Reply(content=m.get("content"), error=bool(m.get("error")),
                                timestamp=m.get("timestamp"), path=where))
        else:
            events.append(Break())
    sid = session_id(sim_id, task_id, sim.get("trial"), messages)
    clock = synthetic_clock(clock_index)
    calls, flags = pair_calls(events, clock, sid)
    start = sim.get("start_time")
    started = (iso(str(start), "start_time") if start else
               stamps[0] if stamps else calls[0].timestamp if calls else next(clock))
    if not stamps:
        flags.add("synthetic-timestamps")
    goal_at = max(stamps) if stamps else next(clock)
    crit = task.get("evaluation_criteria") or {}
    truth = tuple({"name": need(a, "name", str, f"tasks[{task_id}].evaluation_criteria"
                                                 f".actions[{k}]"),
                   "arguments": a.get("arguments") or {}}
                  for k, a in enumerate(crit.get("actions") or [])
                  if a.get("requestor", "assistant") == "assistant")
    label = SessionLabel(
        session_id=sid, source=SOURCE, task_id=f"{domain}/{task_id}", attempt=None,
        success=float(reward) >= 1.0, reward=float(reward),
        essential_steps=tuple(a["name"] for a in truth), actions=truth,
        started_at=started, flags=tuple(sorted(flags)),
        extra={"agent": agent, "trial": sim.get("trial"), "domain": domain,
               "termination_reason": sim.get("termination_reason")},
        source_file=Path(src.name).name, source_record=record)
    goal_turn = Turn(session_id=sid, role="user", content=goal, timestamp=goal_at)
    return SessionRecord(session_id=sid, calls=tuple(calls), turns=(goal_turn,), label=label,
                         aliases=(session_uuid(SOURCE, sim_id),))  # the simulation id alone


def _goal(task: Any, where: str) -> str:
    instr = need(need(task, "user_scenario", Mapping, where), "instructions", (Mapping, str),
                 f"{where}.user_scenario")
    if isinstance(instr, str):  # older tau2 releases keep the scenario as one string
        return instr.strip()
    return str(need(instr, "reason_for_call", str,
                    f"{where}.user_scenario.instructions")).strip()


def _call(c: Any, where: str, message: Mapping[str, Any], role: str) -> Call:
    by = c.get("requestor") if isinstance(c, Mapping) else None
    return Call(name=need(c, "name", str, where), raw_args=c.get("arguments"),
                timestamp=message.get("timestamp"), path=where,
                by_agent=(by or role) == "assistant")
