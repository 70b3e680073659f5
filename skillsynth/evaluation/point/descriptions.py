"""One-line tool descriptions for the control arms' procedures (a world's own, else made
from the tool's name)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DESCRIPTION_CHARS", "generic_line", "one_line", "tool_descriptions"]

#: A one-line tool description is cut here (at a word, with "...").
DESCRIPTION_CHARS = 160


def one_line(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """The first sentence of a tool's description on one line, cut at ``limit``."""
    flat = " ".join(str(text).split())
    m = re.match(r"(.+?[.!?])(\s|$)", flat)
    line = m.group(1) if m else flat
    if len(line) > limit:
        line = line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return line


def generic_line(name: str) -> str:
    """A description made from a tool's name, for a world that has none."""
    words = " ".join(w for w in re.split(r"[_.\-\s]+", name) if w)
    return (words[:1].upper() + words[1:] + ".") if words else f"Use {name}."


def tool_descriptions(specs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Tool name -> its one-line description, from OpenAI function schemas."""
    out = {}
    for s in specs:
        fn = s.get("function") or {}
        if fn.get("name") and str(fn.get("description") or "").strip():
            out[str(fn["name"])] = one_line(str(fn["description"]))
    return out


# ---------------------------------------------------------------------- the oracle skill
