"""The live agent: a function-calling loop over the chat model, inside a tool world.

Each arm of a probe is one run: the task's prompt as the first user turn, the world's tools
(the recalled procedures' ``tools_required`` loaded first, GAIA's CORE > SKILL > SEMANTIC
order, at most 14 tools), the world's policy and, in the memory arm, GAIA's ``RECALLED
PROCEDURES`` block in the system prompt. Every call is executed by the world's episode
(a fresh state per run). The loop stops when the model answers without a tool call
(``agent-stop``; with a simulated user, when the user ends the conversation: ``user-stop``),
at the step limit (``step-limit``) or on a model error (``model-error``); the world then
scores the run by its own rule. A call the model wrote as JSON text in its
answer (small local models do) is taken as a call when it names an offered tool
(:func:`~skillsynth.models.llm.tool_calls_in_content`), and counted. This module measures; it
estimates nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...errors import LLMError
from ...models.llm import tool_calls_in_content
from ...pipeline.inject import RecallCut, inject, tools_for_turn
from ...pipeline.skill import Skill
from ...protocols import ChatModel
from ...store import now_iso
from .user_sim import GREETING, UserSimulator
from .worlds import Episode, Termination, Turn, canonical_args

__all__ = ["AGENT_PROMPT_VERSION", "AgentRun", "run_agent", "system_prompt"]

#: Part of the call-cache key of every agent turn.
AGENT_PROMPT_VERSION = "agent-v3"
_SYSTEM = ("You are a tool-using assistant. Use the tools to accomplish the user's goal, one "
           "call at a time. When the goal is done, reply with a short final answer and no "
           "tool call.")
_SOLO = ("The customer is not available during this task: the request below is all they "
         "will say, and they have already confirmed every action it asks for. Do not ask "
         "them questions: look up what you need with the tools, act, then report the "
         "outcome.")


@dataclass(frozen=True)
class AgentRun:
    """One arm of one probe, run live.

    Attributes:
        steps: tool calls the agent made.
        calls: (tool, canonical arguments) in order.
        failed_calls: calls the world answered with an error.
        turns: model turns taken.
        termination: ``agent-stop``, ``user-stop`` (a simulated user ended it), ``step-limit``,
            ``turn-limit`` (the simulated user ran out of turns) or ``model-error``.
        success, reward: the world's verdict on the run (None where it cannot judge).
        prompt_tokens, completion_tokens: summed over turns, as the server reported them.
        llm_calls, cache_hits: model turns requested, and those answered by the cache.
        content_calls: calls read from the answer's text rather than its ``tool_calls``.
        unoffered_text_calls: call-shaped JSON in a final answer naming a tool that was not
            offered (not executed: the run ended on that answer; counted so it is seen).
        user_turns: messages the simulated user sent (0 in solo mode).
        text_calls_not_run: calls written in an answer's text after its first one (a text
            answer is taken as one call a turn: what follows was written before any result
            came back, so it is a plan, not calls; counted so it is seen).
        error: the model error that ended the run, if one did.
        wall_s: seconds.
        answer: the agent's last text.
        transcript: every call with its result, and the final answer.
        score_detail: the world's breakdown of the score.
    """

    steps: int
    calls: tuple[tuple[str, str], ...]
    failed_calls: int
    turns: int
    termination: Termination
    success: bool | None
    reward: float | None
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    cache_hits: int
    content_calls: int
    error: str | None
    wall_s: float
    answer: str = ""
    transcript: tuple[Turn, ...] = ()
    score_detail: Mapping[str, Any] | None = None
    unoffered_text_calls: int = 0
    user_turns: int = 0
    text_calls_not_run: int = 0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def finished(self) -> bool:
        """The model stopped by itself."""
        return self.termination == "agent-stop"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (one line of a point's ``runs.jsonl``)."""
        d = asdict(self)
        d["calls"] = [list(c) for c in self.calls]
        d["transcript"] = [asdict(t) for t in self.transcript]
        d["score_detail"] = dict(self.score_detail or {})
        return d


def system_prompt(policy: str, recalled: Sequence[Skill], config: Any, *, solo: bool,
                  cut: RecallCut = "raw") -> str:
    """The agent's system prompt: role, policy, solo-mode note, recalled procedures (long
    bodies cut by ``cut``)."""
    parts = [_SYSTEM]
    if policy:
        parts.append(policy.strip())
    if solo:
        parts.append(_SOLO)
    if recalled:
        parts.append(inject(recalled, config, cut=cut))
    return "\n\n".join(parts)


def _loaded(specs: Sequence[Mapping[str, Any]], recalled: Sequence[Skill]
            ) -> list[Mapping[str, Any]]:
    by_name = {s["function"]["name"]: s for s in specs}
    names = tools_for_turn([], [t for s in recalled for t in s.tools_required
                                if t in by_name], list(by_name))
    return [by_name[n] for n in names]


