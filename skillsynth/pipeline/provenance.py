"""Where each argument of a run's calls comes from: an earlier result, the customer, a constant.

A procedure that names the *source* of every argument ("the user_id in step 1's result", "the
order id the customer gives") carries the dataflow of a successful run without carrying its
values, so it leaks no user data and still tells the agent what to pass. In the shipped
successful tau2 retail runs 75% of argument values appear verbatim in an earlier call's result
and 23% in the customer's words (DESIGN.md); this module finds which, per value.

The rule, for each scalar value of a call's arguments (a list's elements one by one):

1. **step**: the value is a leaf of an earlier call's result (parsed as JSON; the nearest
   earlier step wins, the shallowest path within it). The path generalises list positions to
   ``[]`` and names keys, e.g. ``orders[].order_id``; a value that is a *key* of an object
   (``payment_methods.<key>``) is named by the object's path and ``<key>``. A result cut
   short (GAIA keeps 500 characters) is read as its longest complete JSON prefix
   (:func:`read_result`), so the fields before the cut keep their paths; a value only in its
   text (in the element the cut broke) is the step's result with no path.
2. **customer**: else, the value occurs in the customer's words (case-insensitive, as a
   whole token for numbers and one- or two-character strings).
3. **constant**: else, a boolean, ``None``, or a value the tool's schema lists in ``enum``.
4. **unknown**: else (the source is not in the run; its value is never shown).

Values shorter than :data:`MIN_MATCH_CHARS` characters match a result leaf only exactly, so a
"1" in a quantity does not become "the 1 in step 2's result" by accident of substring.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .detect import SessionSequence

__all__ = ["SOURCES_VERSION", "VARIABLE", "ArgSource", "SourceKind", "StepFlow", "TracedCall",
           "argument_sources", "cluster_dataflow", "describe_sources", "enum_values",
           "every_source", "read_result", "scalar_values", "session_calls", "source_counts",
           "step_name"]

#: How results are read for sources, recorded with every design that states them
#: (``sources-v1`` read a result cut short as text, so the fields of GAIA's 500-character
#: results lost their paths: "step 5's result" for "the order_id in step 5's result").
SOURCES_VERSION = "sources-v2"

SourceKind = Literal["step", "customer", "constant", "unknown"]
#: A string value shorter than this is matched in the customer's words as a whole token only.
MIN_MATCH_CHARS = 3


@dataclass(frozen=True)
class TracedCall:
    """One executed call: tool, arguments and the result text the agent saw."""

    name: str
    arguments: Mapping[str, Any]
    result: str = ""


@dataclass(frozen=True)
class ArgSource:
    """Where one argument's value came from.

    Attributes:
        kind: ``step``, ``customer``, ``constant`` or ``unknown`` (module docstring).
        step: for ``step``, the 1-based step whose result holds it.
        path: for ``step``, the field path in that result (``""``: the whole result).
        value: for ``constant`` only, the value (never set for any other kind).
    """

    kind: SourceKind
    step: int | None = None
    path: str = ""
    value: Any = None

    def describe(self, tools: Sequence[str] | None = None) -> str:
        """The source in words, with no user value in it; with ``tools`` (the run's tool
        names, in order) a step is named by its tool (:func:`step_name`), not its number."""
        if self.kind == "step":
            where = f"step {self.step}" if tools is None or self.step is None else \
                step_name(tools, self.step)
            return f"the {self.path} in {where}'s result" if self.path else f"{where}'s result"
        if self.kind == "customer":
            return "from the customer"
        if self.kind == "constant":
            return json.dumps(self.value, ensure_ascii=False)
        return "not found in the run: decide from the conversation"


# ---------------------------------------------------------------------- matching
def read_result(text: str) -> Any:
    """A stored result as JSON, else its longest complete JSON prefix (GAIA keeps 500
    characters), else the text."""
    try:
        parsed = json.loads(text)
    except (TypeError, ValueError):
        parsed = text
    if not isinstance(parsed, str) or not text.lstrip().startswith(("{", "[")):
        return parsed
    stack: list[str] = []
    cut: tuple[int, str] | None = None
    in_str, i = False, 0
    while i < len(text):
        ch = text[i]
        if in_str:
            i += 2 if ch == "\\" else 1
            in_str = ch != '"'
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return text
            stack.pop()
            cut = (i + 1, "".join(reversed(stack)))
        elif ch == ",":  # everything before it is complete
            cut = (i, "".join(reversed(stack)))
        i += 1
    if cut is None:
        return text
    try:
        return json.loads(text[:cut[0]] + cut[1])
    except ValueError:
        return text


def _leaves(node: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(path, value, is_key) for every scalar leaf and every object key of ``node``."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            yield (f"{path}.<key>" if path else "<key>"), k, True
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v, f"{path}[]")
    else:
        yield path, node, False


def _same(value: Any, leaf: Any) -> bool:
    if isinstance(value, bool) or isinstance(leaf, bool):
        return value is leaf
    if isinstance(value, int | float) and isinstance(leaf, int | float):
        return float(value) == float(leaf)
    return str(value) == str(leaf)


def _read(text: str) -> tuple[Any, str]:
    """A result as sources read it: (its JSON, "") when it parses whole, else (its longest
    complete JSON prefix or the text, the text): only a text result, or the part of a cut one
    its prefix leaves out, is searched as text."""
    try:
        return json.loads(text), ""
    except (TypeError, ValueError):
        return read_result(text), text


def _in_result(value: Any, result: Any, text: str) -> str | None:
    """The shallowest path at which ``value`` is a leaf (or key) of ``result``, else ``""``
    where ``text`` (a result that does not parse whole: :func:`_read`) holds it, or None."""
    if value is None or isinstance(value, bool) or str(value) == "":
        return None
    found = [(p.count(".") + p.count("[]"), p) for p, leaf, _ in _leaves(result)
             if _same(value, leaf)]
    if found:
        return min(found)[1]
    if len(str(value)) >= MIN_MATCH_CHARS and str(value) in text:
        return ""  # a text result, or the part of a cut one its prefix leaves out
    return None


def _in_words(value: Any, words: str) -> bool:
    text = str(value)
    if value is None or isinstance(value, bool) or not text.strip():
        return False
    if isinstance(value, int | float) or len(text) < MIN_MATCH_CHARS:
        return re.search(rf"(?<![\w.]){re.escape(text)}(?![\w])", words, re.IGNORECASE) is not None
    return text.lower() in words.lower()


def scalar_values(value: Any) -> list[Any]:
    """A value's scalars in order: a list's elements and an object's values, recursively."""
    if isinstance(value, list):
        return [x for v in value for x in scalar_values(v)]
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in scalar_values(v)]
    return [value]


