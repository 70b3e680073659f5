"""Reading a JSON array of records one element at a time, past malformed elements.

A results file is one JSON array (tau-bench; tau2's ``simulations``; a bare list). One
malformed element must not cost the valid ones after it, so the reader looks for where the
next element starts: a ``{`` after a comma, where a whole element (a valid JSON object that
the format recognises as one of its records, followed by ``,`` or ``]``) can be read.
Searching from the malformed element's own start (not from where parsing failed) finds
an element that an unterminated string swallowed. When no next element exists (a cut
file, a break in the last element), the rest of the array is a stretch that could not be
read, and the caller reports its size. A malformed last element whose brackets balance
(strings and escapes respected) still ends where they close, before the list's ``]``.
Records inside a skipped stretch are counted by how this file's elements open (their first
key, and the second when the first holds a scalar: ``{"task_id": 3, "reward":``), which
objects nested in a record do not share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["ArrayReader", "Gap", "Item", "byte_length", "error_text", "read_object", "skip_ws"]

_WS = " \t\r\n"
_NEXT_OBJECT = re.compile(r",\s*\{")
#: A JSON scalar as it appears in the text (a string, number, true, false or null).
_SCALAR = r'\s*(?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null)'


@dataclass(frozen=True)
class Item:
    """One element that parsed: its 0-based index and its value."""

    index: int
    value: Any


@dataclass(frozen=True)
class Gap:
    """A stretch of the array that could not be read.

    Attributes:
        index: the first record index the stretch covers.
        message: why the first element in it did not parse (json's wording, with position).
        start, end: character offsets of the stretch (``end``: where reading resumed, or
            the end of the text).
        records: how many element starts the stretch holds (0 when it begins after a
            whole element, as a stray bracket does, or where a cut text ends).
        resumed: whether reading resumed after it; False means the rest of the text is the
            stretch (a truncated file, or a break in the last element).
    """

    index: int
    message: str
    start: int
    end: int
    records: int
    resumed: bool


class ArrayReader:
    """The elements of the JSON array that opens at ``text[pos]``, as :class:`Item` and
    :class:`Gap`; :attr:`end` is the offset after its ``]`` once read, None if it never
    closed.

    ``text[pos]`` must be ``[``. ``is_element``: whether a parsed object is one of the
    format's records (what makes a resynchronisation point trustworthy: an object nested
    inside the broken element is not one).
    """

    def __init__(self, text: str, pos: int, is_element: Callable[[Any], bool]):
        self.text, self.pos, self.is_element = text, pos, is_element
        self.end: int | None = None
        self._opener: re.Pattern[str] | None = None
        self._dec = json.JSONDecoder()

    def __iter__(self) -> Iterator[Item | Gap]:
        text = self.text
        pos, index = skip_ws(text, self.pos + 1), 0
        if pos < len(text) and text[pos] == "]":
            self.end = pos + 1
            return
        while True:
            try:
                value, after = self._dec.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                why = "the list is not closed (the text ends where an item should start)" \
                    if pos >= len(text) else f"not valid JSON ({error_text(exc)})"
                gap = self._gap(index, pos, why, opens_element=True)
            else:
                yield Item(index=index, value=value)
                self._learn(value)
                index += 1
                pos = skip_ws(text, after)
                if pos < len(text) and text[pos] == "]":
                    self.end = pos + 1
                    return
                if pos < len(text) and text[pos] == ",":
                    pos = skip_ws(text, pos + 1)
                    continue
                # what follows a parsed element is neither ',' nor ']': a missing comma,
                # a stray bracket, or the end of a cut file
                gap = self._gap(index, pos, "the list is not closed after the item" if
                                pos >= len(text) else "expected ',' or ']' after the item "
                                f"at {_where(text, pos)}",
                                opens_element=text.startswith("{", pos))
            yield gap
            if not gap.resumed:
                return
            index += gap.records
            pos = gap.end
            if text.startswith("]", pos):  # the broken element was the last
                self.end = pos + 1
                return

    def _learn(self, value: Any) -> None:
        """Remember how this format's elements open (their first key, and the second
        when the first holds a scalar), to count the elements inside a broken stretch."""
        if self._opener is not None or not isinstance(value, dict) or not value:
            return
        keys = list(value)[:2]
        pattern = r",\s*\{\s*" + re.escape(json.dumps(keys[0])) + r"\s*:"
        if len(keys) == 2 and (value[keys[0]] is None
                               or isinstance(value[keys[0]], (str, int, float, bool))):
            pattern += _SCALAR + r"\s*,\s*" + re.escape(json.dumps(keys[1])) + r"\s*:"
        self._opener = re.compile(pattern)

    def _gap(self, index: int, start: int, message: str, *, opens_element: bool) -> Gap:
        """The stretch from ``start`` to the next whole element (or the end of the text);
        ``opens_element``: whether an element begins at ``start``."""
        text = self.text
        nxt = self._next_element(start)
        if nxt is None:  # the last element? its brackets may still say where it ends
            close = _balanced_end(text, start)
            if close is not None and text.startswith("]", skip_ws(text, close)):
                nxt = skip_ws(text, close)
        end = len(text) if nxt is None else nxt
        records = self._starts(start, end) + (opens_element and start < len(text))
        return Gap(index=index, message=message, start=start, end=end, records=records,
                   resumed=nxt is not None)

    def _next_element(self, start: int) -> int | None:
        """Where the first whole element after the one at ``start`` begins, or None."""
        text = self.text
        for m in _NEXT_OBJECT.finditer(text, start + 1):
            at = m.end() - 1
            try:
                value, after = self._dec.raw_decode(text, at)
            except json.JSONDecodeError:
                continue
            after = skip_ws(text, after)
            if after < len(text) and text[after] in ",]" and self.is_element(value):
                self._learn(value)
                return at
        return None

    def _starts(self, start: int, end: int) -> int:
        """How many further elements begin in ``text[start:end]``: objects after a comma
        that open the way this format's elements open."""
        if self._opener is None:
            return 0
        return sum(1 for _ in self._opener.finditer(self.text, start + 1, end))


