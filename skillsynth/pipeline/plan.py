"""Plan: a procedure as steps a harness can run, induced from a cluster's runs without a model.

Prose leaves every step to the agent, and every step it re-derives is one it can get wrong. A
plan binds each argument of each step to where its value comes from: an input the customer
gives, a field of an earlier step's result, or a constant (ASI's skills as programs).

**Stored form** (``skillsynth-plan v1``, v2 with choices). GAIA's schema does not change: the plan is a fenced
block in the SKILL.md body, written after ``## Edge cases``, so GAIA's recall cut
(``max_recall_body_chars``) drops the plan before any prose, and both SKILL.md validators
accept it (neither has body rules). The block is JSON: strict (no repeated key, no NaN),
ASCII only, one input and one step per line::

    ```skillsynth-plan v1
    {"inputs": [
     {"name": "first_name", "type": "string", "from": "customer"}
    ],
    "steps": [
     {"tool": "find_user_id_by_name_zip", "args": {"first_name": {"input": "first_name"}}},
     {"tool": "get_user_details", "args": {"user_id": {"step": 1, "path": ""}}}
    ],
    "stop": {"step": 3, "tool": "exchange_delivered_order_items", "argument": "item_ids",
     "reason": "varies"}}
    ```

A binding is one of ``{"input": NAME}``, ``{"step": K, "path": P}`` (one value of step K's
result), ``{"step": K, "path": P, "every": true}`` (all of them, as a list), ``{"const": V}``
(null, a boolean, a number or a string), ``{"list": [binding, ...]}`` or
``{"object": {key: binding}}``. ``stop`` is null when the plan covers the whole run; else the
plan is a prefix and says where it hands back to the agent and why (:data:`STOP_REASONS`).
The plan holds no free text: every string is a tool, argument or input name, a path, or a
constant, so nothing in it reads as an instruction to the agent.

**Paths** are written as :mod:`.provenance` writes them: keys joined by ``.``, ``[]`` after a
key for each element of a list (``items[].item_id``; ``[]`` alone: a top-level list), and a
last ``<key>`` for the keys of an object (``payment_methods.<key>``); ``""`` is the whole
result, read as JSON, else as text. **Several values**: a one-value binding takes the
distinct values at its path and needs exactly one; none, or two different ones, fail the
step (the plan never chooses between an order's items: it hands back to the agent). An
``every`` binding takes all values in the result's order and needs at least one.

**Choices** (``skillsynth-plan v2``; a plan without one is still written as v1). Where the
runs *chose* a value among several at one result path (which order, which item), a plan may
leave the pick to its caller instead of ending there: an input ``{"name": "order_id",
"type": "string", "from": "choice", "among": {"step": 2, "path": "orders[]"}}`` (type
``array``: several of them). The caller may give it up front; else the executor stops
before the first step that uses it and shows the values at ``among`` to pick from, and a
second call with the pick goes on from there. A pick that is not one of those values is
refused before the step that uses it is called, so the caller decides nothing the runs did
not: the plan still holds no value of the runs, only where the pick is made.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from ..errors import PlanError
from .skill import TOOL_RE, Skill

__all__ = ["IDENT_RE", "INPUT_TYPES", "MAX_BINDING_DEPTH", "MAX_BINDING_ITEMS", "MAX_PLAN_CHARS",
           "MAX_PLAN_INPUTS", "MAX_PLAN_STEPS", "MAX_STRING_CHARS", "PATH_RE", "PLAN_VERSION",
           "READ_VERSIONS", "STOP_REASONS", "Binding", "Const", "FromInput", "FromStep",
           "InputSlot", "InputSource", "InputType", "ListOf", "ObjectOf", "Plan", "PlanStep",
           "PlanStop", "StopReason", "find_plan", "parse_plan", "render_plan",
           "strip_plan", "with_plan"]

#: The newest stored form: v2 adds choice inputs; a plan without one is written as v1.
PLAN_VERSION = 2
READ_VERSIONS = (1, 2)
InputType = Literal["string", "integer", "number", "boolean"]
INPUT_TYPES: tuple[InputType, ...] = ("string", "integer", "number", "boolean")
InputSource = Literal["customer", "choice"]
#: Why a plan ends before the run does: an argument's source is not in the run, differs
#: between the members, is one of several values at its path (the agent chose), would put a
#: member's value in a path or key, is under a name a plan cannot carry, or a size limit.
StopReason = Literal["unknown", "varies", "choice", "private", "name", "limit"]
STOP_REASONS: tuple[StopReason, ...] = ("unknown", "varies", "choice", "private", "name",
                                        "limit")
MAX_PLAN_STEPS = 32
MAX_PLAN_INPUTS = 32
#: The longest string a plan carries or passes (a constant, an input value, a bound value).
MAX_STRING_CHARS = 512
#: The longest plan block read back (a planted block is refused before it is parsed).
MAX_PLAN_CHARS = 32_000
#: Deepest nesting of list and object bindings, and most parts in one.
MAX_BINDING_DEPTH = 4
MAX_BINDING_ITEMS = 32
#: An input, argument or object key name.
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_KEY = r"[A-Za-z0-9_/\-]+"
#: A result path as provenance writes it (a key with other characters is not addressable).
PATH_RE = re.compile(rf"^(?:(?:{_KEY})?(?:\[\])*(?:\.{_KEY}(?:\[\])*)*(?:\.?<key>)?)$")
_FENCE = "```"
_OPEN_RE = re.compile(r"^```skillsynth-plan\b(.*)$", re.MULTILINE)


# ---------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class FromInput:
    """The value of input ``name``."""

    name: str


@dataclass(frozen=True)
class FromStep:
    """A value in step ``step``'s result (1-based) at ``path``; ``every``: all of them."""

    step: int
    path: str
    every: bool = False


