"""Tool calls a model wrote as JSON text instead of in ``tool_calls``.

Small local models answer a function-calling request with the call as text; the live agent
takes such a call when it names an offered tool, and counts the ones that name no offered tool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["tool_calls_in_content"]


def _json_values(text: str) -> list[Any]:
    """Every JSON object or array that starts at a ``{`` or ``[`` in ``text``, in order."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                i += 1
                continue
            out.append(value)
            i = end
        else:
            i += 1
    return out


def tool_calls_in_content(content: str | None, tools: Sequence[str] | None
                          ) -> tuple[dict[str, Any], ...]:
    """Tool calls a model wrote as JSON text in ``content`` instead of ``tool_calls``.

    Small local models (Qwen2.5-Coder 0.5B/1.5B under llama-server) answer a function-calling
    request with ``{"name": ..., "arguments": {...}}`` as text, bare, in a code fence or in
    ``<tool_call>`` tags. Such an object (or a list of them) counts as a call only when its
    name is one of the offered ``tools``; anything else stays a text answer. Returned in the
    OpenAI shape (``function.arguments`` a JSON string), with ids ``content_call_N``.
    ``tools=None`` finds call-shaped objects naming any tool (a string ``name`` beside
    ``arguments`` or ``parameters``): what the agent counts as calls to tools it was not offered.
    """
    if not content or tools is not None and not tools:
        return ()
    offered = None if tools is None else set(tools)
    found: list[dict[str, Any]] = []
    for value in _json_values(content):
        for obj in value if isinstance(value, list) else [value]:
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                continue
            if offered is None and not ("arguments" in obj or "parameters" in obj) \
                    or offered is not None and obj["name"] not in offered:
                continue
            args = obj.get("arguments", obj.get("parameters", {}))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    pass
            text = args if isinstance(args, str) else json.dumps(args)
            found.append({"id": f"content_call_{len(found)}", "type": "function",
                          "function": {"name": obj["name"], "arguments": text}})
    return tuple(found)