def enum_values(specs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, tuple[Any, ...]]]:
    """Tool -> argument -> the values its OpenAI function schema allows (``enum``)."""
    out: dict[str, dict[str, tuple[Any, ...]]] = {}
    for s in specs:
        fn = s.get("function") or {}
        props = (fn.get("parameters") or {}).get("properties") or {}
        for arg, schema in props.items():
            enum = schema.get("enum") or (schema.get("items") or {}).get("enum")
            if enum:
                out.setdefault(str(fn.get("name")), {})[str(arg)] = tuple(enum)
    return out


# ---------------------------------------------------------------------- the analysis
def _source(value: Any, step: int, results: Sequence[tuple[Any, str]], customer: str,
            allowed: tuple[Any, ...]) -> ArgSource:
    for k in range(step - 1, 0, -1):  # the nearest earlier result first
        path = _in_result(value, *results[k - 1])
        if path is not None:
            return ArgSource("step", step=k, path=path)
    if _in_words(value, customer):
        return ArgSource("customer")
    if value is None or isinstance(value, bool) or any(_same(value, a) for a in allowed):
        return ArgSource("constant", value=value)
    return ArgSource("unknown")


def argument_sources(calls: Sequence[TracedCall], customer: str, *,
                     enums: Mapping[str, Mapping[str, Sequence[Any]]] | None = None
                     ) -> list[dict[str, tuple[ArgSource, ...]]]:
    """For each call, argument name -> the sources of its scalar values (list elements and
    nested object values in order; one source for a plain scalar).

    Args:
        calls: the run's calls in order, each with the result text it returned.
        customer: everything the customer said or the agent was told by them.
        enums: tool -> argument -> allowed values (:func:`enum_values`), for constants.
    """
    results = [_read(c.result) for c in calls]
    passed = {str(v) for c in calls for v in scalar_values(dict(c.arguments))}
    out = []
    for i, c in enumerate(calls, 1):
        allowed = (enums or {}).get(c.name, {})
        out.append({str(arg): tuple(_unspoken(_source(v, i, results, customer,
                                                      tuple(allowed.get(str(arg), ()))), passed)
                                    for v in scalar_values(value))
                    for arg, value in c.arguments.items()})
    return out


