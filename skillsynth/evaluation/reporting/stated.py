"""Whether a recalled text states where each gold argument's value comes from.

The loss table's content test (:mod:`.loss`) asks whether the text *names* every gold tool and
argument; a body can name ``order_id`` and send the agent to the wrong step for it. This
module judges the sources, against a successful run of the probe's task with its results
(the probe's own session in the corpus: for ideal history, its reference run as executed).

**The gold flow** (:func:`gold_flows`): each gold action is matched to the first not yet
matched successful call of that run that passes tau2's action check; each of its arguments'
scalar values is found by :func:`~skillsynth.pipeline.provenance.every_source` in the run's
successful calls' results and the customer's words (every user turn of the session), and kept
as the set of places it is found, as (kind, tool of the source step): a value in several
results has several right sources. An earlier result the store cut (GAIA keeps 500
characters) may hold it past the cut, so its step is one of the places too. A gold action
with no matching call is not judged.

**The text** (:func:`sources_in_text`): the gold tools are found in order as the content test
finds them; a tool's *block* runs from its mention to the next numbered line (``3.``,
``Step 3:``) or the end. In the block, an argument's *statement* is the words after its name
up to the next ``;``, line break or another of the action's argument names. The statement is
never when it says the value is not found, varies or is to be decided; else right when it
holds the gold value itself (every scalar; one of one or two characters, such as a state's
code, as a whole token in its own case, so that "NC" is not found in "once" nor "IN" in
"in"); else when, for every scalar value,
one of the places it is found is stated: a step by ``step N`` where the text's line N names
that step's tool, or by the tool's name; the customer by the word customer or user. Where
the stored run holds a value nowhere and cut no earlier result (a constant, a value the run
guessed), a statement that names a step or the customer is taken as right, unconfirmed. A
rule on words: it can miss a source an LLM states in another sentence (it errs towards "not
stated").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ...pipeline.provenance import TracedCall, every_source, scalar_values
from ...store import ToolCall
from ...store.schema import TOOL_TEXT_LIMIT
from ..point.controls import GoldAction, action_matches, call_arguments

__all__ = ["Flow", "gold_flows", "source_judgements", "sources_in_text", "write_step"]

#: Per gold action: argument -> for each scalar value, the places it is found as (kind, tool
#: of the source step or None), empty where none; None where no call of the run matches the
#: action (not judged).
Flow = Mapping[str, tuple[frozenset[tuple[str, str | None]], ...]] | None

_CUSTOMER_RE = re.compile(r"\b(?:customer|user)\b", re.IGNORECASE)
_UNDECIDED_RE = re.compile(r"not found|varies|decide", re.IGNORECASE)
_STEP_RE = re.compile(r"\bsteps? (\d+)", re.IGNORECASE)
_LINE_RE = re.compile(r"^[ \t>*-]*(?:step[ \t]*)?(\d+)[ \t]*[.):]", re.IGNORECASE | re.MULTILINE)
_MIN_VALUE_CHARS = 3


def gold_flows(gold: Sequence[GoldAction], calls: Sequence[ToolCall], customer: str
               ) -> list[Flow]:
    """Each gold action's argument sources in the run ``calls`` (module docstring)."""
    done = [c for c in calls if c.success]
    traced = [TracedCall(name=c.tool_name, arguments=call_arguments(c.args) or {},
                         result=c.result_summary or "") for c in done]
    sources = every_source(traced, customer)
    used: set[int] = set()
    out: list[Flow] = []
    for g in gold:
        j = next((j for j, c in enumerate(traced)
                  if j not in used and action_matches(g, c.name, dict(c.arguments))), None)
        if j is None:
            out.append(None)
            continue
        used.add(j)
        cut = {("step", c.name) for c in traced[:j] if len(c.result) >= TOOL_TEXT_LIMIT}
        out.append({arg: tuple(frozenset(
            (s.kind, traced[s.step - 1].name if s.kind == "step" and s.step else None)
            for s in places) | cut for places in sources[j].get(arg, ())) for arg in g.arguments})
    return out


def _has_value(statement: str, value: Any) -> bool:
    """Whether the statement carries every telling scalar of the gold value (a boolean or an
    empty string tells nothing)."""
    told = [str(v) for v in scalar_values(value) if (isinstance(v, int | float) and
            not isinstance(v, bool)) or (isinstance(v, str) and v)]
    low = statement.lower()
    return bool(told) and all(
        v.lower() in low if len(v) >= _MIN_VALUE_CHARS
        else re.search(rf"(?<![A-Za-z0-9]){re.escape(v)}(?![A-Za-z0-9])", statement) is not None
        for v in told)


