"""The live agent: a function-calling loop over the chat client against replayed tools.

Each probe's goal is run twice by the same model, without and with the recalled procedures
injected (their ``tools_required`` loaded first, GAIA's CORE > SKILL > SEMANTIC order,
at most 14 tools). Tools answer from the corpus: a call whose tool and arguments match a
recorded call gets that call's recorded result (the probe's own calls first, then any
session's); any other call gets an explicit error saying no recorded result exists. The
loop stops when the model answers without a tool call or at the step limit. A call the
model wrote as JSON text in its answer (small local models do) is taken as a call when it
names an offered tool (:func:`~skillsynth.llm.tool_calls_in_content`), and counted.

Success is judged against the task's ground truth where the corpus has it: every
ground-truth action (tool and arguments) was called (tau-bench, tau2), or else every
essential tool was called as often as the true procedure needs (synthetic). Without ground
truth, success is None. This module measures; it estimates nothing.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..corpora.labels import SessionLabel
from ..errors import LLMError
from ..inject import inject, tools_for_turn
from ..llm import tool_calls_in_content
from ..protocols import ChatModel
from ..skill import Skill
from ..store import ToolCall

__all__ = ["AGENT_PROMPT_VERSION", "AgentRun", "ReplayToolEnv", "canonical_args", "judge_success",
           "run_agent"]

#: Part of the call-cache key of every agent turn.
AGENT_PROMPT_VERSION = "agent-v1"
_SYSTEM = ("You are a tool-using assistant. Use the tools to accomplish the user's goal, one "
           "call at a time. When the goal is done, reply with a short final answer and no "
           "tool call.")
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


class ReplayToolEnv:
    """Recorded tool results, looked up by tool name and canonical arguments.

    Args:
        calls: every recorded call of the corpus (the world the agent acts in).
        own: the probe's own recorded calls (they answer first).
    """

    def __init__(self, calls: Sequence[ToolCall], own: Sequence[ToolCall] = ()):
        self._answers: dict[tuple[str, str], str] = {}
        for c in [*own, *calls]:
            key = (c.tool_name, canonical_args(c.args))
            if key not in self._answers:
                self._answers[key] = (c.result_summary or "ok") if c.success else \
                    json.dumps({"error": c.error or "the call failed"})
        keys: dict[str, set[str]] = {}
        for c in calls:
            try:
                parsed = json.loads(c.args) if c.args else {}
            except json.JSONDecodeError:
                parsed = {}
            keys.setdefault(c.tool_name, set()).update(parsed if isinstance(parsed, dict)
                                                       else ())
        self.arg_keys = keys
        self.unknown = 0

    def specs(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """OpenAI function specs for ``names`` (argument names as the corpus recorded them)."""
        return [{"type": "function", "function": {
            "name": n, "description": f"The {n} tool (answers are replayed from recordings).",
            "parameters": {"type": "object",
                           "properties": {k: {} for k in sorted(self.arg_keys.get(n, ()))}}}}
            for n in names]

    def call(self, tool: str, args: str | Mapping[str, Any] | None) -> tuple[str, bool]:
        """The recorded result and True, or an explicit error and False."""
        hit = self._answers.get((tool, canonical_args(args)))
        if hit is None:
            self.unknown += 1
            return json.dumps({"error": _UNKNOWN.format(tool=tool)}), False
        return hit, True


@dataclass(frozen=True)
class AgentRun:
    """One arm of one probe under the live agent.

    Attributes:
        steps: tool calls the agent made.
        calls: (tool, canonical arguments) in order.
        unknown_calls: calls the replay environment had no recording for.
        finished: the model stopped by itself (False: the step limit cut it off).
        success: judged against ground truth (None without it).
        tokens: prompt + completion tokens the server reported.
        llm_calls, cache_hits: model turns requested, and those answered by the cache.
        content_calls: calls read from the answer's text rather than its ``tool_calls``.
        error: a model error that ended the run (the arm then counts as not finished).
        wall_s: seconds.
    """

    steps: int
    calls: tuple[tuple[str, str], ...]
    unknown_calls: int
    finished: bool
    success: bool | None
    tokens: int
    llm_calls: int
    cache_hits: int
    error: str | None
    wall_s: float
    content_calls: int = 0


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


def run_agent(llm: ChatModel, goal: str, env: ReplayToolEnv, label: SessionLabel, *,
              tools: Sequence[str], recalled: Sequence[Skill] = (), config: Any,
              step_limit: int = 12, max_tokens: int = 256) -> AgentRun:
    """Run one arm: the goal, the loaded tools, and (for the memory arm) the recalled skills.

    Args:
        llm: a chat client with function calling.
        goal: the probe's first user turn.
        env: the replay tool environment.
        label: the probe's label (for judging success only; never shown to the model).
        tools: the SEMANTIC tool list (most used first); recalled skills' tools go first.
        recalled: the skills to inject (empty for the no-memory arm).
        config: thresholds (``max_recall_body_chars``).
        step_limit: most tool calls before the run is cut off.
        max_tokens: generation cap per turn.
    """
    t0 = time.perf_counter()
    loaded = tools_for_turn([], recalled, tools)
    system = _SYSTEM + ("\n\n" + inject(recalled, config) if recalled else "")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": goal}]
    specs = env.specs(loaded)
    unknown_before = env.unknown
    made: list[tuple[str, str]] = []
    tokens = turns = hits = from_text = 0
    finished, error = False, None
    while len(made) < step_limit:
        try:
            r = llm.chat(messages, tools=specs, temperature=0.0, max_tokens=max_tokens, seed=0,
                         prompt_version=AGENT_PROMPT_VERSION)
        except LLMError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
        turns += 1
        hits += int(r.cached)
        tokens += int(r.usage.get("total_tokens") or 0)
        calls = r.tool_calls
        if not calls:
            calls = tool_calls_in_content(r.content, loaded)
            from_text += len(calls)
        if not calls:
            finished = True
            break
        messages.append({"role": "assistant", "content": "" if calls is not r.tool_calls
                         else r.content or "", "tool_calls": list(calls)})
        for i, tc in enumerate(calls):
            fn = tc.get("function") or {}
            name, args = str(fn.get("name", "")), fn.get("arguments") or "{}"
            made.append((name, canonical_args(args)))
            result, _ = env.call(name, args)
            messages.append({"role": "tool", "tool_call_id": tc.get("id") or f"call_{turns}_{i}",
                             "content": result})
            if len(made) >= step_limit:
                break
    return AgentRun(len(made), tuple(made), env.unknown - unknown_before, finished,
                    judge_success(label, made), tokens, turns - hits, hits, error,
                    round(time.perf_counter() - t0, 3), from_text)
