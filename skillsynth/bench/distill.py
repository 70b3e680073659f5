"""Distillation quality per corpus and mode: parse rate, names, grounding, seconds."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Thresholds
from ..pipeline.distill import DistillMode
from ..protocols import ChatModel, Embeds
from ._stats import mean_of, median_of, share

__all__ = ['bench_distill', 'overall_figures']


def _answer_name(raw: str | None, mode: str) -> str | None:
    """The ``name`` a distillation answer gives, whether or not the answer is valid."""
    import json
    import re

    if not raw:
        return None
    if mode == "json":
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        name = data.get("name") if isinstance(data, dict) else None
        return name if isinstance(name, str) else None
    m = re.search(r'^name:\s*"?([^"\n]*?)"?\s*$', raw, re.MULTILINE)
    return m.group(1) if m else None


def _kebab(name: str | None) -> bool:
    from ..pipeline.skill import MAX_NAME_CHARS, NAME_RE

    return name is not None and bool(NAME_RE.match(name)) and len(name) <= MAX_NAME_CHARS


def bench_distill(corpora: dict[str, str], llm: ChatModel, embedder: Embeds,
                  config: Thresholds, *, k: int = 3, max_clusters: int = 8,
                  mode: DistillMode = "json",
                  log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Distillation quality of one chat model on labelled corpora, per corpus.

    Each corpus's history (attempts 1..k) is detected and clustered with ``config``; the
    first ``max_clusters`` qualified clusters are distilled (one call each, cached calls
    are used but not timed). Per corpus: answers, parse rate (a skill or SKIP), kebab-case
    names among the answers that name something (valid or not), unique names among the
    skills, grounding (every required tool occurs among the cluster's calls), and the trigger test: the cosine of each skill's when_to_use to its
    own cluster's goals (mean) against its best mean cosine to another cluster's goals
    (``points_home``: own > best other). Seconds and completion tokens per uncached call.
    ``log`` (a callable taking a line) hears of each corpus as it starts.
    """
    from ..evaluation.point.split import build_history, load_split
    from ..pipeline.cluster import cluster_by_goal
    from ..pipeline.detect import extract_sequences
    from ..store import MemoryStore

    out: dict[str, Any] = {"model": llm.model_id, "embedder": embedder.embedder_id,
                           "similarity_tau": config.similarity_tau, "mode": mode,
                           "max_clusters": max_clusters, "corpora": {}}
    for name, path in corpora.items():
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "history.db"
            build_history(path, load_split(path, k), db)
            with MemoryStore.open(db, read_only=True) as store:
                seqs = extract_sequences(store, config).qualified
        clusters = [c for c in cluster_by_goal(seqs, embedder, config) if c.qualified]
        clusters = clusters[:max_clusters]
        if log is not None:
            log(f"{out['model']}: {name}: distilling {len(clusters)} cluster(s)")
        goal_vecs = [embedder.embed(list(c.goals), kind="document") for c in clusters]
        rows = [_distill_row(i, c, clusters, goal_vecs, llm, embedder, config, mode)
                for i, c in enumerate(clusters)]
        out["corpora"][name] = _corpus_figures(rows, len(clusters))
    return out


def _distill_row(i: int, c: Any, clusters: list[Any], goal_vecs: list[np.ndarray],
                 llm: ChatModel, embedder: Embeds, config: Thresholds, mode: DistillMode
                 ) -> dict[str, Any]:
    """Distil cluster ``i`` once: its outcome, name, time, tokens and trigger test."""
    from ..errors import MalformedSkill, UngroundedSkill
    from ..pipeline.distill import distill

    t0, calls0 = time.perf_counter(), llm.calls
    row: dict[str, Any] = {"cluster": i, "size": c.size}
    skill = None
    try:
        skill = distill(c, llm, config, mode).skill
        row["outcome"] = "skip" if skill is None else "skill"
    except UngroundedSkill:
        row["outcome"] = "ungrounded"
    except MalformedSkill:
        row["outcome"] = "malformed"
    row["uncached"] = llm.calls > calls0
    row["seconds"] = round(time.perf_counter() - t0, 3)
    last = getattr(llm, "last", None)  # the ChatClient's latest answer, valid or not
    row["completion_tokens"] = (getattr(last, "usage", None) or {}).get("completion_tokens")
    row["name"] = _answer_name(getattr(last, "content", None), mode)
    if skill is not None:
        w = embedder.embed([skill.description], kind="query")[0]
        sims = [float(np.mean(g @ w)) for g in goal_vecs]
        row["own_cosine"] = round(sims[i], 4)
        others = [s for j, s in enumerate(sims) if j != i]
        row["best_other_cosine"] = round(max(others), 4) if others else None
        row["points_home"] = not others or sims[i] > max(others)
    return row


def _corpus_figures(rows: list[dict[str, Any]], clusters: int) -> dict[str, Any]:
    """One corpus's figures from its distillation rows."""
    skills = [r for r in rows if r["outcome"] == "skill"]
    parsed = [r for r in rows if r["outcome"] in ("skill", "ungrounded")]
    named = [r for r in rows if r["name"] is not None]
    timed = [r for r in rows if r["uncached"]]
    homed = [r for r in skills if r.get("points_home") is not None]
    return {
        "clusters": clusters, "answers": len(rows),
        "parse_rate": share(sum(r["outcome"] in ("skill", "skip", "ungrounded")
                                for r in rows), len(rows)),
        "skip": sum(r["outcome"] == "skip" for r in rows),
        "kebab_names": share(sum(_kebab(r["name"]) for r in named), len(named)),
        "unique_names": share(len({r["name"] for r in skills}), len(skills)),
        "grounded": share(len(skills), len(parsed)),
        "points_home": share(sum(bool(r["points_home"]) for r in homed), len(homed)),
        "own_cosine_mean": mean_of([r.get("own_cosine") for r in skills]),
        "best_other_cosine_mean": mean_of([r.get("best_other_cosine") for r in skills]),
        "seconds_per_distillation": {"median": median_of([r["seconds"] for r in timed]),
                                     "n": len(timed)},
        "completion_tokens": {"median": median_of([r["completion_tokens"] for r in timed]),
                              "n": len(timed)},
        "rows": rows}


def overall_figures(result: dict[str, Any]) -> dict[str, Any]:
    """One model's figures over all its corpora: counts summed, medians over every row."""
    corpora = result["corpora"].values()
    return _corpus_figures([r for c in corpora for r in c["rows"]],
                           sum(c["clusters"] for c in corpora))