@dataclass(frozen=True)
class Const:
    """A constant: null, a boolean, a number or a string."""

    value: Any


@dataclass(frozen=True)
class ListOf:
    """A list argument built element by element."""

    items: tuple[Binding, ...]


@dataclass(frozen=True)
class ObjectOf:
    """An object argument built key by key."""

    fields: Mapping[str, Binding]


Binding = FromInput | FromStep | Const | ListOf | ObjectOf


@dataclass(frozen=True)
class InputSlot:
    """One input of a plan: its name, its JSON type, and who gives it.

    ``source`` ``customer``: a value the customer gives. ``choice`` (v2): a value the caller
    picks among the values at ``among`` (an earlier step's result path) once that step has
    run; ``type`` ``array`` picks several. A caller that leaves a choice out is shown the
    values to pick from (:func:`~.execute.execute_plan`).
    """

    name: str
    type: InputType | Literal["array"]
    source: InputSource = "customer"
    among: FromStep | None = None


@dataclass(frozen=True)
class PlanStep:
    """One call: the tool, and each argument's binding (in the run's order)."""

    tool: str
    args: Mapping[str, Binding]


@dataclass(frozen=True)
class PlanStop:
    """Where a prefix plan hands back to the agent: the run's ``step`` (1-based, one after
    the plan's last), its ``tool``, the ``argument`` that could not be bound, and why."""

    step: int
    tool: str
    argument: str
    reason: StopReason


@dataclass(frozen=True)
class Plan:
    """An executable procedure. Construction checks every field (:class:`PlanError` names
    the one at fault), so a plan in hand always renders and parses back equal.

    Attributes:
        inputs: the values the caller gives, each used by some step.
        steps: the calls in order (at least one).
        stop: None when the plan covers the whole run; else where it hands back.
        version: the stored form's version (:data:`READ_VERSIONS`); a choice input needs
            2, and induction writes 1 for a plan without one.
    """

    inputs: tuple[InputSlot, ...]
    steps: tuple[PlanStep, ...]
    stop: PlanStop | None = None
    version: int = 1

    def __post_init__(self) -> None:
        _check_plan_fields(self)

    @property
    def complete(self) -> bool:
        """Whether the plan covers the whole run it was induced from."""
        return self.stop is None

    @property
    def choices(self) -> tuple[InputSlot, ...]:
        """The inputs the caller picks among an earlier step's values."""
        return tuple(s for s in self.inputs if s.source == "choice")


def _fail(field: str, message: str) -> PlanError:
    return PlanError(message, field=field)


