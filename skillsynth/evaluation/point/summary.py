"""A point's ``summary.json`` as one typed value: read once, passed along, written unchanged.

The file's keys are the contract with every run folder already on disk. Every summary
carries its format's version (``schema_version``: :data:`SCHEMA_VERSION`; a file without it
is version 1, written before versions existed), and :func:`upgrade` is the one place that
knows the older formats: it brings a file of any older version to today's shape before
:meth:`PointSummary.from_json` reads it, so no reader branches on "written before X
existed". :meth:`PointSummary.to_json` writes the keys, in the order,
:func:`~.run.run_point` always wrote (the version first, where the file had one), and keeps
the keys it does not know (``extra``): a file read and written again is the same file. Records with fixed keys are attributes (:class:`CorpusInfo`,
:class:`Versions`, :class:`ModelCalls`, the procedure checks); open-ended ones stay maps:
the KPIs (name -> :class:`~.metrics.KPI`), the floors, the split and the pass report (their
keys depend on the protocol), the live run and the details behind GAIA's questions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ...errors import EvaluationError
from ...pipeline.synthesize import PassReport
from .metrics import KPI, ProcedureCheck

__all__ = ["SCHEMA_VERSION", "SUMMARY", "CorpusInfo", "ModelCalls", "PointSummary",
           "Versions", "combined_report", "upgrade"]

#: The file whose presence marks a finished point.
SUMMARY = "summary.json"
#: The version of ``summary.json`` this skillsynth writes (2: the first with the key).
SCHEMA_VERSION = 2
#: Version 1 (no ``schema_version``): keys were added one at a time, so a file may lack any
#: of them; a missing one reads as its empty value (``config`` an empty map, ``live`` and
#: ``controls`` None, ...).
_V1_EMPTY: dict[str, Any] = {
    "config": {}, "corpus": {}, "versions": {}, "split": {}, "live": None, "pass": None,
    "model_calls": {}, "procedures": [], "floors": {}, "controls": None, "kpis": {},
    "gaia_questions": {}, "lumping": {}, "started_at": None, "wall_s": None, "timings": {},
    "record": {}}


def _from_v1(d: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 to 2: every key present (a missing or null map is empty)."""
    out = dict(d)
    for key, empty in _V1_EMPTY.items():
        if out.get(key) is None or (isinstance(empty, dict | list) and not out[key]):
            out[key] = empty
    return out


#: Each older version's step to the next.
_UPGRADES = {1: _from_v1}


def upgrade(d: Mapping[str, Any]) -> dict[str, Any]:
    """``d`` (a ``summary.json`` of any version) in this version's shape; its
    ``schema_version`` stays as the file had it (absent for version 1).

    Raises:
        EvaluationError: a version this skillsynth does not know (a newer one's file), or
            a current one that lacks a key.
    """
    version = d.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) \
            or not 1 <= version <= SCHEMA_VERSION:
        raise EvaluationError(f"a point summary of schema_version {version!r}: this "
                              f"skillsynth reads 1 to {SCHEMA_VERSION}; use the skillsynth "
                              "that wrote it, or a newer one")
    out = dict(d)
    for v in range(version, SCHEMA_VERSION):
        out = _UPGRADES[v](out)
    missing = [k for k in _V1_EMPTY if k not in out]
    if missing:
        raise EvaluationError(f"a point summary of schema_version {version} lacks "
                              f"{', '.join(missing)}; it was not written by run_point")
    return out


#: How a rolling point's passes combine besides the counters (each int or float field of
#: :class:`~skillsynth.pipeline.synthesize.PassReport`, summed): the rule is every pass's,
#: what is left over is the last pass's, skip reasons and failed shares are every pass's.
#: Its other fields (ids, messages, the watermark) describe one pass: they stay in the
#: pass's own record.
_FIRST, _LAST, _EVERY = ("verify",), ("left_for_later",), ("skipped", "failed_shares")


def combined_report(reports: Sequence[PassReport]) -> dict[str, Any] | None:
    """The summary's ``pass``: one pass's report, or the combination over a rolling point's
    passes (status: the worst; ``passes``: how many). A counter added to ``PassReport``
    reaches it with no change here."""
    if not reports:
        return None
    if len(reports) == 1:
        return reports[0].as_dict()
    out: dict[str, Any] = {"status": next((r.status for r in reports if r.status != "ran"),
                                          "ran"), "passes": len(reports)}
    for f in fields(reports[0]):
        if f.type in ("int", "float", int, float) and f.name not in _FIRST + _LAST:
            out[f.name] = sum(getattr(r, f.name) for r in reports)
    out |= {name: getattr(reports[0], name) for name in _FIRST}
    out |= {name: getattr(reports[-1], name) for name in _LAST}
    out |= {name: [list(x) if isinstance(x, tuple) else x for r in reports
                   for x in getattr(r, name)] for name in _EVERY}
    return out


