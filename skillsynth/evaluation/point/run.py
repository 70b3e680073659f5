"""One evaluation point: split, synthesize on the history, recall for each probe, score.

The order is the protocol's guarantee: the history store is built from history sessions
only, the strategy's synthesis pass runs on it, and only then is each probe's goal (read
from the corpus, never written anywhere) recalled for. Labels are read for scoring only.

A point writes, in its own folder: ``history.db`` (the store the pipeline saw),
``skills/<profile>/`` (every synthesized procedure exported and re-read), ``results.jsonl``
(the per-probe table) and, last, ``summary.json`` (config, corpus hashes, versions, pass
report, checks, KPIs, and under ``gaia_questions`` the details behind the KPIs of GAIA's open
questions: :mod:`.questions`). ``summary.json`` is the point's done marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ... import __version__
from ...config import Thresholds
from ...corpora.labels import LabelStore, SessionLabel, labels_path_for
from ...corpora.stats import corpus_digest
from ...errors import (
    EvaluationError,
    MalformedSkill,
    SkillValidationError,
)
from ...models.cache import file_sha256
from ...models.embed import Embeds, check_store_embedder
from ...pipeline.export import export_skill
from ...pipeline.skill import PROFILES
from ...pipeline.synthesize import PassReport
from ...pipeline.verify import Verifier
from ...protocols import ChatModel
from ...store import MemoryStore
from ..live.agent import AGENT_PROMPT_VERSION
from ..live.user_sim import USER_PROMPT_VERSION
from ..live.worlds import WORLDS
from ..strategies import Strategy, get_strategy
from .complete import require_pass
from .control_checks import control_kpis, controls_summary
from .controls import GoldSource, check_gold, gold_source
from .estimate import RULE
from .floors import check_floors
from .live_arms import live_rows, live_world
from .lumping import lumping_kpis
from .metrics import KPI, ProbeResult, ProcedureCheck, point_kpis
from .options import PROTOCOLS, EvalProtocol, HistorySource, PointOptions
from .questions import (
    StartCost,
    procedure_vectors,
    question_kpis,
    starts_from_passes,
    starts_from_report,
)
from .record import RunRecord, model_of, utc_now
from .rolling import run_rolling
from .scoring import FloorWitness, QueryMemo, probe_rows, progress_bar, store_view
from .split import Split, build_history, load_split, procedure_families
from .summary import SUMMARY, CorpusInfo, ModelCalls, PointSummary, Versions, combined_report
from .verify_world import point_verifier, verify_kpis

__all__ = ["PROTOCOLS", "SUMMARY", "EvalConfig", "EvalProtocol", "HistorySource", "PointResult",
           "check_floors", "run_point"]

_OWN = ("history.db", "history.db-wal", "history.db-shm", "history.db.verify.sqlite",
        "results.jsonl", "runs.jsonl", "skills", SUMMARY + ".tmp")


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
class PointResult:
    """What :func:`run_point` produced (also on disk in ``out_dir``): the probe rows, the
    KPIs and the point's summary (:attr:`point_summary`; :attr:`summary`: as written)."""

    out_dir: Path
    rows: tuple[ProbeResult, ...]
    kpis: dict[str, KPI]
    point_summary: PointSummary

    @property
    def summary(self) -> dict[str, Any]:
        """``summary.json``'s dict, as written."""
        return self.point_summary.to_json()


def _check_procedures(store: MemoryStore, split: Split, out_dir: Path,
                      allowed: Collection[str]) -> list[ProcedureCheck]:
    """Export and re-read every procedure; its provenance must be ``allowed`` sessions."""
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
        prov_ok = bool(sessions) and all(s in known and s in allowed for s in sessions)
        checks.append(ProcedureCheck(id=proc.id, name=proc.name,
                                     families=procedure_families(proc, split), valid=valid,
                                     errors=errors, provenance_ok=prov_ok))
    return checks


