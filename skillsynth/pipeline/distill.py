"""Distill: one low-temperature LLM call turns a qualified cluster into a Skill (or SKIP).

The prompt (versioned: :data:`PROMPT_VERSION` is part of the cache key) shows the
representative run's tool sequence, up to five other phrasings of the goal and the
cluster's success counts. The model answers the intermediate SKILL.md shape or the
literal ``SKIP``. Of the calls' arguments it sees (``args``, :data:`DistillArgs`) nothing
(GAIA's choice, so no user data leaks into a procedure), each argument's *source*
(:mod:`.provenance`: where a value came from, never the value), or the values themselves
(an upper bound that shows user data to the model). ``distiller="trace"`` writes the
procedure by rule instead (:func:`distill_trace`): no model call, the fair baseline for a
small distiller and a measure of what the model adds; ``"trace-writes"`` keeps only the
run's state-changing calls (a control for where a procedure puts its write).

Two modes: ``yaml`` (free-form, as GAIA does; wrappers stripped explicitly) and ``json``
(constrained by a JSON schema whose strings and arrays are all bounded; the SKIP decision
is the field ``skip: true``; the answer is rendered to the intermediate shape).
Either way the result goes through :meth:`Skill.parse` with its one repair rule (a tool
repeated in ``tools_required`` keeps its first place; recorded in
:attr:`Distillation.repairs`), and a skill naming a tool the runs never called is
:class:`~skillsynth.errors.UngroundedSkill`: rejected, never trimmed.

Both modes show one worked example (a restaurant booking, a domain no corpus here uses) as
a prior user/assistant turn: without it the smallest embedded model answered SKIP to every
cluster in json mode and broke the frontmatter in yaml mode (docs/models.md). The example
shows ``skip: false``, so it biases small models against SKIP; a capable model still decides.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from ..config import Thresholds
from ..errors import MalformedSkill, UngroundedSkill
from ..protocols import ChatModel
from .cluster import Cluster
from .detect import is_read
from .provenance import cluster_dataflow, session_calls
from .skill import Skill, strip_wrappers

__all__ = [
    "DISTILLERS",
    "DISTILL_ARGS",
    "PROMPT_VERSION",
    "TRACE_VERSION",
    "VALUES_VERSION",
    "DistillArgs",
    "DistillMode",
    "Distillation",
    "Distiller",
    "answer_schema",
    "build_messages",
    "distill",
    "distill_cached",
    "distill_cluster",
    "distill_trace",
    "trace_when",
]

PROMPT_VERSION = "distill-v3"
DistillMode = Literal["yaml", "json"]
#: What the distiller is shown of the calls' arguments: ``none`` (GAIA: tool names only),
#: ``provenance`` (each argument's source, :mod:`.provenance`; no value) or ``values`` (the
#: representative run's values: an upper bound that puts user data in front of the model).
DistillArgs = Literal["none", "provenance", "values"]
DISTILL_ARGS: tuple[DistillArgs, ...] = ("none", "provenance", "values")
#: Who writes the procedure: the LLM, or the trace rule (no model; :func:`distill_trace`),
#: ``trace-writes`` keeping only the run's state-changing calls (research: whether a write
#: the agent meets first is what it follows).
Distiller = Literal["llm", "trace", "trace-writes"]
DISTILLERS: tuple[Distiller, ...] = ("llm", "trace", "trace-writes")
_ARGS_RULE = ("\nWhere a step shows where its arguments come from, keep that in the step "
              "(e.g. 'with user_id = step 1's result'); never write a value from the runs.")
#: ``values``: the upper bound keeps what it is shown (its procedures are marked as holding
#: user data: :func:`~.reconcile.reconcile_and_store`). Before ``values-v2`` the values were
#: shown under :data:`_ARGS_RULE`, which told the model to drop them.
_VALUES_RULE = ("\nEach step shows the run's argument values: keep them in the step "
                "(e.g. 'with order_id \"#W0000001\"'), so the procedure can be followed as "
                "it ran.")
VALUES_VERSION = "values-v2"
TEMPERATURE = 0.1
MAX_TOKENS = 1024
#: Sampling seed: at temperature 0.1 answers still vary; a fixed seed makes a pass repeatable
#: on the same server build and model (and the cache makes it free).
SEED = 0

_SYSTEM = """You write reusable procedures for a tool-using assistant.
You are shown tool calls from a successful run and several ways users phrased the same goal.
Write a procedure another run can follow for any goal of this kind, or answer SKIP when the
runs do not share a reusable procedure.

