"""The replay world: tools answer from a corpus's recordings.

A call whose tool and arguments match a recorded call gets that call's recorded result
(the task's own calls first, then any session's); any other call gets an explicit error
saying no recorded result exists, so a valid call the recordings never saw is a failed
call here (the reason the tau2 worlds exist). A task is one probe session. Success is
judged against the session's ground truth where the corpus has it: every ground-truth
action (tool and arguments) was called (tau-bench, tau2), or else every essential tool as
often as the true procedure needs (synthetic); without ground truth, None.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ....corpora.labels import SessionLabel
from ....errors import WorldError
from ....store import ToolCall
from .base import CallOutcome, Score, Termination, Turn, WorldTask

__all__ = ["ReplayEpisode", "ReplayWorld", "canonical_args", "judge_success"]

_UNKNOWN = "replay environment: no recorded result for {tool} with these arguments"


def canonical_args(args: str | Mapping[str, Any] | None) -> str:
    """Arguments as sorted-key JSON (text that is not JSON is kept as it is)."""
    if args is None or args == "":
        return "{}"
    value: Any = args
    if isinstance(args, str):
        try:
            value = json.loads(args)
        except json.JSONDecodeError:
            return args
    return json.dumps(value, sort_keys=True, default=str)


def judge_success(label: SessionLabel, calls: Sequence[tuple[str, str]]) -> bool | None:
    """Every ground-truth action called (tool and arguments), else every essential step."""
    if label.actions:
        made = Counter(calls)
        need = Counter((a["name"], canonical_args(a.get("arguments"))) for a in label.actions)
        return all(made[k] >= n for k, n in need.items())
    if label.essential_steps:
        made_tools = Counter(t for t, _ in calls)
        return all(made_tools[t] >= n for t, n in Counter(label.essential_steps).items())
    return None


class ReplayEpisode:
    """One run of one probe against the recordings (stateless: recordings do not change)."""

    def __init__(self, world: ReplayWorld, task: WorldTask, own: Sequence[ToolCall],
                 label: SessionLabel):
        self.task = task
        self._world = world
        self._own = {(c.tool_name, canonical_args(c.args)): c for c in reversed(own)}
        self._label = label
        self.unknown = 0

    def execute(self, name: str, arguments: Mapping[str, Any] | str) -> CallOutcome:
        key = (name, canonical_args(arguments))
        hit = self._own.get(key) or self._world._answers.get(key)
        if hit is None:
            self.unknown += 1
            return CallOutcome(result=json.dumps({"error": _UNKNOWN.format(tool=name)}), ok=False)
        if hit.success:
            return CallOutcome(result=hit.result_summary or "ok", ok=True)
        return CallOutcome(result=json.dumps({"error": hit.error or "the call failed"}), ok=False)

    def score(self, turns: Sequence[Turn], termination: Termination) -> Score:
        calls = [(t.name, canonical_args(dict(t.arguments))) for t in turns if t.kind == "call"]
        return Score(judge_success(self._label, calls))


class ReplayWorld:
    """A corpus's recordings as a world; its tasks are the probes handed in.

    Args:
        calls: every recorded call of the corpus (the world the agent acts in).
        probes: per probe session: its goal, family, own recorded calls and label.
        tool_order: the tools offered, most relevant first (GAIA's SEMANTIC list); default
            the corpus's tools by how often they were called.
    """

    name = "replay"

    def __init__(self, calls: Sequence[ToolCall],
                 probes: Mapping[str, tuple[str, str, Sequence[ToolCall], SessionLabel]],
                 tool_order: Sequence[str] | None = None):
        self._answers: dict[tuple[str, str], ToolCall] = {}
        keys: dict[str, set[str]] = {}
        for c in calls:
            self._answers.setdefault((c.tool_name, canonical_args(c.args)), c)
            try:
                parsed = json.loads(c.args) if c.args else {}
            except json.JSONDecodeError:
                parsed = {}
            keys.setdefault(c.tool_name, set()).update(parsed if isinstance(parsed, dict)
                                                       else ())
        self._arg_keys = keys
        self._order = list(tool_order) if tool_order is not None else [
            t for t, _ in Counter(c.tool_name for c in calls).most_common()]
        self._probes = dict(probes)

    def tool_specs(self) -> list[dict[str, Any]]:
        """Argument names as the corpus recorded them (the recordings have no schemas)."""
        return [{"type": "function", "function": {
            "name": n, "description": f"The {n} tool (answers are replayed from recordings).",
            "parameters": {"type": "object",
                           "properties": {k: {} for k in sorted(self._arg_keys.get(n, ()))}}}}
            for n in self._order]

    def policy(self) -> str:
        return ""

    def tasks(self) -> list[WorldTask]:
        return [self.task(s) for s in self._probes]

    def task(self, task_id: str) -> WorldTask:
        if task_id not in self._probes:
            raise WorldError(f"the replay world has no probe session {task_id!r}")
        goal, family, _, _ = self._probes[task_id]
        return WorldTask(task_id=task_id, goal=goal, prompt=goal, family=family)

    def start(self, task_id: str) -> ReplayEpisode:
        task = self.task(task_id)
        _, _, own, label = self._probes[task_id]
        return ReplayEpisode(self, task, own, label)