def _states(statement: str, places: Sequence[frozenset[tuple[str, str | None]]],
            numbered: Mapping[int, str]) -> bool:
    if _UNDECIDED_RE.search(statement):
        return False
    steps = {int(n) for n in _STEP_RE.findall(statement)}
    named = {numbered[n] for n in steps if n in numbered}
    customer = bool(_CUSTOMER_RE.search(statement))
    low = statement.lower()

    def stated(alts: frozenset[tuple[str, str | None]]) -> bool:
        if not alts:  # a value the stored run holds nowhere: a named source, unconfirmed
            return customer or bool(steps)
        return any((kind == "customer" and customer) or (kind == "step" and tool is not None
                                                         and (tool in named or tool.lower() in low))
                   for kind, tool in alts)

    return all(stated(alts) for alts in places)


def _numbered_lines(text: str) -> Iterator[tuple[int, int, str]]:
    """Each numbered line as (its number, where it starts, the line lower-cased)."""
    for m in _LINE_RE.finditer(text):
        stop = text.find("\n", m.start())
        yield int(m.group(1)), m.start(), text[m.start():stop if stop >= 0 else len(text)].lower()


def _numbered(text: str, tools: Sequence[str]) -> tuple[dict[int, str], list[int]]:
    """Line number -> the first of ``tools`` the numbered line names; the lines' starts."""
    out: dict[int, str] = {}
    starts = []
    for n, start, line in _numbered_lines(text):
        starts.append(start)
        found = sorted((line.find(t.lower()), t) for t in tools if t.lower() in line)
        if found:
            out.setdefault(n, found[0][1])
    return out, starts


def _statement(block: str, arg: str, others: Sequence[str]) -> str | None:
    m = re.search(rf"(?<![A-Za-z0-9_]){re.escape(arg)}(?![A-Za-z0-9_])", block, re.IGNORECASE)
    if m is None:
        return None
    rest = block[m.end():]
    ends = [i for i in (rest.find(";"), rest.find("\n")) if i >= 0]
    for o in others:
        n = re.search(rf"(?<![A-Za-z0-9_]){re.escape(o)}(?![A-Za-z0-9_])", rest, re.IGNORECASE)
        if n is not None:
            ends.append(n.start())
    return rest[:min(ends)] if ends else rest


def source_judgements(text: str, gold: Sequence[GoldAction], flows: Sequence[Flow],
                      tools: Sequence[str] = ()) -> list[tuple[str, str, bool]]:
    """Each judged gold argument as (tool, argument, whether the text states its source
    rightly), in the gold's order; the arguments of an action without a flow are left out.

    Args:
        text: what the agent was shown (the recalled bodies as cut).
        gold: the probe's gold actions, in order.
        flows: :func:`gold_flows` of the same actions.
        tools: every tool name a numbered line may name (the world's; the gold's are added).
    """
    names = list(dict.fromkeys([*tools, *(g.name for g in gold),
                                *(t for f in flows if f for places in f.values() for alts in places
                                  for _, t in alts if t)]))
    numbered, starts = _numbered(text, names)
    low, at = text.lower(), 0
    out: list[tuple[str, str, bool]] = []
    for g, flow in zip(gold, flows, strict=True):
        if flow is None:
            continue
        i = low.find(g.name.lower(), at)
        if i < 0:
            out += [(g.name, arg, False) for arg in flow]
            continue
        at = i + len(g.name)
        end = min((s for s in starts if s > i), default=len(text))
        block = text[at:end]
        for arg, srcs in flow.items():
            said = _statement(block, arg, [a for a in g.arguments if a != arg])
            out.append((g.name, arg, said is not None and not _UNDECIDED_RE.search(said) and (
                _has_value(said, g.arguments[arg]) or _states(said, srcs, numbered))))
    return out


def sources_in_text(text: str, gold: Sequence[GoldAction], flows: Sequence[Flow],
                    tools: Sequence[str] = ()) -> tuple[int, int]:
    """(gold arguments whose source the text states rightly, gold arguments judged):
    :func:`source_judgements` counted."""
    said = source_judgements(text, gold, flows, tools)
    return sum(ok for _, _, ok in said), len(said)


def write_step(text: str, gold: Sequence[GoldAction]) -> int | None:
    """The step at which the text puts the first gold write: the smallest number of a numbered
    line that names the tool of the gold's first state-changing action anywhere in it (two
    recalled procedures are numbered each from 1; None: the gold has no write, or no numbered
    line names it). An agent that stops after fewer calls than this never reaches the write,
    whatever the text says of its arguments."""
    write = next((g.name.lower() for g in gold if g.state_changing), None)
    if write is None:
        return None
    return min((n for n, _, line in _numbered_lines(text) if write in line), default=None)