def _check_plan_fields(plan: Plan) -> None:
    if plan.version not in READ_VERSIONS:
        raise _fail("version", f"{plan.version!r} is not supported (this skillsynth reads "
                    f"{', '.join(f'v{v}' for v in READ_VERSIONS)})")
    if len(plan.inputs) > MAX_PLAN_INPUTS:
        raise _fail("inputs", f"{len(plan.inputs)} inputs; the limit is {MAX_PLAN_INPUTS}")
    names: set[str] = set()
    for i, slot in enumerate(plan.inputs):
        where = f"inputs[{i + 1}]"
        if not isinstance(slot.name, str) or not IDENT_RE.match(slot.name):
            raise _fail(f"{where}.name", f"{slot.name!r} is not an identifier")
        if slot.name in names:
            raise _fail(f"{where}.name", f"{slot.name!r} is named twice")
        names.add(slot.name)
        _check_slot(slot, where, plan.version)
    if not plan.steps or len(plan.steps) > MAX_PLAN_STEPS:
        raise _fail("steps", f"{len(plan.steps)} steps; a plan has 1 to {MAX_PLAN_STEPS}")
    used: set[str] = set()
    after = {s.name: s.among.step for s in plan.choices if s.among is not None}
    for k, step in enumerate(plan.steps, 1):
        where = f"steps[{k}]"
        if not isinstance(step.tool, str) or not TOOL_RE.match(step.tool):
            raise _fail(f"{where}.tool", f"{step.tool!r} is not a tool name")
        for arg, b in step.args.items():
            if not isinstance(arg, str) or not IDENT_RE.match(arg):
                raise _fail(f"{where}.args", f"{arg!r} is not an argument name")
            got = _check_binding(b, f"{where}.args.{arg}", k, names, 1)
            early = sorted(n for n in got if after.get(n, 0) >= k)
            if early:
                raise _fail(f"{where}.args.{arg}", f"choice input {early[0]!r} is picked "
                            f"among step {after[early[0]]}'s values, which has not run")
            used |= got
    unused = sorted(names - used)
    if unused:
        raise _fail("inputs", f"{', '.join(unused)} not used by any step")
    s = plan.stop
    if s is not None:
        if s.step != len(plan.steps) + 1:
            raise _fail("stop.step", f"{s.step!r} must follow the last step "
                        f"({len(plan.steps) + 1})")
        if s.reason not in STOP_REASONS:
            raise _fail("stop.reason", f"{s.reason!r} is not one of {', '.join(STOP_REASONS)}")
        if not isinstance(s.tool, str) or not (TOOL_RE.match(s.tool) or s.tool == ""
                                              and s.reason == "name"):
            raise _fail("stop.tool", f"{s.tool!r} is not a tool name")
        if not isinstance(s.argument, str) or s.argument and not IDENT_RE.match(s.argument):
            raise _fail("stop.argument", f"{s.argument!r} is not an argument name")


def _check_slot(slot: InputSlot, where: str, version: int) -> None:
    if slot.source == "customer":
        if slot.type not in INPUT_TYPES:
            raise _fail(f"{where}.type", f"{slot.type!r} is not one of {', '.join(INPUT_TYPES)}")
        if slot.among is not None:
            raise _fail(f"{where}.among", "only a choice input is picked among a step's values")
        return
    if slot.source != "choice" or version < 2:
        raise _fail(f"{where}.from", f"{slot.source!r}: v{version} inputs come from the "
                    + ("customer" if version < 2 else "customer or a choice"))
    if slot.type not in (*INPUT_TYPES, "array"):
        raise _fail(f"{where}.type", f"{slot.type!r} is not one of "
                    f"{', '.join((*INPUT_TYPES, 'array'))}")
    b = slot.among
    if not isinstance(b, FromStep) or b.every:
        raise _fail(f"{where}.among", "a choice names one step's result path to pick among")
    _check_binding(b, f"{where}.among", MAX_PLAN_STEPS + 1, set(), 1)


