"""What one point's protocol works with, built once by :func:`~.run.run_point`.

The strict (:mod:`.strict`) and rolling (:mod:`.rolling`) protocols and the point's KPIs
(:mod:`.kpis`) each take one :class:`PointContext` rather than a dozen positional values,
so a new input of a point is one field here, not a new parameter threaded through every
call. Each protocol hands back one :class:`ProtocolRun` (a rolling one with a
:class:`PassRecord` per simulated process start).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...config import Thresholds
from ...corpora.labels import SessionLabel
from ...errors import MalformedSkill, SkillValidationError
from ...models.embed import Embeds
from ...pipeline.export import export_skill
from ...pipeline.skill import PROFILES
from ...pipeline.synthesize import PassReport
from ...pipeline.verify import Verifier
from ...protocols import ChatModel
from ...store import MemoryStore
from ..strategies import Strategy
from .controls import GoldSource
from .metrics import ProbeResult, ProcedureCheck
from .options import PointOptions
from .scoring import FloorWitness, QueryMemo
from .split import Split, procedure_families

__all__ = ["RUNS_EXPECTED", "EvalConfig", "PassRecord", "PointContext", "ProtocolRun",
           "check_procedures", "families_without_probe"]

#: Beside a live point's ``runs.jsonl``: the number of lines it will hold (a sweep's progress).
RUNS_EXPECTED = "runs.expected"


@dataclass(frozen=True)
class EvalConfig(PointOptions):
    """Everything that decides one point's result (recorded in its summary): the corpus,
    its labels, the thresholds, and the point's options (:class:`~.options.PointOptions`,
    keyword-only: ``EvalConfig(corpus, strategy=..., k=...)``).

    Attributes:
        corpus: a corpus ``memory.db`` with its labels file beside it.
        thresholds: the run's thresholds (tau, min_occurrences, max_recall_body_chars, ...).
        labels: the labels file (default ``<corpus>.labels.sqlite``).
    """

    corpus: str
    thresholds: Thresholds = field(default_factory=Thresholds, kw_only=True)
    labels: str | None = field(default=None, kw_only=True)

    @property
    def options(self) -> PointOptions:
        """The point's options alone."""
        return self.only_options()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


@dataclass(frozen=True)
class PointContext:
    """One point's inputs, read once before any work.

    Attributes:
        cfg: the point's configuration (options, corpus, thresholds).
        strategy: the design under test (``cfg.strategy``).
        llm, embedder: the models; ``queries`` memoises the embedder's query vectors
            (recall and the score diagnostic share each query).
        user: the simulated user of live probes (None: solo).
        split: history and probes; ``labels``: every labelled session (scoring only);
            ``labels_file``: where they were read.
        gold: the point's gold source (scoring's, and the control arms' declared exception).
        verifier: each synthesis pass's verifier (None: ``verify: none``).
        out: the point's folder; ``progress``: show progress bars.
        timings: the summary's stage timings, filled as the stages run.
    """

    cfg: EvalConfig
    strategy: Strategy
    llm: ChatModel
    embedder: Embeds
    queries: QueryMemo
    user: ChatModel | None
    split: Split
    labels: Mapping[str, SessionLabel]
    labels_file: Path
    gold: GoldSource
    verifier: Verifier | None
    out: Path
    progress: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def th(self) -> Thresholds:
        """The point's thresholds."""
        return self.cfg.thresholds

    @property
    def history_db(self) -> Path:
        """The store the pipeline sees (history sessions only)."""
        return self.out / "history.db"

    @property
    def runs_file(self) -> Path:
        """Every live run's full record, one JSON object a line."""
        return self.out / "runs.jsonl"

    @property
    def runs_expected_file(self) -> Path:
        """How many lines ``runs.jsonl`` will hold when the live arms are done (written
        before the first run, so that a sweep can show a point's progress)."""
        return self.out / RUNS_EXPECTED

    @property
    def outcomes(self) -> dict[str, bool]:
        """Each labelled session's outcome, where its label has one (``rate: session``)."""
        return {s: x.success for s, x in self.labels.items() if x.success is not None}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Add the block's wall seconds to ``timings[name]`` (the summary's stage timings)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(self.timings.get(name, 0.0) + time.perf_counter() - t,
                                       4)


