"""Pipeline scale and tuning: detect, cluster and recall at 10k-100k sessions, and the
tuning session's re-cluster times (medians with n, peak memory, checked partitions)."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Thresholds
from ..protocols import ChatModel

__all__ = ['bench_pipeline', 'bench_tuning']


def _synthetic_store(path: Path, n_sessions: int, rng: np.random.Generator) -> None:
    from ..store import MemoryStore, now_iso

    tools = ("search_file", "read_file", "query_documents", "write_file", "list_inbox",
             "draft_reply", "jira_search", "run_shell_command")
    ts = now_iso()
    with MemoryStore.init(path) as store, store.transaction():
        conn = store._conn
        conn.executemany(
            "INSERT INTO tool_history (session_id, tool_name, args, result_summary, success, "
            "timestamp) VALUES (?, ?, NULL, 'ok', 1, ?)",
            ((f"s{i}", tools[int(k)], ts) for i in range(n_sessions)
             for k in rng.integers(0, len(tools), size=3)))
        conn.executemany(
            "INSERT INTO conversations (session_id, role, content, timestamp) "
            "VALUES (?, 'user', ?, ?)", ((f"s{i}", f"goal {i}", ts) for i in range(n_sessions)))


def _family_vectors(n: int, centers: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors around ``centers`` (one family each), 0.25 noise per dimension."""
    v = centers[rng.integers(0, len(centers), size=n)]
    v += 0.25 * rng.standard_normal(v.shape, dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _reset_peak() -> bool:
    """Reset this process's peak resident memory (Linux); False where it cannot be."""
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
        return True
    except OSError:
        return False


def _peak_bytes() -> int:
    """This process's peak resident memory (since the last reset, where resets work)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[dict[str, Any], Any]:
    """Median seconds of ``repeats`` runs and the peak memory while they ran."""
    reset = _reset_peak()
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times), "n": repeats, "peak_bytes": _peak_bytes(),
            "peak_since_start": not reset}, result


def _same_partition(a: list[list[int]], b: list[list[int]], n: int) -> dict[str, Any]:
    la, lb = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for lab, groups in ((la, a), (lb, b)):
        for k, g in enumerate(groups):
            lab[g] = k
    out: dict[str, Any] = {"identical": sorted(map(sorted, a)) == sorted(map(sorted, b))}
    try:
        from sklearn.metrics import adjusted_rand_score
    except ImportError:  # pragma: no cover - sklearn comes with hdbscan
        return out
    out["ari"] = float(adjusted_rand_score(la, lb))
    return out


def _straightforward(method: str, v: np.ndarray, goals: list[str], tau: float
                     ) -> list[list[int]]:
    """The all-pairs methods the scaled ones must equal (a check, slow on purpose)."""
    from ..pipeline.cluster import _components, _linkage, normalise_goal

    if method == "agglomerative":
        return [[comp[i] for i in part] for comp in _components(v, tau)
                for part in _linkage(v[comp], tau, "average")]
    seeds: list[int] = []
    groups: list[list[int]] = []
    for i in sorted(range(len(goals)), key=lambda i: (normalise_goal(goals[i]), i)):
        for g, seed in enumerate(seeds):
            if float(v[i] @ v[seed]) >= tau:
                groups[g].append(i)
                break
        else:
            seeds.append(i)
            groups.append([i])
    return groups


#: Methods too slow to be useful above a size are reported as skipped with the reason.
_SKIP_ABOVE = {"hdbscan": 5_000}


def _bench_sessions(n: int, methods: tuple[str, ...], repeats: int, dim: int, families: int,
                    seed: int, check_up_to: int) -> dict[str, Any]:
    """Detect, then each method, on one synthetic store of ``n`` sessions (one process)."""
    from ..pipeline import cluster as cl
    from ..pipeline.detect import extract_sequences
    from ..store import MemoryStore

    rng = np.random.default_rng(seed)
    cfg = Thresholds(similarity_tau=0.8)
    centers = rng.standard_normal((families, dim), dtype=np.float32)
    row: dict[str, Any] = {"sessions": n}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        _synthetic_store(path, n, rng)
        with MemoryStore.open(path, read_only=True) as store:
            row["detect"], report = _timed(lambda: extract_sequences(store, cfg), repeats)
    seqs = report.qualified
    vecs = _family_vectors(len(seqs), centers, rng)
    goals = [s.goal or "" for s in seqs]
    for m in methods:
        limit = _SKIP_ABOVE.get(m)
        if limit is not None and n > limit:
            row[m] = {"skipped": f"skipped above {limit:,} sessions (too slow to be useful)"}
            continue
        row[m], clusters = _timed(lambda m=m: cl.cluster_by_goal(seqs, None, cfg, m,  # type: ignore[misc]
                                                                   embeddings=vecs), repeats)
        row[m]["clusters"] = len(clusters)
        if m in ("agglomerative", "gaia-greedy") and n <= check_up_to:
            index = {s.session_id: i for i, s in enumerate(seqs)}
            got = [[index[sid] for sid in c.session_ids] for c in clusters]
            t0 = time.perf_counter()
            ref = _straightforward(m, cl._check_vectors(vecs, len(seqs)), goals,
                                   cfg.similarity_tau)
            row[m]["check"] = {**_same_partition(got, ref, len(seqs)),
                               "straightforward_s": time.perf_counter() - t0}
    return row


def _bench_procedures(k: int, queries: int, repeats: int, dim: int, families: int, seed: int,
                      top_k: int, tau: float) -> dict[str, Any]:
    """Build a procedure index of ``k`` and time single-query recalls (one process)."""
    import faiss

    from ..pipeline.recall import ProcedureIndex
    from ..store import Procedure, encode_embedding

    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((families, dim), dtype=np.float32)
    vecs = _family_vectors(k, centers, rng)
    procs = [Procedure(name=f"p{i}", when_to_use="w", markdown_body="b",
                       embedding=encode_embedding(v), id=f"proc_{i}")
             for i, v in enumerate(vecs)]
    reset = _reset_peak()
    t0 = time.perf_counter()
    index = ProcedureIndex(procs)
    build_s = time.perf_counter() - t0
    qs = _family_vectors(queries, centers, rng)  # goals near stored procedures' families
    lat: list[float] = []
    answers: list[list[int]] = []
    scanned: list[int] = []
    cells = getattr(index, "_cells", None)
    for _ in range(repeats):
        answers = []
        for q in qs:
            t1 = time.perf_counter()
            hits = index.search(q, top_k=top_k, tau=tau)
            lat.append((time.perf_counter() - t1) * 1000)
            answers.append([int(h.procedure.id.removeprefix("proc_")) for h in hits])
            if cells is not None:
                scanned.append(cells.scanned)
    flat = faiss.IndexFlatIP(dim)
    flat.add(vecs)
    scores, ids = flat.search(qs, top_k)
    want = [[int(i) for s, i in zip(sr, ir, strict=True) if i >= 0 and s >= tau]
            for sr, ir in zip(scores, ids, strict=True)]
    found = sum(len(set(a) & set(w)) for a, w in zip(answers, want, strict=True))
    expected = sum(len(w) for w in want)
    return {"procedures": k, "index": "flat" if cells is None else "cells",
            "build_s": build_s, "n": len(lat), "queries": queries, "repeats": repeats,
            "median_ms": float(np.median(lat)), "p99_ms": float(np.percentile(lat, 99)),
            "peak_bytes": _peak_bytes(), "peak_since_start": not reset,
            "recall_at_k_vs_flat": found / expected if expected else 1.0,
            "queries_with_hits": sum(1 for w in want if w),
            "cells": None if cells is None else {"nlist": cells.nlist,
                                                 "scanned_mean": float(np.mean(scanned))}}


def _child(queue: Any, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> None:
    try:
        queue.put(("ok", fn(*args)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def _isolated(fn: Callable[..., dict[str, Any]], args: tuple[Any, ...], isolate: bool
              ) -> dict[str, Any]:
    """``fn(*args)`` in a fresh process, so its peak memory is its own."""
    if not isolate:
        return fn(*args)
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, fn, args))
    proc.start()
    import queue as queues

    while True:
        try:
            status, value = queue.get(timeout=1.0)
            break
        except queues.Empty:
            if not proc.is_alive():  # killed (out of memory?) before it could answer
                status, value = "error", f"the process exited with code {proc.exitcode}"
                break
    proc.join()
    if status != "ok":
        from ..errors import SkillsynthError

        raise SkillsynthError(f"benchmark step {fn.__name__} at size {args[0]} failed: "
                              f"{value}")
    return value  # type: ignore[no-any-return]


def bench_pipeline(sizes: tuple[int, ...] = (10_000, 100_000),
                   procedure_counts: tuple[int, ...] = (1_000, 10_000, 100_000), *,
                   repeats: int = 3, dim: int = 384, families: int = 200, seed: int = 0,
                   methods: tuple[str, ...] = ("agglomerative", "gaia-greedy", "hdbscan"),
                   recall_queries: int = 1_000, top_k: int = 2, tau: float = 0.8,
                   check_up_to: int = 20_000, isolate: bool = True) -> dict[str, Any]:
    """Detect and cluster seconds per method on synthetic stores; recall latency.

    Each size runs in its own process (``isolate``), so the peak resident memory reported
    for a step is that step's (reset before it, where Linux allows; else since the
    process started). Times are medians of ``repeats`` runs. Embedding time is excluded:
    vectors are pre-made, ``families`` noisy families in ``dim`` dimensions, and recall
    queries come from the same families (so most have hits). Up to ``check_up_to``
    sessions the scaled methods' partitions are compared with the straightforward
    all-pairs methods (identical, and the adjusted Rand index); recall is compared with
    a flat scan (recall@k of the results at cosine >= tau).
    """
    out: dict[str, Any] = {"detect_cluster": [], "recall": [], "dim": dim, "seed": seed,
                           "families": families, "repeats": repeats, "tau": tau,
                           "top_k": top_k}
    for n in sizes:
        out["detect_cluster"].append(_isolated(
            _bench_sessions, (n, methods, repeats, dim, families, seed, check_up_to), isolate))
    for k in procedure_counts:
        out["recall"].append(_isolated(
            _bench_procedures, (k, recall_queries, repeats, dim, families, seed, top_k, tau),
            isolate))
    return out


def bench_tuning(embedder: Any, llm: ChatModel, *, sessions: int = 10_000, repeats: int = 5,
                 seed: int = 0, workdir: str | Path | None = None) -> dict[str, Any]:
    """Seconds per tuning-view update on a synthetic corpus of ``sessions`` sessions.

    The corpus has 8 families; every attempt but the last is history (k = attempts - 1), so
    about ``sessions`` goals are clustered and 8 probes recalled for. Preparation (detect,
    embed, pair sample) is timed once; then the median over ``repeats`` of an update that
    keeps tau (re-judges cached groups) and of one that moves tau (clusters again).
    The qualified clusters at the starting thresholds are distilled once first (model
    calls, then cached); updates take distillations from the call cache only, as in the
    notebook.
    """
    from ..corpora.synthetic import generate_corpus
    from ..evaluation.tuning.session import TuningSession

    attempts = max(2, sessions // 8)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        db = Path(tmp) / "tune.db"
        generate_corpus(db, seed=seed, attempts=attempts)
        t0 = time.perf_counter()
        ts = TuningSession.prepare(db, embedder, k=attempts - 1, seed=seed)
        prepare_s = time.perf_counter() - t0
        base = Thresholds(similarity_tau=0.5, min_occurrences=3)
        distilled = ts.distill_missing(base, llm)  # model calls once (then cached)
        first = ts.view(base, llm=llm)  # the first grouping at this tau
        keep, move = [], []
        for i in range(repeats):
            t0 = time.perf_counter()
            ts.view(base.merge(min_occurrences=2 + i % 3, max_recall_body_chars=500 + 100 * i),
                    llm=llm)
            keep.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ts.view(base.merge(similarity_tau=0.55 + 0.05 * i), llm=llm)
            move.append(time.perf_counter() - t0)
        return {"corpus_sessions": attempts * 8, "sessions": len(ts.sequences),
                "probes": len(ts.probes), "distilled_now": distilled,
                "procedures_in_view": len(first.procedures), "prepare_s": round(prepare_s, 3),
                "update_keep_tau_s": {"median": round(statistics.median(keep), 4),
                                      "n": repeats},
                "update_move_tau_s": {"median": round(statistics.median(move), 4),
                                      "n": repeats}}