def _unspoken(src: ArgSource, passed: set[str]) -> ArgSource:
    """A step source whose path names a field after a value the run passes as an argument
    (a seat count under ``available_seats.economy`` where the customer flies economy, a card
    under its id) says the step alone: a path must not carry user data."""
    if src.kind != "step" or not src.path:
        return src
    if any(part in passed for part in re.split(r"\.|\[\]", src.path) if part):
        return ArgSource("step", step=src.step, path="")
    return src


def every_source(calls: Sequence[TracedCall], customer: str
                 ) -> list[dict[str, tuple[tuple[ArgSource, ...], ...]]]:
    """For each call, argument name -> for each of its scalar values (in
    :func:`argument_sources`' order) *every* place it is found: each earlier step whose result
    holds it (nearest first), then the customer's words; empty where neither holds it.
    A value is often in several results (an order id in the user's details and the order's),
    and a statement that names any of them names a source the run confirms."""
    results = [_read(c.result) for c in calls]
    out = []
    for i, c in enumerate(calls, 1):
        per_arg = {}
        for arg, value in c.arguments.items():
            per_value = []
            for v in scalar_values(value):
                found = [ArgSource("step", step=k, path=path) for k in range(i - 1, 0, -1)
                         if (path := _in_result(v, *results[k - 1])) is not None]
                per_value.append(tuple(found) + ((ArgSource("customer"),)
                                                 if _in_words(v, customer) else ()))
            per_arg[str(arg)] = tuple(per_value)
        out.append(per_arg)
    return out


def step_name(tools: Sequence[str], step: int) -> str:
    """Step ``step`` (1-based) of a run with these tool names, by its tool:
    ``get_order_details``, or ``get_order_details (its 2nd call)`` where the tool is called
    more than once: for a procedure that does not list the steps it draws from."""
    tool = tools[step - 1]
    if tools.count(tool) == 1:
        return tool
    nth = tools[:step].count(tool)
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(nth if nth < 20 else nth % 10, "th")
    return f"{tool} (its {nth}{suffix} call)"


def describe_sources(sources: Mapping[str, Sequence[ArgSource]],
                     tools: Sequence[str] | None = None) -> str:
    """One call's arguments with their sources, for a procedure step:
    ``order_id from the customer; user_id = the user_id in step 1's result`` (with ``tools``,
    ``... in find_user_id_by_email's result``: :meth:`ArgSource.describe`)."""
    parts = []
    for arg, srcs in sources.items():
        # a list's elements: each distinct source once (its path's [] says it is a list),
        # one path found in several steps' results said once with the steps
        said: dict[str, list[int]] = {}
        for src in srcs:
            key = f"step:{src.path}" if src.kind == "step" else src.describe()
            said.setdefault(key, [])
            if src.step is not None and src.step not in said[key]:
                said[key].append(src.step)
        words = [_steps(k[5:], steps, tools) if k.startswith("step:") else k
                 for k, steps in said.items()]
        joined = " and ".join(words) or "an empty list"
        verb = " =" if all(s.kind in ("constant", "step") for s in srcs) and srcs else ""
        parts.append(f"{arg}{verb} {joined}")
    return "; ".join(parts)


def _steps(path: str, steps: list[int], tools: Sequence[str] | None = None) -> str:
    if len(steps) == 1:
        return ArgSource("step", step=steps[0], path=path).describe(tools)
    if tools is not None:
        named = " and ".join(f"{step_name(tools, k)}'s" for k in steps)
        return f"the {path} in {named} results" if path else f"{named} results"
    listed = ", ".join(map(str, steps[:-1])) + f" and {steps[-1]}"
    return f"the {path} in steps {listed}' results" if path else f"steps {listed}' results"