def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``d`` that are fields of the dataclass ``cls``."""
    return {f.name: d[f.name] for f in fields(cls) if f.name in d}


@dataclass(frozen=True)
class CorpusInfo:
    """The corpus a point read: its path and hashes (content, file bytes, labels file)."""

    path: str | None = None
    sha256: str | None = None
    file_sha256: str | None = None
    labels_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> CorpusInfo:
        """Inverse of :meth:`to_json` (a key the dict lacks: None)."""
        return cls(**_known(cls, d or {}))


@dataclass(frozen=True)
class Versions:
    """What produced a point's figures: skillsynth, the distill prompt, the replay rule, the
    chat model and the embedder."""

    skillsynth: str | None = None
    distill_prompt: str | None = None
    replay_rule: str | None = None
    chat_model: str | None = None
    embedder: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Versions:
        """Inverse of :meth:`to_json` (a key the dict lacks: None)."""
        return cls(**_known(cls, d or {}))


@dataclass(frozen=True)
class ModelCalls:
    """A point's model traffic: the synthesis passes' and the live agent's answers, uncached
    and from the call cache."""

    synthesis: int = 0
    synthesis_cache_hits: int = 0
    agent: int = 0
    agent_cache_hits: int = 0

    @property
    def llm_calls(self) -> int:
        """Uncached answers, synthesis and agent together."""
        return self.synthesis + self.agent

    @property
    def cache_hits(self) -> int:
        """Cached answers, synthesis and agent together."""
        return self.synthesis_cache_hits + self.agent_cache_hits

    def to_json(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> ModelCalls:
        """Inverse of :meth:`to_json` (a key the dict lacks: 0)."""
        return cls(**_known(cls, d or {}))


#: JSON keys that are not the attribute's name (``pass`` is a Python keyword).
_RENAMED = {"pass_report": "pass"}


@dataclass(frozen=True)
class PointSummary:
    """One finished point (``summary.json``).

    Attributes:
        config: the point's :class:`~.run.EvalConfig`, JSON-ready.
        corpus, versions: what it read and what produced it.
        split: how it drew its probes (the keys depend on the protocol).
        live: the live probes' world and counts (None: replay only).
        pass_report: the synthesis pass's report, or a rolling point's sums over its passes
            (``pass`` in the file; None: a design without synthesis).
        model_calls: the point's model traffic.
        procedures: what was checked about each synthesized procedure.
        floors: #887's off-states, True where each behaved (None: not exercised).
        controls: the control arm's gold source and checks (None: no control).
        kpis: name -> KPI.
        gaia_questions, lumping: the details behind the KPIs of GAIA's open questions and
            the lumping guard.
        started_at, wall_s, timings: when it started, its wall seconds, and per stage.
        record: the run record (:class:`~.record.RunRecord`, JSON-ready).
        extra: keys this version does not know (written back as they were read).
        schema_version: the file's format (:data:`SCHEMA_VERSION` for one written now;
            None: read from a version 1 file, which is written back without the key).
    """

    config: Mapping[str, Any]
    corpus: CorpusInfo
    versions: Versions
    split: Mapping[str, Any]
    live: Mapping[str, Any] | None
    pass_report: Mapping[str, Any] | None
    model_calls: ModelCalls
    procedures: tuple[ProcedureCheck, ...]
    floors: Mapping[str, bool | None]
    controls: Mapping[str, Any] | None
    kpis: Mapping[str, KPI]
    gaia_questions: Mapping[str, Any] = field(default_factory=dict)
    lumping: Mapping[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    wall_s: float | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    record: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int | None = SCHEMA_VERSION

    @property
    def pass_status(self) -> str | None:
        """The pass's status (``ran``, ``llm-unavailable``, ...); None: no synthesis."""
        return None if self.pass_report is None else self.pass_report.get("status")

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` dict: its version, today's keys in today's order, then
        ``extra``."""
        out: dict[str, Any] = {}
        if self.schema_version is not None:
            out["schema_version"] = self.schema_version
        for f in fields(self):
            if f.name in ("extra", "schema_version"):
                continue
            v = getattr(self, f.name)
            if f.name == "kpis":
                v = {k: x.as_dict() for k, x in v.items()}
            elif f.name == "procedures":
                v = [c.as_dict() for c in v]
            elif isinstance(v, CorpusInfo | Versions | ModelCalls):
                v = v.to_json()
            out[_RENAMED.get(f.name, f.name)] = v
        return out | dict(self.extra)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PointSummary:
        """Inverse of :meth:`to_json`, for a file of any version (:func:`upgrade`).

        Raises:
            EvaluationError: a version this skillsynth does not know.
        """
        d = upgrade(d)
        keys = {_RENAMED.get(f.name, f.name) for f in fields(cls)}
        return cls(
            config=d["config"],
            corpus=CorpusInfo.from_json(d["corpus"]),
            versions=Versions.from_json(d["versions"]),
            split=d["split"],
            live=d["live"],
            pass_report=d["pass"],
            model_calls=ModelCalls.from_json(d["model_calls"]),
            procedures=tuple(ProcedureCheck.from_dict(c) for c in d["procedures"]),
            floors=d["floors"],
            controls=d["controls"],
            kpis={k: KPI.from_dict(v, k) for k, v in d["kpis"].items()},
            gaia_questions=d["gaia_questions"],
            lumping=d["lumping"],
            started_at=d["started_at"],
            wall_s=d["wall_s"],
            timings=d["timings"],
            record=d["record"],
            extra={k: v for k, v in d.items() if k not in keys},
            schema_version=d.get("schema_version"))

    def write(self, path: str | Path) -> None:
        """Write the file as :func:`~.run.run_point` always has (indented, UTF-8)."""
        Path(path).write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False,
                                         default=str), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> PointSummary:
        """Read a ``summary.json``, or the one in the point folder ``path``."""
        p = Path(path)
        p = p / SUMMARY if p.is_dir() else p
        return cls.from_json(json.loads(p.read_text(encoding="utf-8")))
