"""tau-bench results lists (``historical_trajectories/*.json``): one item per trial.

Each item has ``task_id``, ``trial``, ``reward`` and ``info.task`` (``instruction``, the
user simulator's scenario; ``actions``, the ground-truth calls) and ``traj``, OpenAI chat
messages. The goal is the instruction. tau-bench records no timestamps, so they are
synthesized (monotone, in file order, which is trial-major) and flagged. A tool message
whose content starts with ``Error`` is a failed call.

A session's id is its content's: task id, trial, and a digest of the task and the whole
``traj`` (an item names no agent; two agents' runs differ in their messages). The file's
name and the item's position play no part, so a renamed, truncated or merged copy of a
file imports as the sessions already there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..store import Turn
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
    need,
    pair_calls,
    session_uuid,
    synthetic_clock,
)

__all__ = ["is_trajectory", "read_taubench", "session_id"]

SOURCE = "taubench"


def read_taubench(path: str | Path, *, first_index: int = 0
                  ) -> Iterator[SessionRecord | BadRecord]:
    """Parse one results list; ``first_index`` offsets the synthetic clock across files."""
    src = SourceFile(path)
    for item in src.array_items(is_trajectory):
        if isinstance(item, BadRecord):  # the reader goes on after a broken item if it can
            yield item
            continue
        i, obj = item
        try:
            yield _session(src, i, obj, first_index + i)
        except FieldError as exc:
            yield BadRecord(src.error(exc.message, record=i, field=exc.field))


def is_trajectory(value: Any) -> bool:
    """Whether a parsed object is a results item (where the reader may resume)."""
    return isinstance(value, dict) and "task_id" in value and "traj" in value


def session_id(task_id: int | str, trial: int, task: Any, traj: Any) -> str:
    """The id of the session a results item becomes (see the module's docstring)."""
    return session_uuid(SOURCE, json.dumps(task_id), trial,
                        content_digest({"task": task, "traj": traj}))


def _session(src: SourceFile, i: int, obj: Any, clock_index: int) -> SessionRecord:
    check_text(obj)
    task_id = need(obj, "task_id", (int, str), "")
    trial = need(obj, "trial", int, "")
    reward = need(obj, "reward", (int, float), "")
    task = need(need(obj, "info", dict, ""), "task", dict, "info")
    goal = need(task, "instruction", str, "info.task").strip()
    actions = task.get("actions") or []
    if not isinstance(actions, list):
        raise FieldError("info.task.actions", "expected a list")
    truth = tuple({"name": need(a, "name", str, f"info.task.actions[{j}]"),
                   "arguments": a.get("kwargs") or {}} for j, a in enumerate(actions))
    traj = need(obj, "traj", list, "")
    events: list[tuple[Call, ...] | Reply | Break] = []
    for j, m in enumerate(traj):
        where = f"traj[{j}]"
        role = need(m, "role", str, where)
        if role == "assistant" and m.get("tool_calls"):
            calls = need(m, "tool_calls", list, where)
            events.append(tuple(_call(c, f"{where}.tool_calls[{k}]")
                                for k, c in enumerate(calls)))
        elif role == "tool":
            content = m.get("content")
            events.append(Reply(content=content, error=isinstance(content, str) and
                                content.startswith("Error"), timestamp=None, path=where))
        else:
            events.append(Break())
    sid = session_id(task_id, trial, task, traj)
    clock = synthetic_clock(clock_index)
    calls, flags = pair_calls(events, clock, sid)
    flags.add("synthetic-timestamps")
    legacy = session_uuid(SOURCE, Path(src.name).name, i, task_id, trial)  # file + position
    started = calls[0].timestamp if calls else next(clock)
    label = SessionLabel(
        session_id=sid, source=SOURCE, task_id=str(task_id), attempt=None,
        success=float(reward) >= 1.0, reward=float(reward),
        essential_steps=tuple(a["name"] for a in truth), actions=truth, started_at=started,
        flags=tuple(sorted(flags)), extra={"trial": trial}, source_file=Path(src.name).name,
        source_record=str(i))
    goal_turn = Turn(session_id=sid, role="user", content=goal, timestamp=next(clock))
    return SessionRecord(session_id=sid, calls=tuple(calls), turns=(goal_turn,), label=label,
                         aliases=(legacy,))


def _call(c: Any, where: str) -> Call:
    fn = need(c, "function", dict, where)
    return Call(name=need(fn, "name", str, f"{where}.function"), raw_args=fn.get("arguments"),
                timestamp=None, path=where)
