"""One evaluation point: split, synthesize on the history, recall for each probe, score.

The order is the protocol's guarantee: the history store is built from history sessions
only, the strategy's synthesis pass runs on it, and only then is each probe's goal (read
from the corpus, never written anywhere) recalled for. Labels are read for scoring only.

A point writes, in its own folder: ``history.db`` (the store the pipeline saw),
``skills/<profile>/`` (every synthesized procedure exported and re-read), ``results.jsonl``
(the per-probe table) and, last, ``summary.json`` (config, corpus hashes, versions, pass
report, checks, KPIs). ``summary.json`` is the point's done marker.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..cache import file_sha256
from ..config import Thresholds
from ..corpora.labels import LabelStore, SessionLabel, labels_path_for
from ..distill import PROMPT_VERSION, DistillMode
from ..embed import Embeds, Kind, check_store_embedder
from ..errors import MalformedSkill, SkillsynthError, SkillValidationError
from ..export import export_skill
from ..inject import inject
from ..llm import ChatClient, Endpoint
from ..protocols import ChatModel
from ..recall import ProcedureIndex, Recall, skill_from_procedure
from ..skill import PROFILES
from ..store import MemoryStore, ToolCall
from ..strategies import Recaller, Strategy, get_strategy
from ..synthesize import PassReport
from .agent import ReplayToolEnv, run_agent
from .metrics import KPI, N_BOOT, ProbeResult, ProcedureCheck, point_kpis
from .replay import RULE, estimate_steps
from .split import (
    FAMILY_RULES,
    FamilyRule,
    Split,
    build_history,
    load_split,
    procedure_families,
)

__all__ = ["SUMMARY", "EvalConfig", "PointResult", "check_floors", "run_point"]

#: The file whose presence marks a finished point.
SUMMARY = "summary.json"
_OWN = ("history.db", "history.db-wal", "history.db-shm", "results.jsonl", "skills",
        SUMMARY + ".tmp")


@dataclass(frozen=True)
class EvalConfig:
    """Everything that decides one point's result (recorded in its summary).

    Attributes:
        corpus: a corpus ``memory.db`` with its labels file beside it.
        strategy: a name from :data:`skillsynth.strategies.STRATEGIES`.
        thresholds: the run's thresholds (tau, min_occurrences, max_recall_body_chars, ...).
        k: attempts per task in the history; attempt k+1 is the probe.
        mode: distillation mode (``json`` suits small models; ``yaml`` is GAIA's).
        seed: the bootstrap seed.
        n_boot: bootstrap resamples per interval.
        labels: the labels file (default ``<corpus>.labels.sqlite``).
        family: how sessions form families (``task`` or ``tools``; see :mod:`.split`).
        live: also run the live agent (both arms per probe) on the chat model.
        step_limit: the live agent's most tool calls per arm.
    """

    corpus: str
    strategy: str = "skillsynth"
    thresholds: Thresholds = field(default_factory=Thresholds)
    k: int = 3
    mode: DistillMode = "json"
    seed: int = 0
    n_boot: int = N_BOOT
    labels: str | None = None
    family: FamilyRule = "task"
    live: bool = False
    step_limit: int = 12

    def __post_init__(self) -> None:
        get_strategy(self.strategy)  # fail on a typo before any work
        if self.k < 1:
            raise SkillsynthError(f"k must be >= 1, got {self.k}")
        if self.family not in FAMILY_RULES:
            raise SkillsynthError(f"family must be one of {', '.join(FAMILY_RULES)}, got "
                                  f"{self.family!r}")
        if self.step_limit < 1:
            raise SkillsynthError(f"step_limit must be >= 1, got {self.step_limit}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


@dataclass(frozen=True)
class PointResult:
    """What :func:`run_point` produced (also on disk in ``out_dir``)."""

    out_dir: Path
    rows: tuple[ProbeResult, ...]
    kpis: dict[str, KPI]
    summary: dict[str, Any]


def _procedure_dump(store: MemoryStore) -> str:
    rows = store.execute("SELECT * FROM procedures ORDER BY id")
    calls = store.execute("SELECT COUNT(*) FROM tool_history")
    return repr((rows, calls))


def _closed_port_client() -> ChatClient:
    with socket.socket() as s:  # bind, learn the port, close: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return ChatClient(Endpoint("local", f"http://127.0.0.1:{port}/v1", "none",
                               timeout_s=2.0, connect_timeout_s=1.0, max_retries=0))


def check_floors(store: MemoryStore, strategy: Strategy, llm: ChatModel, embedder: Embeds,
                 config: Thresholds, mode: DistillMode, probe_goal: str | None,
                 recaller: Callable[[], Recaller]) -> dict[str, bool | None]:
    """Provoke #887's off-states on a finished history store; True where each behaved.

    The store ends as it began (a disabled procedure is re-enabled). None: the floor could
    not be provoked here (no synthesis in this design, nothing to distil, nothing recalled).
    """
    with _quiet("skillsynth.synthesize"):  # the off-states below are provoked on purpose
        return _provoke(store, strategy, llm, embedder, config, mode, probe_goal, recaller)


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _provoke(store: MemoryStore, strategy: Strategy, llm: ChatModel, embedder: Embeds,
             config: Thresholds, mode: DistillMode, probe_goal: str | None,
             recaller: Callable[[], Recaller]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    if strategy.method is None:
        return {"memory-disabled": None, "synthesis-disabled": None,
                "llm-unavailable": None, "disabled-not-recalled": None}
    before = _procedure_dump(store)
    before_recall = recaller()(probe_goal) if probe_goal else []
    r = strategy.synthesize(store, llm, embedder, config, mode=mode,
                            env={"GAIA_MEMORY_DISABLED": "1"})
    out["memory-disabled"] = (r is not None and r.status == "memory-disabled"
                              and _procedure_dump(store) == before)
    r = strategy.synthesize(store, llm, embedder, config.merge(enabled=False), mode=mode)
    still = recaller()(probe_goal) if probe_goal else []
    out["synthesis-disabled"] = (r is not None and r.status == "synthesis-disabled"
                                 and _procedure_dump(store) == before
                                 and [h.procedure.id for h in still]
                                 == [h.procedure.id for h in before_recall])
    with _closed_port_client() as down:
        r = strategy.synthesize(store, down, embedder, config, mode=mode, env={})
    if r is None or r.qualified == 0:
        out["llm-unavailable"] = None
    else:
        out["llm-unavailable"] = r.status == "llm-unavailable" and _procedure_dump(store) == before
    if before_recall and probe_goal:
        top = before_recall[0].procedure.id
        store.set_procedure_enabled(top, False)
        try:
            out["disabled-not-recalled"] = top not in {h.procedure.id
                                                       for h in recaller()(probe_goal)}
        finally:
            store.set_procedure_enabled(top, True)
    else:
        out["disabled-not-recalled"] = None
    return out


def _check_procedures(store: MemoryStore, split: Split, out_dir: Path
                      ) -> list[ProcedureCheck]:
    probes = {p.session_id for p in split.probes}
    checks = []
    for proc in store.procedures():
        valid: dict[str, bool] = {}
        errors: dict[str, str] = {}
        for profile in PROFILES:
            try:
                export_skill(store, proc.id, out_dir / "skills" / profile / proc.id, profile)
                valid[profile], errors[profile] = True, ""
            except (SkillValidationError, MalformedSkill) as exc:
                valid[profile], errors[profile] = False, str(exc)
        sessions = list(proc.provenance.get("from_sessions", [])) if proc.provenance else []
        known = store.sessions_with_calls(sessions)
        prov_ok = bool(sessions) and all(s in known and s in split.history
                                         and s not in probes for s in sessions)
        checks.append(ProcedureCheck(proc.id, proc.name, procedure_families(proc, split), valid,
                                     errors, prov_ok))
    return checks


def _clean(out_dir: Path) -> None:
    for name in _OWN:
        p = out_dir / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def _hits_of(embedder: Embeds) -> int:
    cache = getattr(embedder, "cache", None)
    return cache.stats().hits if cache is not None else 0


def run_point(cfg: EvalConfig, llm: ChatModel, embedder: Embeds, out_dir: str | Path, *,
              progress: bool = False) -> PointResult:
    """Run the protocol once and write the point's files (see the module docstring).

    A folder left by a killed run (no ``summary.json``) is cleaned and redone.

    Raises:
        SkillsynthError: ``out_dir`` already holds a finished point, or the corpus has no
            probes (no task with more than ``k`` attempts).
    """
    out = Path(out_dir)
    if (out / SUMMARY).exists():
        raise SkillsynthError(f"{out / SUMMARY} exists: this point is done; use a new folder")
    out.mkdir(parents=True, exist_ok=True)
    _clean(out)
    t0 = time.perf_counter()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    strategy = get_strategy(cfg.strategy)
    th = cfg.thresholds
    labels_file = Path(cfg.labels) if cfg.labels else labels_path_for(cfg.corpus)
    split = load_split(cfg.corpus, cfg.k, labels_path=labels_file, family=cfg.family)
    if not split.probes:
        raise SkillsynthError(f"{cfg.corpus}: no task has more than k={cfg.k} attempts, so "
                              "there is no probe to evaluate")
    with LabelStore(labels_file) as ls:
        labels = {x.session_id: x for x in ls.all()}
    history_db = out / "history.db"
    n_history = build_history(cfg.corpus, split, history_db)
    with MemoryStore.open(cfg.corpus, read_only=True) as corpus:
        probe_ids = [p.session_id for p in split.probes]
        goals = {s: t.content for s, t in corpus.first_user_turns(probe_ids).items()}
        probe_calls = {s: corpus.tool_calls(s) for s in probe_ids}
        world = corpus.tool_calls() if cfg.live else []
    with MemoryStore.open(history_db) as store:
        if hasattr(embedder, "embedder_id"):
            check_store_embedder(store, embedder)  # type: ignore[arg-type]
        report: PassReport | None = strategy.synthesize(store, llm, embedder, th, mode=cfg.mode)
        checks = _check_procedures(store, split, out)
        fam_of = {c.id: c.families for c in checks}
        active_fams = {f for p in store.procedures(active_only=True) for f in fam_of.get(p.id, ())}
        queries = _QueryMemo(embedder)  # recall and the score diagnostic share each query
        recaller = strategy.recaller(store, queries, th)
        rows, floor_goal, recall_floor_ok = _replay_rows(
            cfg, strategy, split, goals, probe_calls, fam_of, active_fams, recaller,
            ProcedureIndex.from_store(store), queries, progress)
        if cfg.live:
            rows += _live_rows(cfg, llm, store, rows, world, probe_calls, labels, recaller, th)
        floors = check_floors(store, strategy, llm, embedder, th, cfg.mode, floor_goal,
                              lambda: strategy.recaller(store, queries, th))
    floors["recall-threshold-and-state"] = recall_floor_ok if any(
        r.recalled_ids for r in rows) else None
    floors["malformed-skipped"] = (report.status == "ran") if report is not None and any(
        "malformed" in why for _, why in report.skipped) else None
    llm_calls = report.llm_calls if report else 0
    hits_n = report.cache_hits if report else 0
    grounded = ([True] * report.distilled + [False] * report.ungrounded) if report else []
    kpis = point_kpis(rows, checks, floors, llm_calls=llm_calls, cache_hits=hits_n,
                      grounded=grounded,
                      duplicate_names=report.duplicate_names if report else 0,
                      seed=cfg.seed, n_boot=cfg.n_boot)
    with (out / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r.as_dict(), ensure_ascii=False) + "\n")
    summary = {
        "config": cfg.as_dict(),
        "corpus": {"path": str(cfg.corpus), "sha256": file_sha256(cfg.corpus),
                   "labels_sha256": file_sha256(labels_file)},
        "versions": {"skillsynth": __version__, "distill_prompt": PROMPT_VERSION,
                     "replay_rule": RULE,
                     "chat_model": getattr(getattr(llm, "endpoint", None), "model", None),
                     "embedder": getattr(embedder, "embedder_id", None)},
        "split": {"k": split.k, "history": len(split.history), "history_with_calls": n_history,
                  "probes": len(split.probes), "probes_without_goal":
                      sum(1 for p in split.probes if p.session_id not in goals),
                  "left_out": len(split.left_out)},
        "pass": report.as_dict() if report else None,
        "model_calls": {"synthesis": llm_calls, "synthesis_cache_hits": hits_n,
                        "agent": sum(r.llm_calls for r in rows),
                        "agent_cache_hits": sum(r.cache_hits for r in rows
                                                if r.steps_method == "live")},
        "procedures": [asdict(c) for c in checks],
        "floors": floors,
        "kpis": {k: v.as_dict() for k, v in kpis.items()},
        "started_at": started, "wall_s": round(time.perf_counter() - t0, 3),
    }
    tmp = out / (SUMMARY + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str),
                   encoding="utf-8")
    os.replace(tmp, out / SUMMARY)
    return PointResult(out, tuple(rows), kpis, summary)


def _replay_rows(cfg: EvalConfig, strategy: Strategy, split: Split, goals: Mapping[str, str],
                 probe_calls: Mapping[str, Sequence[ToolCall]],
                 fam_of: Mapping[str, tuple[str, ...]], active_fams: set[str],
                 recaller: Recaller, index: ProcedureIndex, embedder: Embeds, progress: bool
                 ) -> tuple[list[ProbeResult], str | None, bool]:
    """Both arms of every probe under the replay rule.

    Also returns a goal for the floors (one that recalled something, else any) and whether
    every recall respected tau and the procedures' state.
    """
    th = cfg.thresholds
    rows: list[ProbeResult] = []
    floor_goal: str | None = None
    floor_hit = False
    recall_ok = True
    for p in _progress(split.probes, progress, "probes"):
        goal = goals.get(p.session_id)
        if goal is None:  # a probe without a goal cannot be recalled for; counted in split
            continue
        calls = probe_calls[p.session_id]
        family = str(split.family(p.session_id))
        base = estimate_steps(calls, None)
        common = {"strategy": cfg.strategy, "probe_session": p.session_id, "family": family,
                  "goal": goal, "steps_recorded": base.baseline, "success": p.success,
                  "family_has_procedure": family in active_fams}
        rows.append(ProbeResult(arm="no-memory", recalled_ids=(), recalled_scores=(),
                                recalled_right=0, steps=base.baseline, steps_method="recorded",
                                **common))
        t1, h0 = time.perf_counter(), _hits_of(embedder)
        hits: list[Recall] = recaller(goal)
        right_score, wrong_score = _best_scores(index, embedder, goal, family, fam_of)
        if floor_goal is None or (hits and not floor_hit):
            floor_goal, floor_hit = goal, bool(hits)
        recall_ok &= all(h.procedure.active for h in hits) and (
            strategy.recall_kind != "embedding"
            or all(h.score >= th.effective_recall_tau for h in hits))
        skills = [skill_from_procedure(h.procedure) for h in hits]
        est = estimate_steps(calls, [t for s in skills for t in s.tools_required])
        rows.append(ProbeResult(
            arm="memory", recalled_ids=tuple(h.procedure.id for h in hits),
            recalled_scores=tuple(round(h.score, 6) for h in hits),
            recalled_right=sum(1 for h in hits if family in fam_of.get(h.procedure.id, ())),
            steps=est.estimate, steps_method=RULE if hits else "recorded",
            prompt_chars=len(inject(skills, th)), cache_hits=_hits_of(embedder) - h0,
            wall_s=round(time.perf_counter() - t1, 4), best_right_score=right_score,
            best_wrong_score=wrong_score, **common))
    return rows, floor_goal, recall_ok


class _QueryMemo:
    """An embedder that embeds each query text once per point (documents pass through)."""

    def __init__(self, inner: Embeds):
        self.inner = inner
        self.cache = getattr(inner, "cache", None)  # hit counts stay the inner embedder's
        self._vectors: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str], *, kind: Kind = "document",
              progress: bool = False) -> np.ndarray:
        if kind != "query":
            return self.inner.embed(texts, kind=kind, progress=progress)
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if todo:
            for t, v in zip(todo, self.inner.embed(todo, kind="query"), strict=True):
                self._vectors[t] = v
        return np.vstack([self._vectors[t] for t in texts])


def _best_scores(index: ProcedureIndex, embedder: Embeds, goal: str, family: str,
                 fam_of: Mapping[str, tuple[str, ...]]) -> tuple[float | None, float | None]:
    """Best cosine of the goal to a procedure of its family, and to one of another."""
    if not len(index):
        return None, None
    q = embedder.embed([goal], kind="query")[0]  # a _QueryMemo: recall embedded it already
    right = wrong = None
    for h in index.search(q, top_k=len(index), tau=-1.0):
        if family in fam_of.get(h.procedure.id, ()):
            right = h.score if right is None else max(right, h.score)
        else:
            wrong = h.score if wrong is None else max(wrong, h.score)
    return (None if right is None else round(right, 6),
            None if wrong is None else round(wrong, 6))


def _live_rows(cfg: EvalConfig, llm: ChatModel, store: MemoryStore, replay: Sequence[ProbeResult],
               world: Sequence[ToolCall], probe_calls: Mapping[str, Sequence[ToolCall]],
               labels: Mapping[str, SessionLabel], recaller: Recaller,
               th: Thresholds) -> list[ProbeResult]:
    """Both arms of every probe under the live agent (one row each, ``steps_method`` live)."""
    semantic = [t for t, _ in Counter(c.tool_name for c in store.tool_calls()).most_common()]
    out: list[ProbeResult] = []
    for r in replay:
        if r.arm != "memory":
            continue
        label = labels[r.probe_session]
        env = ReplayToolEnv(world, probe_calls[r.probe_session])
        skills = [skill_from_procedure(h.procedure) for h in recaller(r.goal)]
        base = run_agent(llm, r.goal, env, label, tools=semantic, config=th,
                         step_limit=cfg.step_limit)
        # nothing recalled: the memory arm's inputs are the no-memory arm's, so is its run
        mem = run_agent(llm, r.goal, env, label, tools=semantic, recalled=skills, config=th,
                        step_limit=cfg.step_limit) if skills else base
        for arm, run, block in (("no-memory", base, ""), ("memory", mem, inject(skills, th))):
            out.append(ProbeResult(
                strategy=r.strategy, arm=arm, probe_session=r.probe_session,  # type: ignore[arg-type]
                family=r.family, goal=r.goal,
                recalled_ids=r.recalled_ids if arm == "memory" else (),
                recalled_scores=r.recalled_scores if arm == "memory" else (),
                recalled_right=r.recalled_right if arm == "memory" else 0,
                family_has_procedure=r.family_has_procedure, steps_recorded=r.steps_recorded,
                steps=run.steps, steps_method="live", success=run.success,
                prompt_chars=len(block), tokens=run.tokens, llm_calls=run.llm_calls,
                cache_hits=run.cache_hits, wall_s=run.wall_s))
    return out


def _progress(items: Sequence[Any], show: bool, desc: str) -> Any:
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)
