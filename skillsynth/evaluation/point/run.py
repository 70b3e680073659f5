"""One evaluation point: split, synthesize on the history, recall for each probe, score.

The order is the protocol's guarantee: the history store is built from history sessions
only, the strategy's synthesis pass runs on it, and only then is each probe's goal (read
from the corpus, never written anywhere) recalled for. Labels are read for scoring only.
:func:`run_point` reads the point's inputs once into a :class:`~.context.PointContext` and
hands it to its protocol (:mod:`.strict` or :mod:`.rolling`), then to :mod:`.kpis`.

A point writes, in its own folder: ``history.db`` (the store the pipeline saw),
``skills/<profile>/`` (every synthesized procedure exported and re-read), ``results.jsonl``
(the per-probe table) and, last, ``summary.json`` (config, corpus hashes, versions, pass
report, checks, KPIs, and under ``gaia_questions`` the details behind the KPIs of GAIA's open
questions: :mod:`.questions`). ``summary.json`` is the point's done marker.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import __version__
from ...corpora.labels import LabelStore, labels_path_for
from ...corpora.stats import corpus_digest
from ...errors import EvaluationError
from ...models.cache import file_sha256
from ...models.embed import Embeds
from ...protocols import ChatModel
from ..live.agent import AGENT_PROMPT_VERSION
from ..live.user_sim import USER_PROMPT_VERSION
from ..live.worlds import WORLDS
from ..strategies import get_strategy
from .context import EvalConfig, PointContext, ProtocolRun
from .control_checks import controls_summary
from .controls import check_gold
from .estimate import RULE
from .floors import check_floors
from .gold_source import gold_source
from .kpis import PointScores, score_point
from .metrics import KPI, ProbeResult
from .options import PROTOCOLS, EvalProtocol, HistorySource
from .record import RunRecord, model_of, utc_now
from .rolling import run_rolling
from .scoring import QueryMemo
from .split import load_split
from .strict import run_strict
from .summary import SUMMARY, CorpusInfo, ModelCalls, PointSummary, Versions, combined_report
from .verify_world import point_verifier

__all__ = ["PROTOCOLS", "SUMMARY", "EvalConfig", "EvalProtocol", "HistorySource", "PointResult",
           "check_floors", "run_point"]

_OWN = ("history.db", "history.db-wal", "history.db-shm", "history.db.verify.sqlite",
        "results.jsonl", "runs.jsonl", "skills", SUMMARY + ".tmp")
#: Each protocol's module takes the point's context and hands back what it produced.
_PROTOCOLS = {"strict": run_strict, "rolling": run_rolling}


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
    ctx = _context(cfg, llm, embedder, out, progress=progress, user=user)
    ran = _PROTOCOLS[cfg.protocol](ctx)
    ran.floors["recall-threshold-and-state"] = ran.witness.recall_ok if any(
        r.recalled_ids for r in ran.rows) else None
    ran.floors["malformed-skipped"] = all(r.status == "ran" for r in ran.reports) if any(
        "malformed" in why for r in ran.reports for _, why in r.skipped) else None
    with ctx.stage("bootstrap"):
        scored = score_point(ctx, ran)
    t_report = time.perf_counter()
    with (out / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in ran.rows:
            fh.write(json.dumps(r.as_dict(), ensure_ascii=False) + "\n")
    summary = _summary(ctx, ran, scored, started, round(time.perf_counter() - t0, 3))
    ctx.timings["report"] = round(time.perf_counter() - t_report, 4)
    tmp = out / (SUMMARY + ".tmp")
    summary.write(tmp)
    os.replace(tmp, out / SUMMARY)
    return PointResult(out_dir=out, rows=tuple(ran.rows), kpis=scored.kpis, point_summary=summary)


def _context(cfg: EvalConfig, llm: ChatModel, embedder: Embeds, out: Path, *, progress: bool,
             user: ChatModel | None) -> PointContext:
    """The point's context: its split, labels, gold source and verifier, read once (the
    corpus_load stage) before any work.

    Raises:
        EvaluationError: the corpus has no probe, or a control arm has no gold actions.
    """
    timings: dict[str, float] = {}
    strategy = get_strategy(cfg.strategy)
    labels_file = Path(cfg.labels) if cfg.labels else labels_path_for(cfg.corpus)
    t = time.perf_counter()
    split = load_split(cfg.corpus, cfg.k, labels_path=labels_file, family=cfg.family,
                       probes=cfg.probes)
    if not split.probes:
        raise EvaluationError(f"{cfg.corpus}: no task has more than k={cfg.k} attempts, "
                              "so there is no probe to evaluate")
    with LabelStore(labels_file) as ls:
        labels = {x.session_id: x for x in ls.all()}
    # gold actions: scoring's (graded live KPIs), and the control arms' declared exception
    gold = gold_source(cfg, labels, split, out / "skills" / "controls", cfg.corpus)
    check_gold(getattr(strategy, "control", None), gold, split)
    verifier = point_verifier(cfg, llm, labels, cfg.thresholds, user)
    timings["corpus_load"] = round(time.perf_counter() - t, 4)
    return PointContext(cfg=cfg, strategy=strategy, llm=llm, embedder=embedder,
                        queries=QueryMemo(embedder), user=user, split=split, labels=labels,
                        labels_file=labels_file, gold=gold, verifier=verifier, out=out,
                        progress=progress, timings=timings)


def _summary(ctx: PointContext, ran: ProtocolRun, scored: PointScores, started: str,
             wall_s: float) -> PointSummary:
    """The point's ``summary.json``; its timings are the context's live dict (the report
    stage's own time lands in it after this)."""
    cfg, strategy, llm, embedder, user = ctx.cfg, ctx.strategy, ctx.llm, ctx.embedder, ctx.user
    labels_file, timings = ctx.labels_file, ctx.timings
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