def _clean(out_dir: Path) -> None:
    for name in _OWN:
        p = out_dir / name
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def run_point(cfg: EvalConfig, llm: ChatModel, embedder: Embeds, out_dir: str | Path, *,
              progress: bool = False, user: ChatModel | None = None) -> PointResult:
    """Run the protocol once and write the point's files (see the module docstring).

    A folder left by a killed run (no ``summary.json``) is cleaned and redone. ``user``: a
    chat model that plays each live probe's user (a tau2 world's user simulator; default
    solo mode, no user).

    Raises:
        EvaluationError: ``out_dir`` already holds a finished point, or the corpus has no
            probes (no task with more than ``k`` attempts).
    """
    out = Path(out_dir)
    if user is not None and (not cfg.live or cfg.world == "replay"):
        raise EvaluationError("a user simulator needs live probes in a world with a user side "
                              f"({', '.join(WORLDS)})")
    if (out / SUMMARY).exists():
        raise EvaluationError(f"{out / SUMMARY} exists: this point is done; use a new folder")
    out.mkdir(parents=True, exist_ok=True)
    _clean(out)
    t0 = time.perf_counter()
    started = utc_now()
    timings: dict[str, float] = {}
    strategy = get_strategy(cfg.strategy)
    th = cfg.thresholds
    labels_file = Path(cfg.labels) if cfg.labels else labels_path_for(cfg.corpus)
    with _stage(timings, "corpus_load"):
        split = load_split(cfg.corpus, cfg.k, labels_path=labels_file, family=cfg.family)
        if not split.probes:
            raise EvaluationError(f"{cfg.corpus}: no task has more than k={cfg.k} attempts, "
                                  "so there is no probe to evaluate")
        with LabelStore(labels_file) as ls:
            labels = {x.session_id: x for x in ls.all()}
        # gold actions: scoring's (graded live KPIs), and the control arms' declared exception
        gold = gold_source(cfg, labels, split, out / "skills" / "controls", cfg.corpus)
        check_gold(getattr(strategy, "control", None), gold, split)
        verifier = point_verifier(cfg, llm, labels, th, user)
    history_db = out / "history.db"
    queries = QueryMemo(embedder)  # recall and the score diagnostic share each query
    if cfg.protocol == "rolling":
        ran = _rolling(cfg, strategy, llm, embedder, queries, split, labels, history_db, out,
                       progress, timings, gold, verifier)
    else:
        ran = _strict(cfg, strategy, llm, embedder, queries, split, labels, history_db, out,
                      progress, user, timings, gold, verifier)
    ran.floors["recall-threshold-and-state"] = ran.witness.recall_ok if any(
        r.recalled_ids for r in ran.rows) else None
    ran.floors["malformed-skipped"] = all(r.status == "ran" for r in ran.reports) if any(
        "malformed" in why for r in ran.reports for _, why in r.skipped) else None
    with _stage(timings, "bootstrap"):
        scored = _score(cfg, strategy, ran, split, gold, history_db, queries, timings,
                        out / "runs.jsonl")
    t_report = time.perf_counter()
    with (out / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in ran.rows:
            fh.write(json.dumps(r.as_dict(), ensure_ascii=False) + "\n")
    summary = _summary(cfg, strategy, llm, embedder, user, ran, scored, labels_file, started,
                       round(time.perf_counter() - t0, 3), timings)
    timings["report"] = round(time.perf_counter() - t_report, 4)
    tmp = out / (SUMMARY + ".tmp")
    summary.write(tmp)
    os.replace(tmp, out / SUMMARY)
    return PointResult(out_dir=out, rows=tuple(ran.rows), kpis=scored.kpis, point_summary=summary)


@dataclass
class _Ran:
    """What one protocol produced at a point (strict or rolling)."""

    rows: list[ProbeResult]
    reports: list[PassReport]
    witness: FloorWitness
    checks: list[ProcedureCheck]
    floors: dict[str, bool | None]
    split_info: dict[str, Any]
    live_info: dict[str, Any] | None = None
    starts: list[StartCost] | None = None  # None: the one start's, read after the pass
    first_counts: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def llm_calls(self) -> int:
        return sum(r.llm_calls for r in self.reports)

    @property
    def cache_hits(self) -> int:
        return sum(r.cache_hits for r in self.reports)


@dataclass(frozen=True)
class _Scored:
    """A point's KPIs and the details behind them."""

    kpis: dict[str, KPI]
    control: str | None
    gold: GoldSource | None
    inert: Any
    questions_info: dict[str, Any]
    lumping_info: dict[str, Any]


def _rolling(cfg: EvalConfig, strategy: Strategy, llm: ChatModel, embedder: Embeds,
             queries: QueryMemo, split: Split, labels: Mapping[str, SessionLabel],
             history_db: Path, out: Path, progress: bool, timings: dict[str, float],
             gold: GoldSource, verifier: Verifier | None) -> _Ran:
    """The corpus replayed in order with a pass every ``cadence`` (:mod:`.rolling`)."""
    th = cfg.thresholds
    with MemoryStore.open(cfg.corpus, read_only=True) as corpus, \
            MemoryStore.init(history_db) as store, _stage(timings, "rolling_passes"):
        check_store_embedder(store, embedder)
        rolled = run_rolling(
            corpus, store, strategy=strategy, llm=llm, embedder=queries, th=th,
            split=split, labels=labels, k=cfg.k, mode=cfg.mode, recall_key=cfg.recall_key,
            rate=cfg.rate, cadence=cfg.cadence, cadence_unit=cfg.cadence_unit,
            progress=progress, gold=gold, recall_cut=cfg.recall_cut, verifier=verifier,
            distill_args=cfg.distill_args, distiller=cfg.distiller)
        checks = _check_procedures(store, split, out, set(store.session_ids()))
        floors = check_floors(store, strategy, llm, embedder, th, cfg.mode,
                              rolled.witness.goal,
                              lambda: strategy.recaller(store, queries, th, cfg.recall_key))
    split_info = {"k": split.k, "protocol": "rolling", **rolled.info(),
                  "families_without_probe": _families_without_probe(split)}
    return _Ran(rows=list(rolled.rows), reports=list(rolled.reports), witness=rolled.witness,
                checks=checks, floors=floors, split_info=split_info, live_info=None,
                starts=starts_from_passes(rolled.passes), first_counts=dict(rolled.first_counts))


def _score(cfg: EvalConfig, strategy: Strategy, ran: _Ran, split: Split,
           gold: GoldSource, history_db: Path, queries: QueryMemo,
           timings: Mapping[str, float], runs_file: Path) -> _Scored:
    """Every KPI of the point: #887's, the controls', verification's, GAIA's questions',
    lumping's."""
    reports = ran.reports
    grounded = [g for r in reports for g in [True] * r.distilled + [False] * r.ungrounded]
    kpis = point_kpis(ran.rows, ran.checks, ran.floors, llm_calls=ran.llm_calls,
                      cache_hits=ran.cache_hits, grounded=grounded,
                      duplicate_names=sum(r.duplicate_names for r in reports),
                      seed=cfg.seed, n_boot=cfg.n_boot)
    control = getattr(strategy, "control", None)
    extra, inert = control_kpis(control, ran.rows, kpis, _runs(runs_file), gold,
                                seed=cfg.seed, n_boot=cfg.n_boot)
    kpis.update(extra)
    kpis |= {k.name: k for k in verify_kpis(reports)}
    with MemoryStore.open(history_db, read_only=True) as store:
        procs = store.procedures()
    starts = ran.starts if ran.starts is not None else starts_from_report(
        reports[0] if reports else None, timings.get("clustering", 0.0),
        sum(p.active for p in procs))
    questions, questions_info = question_kpis(
        ran.rows, procs, split, cfg.thresholds, cut=cfg.recall_cut, starts=starts,
        first_counts=ran.first_counts,
        vectors=procedure_vectors([p for p in procs if p.active], queries),
        distill_cap=strategy.distill_cap(cfg.thresholds), seed=cfg.seed, n_boot=cfg.n_boot)
    kpis |= questions
    lumps, lumping_info = lumping_kpis(procs, split)
    kpis |= {k.name: k for k in lumps}
    return _Scored(kpis=kpis, control=control, gold=gold, inert=inert,
                   questions_info=questions_info, lumping_info=lumping_info)


def _summary(cfg: EvalConfig, strategy: Strategy, llm: ChatModel, embedder: Embeds,
             user: ChatModel | None, ran: _Ran, scored: _Scored, labels_file: Path,
             started: str, wall_s: float, timings: dict[str, float]) -> PointSummary:
    """The point's ``summary.json``; ``timings`` is the live dict (the report stage's own
    time lands in it after this)."""
    # the corpus's content digest: identical corpora built twice hash the same
    corpus_sha, labels_sha = corpus_digest(cfg.corpus), file_sha256(labels_file)
    rows = ran.rows
    return PointSummary(
        config=cfg.as_dict(),
        corpus=CorpusInfo(path=str(cfg.corpus), sha256=corpus_sha,
                          file_sha256=file_sha256(cfg.corpus), labels_sha256=labels_sha),
        versions=Versions(skillsynth=__version__,
                          distill_prompt=strategy.distill_prompt(cfg.distill_args, cfg.distiller),
                          replay_rule=RULE, chat_model=llm.model_id,
                          embedder=embedder.embedder_id),
        split=ran.split_info, live=ran.live_info, pass_report=combined_report(ran.reports),
        model_calls=ModelCalls(synthesis=ran.llm_calls, synthesis_cache_hits=ran.cache_hits,
                               agent=sum(r.llm_calls for r in rows),
                               agent_cache_hits=sum(r.cache_hits for r in rows
                                                    if r.steps_method == "live")),
        procedures=tuple(ran.checks), floors=ran.floors,
        controls=controls_summary(scored.control, scored.gold, scored.inert),
        kpis=dict(scored.kpis), gaia_questions=scored.questions_info,
        lumping=scored.lumping_info, started_at=started, wall_s=wall_s, timings=timings,
        record=RunRecord(
            kind="point", config=cfg.as_dict(), started_utc=started, finished_utc=utc_now(),
            models={"chat": model_of(llm), "embed": model_of(embedder),
                    "user": model_of(user)},
            inputs={"corpus": {"path": str(cfg.corpus), "sha256": corpus_sha},
                    "labels": {"path": str(labels_file), "sha256": labels_sha}},
            prompts={"distill": strategy.distill_prompt(cfg.distill_args, cfg.distiller),
                     "agent": AGENT_PROMPT_VERSION,
                     "user_sim": USER_PROMPT_VERSION, "replay_rule": RULE}).as_dict())


def _strict(cfg: EvalConfig, strategy: Strategy, llm: ChatModel, embedder: Embeds,
            queries: QueryMemo, split: Split, labels: Mapping[str, SessionLabel],
            history_db: Path, out: Path, progress: bool, user: ChatModel | None,
            timings: dict[str, float], gold: GoldSource, verifier: Verifier | None) -> _Ran:
    """One pass over attempts 1..k of every family, then attempt k+1 of each recalled for
    (each procedure's count columns are read right after the pass)."""
    th = cfg.thresholds
    with _stage(timings, "corpus_load"), \
            MemoryStore.open(cfg.corpus, read_only=True) as corpus:
        n_history = build_history(cfg.corpus, split, history_db)
        probe_ids = [p.session_id for p in split.probes]
        goals = {s: t.content for s, t in corpus.first_user_turns(probe_ids).items()}
        probe_calls = {s: corpus.tool_calls(s) for s in probe_ids}
        recorded = corpus.tool_calls() if cfg.live and cfg.world == "replay" else []
    outcomes = {s: x.success for s, x in labels.items() if x.success is not None}
    history_tasks = {labels[s].task_id for s in split.history if s in labels}
    with MemoryStore.open(history_db) as store:
        check_store_embedder(store, embedder)
        with _stage(timings, "clustering"):  # with distillation (cache hits when warm)
            report = strategy.synthesize(store, llm, embedder, th, mode=cfg.mode,
                                         rate=cfg.rate, outcomes=outcomes, verifier=verifier,
                                         args=cfg.distill_args, distiller=cfg.distiller)
        require_pass(report, f"{cfg.strategy} on {Path(cfg.corpus).name}")
        t_recall = time.perf_counter()
        view = store_view(store, strategy, queries, th, cfg.recall_key, split, gold)
        first_counts = {p.id: (p.success_count, p.attempt_count) for p in view.procedures}
        witness = FloorWitness()
        rows: list[ProbeResult] = []
        for p in progress_bar(split.probes, progress, "probes"):
            goal = goals.get(p.session_id)
            if goal is None:  # a probe without a goal cannot be recalled for; counted below
                continue
            rows += probe_rows(strategy, th, view, queries, session_id=p.session_id,
                               goal=goal, calls=probe_calls[p.session_id],
                               family=str(split.family(p.session_id)), success=p.success,
                               seen_task=None if p.task_id is None
                               else p.task_id in history_tasks, witness=witness,
                               recall_cut=cfg.recall_cut)
        timings["recall"] = round(time.perf_counter() - t_recall, 4)
        with _stage(timings, "validate"):
            checks = _check_procedures(store, split, out,
                                       split.history - {p.session_id for p in split.probes})
        live_info: dict[str, Any] | None = None
        t_live = time.perf_counter()
        if cfg.live:
            world, task_of, live_info = live_world(cfg, store, recorded, probe_calls, labels,
                                                    goals, split)
            rows += live_rows(cfg, llm, world, task_of, rows, view.recaller, th,
                              out / "runs.jsonl", progress, user,
                              rerun_empty=strategy.runs_empty_memory_arm, gold=gold)
            live_info["user_model"] = (model_of(user) or {}).get("model")
            timings["live"] = round(time.perf_counter() - t_live, 4)
        with _stage(timings, "floors"):
            floors = check_floors(store, strategy, llm, embedder, th, cfg.mode, witness.goal,
                                  lambda: strategy.recaller(store, queries, th, cfg.recall_key))
    split_info = {"k": split.k, "protocol": "strict", "history": len(split.history),
                  "history_with_calls": n_history, "probes": len(split.probes),
                  "probes_without_goal": sum(1 for p in split.probes
                                             if p.session_id not in goals),
                  "left_out": len(split.left_out),
                  "families_without_probe": _families_without_probe(split)}
    return _Ran(rows=rows, reports=[report] if report else [], witness=witness, checks=checks,
                floors=floors, split_info=split_info, live_info=live_info, starts=None,
                first_counts=first_counts)


@contextlib.contextmanager
def _stage(timings: dict[str, float], name: str) -> Iterator[None]:
    """Add the block's wall seconds to ``timings[name]`` (the summary's stage timings)."""
    t = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - t, 4)


def _runs(path: Path) -> list[dict[str, Any]]:
    """A point's live runs (``runs.jsonl``; none for a replay-only point)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _families_without_probe(split: Split) -> int:
    """Families with k attempts or fewer: no probe under either protocol (counted, not hidden)."""
    return len(set(split.families.values())) - len(split.probes)


