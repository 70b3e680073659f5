"""The live agent: a function-calling loop over the chat model, inside a tool world.

Each arm of a probe is one run: the task's prompt as the first user turn, the world's tools
(the recalled procedures' ``tools_required`` loaded first, GAIA's CORE > SKILL > SEMANTIC
order, at most 14 tools), the world's policy and, in the memory arm, GAIA's ``RECALLED
PROCEDURES`` block in the system prompt (under ``recall_layout: release``, amd-gaia
0.25.1's block in the memory context before the first user turn: :mod:`.gaia_context`)
and, under ``procedure_form`` plan or both, each recalled plan as one more tool
(:mod:`.plan_tool`). Every call is executed by the world's
episode (a fresh state per run). The loop stops when the model answers without a tool call
(``agent-stop``; solo, when it calls tau2's stop tool ``done``, or answers in text after two
reminders to go on; with a simulated user, when the user ends the conversation: ``user-stop``),
at the step limit (``step-limit``), when the conversation outgrows the model's context
(``context-limit``: the server refuses the request as too long, as a fixed-context agent
would be cut off; not an outage) or on a model error (``model-error``); the world then
scores the run by its own rule. A call the model wrote as JSON text in its
answer (small local models do) is taken as a call when it names an offered tool
(:func:`~skillsynth.models.text_calls.tool_calls_in_content`), and counted. This module measures; it
estimates nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ...errors import ContextExceeded, LLMError, StepNotCalled
from ...models.text_calls import tool_calls_in_content
from ...pipeline.execute import PlanRun
from ...pipeline.inject import RecallCut, inject, tools_for_turn
from ...pipeline.skill import Skill
from ...protocols import ChatModel
from ...store import now_iso
from .gaia_context import RecallLayout, release_context, with_context
from .plan_tool import PlanTools, ProcedureForm, recalled_forms, run_plan_tool
from .user_sim import GREETING, UserSimulator
from .worlds import Episode, Termination, Turn, canonical_args

__all__ = ["AGENT_PROMPT_VERSION", "DONE_TOOL", "SOLO_NUDGE", "SOLO_NUDGES", "AgentRun",
           "loaded_tools", "run_agent", "system_prompt"]

#: The tool a solo agent calls to end its run (tau2's solo agent's stop tool).
DONE_TOOL = "done"
#: Part of the call-cache key of every agent turn.
AGENT_PROMPT_VERSION = "agent-v4"
_SYSTEM = ("You are a tool-using assistant. Use the tools to accomplish the user's goal, one "
           "call at a time. When the goal is done, reply with a short final answer and no "
           "tool call.")
_SOLO = ("The customer is not available during this task: the request below is all they "
         "will say, and they have already confirmed every action it asks for. Do not ask "
         "them questions: look up what you need with the tools and act. When the task is "
         f"complete, call the `{DONE_TOOL}` tool, alone.")
#: The reminder a solo agent gets when it answers in text instead of calling a tool.
SOLO_NUDGE = ("(The customer cannot reply.) Continue with the tools. When the task is "
              f"complete, call the `{DONE_TOOL}` tool.")
#: Reminders a solo agent gets before a text answer ends its run.
SOLO_NUDGES = 2
_DONE_SPEC: Mapping[str, Any] = {"type": "function", "function": {
    "name": DONE_TOOL, "description": "Call this, alone, when the task is complete.",
    "parameters": {"type": "object", "properties": {}}}}


@dataclass(frozen=True)
class AgentRun:
    """One arm of one probe, run live.

    Attributes:
        steps: tool calls the agent made.
        calls: (tool, canonical arguments) in order.
        failed_calls: calls the world answered with an error.
        turns: model turns taken.
        termination: ``agent-stop``, ``user-stop`` (a simulated user ended it), ``step-limit``,
            ``turn-limit`` (the simulated user ran out of turns), ``context-limit`` (the
            conversation outgrew the model's context) or ``model-error``.
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
        nudges: reminders a solo agent got after answering in text (``done`` not called).
        decisions: model turns that issued a call (the stop tool ``done`` aside): what the
            agent decided, where ``steps`` counts what the world was asked (a plan tool's
            call is one decision and as many steps as it ran).
        plan_calls: calls of a recalled plan's tool; plan_steps: world calls they made;
            plan_failures: plan calls that did not finish (refused inputs, a step that could
            not be bound or failed its schema before any call, a failed call, the step
            limit): what ``failed_calls`` does not see of a plan, whose executor checks each
            step before calling it.
        plans_offered: recalled plans offered as tools; plans_refused: recalled plans not
            offered because the world's tools refuse them.
        error: the model error that ended the run, if one did.
        wall_s: seconds.
        answer: the agent's last text.
        transcript: every call with its result, the agent's text answers and the
            simulated user's messages.
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
    nudges: int = 0
    decisions: int = 0
    plan_calls: int = 0
    plan_steps: int = 0
    plan_failures: int = 0
    plans_offered: int = 0
    plans_refused: int = 0

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


def loaded_tools(specs: Sequence[Mapping[str, Any]], recalled: Sequence[Skill]
                 ) -> list[Mapping[str, Any]]:
    """The world tools the agent is offered: the recalled skills' ``tools_required`` first,
    then the rest, at most GAIA's 14 (:func:`~skillsynth.pipeline.inject.tools_for_turn`)."""
    by_name = {s["function"]["name"]: s for s in specs}
    names = tools_for_turn([], [t for s in recalled for t in s.tools_required
                                if t in by_name], list(by_name))
    return [by_name[n] for n in names]


def run_agent(llm: ChatModel, episode: Episode, *, tool_specs: Sequence[Mapping[str, Any]],
              policy: str = "", recalled: Sequence[Skill] = (), config: Any,
              step_limit: int = 12, max_tokens: int = 256, temperature: float = 0.0,
              seed: int = 0, solo: bool = False, user: UserSimulator | None = None,
              recall_cut: RecallCut = "raw", solo_nudges: int = SOLO_NUDGES,
              procedure_form: ProcedureForm = "prose",
              recall_layout: RecallLayout = "main") -> AgentRun:
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
        solo: no user simulator: the system prompt says the user is away, the agent is
            offered tau2's solo stop tool ``done`` and ends the run by calling it; a text
            answer instead is met with a fixed reminder, at most ``solo_nudges`` times,
            after which the answer ends the run.
        user: a simulated user: it opens the conversation and answers every message the
            agent sends without a tool call, until it stops (``user-stop``) or runs out of
            turns (``turn-limit``). Without one (and not solo), the first answer ends the run.
        recall_cut: how recalled bodies over ``max_recall_body_chars`` are cut (``raw``:
            GAIA's slice; ``whole_steps``: after the last whole step).
        solo_nudges: reminders a solo agent gets when it answers in text (0: the first
            answer ends the run, the loop before ``agent-v4``).
        procedure_form: how the recalled skills reach the agent: ``prose`` (their bodies in
            the system prompt, any plan block left out), ``plan`` (a skill whose plan the
            offered world tools accept, as one more tool instead of its prose; the others as
            prose) or ``both`` (every body, and the tools).
        recall_layout: where the prose goes: ``main`` (the system prompt) or ``release``
            (amd-gaia 0.25.1's memory context before the opening message; the transcript
            keeps the opening as the user or the task wrote it).
    """
    t0 = time.perf_counter()
    solo = solo and user is None
    loaded = loaded_tools(tool_specs, recalled)
    prose, plans = recalled_forms(recalled, loaded, procedure_form)
    specs = loaded + plans.specs + ([_DONE_SPEC] if solo else [])
    loop = _Loop(offered=[s["function"]["name"] for s in specs],
                 max_nudges=solo_nudges if solo else 0, plans=plans, world_specs=loaded)
    opening = episode.task.prompt
    if user is not None:
        try:
            opening, _ = user.reply(GREETING)
        except LLMError as exc:
            return _failed(exc, t0)
        loop.transcript.append(Turn("user", content=opening, timestamp=now_iso()))
    release = recall_layout == "release"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(policy, () if release else prose, config,
                                                    solo=solo, cut=recall_cut)},
        *([{"role": "assistant", "content": GREETING}] if user is not None else []),
        {"role": "user", "content": with_context(release_context(prose, config), opening)
         if release else opening}]
    while loop.termination is None:
        if len(loop.made) >= step_limit:
            loop.termination = "step-limit"
            break
        try:
            r = llm.chat(messages, tools=specs, temperature=temperature, max_tokens=max_tokens,
                         seed=seed, prompt_version=AGENT_PROMPT_VERSION)
        except ContextExceeded as exc:
            loop.error, loop.termination = f"{type(exc).__name__}: {exc}", "context-limit"
            break
        except LLMError as exc:
            loop.error, loop.termination = f"{type(exc).__name__}: {exc}", "model-error"
            break
        loop.count(r)
        calls = loop.calls_of(r)
        if calls:
            _execute(loop, episode, messages, r, calls, step_limit)
        else:
            _answered(loop, messages, (r.content or "").strip(), user)
    return loop.finished(episode, user, t0)


@dataclass
class _Loop:
    """One run's running state (mutable, private to :func:`run_agent`)."""

    offered: list[str]
    max_nudges: int
    plans: PlanTools = field(default_factory=PlanTools)
    world_specs: Sequence[Mapping[str, Any]] = ()
    made: list[tuple[str, str]] = field(default_factory=list)
    transcript: list[Turn] = field(default_factory=list)
    termination: Termination | None = None
    error: str | None = None
    answer: str = ""
    failed: int = 0
    turns: int = 0
    hits: int = 0
    from_text: int = 0
    p_tok: int = 0
    c_tok: int = 0
    unoffered: int = 0
    not_run: int = 0
    nudges: int = 0
    decisions: int = 0
    plan_calls: int = 0
    plan_steps: int = 0
    plan_failures: int = 0
    plan_runs: dict[str, PlanRun] = field(default_factory=dict)

    def finished(self, episode: Episode, user: UserSimulator | None, t0: float) -> AgentRun:
        """The run as the world scores it."""
        termination = self.termination or "step-limit"
        score = episode.score(self.transcript, termination)
        return AgentRun(steps=len(self.made), calls=tuple(self.made), failed_calls=self.failed,
                        turns=self.turns, termination=termination, success=score.success,
                        reward=score.reward, prompt_tokens=self.p_tok,
                        completion_tokens=self.c_tok, llm_calls=self.turns - self.hits,
                        cache_hits=self.hits, content_calls=self.from_text, error=self.error,
                        wall_s=round(time.perf_counter() - t0, 3), answer=self.answer,
                        transcript=tuple(self.transcript), score_detail=dict(score.detail),
                        unoffered_text_calls=self.unoffered,
                        user_turns=user.turns if user is not None else 0,
                        text_calls_not_run=self.not_run, nudges=self.nudges,
                        decisions=self.decisions, plan_calls=self.plan_calls,
                        plan_steps=self.plan_steps, plan_failures=self.plan_failures,
                        plans_offered=len(self.plans.tools),
                        plans_refused=len(self.plans.refused))

    def count(self, r: Any) -> None:
        self.turns += 1
        self.hits += int(r.cached)
        self.p_tok += int(r.usage.get("prompt_tokens") or 0)
        self.c_tok += int(r.usage.get("completion_tokens") or 0)

    def calls_of(self, r: Any) -> list[dict[str, Any]]:
        """The turn's calls: its ``tool_calls``, else the first call written in its text
        (one call a turn: the rest had not seen this one's result)."""
        if r.tool_calls:
            return list(r.tool_calls)
        written = tool_calls_in_content(r.content, self.offered)
        self.from_text += min(len(written), 1)
        self.not_run += max(len(written) - 1, 0)
        return list(written[:1])


def _execute(loop: _Loop, episode: Episode, messages: list[dict[str, Any]], r: Any,
             calls: list[dict[str, Any]], step_limit: int) -> None:
    """Execute a turn's calls in the world (the solo stop tool ends the run instead)."""
    native = bool(r.tool_calls)
    if r.content and native:
        loop.transcript.append(Turn("answer", content=r.content.strip(), timestamp=now_iso()))
    messages.append({"role": "assistant", "content": (r.content or "") if native else "",
                     "tool_calls": calls})
    decided = False
    for i, tc in enumerate(calls):
        fn = tc.get("function") or {}
        name, args = str(fn.get("name", "")), fn.get("arguments") or "{}"
        if name == DONE_TOOL and DONE_TOOL in loop.offered:
            loop.termination = "agent-stop"
            break
        if not decided:
            loop.decisions, decided = loop.decisions + 1, True
        plan = loop.plans.get(name)
        if plan is not None:
            result = _call_plan(loop, episode, plan, args, step_limit)
        else:
            result = _world_call(loop, episode, name, args).result
        messages.append({"role": "tool", "tool_call_id": tc.get("id")
                         or f"call_{loop.turns}_{i}", "content": result})
        if len(loop.made) >= step_limit:
            break


def _world_call(loop: _Loop, episode: Episode, name: str, args: Any, via: str = "") -> Any:
    """One call executed in the world and recorded; its outcome."""
    loop.made.append((name, canonical_args(args)))
    at = now_iso()
    out = episode.execute(name, args)
    loop.failed += not out.ok
    loop.transcript.append(Turn(kind="call", name=name, arguments=_as_mapping(args),
                                result=out.result, ok=out.ok, timestamp=at, via=via))
    return out


def _call_plan(loop: _Loop, episode: Episode, plan: Any, args: Any, step_limit: int) -> str:
    """The agent called a recalled plan: its steps run as world calls (each recorded with
    ``via``), up to the run's step limit; the plan's reply, recorded as a ``plan`` turn
    before its calls."""
    at, where = now_iso(), len(loop.transcript)

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        if len(loop.made) >= step_limit:
            raise StepNotCalled(f"the run's step limit ({step_limit} calls) is reached")
        loop.plan_steps += 1
        return _world_call(loop, episode, tool, arguments, via=plan.name)

    reply, ok, run = run_plan_tool(plan, args, call, loop.world_specs,
                                   resume=loop.plan_runs.get(plan.name))
    if run is not None:
        loop.plan_runs[plan.name] = run
    loop.plan_calls += 1
    loop.plan_failures += not ok
    loop.transcript.insert(where, Turn(kind="plan", name=plan.name, arguments=_as_mapping(args),
                                       result=reply, ok=ok, timestamp=at))
    return reply


def _answered(loop: _Loop, messages: list[dict[str, Any]], answer: str,
              user: UserSimulator | None) -> None:
    """A text answer: a solo agent is reminded to go on or call ``done``; a simulated user
    replies; otherwise the run ends."""
    loop.unoffered += len(tool_calls_in_content(answer, None))
    loop.answer = answer
    loop.transcript.append(Turn("answer", content=answer, timestamp=now_iso()))
    if user is None:
        if loop.nudges >= loop.max_nudges:
            loop.termination = "agent-stop"
            return
        loop.nudges += 1
        messages += [{"role": "assistant", "content": answer},
                     {"role": "user", "content": SOLO_NUDGE}]
        return
    if user.exhausted:
        loop.termination = "turn-limit"
        return
    try:
        said, stop = user.reply(answer)
    except LLMError as exc:
        loop.error, loop.termination = f"user {type(exc).__name__}: {exc}", "model-error"
        return
    if said:
        loop.transcript.append(Turn("user", content=said, timestamp=now_iso()))
    if stop:
        loop.termination = "user-stop"
        return
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": said}]


def _failed(exc: LLMError, t0: float) -> AgentRun:
    """A run the simulated user could not open (no step taken, nothing to score)."""
    return AgentRun(steps=0, calls=(), failed_calls=0, turns=0, termination="model-error",
                    success=None, reward=None, prompt_tokens=0, completion_tokens=0, llm_calls=0,
                    cache_hits=0, content_calls=0, error=f"user {type(exc).__name__}: {exc}",
                    wall_s=round(time.perf_counter() - t0, 3))


def _as_mapping(args: Any) -> dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(args)
    try:
        value = json.loads(args) if args else {}
    except (TypeError, json.JSONDecodeError):
        return {"_raw": str(args)}
    return value if isinstance(value, dict) else {"_raw": value}