Answer exactly in this shape and nothing else:
---
name: <kebab-case name, lowercase letters, digits and hyphens, at most 64 characters>
when_to_use: "<one sentence: the kind of goal this procedure serves>"
tools_required:
  - <tool name>
---

1. <first step, naming the tool to call>
2. <next step>

## Edge cases
- <what to do when a step fails or finds nothing>"""


@dataclass(frozen=True)
class Distillation:
    """What one distillation call produced (for the pass report and the notebooks)."""

    skill: Skill | None
    raw: str
    cached: bool
    stripped: bool
    repairs: tuple[str, ...] = ()


_JSON_SYSTEM = ("You write reusable procedures for a tool-using assistant from successful runs. "
                "Answer with JSON only. when_to_use is one sentence that starts with 'The user "
                "wants' and describes the goal in words; steps name the tools in order. Set skip "
                "to true (meaning SKIP) only when the runs share no reusable procedure.")

#: The worked example (user turn, then the answer in each mode).
_EXAMPLE_USER = """Goal of the representative run: Book a table for two at Luigi's tonight

Its successful tool calls, in order:
1. search_restaurants
2. check_availability
3. make_booking

Other phrasings of the same goal:
- Reserve dinner at Luigi's for 2 people
- Get me a table at Luigi's this evening

Sessions: 3; successful sessions: 3.
Tools available to name: check_availability, make_booking, search_restaurants."""
_EXAMPLE = {
    "name": "book-restaurant-table",
    "when_to_use": "The user wants to book a table at a restaurant for a number of people",
    "tools_required": ["search_restaurants", "check_availability", "make_booking"],
    "steps": ["Call search_restaurants with the restaurant name",
              "Call check_availability for the party size and time",
              "Call make_booking to reserve the table"],
    "edge_cases": ["If no table is free, offer the nearest other time"],
    "skip": False,
}


def _q(value: Any) -> str:
    """A YAML double-quoted scalar: JSON without ASCII escapes (an emoji escaped as a JSON
    surrogate pair would be read back by YAML as two lone surrogates)."""
    return json.dumps(value, ensure_ascii=False)


def _render(data: dict[str, Any]) -> str:
    """The intermediate SKILL.md shape of a JSON-mode answer (also the yaml-mode example)."""
    tools = "".join(f"  - {_q(t)}\n" for t in data["tools_required"])
    steps = "\n".join(f"{i}. {' '.join(str(s).split())}"
                      for i, s in enumerate(data["steps"], 1))
    edges = "\n".join(f"- {' '.join(str(e).split())}" for e in data["edge_cases"])
    return (f"---\nname: {_q(data['name'])}\n"
            f"when_to_use: {_q(data['when_to_use'])}\ntools_required:\n{tools}"
            f"---\n\n{steps}\n\n## Edge cases\n{edges}\n")


def _steps(cluster: Cluster, args: DistillArgs) -> str:
    rep = cluster.representative()
    if args == "provenance":
        flows = cluster_dataflow(cluster.members, rep)
        return "\n".join(f"{i}. {f.tool}" + (f" with {f.describe()}" if f.describe() else "")
                         for i, f in enumerate(flows, 1))
    if args == "values":
        return "\n".join(f"{i}. {c.name} {json.dumps(dict(c.arguments), ensure_ascii=False)}"
                         for i, c in enumerate(session_calls(rep), 1))
    return "\n".join(f"{i}. {t}" for i, t in enumerate(rep.tool_names, 1))


def build_messages(cluster: Cluster, mode: DistillMode = "yaml", args: DistillArgs = "none"
                   ) -> list[dict[str, Any]]:
    """The chat messages for ``cluster``: the representative run's tool names (``args``:
    with each argument's source or value), the goals and the counts; no results."""
    rep = cluster.representative()
    steps = _steps(cluster, args)
    others = [g for g in dict.fromkeys(cluster.goals) if g != rep.goal][:5]
    phrasings = "\n".join(f"- {g}" for g in others) or "- (none)"
    user = (f"Goal of the representative run: {rep.goal}\n\n"
            f"Its successful tool calls, in order:\n{steps}\n\n"
            f"Other phrasings of the same goal:\n{phrasings}\n\n"
            f"Sessions: {cluster.size}; successful sessions: {cluster.successful_sessions}.\n"
            f"Tools available to name: {', '.join(sorted(set(_cluster_tools(cluster))))}.")
    if mode == "json":
        system, example = _JSON_SYSTEM, json.dumps(_EXAMPLE)
    else:
        system, example = _SYSTEM, _render(_EXAMPLE)
    if args == "values":
        system += _VALUES_RULE
    elif args != "none":
        system += _ARGS_RULE
    return [{"role": "system", "content": system},
            {"role": "user", "content": _EXAMPLE_USER},
            {"role": "assistant", "content": example},
            {"role": "user", "content": user}]