def _check_binding(b: Any, where: str, step: int, names: set[str], depth: int) -> set[str]:
    """The inputs ``b`` uses; raises on a binding no plan may hold."""
    if depth > MAX_BINDING_DEPTH:
        raise _fail(where, f"nested deeper than {MAX_BINDING_DEPTH}")
    if isinstance(b, FromInput):
        if not isinstance(b.name, str) or b.name not in names:
            raise _fail(where, f"names no input {b.name!r}")
        return {b.name}
    if isinstance(b, FromStep):
        if isinstance(b.step, bool) or not isinstance(b.step, int) or not 1 <= b.step < step:
            raise _fail(f"{where}.step", f"{b.step!r} is not an earlier step (1..{step - 1})")
        if not isinstance(b.path, str) or len(b.path) > 200 or not PATH_RE.match(b.path):
            raise _fail(f"{where}.path", f"{b.path!r} is not a result path")
        if not isinstance(b.every, bool):
            raise _fail(f"{where}.every", "must be true or false")
        return set()
    if isinstance(b, Const):
        v = b.value
        if isinstance(v, str) and len(v) > MAX_STRING_CHARS:
            raise _fail(where, f"a constant of {len(v)} characters; the limit is "
                        f"{MAX_STRING_CHARS}")
        if isinstance(v, float) and not math.isfinite(v):
            raise _fail(where, "a constant must be a finite number")
        if v is not None and not isinstance(v, bool | int | float | str):
            raise _fail(where, "a constant is null, a boolean, a number or a string")
        return set()
    parts: list[tuple[str, Any]]
    if isinstance(b, ListOf):
        parts = [(f"{where}[{i + 1}]", x) for i, x in enumerate(b.items)]
    elif isinstance(b, ObjectOf):
        bad = [k for k in b.fields if not isinstance(k, str) or not IDENT_RE.match(k)]
        if bad:
            raise _fail(where, f"{bad[0]!r} is not a key name")
        parts = [(f"{where}.{k}", x) for k, x in b.fields.items()]
    else:
        raise _fail(where, f"{type(b).__name__} is not a binding")
    if len(parts) > MAX_BINDING_ITEMS:
        raise _fail(where, f"{len(parts)} parts; the limit is {MAX_BINDING_ITEMS}")
    return set().union(*(_check_binding(x, w, step, names, depth + 1) for w, x in parts))


# ---------------------------------------------------------------------- the stored form
def _encode(b: Binding) -> Any:
    if isinstance(b, FromInput):
        return {"input": b.name}
    if isinstance(b, FromStep):
        return {"step": b.step, "path": b.path, **({"every": True} if b.every else {})}
    if isinstance(b, Const):
        return {"const": b.value}
    if isinstance(b, ListOf):
        return {"list": [_encode(x) for x in b.items]}
    return {"object": {k: _encode(x) for k, x in b.fields.items()}}


def _dump(value: Any) -> str:
    # ASCII with backticks escaped: no line of the block can close the fence
    return json.dumps(value, ensure_ascii=True, allow_nan=False).replace("`", "\\u0060")


def render_plan(plan: Plan) -> str:
    """The plan as its fenced ``skillsynth-plan`` block (no trailing newline)."""
    inputs = [{"name": s.name, "type": s.type, "from": s.source,
               **({"among": _encode(s.among)} if s.among is not None else {})}
              for s in plan.inputs]
    steps = [{"tool": s.tool, "args": {a: _encode(b) for a, b in s.args.items()}}
             for s in plan.steps]
    stop = None if plan.stop is None else {
        "step": plan.stop.step, "tool": plan.stop.tool, "argument": plan.stop.argument,
        "reason": plan.stop.reason}
    rows = ["{\"inputs\": [" + ",".join(f"\n {_dump(x)}" for x in inputs) + "\n],",
            "\"steps\": [" + ",".join(f"\n {_dump(x)}" for x in steps) + "\n],",
            f"\"stop\": {_dump(stop)}}}"]
    return f"{_FENCE}skillsynth-plan v{plan.version}\n" + "\n".join(rows) + f"\n{_FENCE}"


def _block(text: str) -> tuple[int, int, str | None, str] | None:
    """(start, end, version, JSON) of the one plan block in ``text``, or None."""
    opens = list(_OPEN_RE.finditer(text))
    if len(opens) > 1:
        raise _fail("body", f"{len(opens)} plan blocks; a skill has at most one")
    if not opens:
        return None
    m = opens[0]
    close = re.compile(r"^```[ \t]*$", re.MULTILINE).search(text, m.end())
    if close is None:
        raise _fail("body", "the plan block is not closed by a ``` line")
    return m.start(), close.end(), m.group(1).strip(), text[m.end():close.start()]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _fail("block", f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise _fail("block", f"{name} is not a JSON value a plan may hold")


def _obj(value: Any, where: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()
         ) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"must be an object with {', '.join(keys)}")
    extra = sorted(set(value) - set(keys) - set(optional))
    missing = [k for k in keys if k not in value]
    if extra or missing:
        raise _fail(where, f"unexpected {', '.join(extra)}" if extra
                    else f"missing {', '.join(missing)}")
    return value


