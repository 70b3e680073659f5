"""Schema: the subset of JSON Schema a world's tool specs use, for checking a plan's calls.

A plan's executor (:mod:`.execute`) validates every step's arguments against the tool's own
schema before calling it, and refuses a plan whose bindings cannot fit; this is that check,
without a dependency: ``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``anyOf``/``oneOf``/``allOf``, local ``$ref``, lengths,
``pattern`` and number bounds (what OpenAI function schemas and pydantic write).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["deref", "is_type", "same_json", "schema_enum", "schema_errors", "schema_types",
           "short_json"]

_MAX_SCHEMA_DEPTH = 32


def is_type(value: Any, name: str) -> bool:
    """Whether ``value`` is of JSON type ``name`` (a whole float counts as an integer, a
    boolean as no number)."""
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    kinds: dict[str, Any] = {"string": str, "boolean": bool, "array": list, "object": dict,
                             "null": type(None)}
    return name in kinds and isinstance(value, kinds[name])


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: a boolean is not a number, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b) and (isinstance(a, int | float) == isinstance(b, int | float))


def deref(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` with a local ``$ref`` (``#/$defs/X``) followed; None where it dangles."""
    for _ in range(_MAX_SCHEMA_DEPTH):
        if not isinstance(schema, Mapping) or "$ref" not in schema:
            return schema
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return None
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is None:
            return None
        schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
    return None


def short_json(value: Any) -> str:
    """``value`` as JSON, cut to 60 characters: how an error message quotes it."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_errors(value: Any, schema: Any, *, where: str = "",
                  root: Mapping[str, Any] | None = None, depth: int = 0) -> list[str]:
    """Why ``value`` fails ``schema``; an empty list means it passes.

    The subset OpenAI function schemas use (pydantic's included): ``type`` (one or a list),
    ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``, ``items``,
    ``anyOf``/``oneOf``/``allOf``, local ``$ref`` to ``$defs``, string and list lengths,
    ``pattern``, number bounds. Other keywords (``title``, ``description``, ``format``) do
    not constrain. A ``$ref`` that does not resolve fails (refused, not waved through).
    """
    root = schema if root is None and isinstance(schema, Mapping) else root or {}
    if depth > _MAX_SCHEMA_DEPTH:
        return [f"{where}: the schema nests too deep to check"]
    schema = deref(schema, root)
    if schema is None:
        return [f"{where}: the tool's schema has a reference that does not resolve"]
    if schema is True or schema == {}:
        return []
    if schema is False or not isinstance(schema, Mapping):
        return [f"{where}: no value is allowed here"]
    errors: list[str] = []
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            fits = sum(not schema_errors(value, s, where=where, root=root, depth=depth + 1)
                       for s in schema[key])
            if fits == 0 or (key == "oneOf" and fits > 1):
                errors.append(f"{where}: {short_json(value)} fits {fits} of the schema's "
                              f"{len(schema[key])} alternatives ({key})")
    for s in schema.get("allOf") or []:
        errors += schema_errors(value, s, where=where, root=root, depth=depth + 1)
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        if not any(is_type(value, t) for t in types):
            return errors + [f"{where}: {short_json(value)} is not of type {' or '.join(types)}"]
    if "enum" in schema and not any(same_json(value, e) for e in schema["enum"]):
        errors.append(f"{where}: {short_json(value)} is not one of {short_json(schema['enum'])}")
    if "const" in schema and not same_json(value, schema["const"]):
        errors.append(f"{where}: {short_json(value)} is not {short_json(schema['const'])}")
    errors += _bounds(value, schema, where)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping | bool):
        for i, x in enumerate(value):
            errors += schema_errors(x, schema["items"], where=f"{where}[{i + 1}]", root=root,
                                    depth=depth + 1)
    if isinstance(value, dict):
        errors += _object_errors(value, schema, where, root, depth)
    return errors


def _bounds(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    out = []
    size = len(value) if isinstance(value, str | list) else None
    if size is not None:
        lo, hi = ("minLength", "maxLength") if isinstance(value, str) else ("minItems",
                                                                             "maxItems")
        if isinstance(schema.get(lo), int) and size < schema[lo]:
            out.append(f"{where}: {size} long; the schema's {lo} is {schema[lo]}")
        if isinstance(schema.get(hi), int) and size > schema[hi]:
            out.append(f"{where}: {size} long; the schema's {hi} is {schema[hi]}")
    if isinstance(value, str) and isinstance(schema.get("pattern"), str) and \
            re.search(schema["pattern"], value) is None:
        out.append(f"{where}: {short_json(value)} does not match the schema's pattern")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, bad in (("minimum", value.__lt__), ("maximum", value.__gt__),
                         ("exclusiveMinimum", value.__le__), ("exclusiveMaximum", value.__ge__)):
            if isinstance(schema.get(key), int | float) and bad(schema[key]) is True:
                out.append(f"{where}: {value} is past the schema's {key} {schema[key]}")
    return out


def _object_errors(value: Mapping[str, Any], schema: Mapping[str, Any], where: str,
                   root: Mapping[str, Any], depth: int) -> list[str]:
    out = [f"{where}: {k!r} is required" for k in schema.get("required") or []
           if k not in value]
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    for k, v in value.items():
        sub = props.get(k, extra)
        if sub is False:
            out.append(f"{where}: {k!r} is not an argument the schema declares")
        else:
            out += schema_errors(v, sub, where=f"{where}.{k}", root=root, depth=depth + 1)
    return out


def schema_types(schema: Any, root: Mapping[str, Any], depth: int = 0) -> set[str] | None:
    """The JSON types ``schema`` allows (None: any)."""
    schema = deref(schema, root)
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return None if schema is True or schema == {} else set()
    if "type" in schema:
        t = schema["type"]
        found = {t} if isinstance(t, str) else set(t)
        return found | ({"integer"} if "number" in found else set())
    alts = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alts, list):
        parts = [schema_types(s, root, depth + 1) for s in alts]
        if any(p is None for p in parts):
            return None
        return set().union(*(p for p in parts if p is not None))
    return None


def schema_enum(schema: Any, root: Mapping[str, Any], depth: int = 0) -> list[Any]:
    """Every value ``schema`` lists in an ``enum`` or ``const`` (through refs and choices)."""
    schema = deref(schema, root)
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return []
    found = list(schema.get("enum") or []) + ([schema["const"]] if "const" in schema else [])
    for key in ("anyOf", "oneOf", "allOf"):
        for s in schema.get(key) or []:
            found += schema_enum(s, root, depth + 1)
    return found