def _cluster_tools(cluster: Cluster) -> list[str]:
    return [t for m in cluster.members for t in m.tool_names]


def answer_schema(cluster: Cluster, args: DistillArgs = "none") -> dict[str, Any]:
    """The JSON schema for ``json`` mode: every string and array bounded (small models loop);
    a step may be longer where it carries its arguments."""
    tools = sorted(set(_cluster_tools(cluster)))
    step_chars = 200 if args == "none" else 400
    return {
        "type": "object", "additionalProperties": False,
        # The SKIP decision comes last (decoding writes properties in this order): asked
        # first, SmolLM2-135M looped until max_tokens once and wrote worse when_to_use.
        "required": ["name", "when_to_use", "tools_required", "steps", "edge_cases", "skip"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+){0,5}$",
                     "maxLength": 64},
            "when_to_use": {"type": "string", "minLength": 10, "maxLength": 300},
            "tools_required": {"type": "array", "items": {"enum": tools}, "minItems": 1,
                               "maxItems": min(8, len(tools)), "uniqueItems": True},
            "steps": {"type": "array", "minItems": 1, "maxItems": 8,
                      "items": {"type": "string", "minLength": 3, "maxLength": step_chars}},
            "edge_cases": {"type": "array", "minItems": 1, "maxItems": 4,
                           "items": {"type": "string", "minLength": 3, "maxLength": 200}},
            "skip": {"type": "boolean"},
        },
    }


def _from_json(text: str) -> str | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedSkill(f"json mode answer is not JSON: {exc}", field="document") from exc
    if not isinstance(data, dict):
        raise MalformedSkill("json mode answer is not an object", field="document")
    if data.get("skip") is True:
        return None
    try:
        return _render(data)
    except (KeyError, TypeError) as exc:
        raise MalformedSkill(f"json mode answer lacks {exc}", field="document") from exc


def distill(cluster: Cluster, llm: ChatModel, config: Thresholds,
            mode: DistillMode = "yaml", *, args: DistillArgs = "none",
            distiller: Distiller = "llm") -> Distillation:
    """One call (``distiller`` llm) or the trace rule (``trace``, no call); returns the raw
    answer and the Skill (None for SKIP).

    Raises:
        UngroundedSkill: a valid skill that names a tool none of the cluster's runs called.
        MalformedSkill: the answer is neither SKIP nor a valid skill.
        LLMError: the model call failed (the pass decides what that means).
    """
    del config  # the thresholds do not shape the prompt; kept for a uniform stage signature
    if distiller != "llm":
        return distill_trace(cluster, args, writes_only=distiller == "trace-writes")
    return _interpret(cluster, llm.chat(**_request(cluster, mode, args)), mode)


def distill_cached(cluster: Cluster, llm: Any, mode: DistillMode = "yaml"
                   ) -> Distillation | None:
    """The distillation :func:`distill` would return if its answer is in the call cache.

    None when it is not (no request is ever sent: the tuning views show only what a pass
    has already paid for). ``llm`` is a :class:`~skillsynth.models.chat.ChatClient` with a cache.

    Raises:
        MalformedSkill: the cached answer is malformed (as :func:`distill` would).
    """
    result = llm.cached(**_request(cluster, mode))
    return None if result is None else _interpret(cluster, result, mode)


def _request(cluster: Cluster, mode: DistillMode, args: DistillArgs = "none"
             ) -> dict[str, Any]:
    version = f"{PROMPT_VERSION}-{mode}" + ("" if args == "none" else f"-{args}")
    return {"messages": build_messages(cluster, mode, args), "temperature": TEMPERATURE,
            "max_tokens": MAX_TOKENS,
            "json_schema": answer_schema(cluster, args) if mode == "json" else None,
            "seed": SEED, "prompt_version": version}