@dataclass(frozen=True)
class PassRecord:
    """One simulated process start's pass (a rolling point's).

    Attributes:
        index: 0-based.
        at_session: sessions already in the store when it ran.
        status: the pass's status (``ran``, ``llm-unavailable``, ...).
        read: sessions the pass read (past the watermark, not marked consumed).
        qualified, distilled, added, updated: the pass's counts.
        left_for_later: qualified clusters the pass did not hand to the distiller (over
            ``max_clusters_per_pass``, or gaia-shipped's two distillations a pass); a later
            pass may reach them.
        llm_calls, cache_hits: distillation answers, uncached and cached.
        active_procedures: active procedures after the pass.
        wall_s: the pass's wall time (model answers included, cached or not).
        consumed: sessions marked consumed after the pass (all passes so far).
    """

    index: int
    at_session: int
    status: str
    read: int
    qualified: int
    distilled: int
    added: int
    updated: int
    left_for_later: int
    llm_calls: int
    cache_hits: int
    active_procedures: int
    wall_s: float = 0.0
    consumed: int = 0


@dataclass(frozen=True)
class ProtocolRun:
    """What one protocol produced at a point (strict or rolling).

    Attributes:
        rows: the probe rows (both arms, replay and live).
        reports: the synthesis passes' reports (none for a design without synthesis).
        witness: what recall showed the floors.
        checks: each procedure exported, re-read and its provenance checked.
        floors: #887's off-states (filled in further by :func:`~.run.run_point`).
        split_info: how the probes were drawn (the summary's ``split``).
        live_info: the live probes' world and counts (None: replay only).
        passes: a rolling point's pass at each simulated process start (None: a strict
            point's one start, read from its report after the pass).
        first_counts: procedure id -> (success_count, attempt_count) right after the pass
            that wrote it.
    """

    rows: list[ProbeResult]
    reports: list[PassReport]
    witness: FloorWitness
    checks: list[ProcedureCheck]
    floors: dict[str, bool | None]
    split_info: dict[str, Any]
    live_info: dict[str, Any] | None = None
    passes: tuple[PassRecord, ...] | None = None
    first_counts: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def llm_calls(self) -> int:
        """The passes' uncached distillation answers."""
        return sum(r.llm_calls for r in self.reports)

    @property
    def cache_hits(self) -> int:
        """The passes' cached distillation answers."""
        return sum(r.cache_hits for r in self.reports)


def check_procedures(store: MemoryStore, split: Split, out_dir: Path,
                     allowed: Collection[str]) -> list[ProcedureCheck]:
    """Export and re-read every procedure into the point's own folder (a procedure distilled
    from the runs' values too: the point asked for it, and the report says so); its
    provenance must be ``allowed`` sessions."""
    checks = []
    for proc in store.procedures():
        valid: dict[str, bool] = {}
        errors: dict[str, str] = {}
        for profile in PROFILES:
            try:
                export_skill(store, proc.id, out_dir / "skills" / profile / proc.id, profile,
                             allow_user_data=True)
                valid[profile], errors[profile] = True, ""
            except (SkillValidationError, MalformedSkill) as exc:
                valid[profile], errors[profile] = False, str(exc)
        sessions = list(proc.provenance.get("from_sessions", [])) if proc.provenance else []
        known = store.sessions_with_calls(sessions)
        prov_ok = bool(sessions) and all(s in known and s in allowed for s in sessions)
        checks.append(ProcedureCheck(id=proc.id, name=proc.name,
                                     families=procedure_families(proc, split), valid=valid,
                                     errors=errors, provenance_ok=prov_ok))
    return checks


def families_without_probe(split: Split) -> int:
    """Families with k attempts or fewer: no probe under either protocol (counted, not hidden)."""
    return len(set(split.families.values()) - {split.family(p.session_id) for p in split.probes})
