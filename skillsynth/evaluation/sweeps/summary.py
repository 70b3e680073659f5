"""A sweep's ``summary.json`` as one typed value: every finished point's entry, the run record.

:func:`~.run.aggregate` builds it from each point's :class:`~..point.summary.PointSummary`
(each read once); the reports and the gate read it with :meth:`SweepSummary.load`. The
file's keys are those every sweep has written, so run folders already on disk still load;
an entry or a summary written by hand (a test's table, an older run) may leave keys out,
and they take their defaults.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..point.metrics import KPI
from ..point.summary import CorpusInfo, ModelCalls, PointSummary, Versions
from .spec import Point, SweepSpec

__all__ = ["PointEntry", "PointLike", "PointT", "SweepSummary", "as_entry"]


@dataclass(frozen=True)
class PointEntry:
    """One finished point as the sweep summary lists it.

    Attributes:
        id, strategy: the point.
        params: its thresholds (the grid's ``similarity_tau``, ``min_occurrences``, ...).
        protocol: its protocol settings (``protocol``, ``recall_key``, ``rate``, ...; empty
            in runs written before them).
        kpis: name -> KPI.
        floors, split, model_calls, wall_s, corpus, versions: from the point's summary.
        llm_calls, cache_hits: its model traffic, synthesis and agent together.
        pass_status: its synthesis pass's status (None: a design without synthesis).
    """

    id: str
    strategy: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    protocol: Mapping[str, Any] = field(default_factory=dict)
    kpis: Mapping[str, KPI] = field(default_factory=dict)
    floors: Mapping[str, bool | None] = field(default_factory=dict)
    split: Mapping[str, Any] = field(default_factory=dict)
    llm_calls: int = 0
    cache_hits: int = 0
    model_calls: ModelCalls = field(default_factory=ModelCalls)
    wall_s: float | None = None
    pass_status: str | None = None
    corpus: CorpusInfo = field(default_factory=CorpusInfo)
    versions: Versions = field(default_factory=Versions)

    @classmethod
    def of(cls, point: Point, spec: SweepSpec, summary: PointSummary) -> PointEntry:
        """The entry of a finished ``point`` of ``spec``."""
        mc = summary.model_calls
        return cls(id=point.id, strategy=point.strategy,
                   params=point.thresholds().to_settings_block(), protocol=point.settings(spec),
                   kpis=summary.kpis, floors=summary.floors, split=summary.split,
                   llm_calls=mc.llm_calls, cache_hits=mc.cache_hits, model_calls=mc,
                   wall_s=summary.wall_s, pass_status=summary.pass_status, corpus=summary.corpus,
                   versions=summary.versions)

    def kpi(self, name: str) -> KPI | None:
        """The KPI ``name``, None where the point has none."""
        return self.kpis.get(name)

    def to_json(self) -> dict[str, Any]:
        """The entry's dict in the sweep's ``summary.json``."""
        return {"id": self.id, "strategy": self.strategy, "params": dict(self.params),
                "protocol": dict(self.protocol),
                "kpis": {k: v.as_dict() for k, v in self.kpis.items()},
                "floors": dict(self.floors), "split": dict(self.split),
                "llm_calls": self.llm_calls, "cache_hits": self.cache_hits,
                "model_calls": self.model_calls.to_json(), "wall_s": self.wall_s,
                "pass_status": self.pass_status, "corpus": self.corpus.to_json(),
                "versions": self.versions.to_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PointEntry:
        """Inverse of :meth:`to_json`; a key the dict lacks takes its default."""
        return cls(id=d["id"], strategy=d.get("strategy"), params=d.get("params") or {},
                   protocol=d.get("protocol") or {},
                   kpis={k: KPI.from_dict(v, k) for k, v in (d.get("kpis") or {}).items()},
                   floors=d.get("floors") or {}, split=d.get("split") or {},
                   llm_calls=d.get("llm_calls") or 0, cache_hits=d.get("cache_hits") or 0,
                   model_calls=ModelCalls.from_json(d.get("model_calls")), wall_s=d.get("wall_s"),
                   pass_status=d.get("pass_status"), corpus=CorpusInfo.from_json(d.get("corpus")),
                   versions=Versions.from_json(d.get("versions")))


#: A sweep summary's point, typed or as its JSON dict (what the report functions accept).
PointLike = PointEntry | Mapping[str, Any]
#: A point of either kind: the report functions that choose points return the kind given.
PointT = TypeVar("PointT", bound=PointLike)


def as_entry(point: PointLike) -> PointEntry:
    """``point`` as a :class:`PointEntry` (a dict is read with :meth:`PointEntry.from_json`)."""
    return point if isinstance(point, PointEntry) else PointEntry.from_json(point)


@dataclass(frozen=True)
class SweepSummary:
    """A sweep run (its ``summary.json``).

    Attributes:
        name: the sweep; spec: its spec, JSON-ready.
        points: the finished points' entries, in the spec's order.
        n_points, finished: the spec's points, and how many have finished.
        record: the sweep's run record (:class:`~..point.record.RunRecord`, JSON-ready).
        failed: point id -> error text, of the last invocation's failed points.
        this_run: the last invocation's points and model traffic (None before it is done).
    """

    name: str
    spec: Mapping[str, Any] = field(default_factory=dict)
    points: tuple[PointEntry, ...] = ()
    n_points: int = 0
    finished: int = 0
    record: Mapping[str, Any] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    this_run: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The sweep's ``summary.json`` dict."""
        return {"name": self.name, "spec": dict(self.spec),
                "points": [p.to_json() for p in self.points], "n_points": self.n_points,
                "finished": self.finished, "record": dict(self.record),
                "failed": dict(self.failed), "this_run": self.this_run}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SweepSummary:
        """Inverse of :meth:`to_json`; counts a summary lacks are its points'."""
        points = tuple(as_entry(p) for p in d.get("points") or ())
        return cls(name=str(d.get("name")), spec=d.get("spec") or {}, points=points,
                   n_points=d.get("n_points", len(points)), finished=d.get("finished", len(points)),
                   record=d.get("record") or {}, failed=d.get("failed") or {},
                   this_run=d.get("this_run"))

    @classmethod
    def load(cls, run_dir: str | Path) -> SweepSummary:
        """Read ``<run_dir>/summary.json``."""
        return cls.from_json(json.loads((Path(run_dir) / "summary.json")
                                        .read_text(encoding="utf-8")))

    def write(self, run_dir: str | Path) -> None:
        """Write ``<run_dir>/summary.json`` (whole or not at all: a report may be reading it
        while a sweep rewrites it)."""
        out = Path(run_dir) / "summary.json"
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=str), encoding="utf-8")
        os.replace(tmp, out)

    def entries(self, points: Sequence[str]) -> list[PointEntry]:
        """The entries of the points ``points`` names (those that finished)."""
        ids = set(points)
        return [p for p in self.points if p.id in ids]