def _interpret(cluster: Cluster, result: Any, mode: DistillMode) -> Distillation:
    raw = result.content or ""
    if mode == "json":
        text, stripped = _from_json(raw), False
    else:
        cleaned = strip_wrappers(raw)
        stripped = cleaned.strip() != raw.strip()
        text = None if cleaned.strip() == "SKIP" else cleaned
    cached = bool(getattr(result, "cached", False))
    if text is None:
        return Distillation(skill=None, raw=raw, cached=cached, stripped=stripped)
    repairs: list[str] = []
    skill = Skill.parse(text, repairs=repairs)
    unknown = sorted(set(skill.tools_required) - set(_cluster_tools(cluster)))
    if unknown:
        raise UngroundedSkill(f"names tools no run of the cluster called: {', '.join(unknown)}",
                              field="tools_required")
    return Distillation(skill=skill, raw=raw, cached=cached, stripped=stripped,
                        repairs=tuple(repairs))


def distill_cluster(cluster: Cluster, llm: ChatModel, config: Thresholds,
                    mode: DistillMode = "yaml") -> Skill | None:
    """:func:`distill`, returning just the Skill (None when the model answered SKIP)."""
    return distill(cluster, llm, config, mode).skill


# ---------------------------------------------------------------------- the trace distiller
TRACE_VERSION = "trace-v1"
_TRACE_EDGE = "If a call fails, read its error, correct the arguments and call it again."
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def trace_when(cluster: Cluster) -> str:
    """``when_to_use`` by rule: the words (in the representative goal's order) that at least
    half the members' goals share, leaving out any word with a digit and any word passed
    as an argument value in a member's calls (user data: names, ids); at most 25 words."""
    rep = cluster.representative()
    goals = [m.goal or "" for m in cluster.members]
    passed = {w.lower() for m in cluster.members for c in session_calls(m)
              for v in c.arguments.values() for w in _WORD.findall(json.dumps(v))}
    counts: dict[str, int] = {}
    for g in goals:
        for w in {x.lower() for x in _WORD.findall(g)}:
            counts[w] = counts.get(w, 0) + 1
    words = [w for w in _WORD.findall(rep.goal or "")
             if counts.get(w.lower(), 0) * 2 >= len(goals) and w.lower() not in passed]
    kept = list(dict.fromkeys(w.lower() for w in words))[:25]
    if not kept:
        return "The user wants what these runs did: " + ", ".join(dict.fromkeys(rep.tool_names))
    return "The user wants: " + " ".join(kept)


def distill_trace(cluster: Cluster, args: DistillArgs = "provenance", *,
                  writes_only: bool = False) -> Distillation:
    """A procedure written by rule from the cluster's runs, no model: the representative
    run's successful calls in order, each with its arguments' sources where every member
    agrees (:func:`~.provenance.cluster_dataflow`), ``when_to_use`` by :func:`trace_when`,
    the name from the run's last tool. No value from the runs appears, but a constant every
    member passed. ``args`` values: each call with the representative run's own argument
    values instead (the upper bound: user data in the procedure, which is marked so).

    ``writes_only`` keeps only the calls that are not reads by name (:func:`~.detect.is_read`),
    renumbered from 1: the procedure an agent that stops after two or three calls reaches
    the write of. Its sources name the read a value comes from by its tool ("the orders[] in
    get_user_details's result"), since the steps they would number are not in it.

    Raises:
        MalformedSkill: the representative run has no successful call (with ``writes_only``,
            no successful state-changing call).
    """
    rep = cluster.representative()
    flows = cluster_dataflow(cluster.members, rep)
    kept = [i for i, f in enumerate(flows) if not (writes_only and is_read(f.tool))]
    if not kept:
        what = "successful state-changing call" if flows else "successful call"
        raise MalformedSkill(f"the representative run has no {what}", field="steps")
    if args == "values":
        calls = session_calls(rep)
        said = [json.dumps(dict(calls[i].arguments), ensure_ascii=False)
                if calls[i].arguments else "" for i in kept]
    else:
        tools = [f.tool for f in flows] if writes_only else None
        said = [flows[i].describe(tools) for i in kept]
    steps = [f"Call {flows[i].tool}" + (f" with {w}" if w else "")
             for i, w in zip(kept, said, strict=True)]
    last = flows[kept[-1]].tool
    name = re.sub(r"[^a-z0-9]+", "-", last.lower()).strip("-")[:64].strip("-")
    data = {"name": name or "procedure", "when_to_use": trace_when(cluster),
            "tools_required": list(dict.fromkeys(flows[i].tool for i in kept)),
            "steps": steps, "edge_cases": [_TRACE_EDGE]}
    text = _render(data)
    repairs: list[str] = []
    return Distillation(skill=Skill.parse(text, repairs=repairs), raw=text, cached=False,
                        stripped=False, repairs=tuple(repairs))
