"""Measured figures as records: one JSON file per measurement, rendered into one docs page.

A figure copied into prose goes stale the day it is measured again, and the copy forgets how it
was measured. A :class:`Measurement` keeps the figures with the command that reproduces them,
the date, the skillsynth version and the machine; ``skillsynth bench ... --record DIR`` writes
one with :func:`record`, and the docs site renders every record in the folder with
:func:`render`. A new measurement is then a new (or replaced) file, not an edit of the docs.

Each figure is a median or a value *with its n* (the runs, calls or items it summarises); a
figure without n is refused, since a median of one run and of a thousand read alike otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform as _platform
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import FigureError

__all__ = ["Measurement", "load", "measure", "record", "render"]

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
_CENTRES = ("median", "value")


def _check_figure(name: str, fig: Any) -> dict[str, Any]:
    """One figure as a plain dict, or a :class:`FigureError` that names it."""
    if not isinstance(fig, Mapping):
        raise FigureError(f"figure {name!r} is {type(fig).__name__}, not a mapping with a "
                          "median or value and its n")
    centres = [k for k in _CENTRES if k in fig]
    if len(centres) != 1:
        raise FigureError(f"figure {name!r} needs exactly one of 'median' or 'value' "
                          f"(has {sorted(fig)})")
    n = fig.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise FigureError(f"figure {name!r} has no n (how many runs, calls or items it "
                          f"summarises); got {n!r}")
    centre = fig[centres[0]]
    if centre is not None and (isinstance(centre, bool)
                               or not isinstance(centre, int | float | str)):
        raise FigureError(f"figure {name!r}: its {centres[0]} must be a number, a text or "
                          f"null, not {type(centre).__name__}")
    try:
        json.dumps(dict(fig), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise FigureError(f"figure {name!r} is not JSON-ready: {exc}") from exc
    return dict(fig)


@dataclass(frozen=True)
class Measurement:
    """One measurement: its figures and how, when and where they were measured.

    Attributes:
        name: the record's file stem (lower case, digits, ``.``, ``_``, ``-``); recording a
            measurement of the same name replaces the older one.
        title: the heading the docs page gives it.
        command: the command line that reproduces it.
        figures: figure name -> ``{"median" | "value": x, "n": count, ...}``; other keys
            (``unit``, ``p99``, ...) are shown beside it.
        date: ISO date of the measurement (UTC).
        version: the skillsynth version that measured it.
        cores: the machine's CPU cores (None when not recorded).
        platform: the machine's platform string (empty when not recorded).
        note: conditions a reader needs (shared machine, settings, what is left out).
    """

    name: str
    title: str
    command: str
    figures: Mapping[str, Mapping[str, Any]] = field(hash=False)
    date: str
    version: str
    cores: int | None = None
    platform: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise FigureError(f"measurement name {self.name!r} must be lower case letters, "
                              "digits, '.', '_' or '-' (it names the record's file)")
        if not self.figures:
            raise FigureError(f"measurement {self.name!r} has no figures")
        try:
            dt.date.fromisoformat(self.date)
        except (TypeError, ValueError) as exc:
            raise FigureError(f"measurement {self.name!r}: date {self.date!r} is not an ISO "
                              "date (YYYY-MM-DD)") from exc
        object.__setattr__(self, "figures",
                           {str(k): _check_figure(str(k), v) for k, v in self.figures.items()})

    def to_json(self) -> dict[str, Any]:
        """The record as written to ``<name>.json``."""
        return {"name": self.name, "title": self.title, "command": self.command,
                "date": self.date, "version": self.version,
                "machine": {"cores": self.cores, "platform": self.platform},
                "note": self.note, "figures": {k: dict(v) for k, v in self.figures.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        """A record read back (a :class:`FigureError` names what is missing)."""
        try:
            machine = data.get("machine") or {}
            return cls(name=data["name"], title=data["title"], command=data["command"],
                       figures=data["figures"], date=data["date"], version=data["version"],
                       cores=machine.get("cores"), platform=machine.get("platform", ""),
                       note=data.get("note", ""))
        except KeyError as exc:
            raise FigureError(f"measurement record has no {exc.args[0]!r}") from exc


def _machine() -> str:
    """The platform in words a reader compares (no host name, no kernel build)."""
    return (f"{_platform.system()} {_platform.machine()}, "
            f"Python {_platform.python_version()}")


def measure(name: str, title: str, command: str, figures: Mapping[str, Mapping[str, Any]],
            *, note: str = "") -> Measurement:
    """A measurement made now, on this machine, by this version."""
    from . import __version__

    return Measurement(name=name, title=title, command=command, figures=figures,
                       date=dt.datetime.now(dt.UTC).date().isoformat(), version=__version__,
                       cores=os.cpu_count(), platform=_machine(), note=note)


def record(measurement: Measurement, folder: str | Path) -> Path:
    """Write ``<folder>/<name>.json``, replacing an older record of that name atomically.

    The file is written beside its final name and renamed over it, so a reader (the docs
    build) sees the old record or the new one, never half of one.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{measurement.name}.json"
    text = json.dumps(measurement.to_json(), indent=1, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{measurement.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(folder: str | Path) -> list[Measurement]:
    """Every record in ``folder``, by name (none when the folder does not exist)."""
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out.append(Measurement.from_json(data))
        except (ValueError, FigureError) as exc:
            raise FigureError(f"{path.name}: {exc}") from exc
    return out


def _cell(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.1f}"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return str(x).replace("|", "\\|")


def _section(m: Measurement) -> list[str]:
    machine = ", ".join(p for p in (f"{m.cores} cores" if m.cores else "",
                                    m.platform) if p) or "not recorded"
    lines = [f"## {m.title}", "", f"`{m.command}`", "",
             (f"Measured {m.date} by skillsynth {m.version}; machine: {machine}. "
              f"Record `{m.name}.json`."), ""]
    if m.note:
        lines += [m.note, ""]
    lines += ["| figure | median or value | n | unit | also |", "| --- | --- | --- | --- | --- |"]
    for name, fig in m.figures.items():
        centre = "median" if "median" in fig else "value"
        value, unit = _cell(fig[centre]), _cell(fig.get("unit", ""))
        if centre == "median":
            value += " (median)"
        elif unit == "of n" and fig[centre] is not None:  # a count: "27 of 28"
            value, unit = f"{value} of {_cell(fig['n'])}", ""
        also = "; ".join(f"{k} {_cell(v)}" for k, v in fig.items()
                         if k not in (*_CENTRES, "n", "unit"))
        lines.append(f"| {_cell(name)} | {value} | {_cell(fig['n'])} | {unit} | {also} |")
    return [*lines, ""]


def render(folder: str | Path, *, intro: str = "") -> str:
    """The "Measured figures" page: one section per record in ``folder``, by name."""
    lines = ["# Measured figures", ""]
    if intro:
        lines += [intro, ""]
    records = load(folder)
    if not records:
        lines += ["No measurement is recorded yet.", ""]
    for m in records:
        lines += _section(m)
    return "\n".join(lines)
