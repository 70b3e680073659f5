"""Execute: a plan checked against a world's tool schemas, then run one world call at a time.

A plan may come from an imported or tampered memory.db, so nothing runs before it passes
:func:`check_plan` against the world's own tool specs (OpenAI function schemas, as a world's
``tool_specs()`` lists them):

- each step's tool is one the world offers, looked up by its exact name: a plan cannot reach
  a shell, a module or any other code, because it can only name the world's tools;
- each argument is one the tool declares, and every argument it requires is bound;
- a constant fits its argument's schema, and a string constant must be one of the schema's
  ``enum`` values: an induced plan holds no other (its constants are null, booleans and enum
  values), so a planted free-text string (a shell command, a prompt) is refused;
- an input's type is one its argument's schema allows; an ``every`` binding feeds a list.

:func:`execute_plan` then checks the inputs it is given (each of the plan's inputs, of its
slot's type, no string over :data:`~.plan.MAX_STRING_CHARS`) and runs the steps in order.
Before each call the step's arguments are resolved (:func:`~.plan.resolve_binding`) and
validated against the tool's JSON schema (:func:`schema_errors`), every string bounded.
The first step that cannot be bound, fails validation or whose call fails ends the run: the
:class:`PlanRun` says what ran, the error and the partial results, so the agent can go on.

**Choice inputs** (:attr:`~.plan.Plan.choices`) may be left out. Before a step that uses one,
the values at the choice's ``among`` path in the earlier step's result are read: a pick given
must be one of them (each element, for an ``array`` choice), else the run stops there with
nothing called; a pick left out stops the run with :attr:`PlanRun.needs` listing them. A
later call *resumes* a run that stopped before calling its next step (for a pick, or a pick or
binding refused; ``execute_plan(..., resume=...)``): the inputs its steps used are kept (a
call may leave them out, and is refused if it changes one), the steps it ran are not called
again, so no write among them is repeated, and their results bind the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..errors import PlanError, PlanRefused, StepNotCalled
from .plan import (
    MAX_BINDING_ITEMS,
    MAX_STRING_CHARS,
    Binding,
    Const,
    FromInput,
    FromStep,
    InputSlot,
    ListOf,
    ObjectOf,
    Plan,
    PlanStop,
)
from .resolve import parse_result, resolve_binding, resolve_path, value_key
from .schema import deref, is_type, same_json, schema_enum, schema_errors, schema_types, short_json

__all__ = ["Needs", "PlanRun", "StepOutcome", "StepRun", "WorldCall", "check_plan", "execute_plan",
           "input_problems", "plan_problems", "schema_errors"]



class StepOutcome(Protocol):
    """What one world call returns: the text the agent would see, and whether it succeeded
    (a world episode's ``CallOutcome`` is one)."""

    @property
    def result(self) -> str: ...

    @property
    def ok(self) -> bool: ...


#: One call into the world: (tool name, arguments) -> its outcome. A world episode's
#: ``execute`` is one; a harness may wrap it to record the call in its transcript, or raise
#: :class:`~skillsynth.errors.StepNotCalled` to decline it (the run stops there).
WorldCall = Callable[[str, dict[str, Any]], StepOutcome]


@dataclass(frozen=True)
class StepRun:
    """One step that was called: its number, tool, resolved arguments and outcome;
    ``reused``: called by the run this one resumed, not called again."""

    step: int
    tool: str
    arguments: Mapping[str, Any]
    result: str
    ok: bool
    reused: bool = False


@dataclass(frozen=True)
class Needs:
    """A choice the caller left out: the input, the step that uses it (1-based) and its
    tool, and the values to pick from (distinct, in the result's order)."""

    input: str
    step: int
    tool: str
    options: tuple[Any, ...]


@dataclass(frozen=True)
class PlanRun:
    """What a plan's run did.

    Attributes:
        ran: the steps called, in order (the last one failed when ``error`` names it).
        error: why the run stopped early (a binding, an argument its schema refuses, a
            failed call), naming the step; None when every step ran and succeeded.
        failed_step: the step ``error`` is about (1-based), else None.
        handoff: where the plan itself ends before the run it came from did
            (:attr:`~.plan.Plan.stop`): the agent continues from there.
        needs: the choice input the run stopped for (None: it did not).
        inputs: the inputs it ran with (a resumed run: those of the earlier call its
            steps used, and this call's).
    """

    ran: tuple[StepRun, ...]
    error: str | None = None
    failed_step: int | None = None
    handoff: PlanStop | None = None
    needs: Needs | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every step ran and succeeded and the plan covers the whole procedure."""
        return self.error is None and self.handoff is None and self.needs is None

    @property
    def goes_on_from(self) -> int | None:
        """The step a later call resumes at (:func:`execute_plan`): the one this run
        stopped before calling, for a pick or an input refused, every step before it having
        succeeded; None when it finished, handed back or a call failed."""
        if self.needs is not None:
            return self.needs.step
        if self.error is not None and self.failed_step == len(self.ran) + 1 and \
                all(s.ok for s in self.ran):
            return self.failed_step
        return None

    @property
    def results(self) -> tuple[str, ...]:
        """The result text of each step that ran (the partial results after an error)."""
        return tuple(s.result for s in self.ran)


# ---------------------------------------------------------------------- checking a plan
def _tools(tool_specs: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Tool name -> its parameters schema (OpenAI ``{"type": "function", "function": ...}``
    entries, or bare ``{"name", "parameters"}`` ones)."""
    out: dict[str, Mapping[str, Any]] = {}
    for spec in tool_specs:
        fn = spec.get("function", spec) if isinstance(spec, Mapping) else {}
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, Mapping) else {
                "type": "object", "properties": {}}
    return out


