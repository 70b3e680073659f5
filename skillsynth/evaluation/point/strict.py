"""The strict protocol: one pass over attempts 1..k of every family, then attempt k+1 of
each recalled for.

The history store holds the history sessions only; the strategy's one synthesis pass runs
on it, each procedure's count columns are read right after the pass, and only then is each
probe's goal (read from the corpus, never written to the store) recalled for, in replay and,
with ``live``, in a world (both arms, :mod:`.live_arms`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...models.embed import check_store_embedder
from ...store import MemoryStore
from .complete import require_pass
from .context import PointContext, ProtocolRun, check_procedures, families_without_probe
from .floors import check_floors
from .live_arms import live_rows, live_world, terminations
from .metrics import ProbeResult
from .record import model_of
from .scoring import FloorWitness, probe_rows, progress_bar, store_view
from .split import build_history

__all__ = ["run_strict"]


def run_strict(ctx: PointContext) -> ProtocolRun:
    """Build the history store, run the pass, recall for every probe (replay, then live),
    check each procedure and the floors (see the module docstring)."""
    cfg, strategy, th, split, labels = ctx.cfg, ctx.strategy, ctx.th, ctx.split, ctx.labels
    with ctx.stage("corpus_load"), MemoryStore.open(cfg.corpus, read_only=True) as corpus:
        n_history = build_history(cfg.corpus, split, ctx.history_db)
        probe_ids = [p.session_id for p in split.probes]
        goals = {s: t.content for s, t in corpus.first_user_turns(probe_ids).items()}
        probe_calls = {s: corpus.tool_calls(s) for s in probe_ids}
        recorded = corpus.tool_calls() if cfg.live and cfg.world == "replay" else []
    history_tasks = {labels[s].task_id for s in split.history if s in labels}
    with MemoryStore.open(ctx.history_db) as store:
        check_store_embedder(store, ctx.embedder)
        with ctx.stage("clustering"):  # with distillation (cache hits when warm)
            report = strategy.synthesize(store, ctx.llm, ctx.embedder, th, mode=cfg.mode,
                                         rate=cfg.rate, outcomes=ctx.outcomes,
                                         verifier=ctx.verifier, args=cfg.distill_args,
                                         distiller=cfg.distiller)
        require_pass(report, f"{cfg.strategy} on {Path(cfg.corpus).name}")
        t_recall = time.perf_counter()
        view = store_view(store, strategy, ctx.queries, th, cfg.recall_key, split, ctx.gold)
        first_counts = {p.id: (p.success_count, p.attempt_count) for p in view.procedures}
        witness = FloorWitness()
        rows: list[ProbeResult] = []
        for p in progress_bar(split.probes, ctx.progress, "probes"):
            goal = goals.get(p.session_id)
            if goal is None:  # a probe without a goal cannot be recalled for; counted below
                continue
            rows += probe_rows(strategy, th, view, ctx.queries, session_id=p.session_id,
                               goal=goal, calls=probe_calls[p.session_id],
                               family=str(split.family(p.session_id)), success=p.success,
                               seen_task=None if p.task_id is None
                               else p.task_id in history_tasks, witness=witness,
                               recall_cut=cfg.recall_cut,
                               recall_layout=cfg.recall_layout)
        ctx.timings["recall"] = round(time.perf_counter() - t_recall, 4)
        with ctx.stage("validate"):
            checks = check_procedures(store, split, ctx.out,
                                      split.history - {p.session_id for p in split.probes})
        live_info: dict[str, Any] | None = None
        t_live = time.perf_counter()
        if cfg.live:
            world, task_of, live_info = live_world(ctx, store, recorded, probe_calls, goals)
            rows += live_rows(ctx, world, task_of, rows, view.recaller)
            live_info["user_model"] = (model_of(ctx.user) or {}).get("model")
            live_info["terminations"] = terminations(rows)
            ctx.timings["live"] = round(time.perf_counter() - t_live, 4)
        with ctx.stage("floors"):
            floors = check_floors(store, strategy, ctx.llm, ctx.embedder, th, cfg.mode,
                                  witness.goal,
                                  lambda: strategy.recaller(store, ctx.queries, th,
                                                            cfg.recall_key))
    split_info = {"k": split.k, "protocol": "strict", "history": len(split.history),
                  "history_with_calls": n_history, "probes": len(split.probes),
                  "probes_without_goal": sum(1 for p in split.probes
                                             if p.session_id not in goals),
                  "left_out": len(split.left_out),
                  "families_without_probe": families_without_probe(split)}
    return ProtocolRun(rows=rows, reports=[report] if report else [], witness=witness,
                       checks=checks, floors=floors, split_info=split_info,
                       live_info=live_info, passes=None, first_counts=first_counts)