def source_counts(per_call: Sequence[Mapping[str, Sequence[ArgSource]]]) -> dict[str, int]:
    """How many scalar values came from each kind of source (for a record)."""
    counts = {k: 0 for k in ("step", "customer", "constant", "unknown")}
    for call in per_call:
        for srcs in call.values():
            for s in srcs:
                counts[s.kind] += 1
    return counts


# ---------------------------------------------------------------------- over a cluster's runs
#: What a step says of an argument whose source differs between the members' runs.
VARIABLE = "varies between the runs: decide from the conversation"


def session_calls(seq: SessionSequence) -> list[TracedCall]:
    """A session's successful calls as traced calls (arguments that are not a JSON object
    count as none; results as GAIA stored them, at most 500 characters)."""
    out = []
    for c in seq.span:
        try:
            args = json.loads(c.args) if c.args else {}
        except ValueError:
            args = {}
        out.append(TracedCall(name=c.tool_name, arguments=args if isinstance(args, dict) else {},
                              result=c.result_summary or ""))
    return out


@dataclass(frozen=True)
class StepFlow:
    """One step of a cluster's representative run with its arguments' sources.

    Attributes:
        tool: the tool called.
        sources: argument -> its sources in the representative run; an argument whose
            source differs in another member's matching call is left out of ``sources`` and
            named in ``variable``.
        variable: the arguments whose source varies between the members' runs.
    """

    tool: str
    sources: Mapping[str, tuple[ArgSource, ...]]
    variable: tuple[str, ...] = ()

    def describe(self, tools: Sequence[str] | None = None) -> str:
        """The arguments in words (no value but a constant every member passed); with
        ``tools`` (the representative run's tool names) a step is named by its tool."""
        said = describe_sources(self.sources, tools)
        var = "; ".join(f"{a} {VARIABLE}" for a in self.variable)
        return "; ".join(x for x in (said, var) if x)


def _signature(src: ArgSource, tools: Sequence[str]) -> tuple[Any, ...]:
    """A source as it can be compared across runs: a step by the tool it names, not its
    position (runs differ in length); a constant by its value."""
    if src.kind == "step" and src.step is not None:
        return ("step", tools[src.step - 1], src.path)
    if src.kind == "constant":
        return ("constant", json.dumps(src.value, sort_keys=True))
    return (src.kind,)


def cluster_dataflow(members: Sequence[SessionSequence], representative: SessionSequence,
                     *, enums: Mapping[str, Mapping[str, Sequence[Any]]] | None = None
                     ) -> list[StepFlow]:
    """The representative run's steps with each argument's source, kept only where every
    other member's matching call (the same tool's same occurrence) traces it the same way.

    The customer's words are each run's goal (its first user turn). A member without the
    matching call, or without the argument, does not contradict. The result carries no
    argument value except a constant that every member with the call passed.
    """
    def traced(seq: SessionSequence) -> tuple[list[TracedCall], list[dict[str, tuple[ArgSource, ...]]]]:
        calls = session_calls(seq)
        return calls, argument_sources(calls, seq.goal or "", enums=enums)

    rep_calls, rep_sources = traced(representative)
    others = [traced(m) for m in members if m.session_id != representative.session_id]
    rep_tools = [c.name for c in rep_calls]
    out = []
    for i, (call, sources) in enumerate(zip(rep_calls, rep_sources, strict=True)):
        nth = rep_tools[:i].count(call.name)
        keep, variable = {}, []
        for arg, srcs in sources.items():
            mine = [_signature(s, rep_tools) for s in srcs]
            agree = True
            for calls, srcs_other in others:
                idx = [j for j, c in enumerate(calls) if c.name == call.name]
                if nth >= len(idx) or arg not in srcs_other[idx[nth]]:
                    continue
                tools = [c.name for c in calls]
                theirs = [_signature(s, tools) for s in srcs_other[idx[nth]][arg]]
                if set(theirs) != set(mine):
                    agree = False
                    break
            if agree:
                keep[arg] = srcs
            else:
                variable.append(arg)
        out.append(StepFlow(tool=call.name, sources=keep, variable=tuple(variable)))
    return out
