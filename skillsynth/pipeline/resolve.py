"""Resolve: what a plan's binding stands for, given the earlier steps' results and the inputs.

The executor (:mod:`.execute`) and induction (:mod:`.induce`, which keeps a binding only if
resolving it as the executor does gives every member back its own value) share these, so a
plan is read the same way where it is made and where it runs. Paths and the several-values
rule are :mod:`.plan`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import PlanError
from .plan import PATH_RE, Binding, Const, FromInput, ListOf, ObjectOf

__all__ = ["parse_result", "resolve_binding", "resolve_path", "value_key"]


def _fail(field: str, message: str) -> PlanError:
    return PlanError(message, field=field)


def parse_result(text: str) -> Any:
    """A result as its paths see it: the JSON value, else the text itself."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def resolve_path(result: Any, path: str) -> list[Any]:
    """Every value at ``path`` in a parsed result, in the result's order."""
    if not PATH_RE.match(path):
        raise _fail("path", f"{path!r} is not a result path")
    values = [result]
    for seg in path.split(".") if path else []:
        name, lists = seg.split("[]", 1)[0], seg.count("[]")
        if name == "<key>":
            values = [k for v in values if isinstance(v, dict) for k in v]
        elif name:
            values = [v[name] for v in values if isinstance(v, dict) and name in v]
        for _ in range(lists):
            values = [x for v in values if isinstance(v, list) for x in v]
    return values


def value_key(value: Any) -> str:
    """A value's identity with its JSON type (1, 1.0, "1" and true all differ): how a plan
    compares values."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True) + type(value).__name__


def resolve_binding(binding: Binding, results: Sequence[Any], inputs: Mapping[str, Any],
                    *, where: str = "") -> Any:
    """The value ``binding`` stands for, given the parsed results of the steps before it
    (``results[0]`` is step 1's) and the inputs.

    Raises:
        PlanError: an input is missing, a step has not run, or a path gives no value or
            (one-value binding) two different values.
    """
    if isinstance(binding, FromInput):
        if binding.name not in inputs:
            raise _fail(where, f"no input {binding.name!r} was given")
        return inputs[binding.name]
    if isinstance(binding, Const):
        return binding.value
    if isinstance(binding, ListOf):
        return [resolve_binding(x, results, inputs, where=f"{where}[{i + 1}]")
                for i, x in enumerate(binding.items)]
    if isinstance(binding, ObjectOf):
        return {k: resolve_binding(x, results, inputs, where=f"{where}.{k}")
                for k, x in binding.fields.items()}
    if not 1 <= binding.step <= len(results):
        raise _fail(where, f"step {binding.step} has not run")
    found = resolve_path(results[binding.step - 1], binding.path)
    said = f"step {binding.step}'s result at {binding.path or '(the whole result)'!r}"
    if not found:
        raise _fail(where, f"no value in {said}")
    if binding.every:
        return found
    distinct = {value_key(v): v for v in found}
    if len(distinct) > 1:
        raise _fail(where, f"{len(distinct)} different values in {said}; a plan does not "
                    "choose between them, the agent does")
    return found[0]