def _decode(value: Any, where: str, depth: int = 1) -> Binding:
    if not isinstance(value, dict) or (len(value) != 1 and "step" not in value):
        raise _fail(where, "a binding is an object with one of input, step, const, list, "
                    "object")
    if depth > MAX_BINDING_DEPTH:
        raise _fail(where, f"nested deeper than {MAX_BINDING_DEPTH}")
    if "step" in value:
        v = _obj(value, where, ("step", "path"), ("every",))
        return FromStep(step=v["step"], path=v["path"], every=v.get("every", False))
    (kind, inner), = value.items()
    if kind == "input":
        return FromInput(inner)
    if kind == "const":
        return Const(inner)
    if kind == "list" and isinstance(inner, list):
        return ListOf(tuple(_decode(x, f"{where}[{i + 1}]", depth + 1)
                            for i, x in enumerate(inner[:MAX_BINDING_ITEMS + 1])))
    if kind == "object" and isinstance(inner, dict):
        return ObjectOf({k: _decode(x, f"{where}.{k}", depth + 1) for k, x in inner.items()})
    raise _fail(where, f"{kind!r} is not a binding kind (input, step, const, list, object)")


def parse_plan(text: str) -> Plan:
    """Read the one ``skillsynth-plan`` block in ``text`` (a SKILL.md body or the block).

    Strict: an unknown version, key or binding kind, a repeated key, NaN, a missing field or
    a block over :data:`MAX_PLAN_CHARS` is an error; nothing is repaired.

    Raises:
        PlanError: naming the field at fault (``version``, ``steps[2].args.order_id``).
    """
    found = _block(text)
    if found is None:
        raise _fail("body", "no ```skillsynth-plan block")
    _, _, version, raw = found
    readable = [f"v{v}" for v in READ_VERSIONS]
    if version not in readable:
        raise _fail("version", f"{version or 'none'!r}: this skillsynth reads "
                    f"skillsynth-plan {', '.join(readable)}")
    if len(raw) > MAX_PLAN_CHARS:
        raise _fail("block", f"{len(raw)} characters; the limit is {MAX_PLAN_CHARS}")
    try:
        data = json.loads(raw, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except ValueError as exc:
        if isinstance(exc, PlanError):
            raise
        raise _fail("block", f"not JSON: {exc}") from exc
    data = _obj(data, "block", ("inputs", "steps", "stop"))
    if not isinstance(data["inputs"], list) or not isinstance(data["steps"], list):
        raise _fail("block", "inputs and steps must be lists")
    inputs = []
    for i, x in enumerate(data["inputs"][:MAX_PLAN_INPUTS + 1], 1):
        x = _obj(x, f"inputs[{i}]", ("name", "type", "from"), ("among",))
        among = _decode(x["among"], f"inputs[{i}].among") if "among" in x else None
        inputs.append(InputSlot(name=x["name"], type=x["type"], source=x["from"],
                                among=cast(FromStep, among)))
    steps = []
    for k, x in enumerate(data["steps"][:MAX_PLAN_STEPS + 1], 1):
        x = _obj(x, f"steps[{k}]", ("tool", "args"))
        if not isinstance(x["args"], dict):
            raise _fail(f"steps[{k}].args", "must be an object")
        steps.append(PlanStep(tool=x["tool"], args={a: _decode(b, f"steps[{k}].args.{a}")
                                                    for a, b in x["args"].items()}))
    stop = data["stop"]
    if stop is not None:
        stop = _obj(stop, "stop", ("step", "tool", "argument", "reason"))
        stop = PlanStop(step=stop["step"], tool=stop["tool"], argument=stop["argument"],
                        reason=stop["reason"])
    return Plan(inputs=tuple(inputs), steps=tuple(steps), stop=stop,
                version=int(version[1:]))


def find_plan(body: str) -> Plan | None:
    """The plan in a SKILL.md body, None when it has none (a malformed one is an error)."""
    return None if _block(body) is None else parse_plan(body)


def strip_plan(body: str) -> str:
    """``body`` without its plan block: the prose an agent reads."""
    found = _block(body)
    return body if found is None else (body[:found[0]] + body[found[1]:]).strip()


def with_plan(skill: Skill, plan: Plan) -> Skill:
    """``skill`` with ``plan`` as the last part of its body (an existing plan replaced)."""
    return replace(skill, body=strip_plan(skill.body) + "\n\n" + render_plan(plan))
