"""Induce: a cluster's runs into a plan (:mod:`.plan`), by rule, with no model call.

The plan follows the representative run's successful calls. For each value of each argument
(a list's elements and an object's values one by one), tried in this order, the first that
holds in *every* member's matching call (the same tool's same occurrence) wins:

1. **a result field** of an earlier step, found where :func:`~.provenance.argument_sources`
   traced the value in a member (provenance's path, then every path at which the parsed
   result holds it). It is kept only if resolving it as the executor does
   (:func:`~.plan.resolve_binding`) gives every member back its own value from its own
   result, and no key in the path is a member's argument value. A list that is, in every
   member, *all* the values at one path (and in some member several) becomes one ``every``
   binding.
2. **the customer**: the value is in every member's customer words (an input slot; one slot
   serves every argument that gets the same value in each member).
3. **a constant**: every member passed the same value, and provenance calls it a constant
   (null, a boolean, an enum value) with no customer word containing it.

The first argument with none of these ends the plan: the plan covers the calls before it
and its ``stop`` names that call, the argument and why (``unknown``: a member's value is not
in its run; ``choice``: it is one of several values at a result path in every member, so
the agent chose it; ``varies``: each member's value has a source but not the same one;
``private``: binding it would write a member's value into a path or key). No value from the runs reaches
the plan but a constant every member passed. A member without the matching call, or
without the argument, does not contradict (as :func:`~.provenance.cluster_dataflow`).

**Choices** (``choices=True``): where the runs chose, the pick is left to the caller instead
of ending the plan: a choice input (:mod:`.plan`) among the values at a path that holds the
value in every member (for the pick alone every earlier step's result is searched, nearest
first, a flag, null or empty text never; of several such paths, the one with the fewest
values), when the members' values are of one JSON type. A list of scalars (the items an exchange
names) is bound element by element where that needs no pick, else as one ``array`` choice
among the values at a path holding every member's every element (the members may pick
different numbers of them).

Results are read as GAIA stores them: cut at 500 characters, so a JSON result is read as
its longest complete prefix (:func:`~.provenance.read_result`); a path verified on the prefix
may find several values in the full result, which the executor refuses (the several-values
rule).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import PlanError
from .plan import (
    IDENT_RE,
    INPUT_TYPES,
    MAX_BINDING_DEPTH,
    MAX_BINDING_ITEMS,
    MAX_PLAN_INPUTS,
    MAX_PLAN_STEPS,
    PATH_RE,
    Binding,
    Const,
    FromInput,
    FromStep,
    InputSlot,
    InputType,
    ListOf,
    ObjectOf,
    Plan,
    PlanStep,
    PlanStop,
    StopReason,
)
from .provenance import ArgSource, TracedCall, argument_sources, read_result, session_calls
from .resolve import resolve_binding, resolve_path, value_key
from .skill import TOOL_RE

if TYPE_CHECKING:
    from .detect import SessionSequence

__all__ = ["induce_plan"]


# ---------------------------------------------------------------------- values
def _leaves(value: Any, pos: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(position, scalar) in the order provenance lists an argument's sources."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*pos, i))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, (*pos, k))
    else:
        yield pos, value


def _at(value: Any, pos: tuple[Any, ...]) -> Any:
    for p in pos:
        value = value[p]
    return value


def _shape(value: Any) -> Any:
    if isinstance(value, list):
        return ("list", tuple(_shape(v) for v in value))
    if isinstance(value, Mapping):
        return ("object", tuple(sorted((str(k), _shape(v)) for k, v in value.items())))
    return "leaf"


def _scalar_lists(values: list[Any]) -> bool:
    """Whether every value is a non-empty list of scalars."""
    return all(isinstance(v, list) and v and not any(isinstance(x, list | dict) for x in v)
               for v in values)


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "other")


def _paths(node: Any, value: Any, path: str = "") -> Iterator[str]:
    """Paths (provenance's grammar) at which ``value`` is a leaf or key of ``node``."""
    if isinstance(node, dict):
        if any(value_key(k) == value_key(value) for k in node):
            yield f"{path}.<key>" if path else "<key>"
        for k, v in node.items():
            yield from _paths(v, value, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _paths(v, value, f"{path}[]")
    elif value_key(node) == value_key(value):
        yield path


class _Run:
    """One member's successful calls, parsed results and each value's source."""

    def __init__(self, seq: SessionSequence, enums: Any, words: str | None):
        self.sid, self.enums = seq.session_id, enums
        self.goal = seq.goal or "" if words is None else words
        self.calls: list[TracedCall] = session_calls(seq)
        self.results = [read_result(c.result) for c in self.calls]
        self.sources = argument_sources(self.calls, self.goal, enums=enums)
        self.tools = [c.name for c in self.calls]
        self._alone: dict[tuple[str, str, str], str] = {}

    def at(self, tool: str, nth: int) -> int | None:
        idx = [j for j, t in enumerate(self.tools) if t == tool]
        return idx[nth] if nth < len(idx) else None

    def source(self, j: int, arg: str, pos: tuple[Any, ...]) -> ArgSource:
        value = self.calls[j].arguments[arg]
        return dict(zip((p for p, _ in _leaves(value)), self.sources[j][arg],
                        strict=True))[pos]

    def alone(self, tool: str, arg: str, leaf: Any) -> str:
        """The leaf's source with no result before it: customer, constant or unknown."""
        key = (tool, arg, value_key(leaf))
        if key not in self._alone:
            self._alone[key] = argument_sources([TracedCall(name=tool, arguments={arg: leaf})], self.goal,
                                                enums=self.enums)[0][arg][0].kind
        return self._alone[key]


class _Inducer:
    """The bindings of the representative's calls, checked against every member."""

    def __init__(self, runs: list[_Run], choices: bool = False):
        self.runs, self.rep, self.choices = runs, runs[0], choices
        self.keys = [(t, self.rep.tools[:i].count(t)) for i, t in enumerate(self.rep.tools)]
        self.inputs: list[tuple[InputSlot, dict[str, str]]] = []
        self.private = {str(v) for r in runs for c in r.calls
                        for _, v in _leaves(dict(c.arguments))}

    def bind(self, i: int, arg: str, peers: list[tuple[_Run, int]], pos: tuple[Any, ...]
             ) -> Binding | StopReason:
        """The binding of the value at ``pos`` of argument ``arg`` of the representative's
        call ``i`` (0-based), or why there is none; ``peers``: (member, its matching call)."""
        values = [_at(r.calls[j].arguments[arg], pos) for r, j in peers]
        every = self._every(i, arg, peers, pos, values)
        if every is not None:
            return every
        if self.choices and _scalar_lists(values):
            return self._some(i, arg, peers, pos, values)
        if len({_shape(v) for v in values}) > 1:
            return "varies"
        first = values[0]
        if isinstance(first, list | dict) and (len(first) > MAX_BINDING_ITEMS
                                               or len(pos) > MAX_BINDING_DEPTH - 2):
            return "limit"
        if isinstance(first, list):
            items = [self.bind(i, arg, peers, (*pos, n)) for n in range(len(first))]
            bad = next((x for x in items if isinstance(x, str)), None)
            return bad or ListOf(tuple(x for x in items if not isinstance(x, str)))
        if isinstance(first, dict):
            if any(str(k) in self.private or not IDENT_RE.match(str(k)) for k in first):
                return "private"
            parts = {str(k): self.bind(i, arg, peers, (*pos, k)) for k in first}
            bad = next((x for x in parts.values() if isinstance(x, str)), None)
            return bad or ObjectOf({k: x for k, x in parts.items() if not isinstance(x, str)})
        return self._leaf(i, arg, peers, pos, values)

    def _candidates(self, i: int, arg: str, peers: list[tuple[_Run, int]],
                    pos: tuple[Any, ...], private: bool = False, wide: bool = False
                    ) -> list[tuple[int, str]]:
        """(plan step, path) where members' provenance found the value, in a step before
        ``i``: provenance's path, then every path the parsed result holds it at (only those
        with a member's value as a key when ``private``); ``wide`` (where to pick a choice
        among), then every path of every earlier step's result that holds it (nearest
        first)."""
        out: list[tuple[int, str]] = []
        for r, j in peers:
            src = r.source(j, arg, pos)
            value = _at(r.calls[j].arguments[arg], pos)
            steps = [src.step] if src.kind == "step" and src.step is not None else []
            if wide and not (value is None or isinstance(value, bool) or value == ""):
                # (as provenance, a flag, null or empty text is never traced to a result)
                steps += [n for n in range(j, 0, -1) if n not in steps]
            for n in steps:
                tool = r.tools[n - 1]
                key = (tool, r.tools[:n - 1].count(tool))
                if key not in self.keys[:i]:
                    continue
                found = [src.path] if src.path and n == src.step else []
                found += sorted(set(_paths(r.results[n - 1], value)),
                                key=lambda p: (p.count(".") + p.count("[]"), p))
                out += [(self.keys.index(key) + 1, p) for p in found]
        return [(k, p) for k, p in dict.fromkeys(out) if PATH_RE.match(p) and private == any(
            seg.split("[]")[0] in self.private for seg in p.split("."))]

    def _gives(self, r: _Run, j: int, b: FromStep, want: Any) -> bool:
        """Whether ``b`` gives member ``r`` back ``want`` from its own result."""
        jk = r.at(*self.keys[b.step - 1])
        if jk is None or jk >= j:
            return False
        try:
            got = resolve_binding(b, [None] * (b.step - 1) + [r.results[jk]], {})
        except PlanError:
            return False
        return value_key(got) == value_key(want)

    def _among(self, r: _Run, j: int, b: FromStep, want: Any) -> bool:
        """Whether ``want`` is one of the values at ``b``'s path in member ``r``."""
        jk = r.at(*self.keys[b.step - 1])
        return jk is not None and jk < j and value_key(want) in {
            value_key(v) for v in resolve_path(r.results[jk], b.path)}

    def _every(self, i: int, arg: str, peers: list[tuple[_Run, int]], pos: tuple[Any, ...],
               values: list[Any]) -> FromStep | None:
        """A list of scalars that is, in every member, all the values at one result path,
        and in some member more than one (with one value each, "all of them" and "the one"
        cannot be told apart, and the one-value rule is the one that refuses to guess)."""
        if not _scalar_lists(values) or not any(len(v) > 1 for v in values):
            return None
        for k, path in self._candidates(i, arg, peers, (*pos, 0)):
            b = FromStep(step=k, path=path, every=True)
            if all(self._gives(r, j, b, v) for (r, j), v in zip(peers, values, strict=True)):
                return b
        return None

    def _some(self, i: int, arg: str, peers: list[tuple[_Run, int]], pos: tuple[Any, ...],
              values: list[Any]) -> Binding | StopReason:
        """A list of scalars under ``choices``: bound element by element where that binds
        without a pick, else one ``array`` choice among the values at the one result path
        that holds every member's every element."""
        kept, self.choices = len(self.inputs), False
        try:
            got = self.bind(i, arg, peers, pos) if len({_shape(v) for v in values}) == 1 \
                else "varies"
        finally:
            self.choices = True
        if not isinstance(got, str) or got not in ("choice", "varies"):
            return got
        del self.inputs[kept:]
        kinds = {_json_type(x) for v in values for x in v}
        if len(kinds) != 1 or not kinds <= set(INPUT_TYPES):
            return got  # one pick's values are of one JSON type
        pairs = list(zip(peers, values, strict=True))
        held = [b for b in (FromStep(*c) for c in self._candidates(i, arg, peers, (*pos, 0),
                                                                    wide=True))
                if all(all(self._among(r, j, b, x) for x in v) for (r, j), v in pairs)]
        return self._input(arg, pos, peers, values, among=self._narrowest(peers, held)) \
            if held else got

    def _narrowest(self, peers: list[tuple[_Run, int]], held: list[FromStep]) -> FromStep:
        """Of the paths that hold every member's pick, the one with the fewest values to
        pick from (the order's items, not every variant of the product)."""
        def width(b: FromStep) -> int:
            return max(len({value_key(v) for v in resolve_path(r.results[jk], b.path)})
                       for r, j in peers if (jk := r.at(*self.keys[b.step - 1])) is not None)
        return min(held, key=width)

    def _leaf(self, i: int, arg: str, peers: list[tuple[_Run, int]], pos: tuple[Any, ...],
              values: list[Any]) -> Binding | StopReason:
        for k, path in self._candidates(i, arg, peers, pos):
            b = FromStep(step=k, path=path)
            if all(self._gives(r, j, b, v) for (r, j), v in zip(peers, values, strict=True)):
                return b
        tool = self.rep.tools[i]
        kinds = [r.alone(tool, arg, v) for (r, _), v in zip(peers, values, strict=True)]
        types = {_json_type(v) for v in values}
        if set(kinds) == {"customer"} and len(types) == 1 and types <= set(INPUT_TYPES):
            return self._input(arg, pos, peers, values)
        if set(kinds) == {"constant"} and len({value_key(v) for v in values}) == 1:
            return Const(values[0])
        if any(r.source(j, arg, pos).kind == "unknown" for r, j in peers):
            return "unknown"
        pairs = list(zip(peers, values, strict=True))
        held = [b for b in (FromStep(*c) for c in self._candidates(i, arg, peers, pos,
                                                                    wide=self.choices))
                if all(self._among(r, j, b, v) for (r, j), v in pairs)]
        if held:  # one path holds it among others, in every member: the agent chose
            typed = len(types) == 1 and types <= set(INPUT_TYPES)  # one pick, one JSON type
            return self._input(arg, pos, peers, values, among=self._narrowest(peers, held)) \
                if self.choices and typed else "choice"
        if all(any(self._among(r, j, FromStep(*c), v)
                   for c in self._candidates(i, arg, [(r, j)], pos, private=True))
               for (r, j), v in pairs):
            return "private"  # each member's own path runs through one of its values
        return "varies"

    def _input(self, arg: str, pos: tuple[Any, ...], peers: list[tuple[_Run, int]],
               values: list[Any], among: FromStep | None = None) -> Binding | StopReason:
        """The input for a customer's value (a pick among ``among``'s values): one that has
        the same value in every member (and the same ``among``), else a new one named after
        the argument."""
        seen = {r.sid: value_key(v) for (r, _), v in zip(peers, values, strict=True)}
        for slot, had in self.inputs:
            if slot.among == among and all(had.get(sid) == v for sid, v in seen.items()):
                return FromInput(slot.name)
        if len(self.inputs) == MAX_PLAN_INPUTS:
            return "limit"
        words = [arg, *(str(p + 1) if isinstance(p, int) else str(p) for p in pos)]
        base = re.sub(r"[^a-z0-9_]+", "_", "_".join(words).lower()).strip("_")[:56]
        base = base if base[:1].isalpha() else f"x_{base}"
        taken = {s.name for s, _ in self.inputs}
        name = next(n for n in (base, *(f"{base}_{k}" for k in range(2, 99)))
                    if n not in taken)
        kind = "array" if isinstance(values[0], list) else _json_type(values[0])
        self.inputs.append((InputSlot(name=name, type=cast(InputType, kind),
                                      source="customer" if among is None else "choice",
                                      among=among), seen))
        return FromInput(name)


def induce_plan(members: Sequence[SessionSequence], representative: SessionSequence, *,
                enums: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
                customer: Mapping[str, str] | None = None, choices: bool = False
                ) -> Plan | None:
    """The plan of a cluster's representative run, bound where every member agrees (rule in
    the module docstring); None when not even its first call can be bound.

    Args:
        members: the cluster's runs (the representative among them or not).
        representative: the run whose calls the plan follows.
        enums: tool -> argument -> allowed values (:func:`~.provenance.enum_values` of the
            world's tool schemas), for constants.
        customer: session id -> everything its customer said (default: the run's goal,
            its first user turn); a corpus whose goal leaves out what the customer knows
            (tau2's ``known_info``) passes it here.
        choices: where the runs chose among several values at one result path, leave the
            pick to the caller (a v2 choice input) instead of ending the plan there.
    """
    said = customer or {}
    runs = [_Run(m, enums, said.get(m.session_id)) for m in (representative, *(
        m for m in members if m.session_id != representative.session_id))]
    ind = _Inducer(runs, choices)
    steps: list[PlanStep] = []
    stop: PlanStop | None = None
    for i, call in enumerate(ind.rep.calls):
        if not TOOL_RE.match(call.name):
            stop = PlanStop(step=i + 1, tool="", argument="", reason="name")
            break
        if i == MAX_PLAN_STEPS:
            stop = PlanStop(step=i + 1, tool=call.name, argument="", reason="limit")
            break
        peers = [(r, j) for r in runs if (j := r.at(*ind.keys[i])) is not None]
        kept = len(ind.inputs)
        args: dict[str, Binding] = {}
        for arg in call.arguments:
            with_arg = [(r, j) for r, j in peers if arg in r.calls[j].arguments]
            got = ind.bind(i, arg, with_arg, ()) if IDENT_RE.match(arg) else "name"
            if isinstance(got, str):
                stop = PlanStop(step=i + 1, tool=call.name,
                                argument=arg if IDENT_RE.match(arg) else "", reason=got)
                break
            args[arg] = got
        if stop is not None:
            del ind.inputs[kept:]  # the inputs only the unbound step would have used
            break
        steps.append(PlanStep(tool=call.name, args=args))
    if not steps:
        return None
    inputs = tuple(s for s, _ in ind.inputs)
    return Plan(inputs=inputs, steps=tuple(steps), stop=stop,
                version=2 if any(s.source == "choice" for s in inputs) else 1)