def _binding_problems(b: Binding, schema: Any, where: str, root: Mapping[str, Any],
                      slots: Mapping[str, str]) -> list[str]:
    """What can be known of a binding before anything runs."""
    allowed = schema_types(schema, root)

    def wants(t: str) -> list[str]:
        if allowed is None or t in allowed:
            return []
        wanted = " or ".join(sorted(allowed)) or "nothing"
        return [f"{where}: a value of type {t} where the schema wants {wanted}"]

    if isinstance(b, Const):
        out = schema_errors(b.value, schema, where=where, root=root)
        if isinstance(b.value, str) and not any(same_json(b.value, e) for e in schema_enum(schema, root)):
            out.append(f"{where}: a string constant the schema does not list in an enum (a "
                       "plan carries no free text; such a value comes from an input)")
        return out
    if isinstance(b, FromInput):
        return wants(slots.get(b.name, "?"))
    if isinstance(b, FromStep):
        return wants("array") if b.every else []
    target = deref(schema, root)
    target = target if isinstance(target, Mapping) else {}
    if isinstance(b, ListOf):
        return wants("array") + [p for i, x in enumerate(b.items) for p in _binding_problems(
            x, target.get("items", {}), f"{where}[{i + 1}]", root, slots)]
    out = wants("object")
    props, extra = target.get("properties") or {}, target.get("additionalProperties", True)
    out += [f"{where}: {k!r} is required" for k in target.get("required") or []
            if k not in b.fields]
    for k, x in b.fields.items():
        sub = props.get(k, extra)
        out += [f"{where}.{k}: not a key the schema declares"] if sub is False else \
            _binding_problems(x, sub, f"{where}.{k}", root, slots)
    return out