def _balanced_end(text: str, pos: int) -> int | None:
    """Where the bracketed value at ``pos`` closes, strings and escapes respected; None
    when it never does (or does not start with a bracket)."""
    if pos >= len(text) or text[pos] not in "[{":
        return None
    depth, in_str, esc = 0, False, False
    for j in range(pos, len(text)):
        ch = text[j]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def skip_ws(text: str, pos: int) -> int:
    """The first offset at or after ``pos`` that is not JSON whitespace."""
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def error_text(exc: json.JSONDecodeError, *, line: bool = True) -> str:
    """Where and why JSON failed to parse, as one phrase: ``Expecting value at line 3
    column 7``.

    Some of json's messages end in "at" themselves (``Unterminated string starting at``,
    ``Invalid control character at``); the position is appended to them once, so no
    message reads "at at column". ``line=False`` leaves the line out (one-line records).
    """
    msg = exc.msg.removesuffix(" at")
    where = f"line {exc.lineno} column {exc.colno}" if line else f"column {exc.colno}"
    return f"{msg} at {where}"


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line} column {pos - text.rfind(chr(10), 0, pos)}"


def byte_length(text: str, start: int, end: int) -> int:
    """How many bytes of the source file ``text[start:end]`` was read from (UTF-8, with
    undecodable bytes kept as escapes)."""
    return len(text[start:end].encode("utf-8", errors="surrogateescape"))


def read_object(text: str, pos: int, array_key: str, is_element: Callable[[Any], bool]
                ) -> tuple[dict[str, Any], list[Item | Gap] | None, tuple[str, int] | None]:
    """The members of the JSON object that opens at ``text[pos]``, with the array under
    ``array_key`` read element by element (:class:`ArrayReader`).

    Returns the other members, the array's items (None when the key never came), and,
    where the object itself broke outside the array, why and at which offset (reading
    stopped there). A break inside the array that reading could not get past ends the
    object there too; it is the array's last :class:`Gap`.
    """
    dec = json.JSONDecoder()
    members: dict[str, Any] = {}
    items: list[Item | Gap] | None = None
    pos = skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        return members, items, None
    while True:
        try:
            key, after = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            return members, items, (f"not valid JSON ({error_text(exc)})", pos)
        colon = skip_ws(text, after)
        if not isinstance(key, str) or not text.startswith(":", colon):
            return members, items, (f"expected a member name and ':' at {_where(text, pos)}",
                                    pos)
        pos = skip_ws(text, colon + 1)
        if key == array_key and text.startswith("[", pos):
            reader = ArrayReader(text, pos, is_element)
            items = list(reader)
            if reader.end is None:
                return members, items, None
            pos = reader.end
        else:
            try:
                members[key], pos = dec.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                return members, items, (f"not valid JSON ({error_text(exc)})", pos)
        pos = skip_ws(text, pos)
        if text.startswith(",", pos):
            pos = skip_ws(text, pos + 1)
        elif text.startswith("}", pos):
            return members, items, None
        else:
            what = "the object is not closed" if pos >= len(text) else \
                f"expected ',' or '}}' after member {key!r} at {_where(text, pos)}"
            return members, items, (what, pos)