def run_agent(llm: ChatModel, episode: Episode, *, tool_specs: Sequence[Mapping[str, Any]],
              policy: str = "", recalled: Sequence[Skill] = (), config: Any,
              step_limit: int = 12, max_tokens: int = 256, temperature: float = 0.0,
              seed: int = 0, solo: bool = False, user: UserSimulator | None = None,
              recall_cut: RecallCut = "raw") -> AgentRun:
    """Run one arm of one task in ``episode`` and have the world score it.

    Args:
        llm: a chat model with function calling.
        episode: a fresh episode of the task (its world executes the calls).
        tool_specs: the world's tools (OpenAI function schemas, most relevant first).
        policy: the world's policy text, put in the system prompt ("" for none).
        recalled: the skills to inject (empty for the no-memory arm).
        config: thresholds (``max_recall_body_chars``).
        step_limit: most tool calls before the run is cut off.
        max_tokens: generation cap per turn.
        temperature, seed: sampling (seeded where the server honours it).
        solo: no user simulator: the system prompt says the user is away.
        user: a simulated user: it opens the conversation and answers every message the
            agent sends without a tool call, until it stops (``user-stop``) or runs out of
            turns (``turn-limit``). Without one, the agent's first answer ends the run.
        recall_cut: how recalled bodies over ``max_recall_body_chars`` are cut (``raw``:
            GAIA's slice; ``whole_steps``: after the last whole step).
    """
    t0 = time.perf_counter()
    specs = _loaded(tool_specs, recalled)
    offered = [s["function"]["name"] for s in specs]
    transcript: list[Turn] = []
    opening = episode.task.prompt
    if user is not None:
        try:
            opening, _ = user.reply(GREETING)
        except LLMError as exc:
            return _failed(exc, t0)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(policy, recalled, config,
                                                    solo=solo and user is None,
                                                    cut=recall_cut)},
        *([{"role": "assistant", "content": GREETING}] if user is not None else []),
        {"role": "user", "content": opening}]
    made: list[tuple[str, str]] = []
    failed = turns = hits = from_text = p_tok = c_tok = unoffered = not_run = 0
    termination: Termination = "step-limit"
    error, answer = None, ""
    while len(made) < step_limit:
        try:
            r = llm.chat(messages, tools=specs, temperature=temperature, max_tokens=max_tokens,
                         seed=seed, prompt_version=AGENT_PROMPT_VERSION)
        except LLMError as exc:
            error, termination = f"{type(exc).__name__}: {exc}", "model-error"
            break
        turns += 1
        hits += int(r.cached)
        p_tok += int(r.usage.get("prompt_tokens") or 0)
        c_tok += int(r.usage.get("completion_tokens") or 0)
        calls = r.tool_calls
        if not calls:
            written = tool_calls_in_content(r.content, offered)
            calls = written[:1]  # one call a turn: the rest had not seen this one's result
            from_text += len(calls)
            not_run += len(written) - len(calls)
        if not calls:
            unoffered += len(tool_calls_in_content(r.content, None))
            answer = (r.content or "").strip()
            transcript.append(Turn("answer", content=answer, timestamp=now_iso()))
            if user is None:
                termination = "agent-stop"
                break
            if user.exhausted:
                termination = "turn-limit"
                break
            try:
                said, stop = user.reply(answer)
            except LLMError as exc:
                error, termination = f"user {type(exc).__name__}: {exc}", "model-error"
                break
            if stop:
                termination = "user-stop"
                break
            messages += [{"role": "assistant", "content": answer},
                         {"role": "user", "content": said}]
            continue
        if r.content and calls is r.tool_calls:
            transcript.append(Turn("answer", content=r.content.strip(), timestamp=now_iso()))
        messages.append({"role": "assistant", "content": "" if calls is not r.tool_calls
                         else r.content or "", "tool_calls": list(calls)})
        for i, tc in enumerate(calls):
            fn = tc.get("function") or {}
            name, args = str(fn.get("name", "")), fn.get("arguments") or "{}"
            made.append((name, canonical_args(args)))
            at = now_iso()
            out = episode.execute(name, args)
            failed += not out.ok
            transcript.append(Turn("call", name, _as_mapping(args), out.result, out.ok,
                                   timestamp=at))
            messages.append({"role": "tool", "tool_call_id": tc.get("id") or f"call_{turns}_{i}",
                             "content": out.result})
            if len(made) >= step_limit:
                break
    score = episode.score(transcript, termination)
    return AgentRun(len(made), tuple(made), failed, turns, termination, score.success,
                    score.reward, p_tok, c_tok, turns - hits, hits, from_text, error,
                    round(time.perf_counter() - t0, 3), answer, tuple(transcript),
                    dict(score.detail), unoffered, user.turns if user is not None else 0,
                    not_run)


def _failed(exc: LLMError, t0: float) -> AgentRun:
    """A run the simulated user could not open (no step taken, nothing to score)."""
    return AgentRun(0, (), 0, 0, "model-error", None, None, 0, 0, 0, 0, 0,
                    f"user {type(exc).__name__}: {exc}", round(time.perf_counter() - t0, 3))


def _as_mapping(args: Any) -> dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(args)
    try:
        value = json.loads(args) if args else {}
    except (TypeError, json.JSONDecodeError):
        return {"_raw": str(args)}
    return value if isinstance(value, dict) else {"_raw": value}