def plan_problems(plan: Plan, tool_specs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every reason ``plan`` may not run against these tool specs; empty when it may."""
    tools = _tools(tool_specs)
    slots = {s.name: s.type for s in plan.inputs}
    out: list[str] = []
    for k, step in enumerate(plan.steps, 1):
        where = f"steps[{k}]"
        if step.tool not in tools:
            out.append(f"{where}: {step.tool!r} is not one of the world's tools")
            continue
        params = tools[step.tool]
        props = params.get("properties") or {}
        out += [f"{where}.args: {step.tool} requires {r!r}, which the plan does not bind"
                for r in params.get("required") or [] if r not in step.args]
        for arg, b in step.args.items():
            out += [f"{where}.args.{arg}: {step.tool} has no argument {arg!r}"] \
                if arg not in props else _binding_problems(b, props[arg], f"{where}.args.{arg}",
                                                           params, slots)
    return out


def check_plan(plan: Plan, tool_specs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse ``plan`` unless every step is a world tool called with arguments its schema
    allows (module docstring).

    Raises:
        PlanRefused: listing every problem (:func:`plan_problems`).
    """
    problems = plan_problems(plan, tool_specs)
    if problems:
        raise PlanRefused(problems)


def input_problems(plan: Plan, inputs: Mapping[str, Any]) -> list[str]:
    """Why ``inputs`` cannot be given to ``plan``: a missing customer input or an unknown
    input, a value not of its slot's type (an ``array`` choice: 1 to
    :data:`~.plan.MAX_BINDING_ITEMS` scalars), a string over :data:`~.plan.MAX_STRING_CHARS`.
    A choice may be left out."""
    slots = {s.name: s for s in plan.inputs}
    out = [f"input {n!r} is not one of the plan's inputs" for n in inputs if n not in slots]
    for name, slot in slots.items():
        if name not in inputs:
            if slot.source != "choice":
                out.append(f"input {name!r} is missing")
            continue
        value = inputs[name]
        if not is_type(value, slot.type):
            out.append(f"input {name!r}: {short_json(value)} is not of type {slot.type}")
        elif slot.type == "array" and not (0 < len(value) <= MAX_BINDING_ITEMS and all(
                v is None or isinstance(v, bool | int | float | str) for v in value)):
            out.append(f"input {name!r}: a pick of 1 to {MAX_BINDING_ITEMS} values, each a "
                       "string, number, boolean or null")
        else:
            out += [f"input {name!r} has {len(v)} characters; the limit is {MAX_STRING_CHARS}"
                    for v in (value if isinstance(value, list) else [value])
                    if isinstance(v, str) and len(v) > MAX_STRING_CHARS]
    return out


def _long_strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [f"{where}: {len(value)} characters; the limit is {MAX_STRING_CHARS}"] \
            if len(value) > MAX_STRING_CHARS else []
    if isinstance(value, Mapping):
        return [e for k, v in value.items() for e in _long_strings(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _long_strings(v, f"{where}[{i + 1}]")]
    return []


# ---------------------------------------------------------------------- running it
def _used(b: Binding) -> list[str]:
    """The inputs a binding uses, in its order."""
    if isinstance(b, FromInput):
        return [b.name]
    if isinstance(b, ListOf):
        return [n for x in b.items for n in _used(x)]
    if isinstance(b, ObjectOf):
        return [n for x in b.fields.values() for n in _used(x)]
    return []


def _same_value(a: Any, b: Any) -> bool:
    """JSON equality (:func:`_same`), element by element for lists."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return same_json(a, b)


def _resumed(plan: Plan, inputs: Mapping[str, Any], resume: PlanRun | None
             ) -> tuple[int, dict[str, Any]]:
    """(how many steps of ``resume`` this call goes on after, the inputs it runs with).

    A run resumes when it stopped before calling a step (:attr:`PlanRun.goes_on_from`)
    after calling this plan's first steps: the inputs those steps used are taken from it
    where this call leaves them out, and must be the same where it gives them. Otherwise
    the call starts at step 1 with its own inputs.

    Raises:
        PlanRefused: this call changes an input the earlier call's steps used (starting
            again could repeat a write they made; nothing is called).
    """
    n = len(resume.ran) if resume is not None else 0
    if resume is None or resume.goes_on_from is None or not n or \
            [s.tool for s in resume.ran] != [s.tool for s in plan.steps[:n]]:
        return 0, dict(inputs)
    used = {name for step in plan.steps[:n] for b in step.args.values() for name in _used(b)}
    merged = {**{k: v for k, v in resume.inputs.items() if k in used}, **inputs}
    changed = sorted(k for k in used if not _same_value(merged.get(k), resume.inputs.get(k)))
    if changed:
        raise PlanRefused([
            f"input {k!r}: {short_json(merged.get(k))} is not {short_json(resume.inputs.get(k))}, "
            f"which your earlier call ran steps 1-{n} with; leave it out or give the same "
            f"value to go on from step {n + 1}, or go on with the tools yourself"
            for k in changed])
    return n, merged


def _pick(slot: InputSlot, inputs: Mapping[str, Any], parsed: Sequence[Any], step: int,
          tool: str) -> Needs | str | None:
    """A choice input before the step that uses it: what it may be picked among when it
    was left out, why there is nothing to pick or the pick given is not one of those
    values (each once), or None (it is)."""
    assert slot.among is not None
    where = f"step {slot.among.step}'s {slot.among.path or '(whole result)'}"
    options = list({value_key(v): v for v in resolve_path(parsed[slot.among.step - 1],
                                                          slot.among.path)
                    if v is None or isinstance(v, bool | int | float | str)}.values())
    if not options:
        return f"steps[{step}]: input {slot.name!r}: {where} holds no value to pick"
    if slot.name not in inputs:
        return Needs(input=slot.name, step=step, tool=tool, options=tuple(options))
    picked = inputs[slot.name] if slot.type == "array" else [inputs[slot.name]]
    bad = [v for v in picked if not any(same_json(v, o) for o in options)]
    twice = [v for i, v in enumerate(picked) if any(same_json(v, w) for w in picked[:i])]
    if not bad and not twice:
        return None
    if twice:
        return f"steps[{step}]: input {slot.name!r} picks {short_json(twice[0])} twice"
    shown = ", ".join(short_json(v) for v in options[:12]) + (
        f" and {len(options) - 12} more" if len(options) > 12 else "")
    return (f"steps[{step}]: input {slot.name!r}: {short_json(bad[0])} is not one of {where} "
            f"values ({shown})")


def execute_plan(plan: Plan, inputs: Mapping[str, Any], call: WorldCall, *,
                 tool_specs: Sequence[Mapping[str, Any]], resume: PlanRun | None = None
                 ) -> PlanRun:
    """Run ``plan``'s steps in order through ``call``, one world call per step.

    Nothing is called unless the plan passes :func:`check_plan` against ``tool_specs`` and
    the inputs pass :func:`input_problems`. Each step's arguments are resolved from the
    inputs and the earlier results and validated against the tool's schema before its
    call; the first step that cannot be, or whose call fails, ends the run. A choice left
    out stops the run before the step that uses it (:attr:`PlanRun.needs`).

    Args:
        plan: the plan (from :func:`~.plan.find_plan` of a recalled skill's body).
        inputs: input name -> value, as the plan's slots declare them.
        call: one world call (a world episode's ``execute``, or a harness's wrapper).
        tool_specs: the world's tools as OpenAI function schemas.
        resume: this plan's earlier run in the same episode; when it stopped before
            calling a step (a pick left out, an input refused), this call goes on from that
            step and its steps are not called again (:func:`_resumed`). Their results are
            reused as they were, even where the caller has called tools since.

    Raises:
        PlanRefused: the plan or the inputs are refused, or they change an input the
            resumed run's steps used; nothing was called.
    """
    check_plan(plan, tool_specs)
    choices = {s.name: s for s in plan.choices}
    # a pick given as null is a pick left out (a small model fills optional parameters so)
    done, given = _resumed(plan, {k: v for k, v in inputs.items()
                                  if not (k in choices and v is None)}, resume)
    problems = input_problems(plan, given)
    if problems:
        raise PlanRefused(problems)
    tools = _tools(tool_specs)
    ran: list[StepRun] = [replace(s, reused=True) for s in resume.ran[:done]] if resume else []
    parsed: list[Any] = [parse_result(s.result) for s in ran]

    def stopped(k: int, error: str | None = None, needs: Needs | None = None) -> PlanRun:
        return PlanRun(ran=tuple(ran), error=error, failed_step=k if error else None,
                       handoff=plan.stop, needs=needs, inputs=given)

    for k, step in enumerate(plan.steps[done:], done + 1):
        where = f"steps[{k}].args"
        for name in dict.fromkeys(n for b in step.args.values() for n in _used(b)):
            if name in choices:
                got = _pick(choices[name], given, parsed, k, step.tool)
                if isinstance(got, Needs):
                    return stopped(k, needs=got)
                if got is not None:
                    return stopped(k, error=got)
        try:
            args = {a: resolve_binding(b, parsed, given, where=f"{where}.{a}")
                    for a, b in step.args.items()}
        except PlanError as exc:
            return stopped(k, error=str(exc))
        errors = schema_errors(args, tools[step.tool], where=where) + _long_strings(args, where)
        if errors:
            return stopped(k, error="; ".join(errors))
        try:
            outcome = call(step.tool, args)
        except StepNotCalled as exc:
            return stopped(k, error=f"steps[{k}]: not called: {exc}")
        ran.append(StepRun(step=k, tool=step.tool, arguments=args, result=str(outcome.result),
                           ok=bool(outcome.ok)))
        if not outcome.ok:
            return stopped(k, error=f"steps[{k}]: {step.tool} failed: "
                           f"{str(outcome.result)[:300]}")
        parsed.append(parse_result(str(outcome.result)))
    return stopped(len(plan.steps))
