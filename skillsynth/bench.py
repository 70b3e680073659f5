"""Benchmarks: figures printed by ``skillsynth bench``, never asserted in unit tests."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .config import Thresholds
from .models.cache import CallCache
from .models.embed import Embedder
from .models.llm import ChatClient
from .models.serve import LocalServers
from .pipeline.distill import DistillMode
from .protocols import ChatModel, Embeds

__all__ = ["bench_distill", "bench_models", "bench_pipeline", "bench_tuning", "bench_worlds"]

_GOALS = [f"{verb} the {obj} for {who}" for verb in ("Summarise", "Find", "Draft a reply to",
                                                       "Index", "Search")
          for obj in ("quarterly report", "invoice", "inbox thread", "design doc")
          for who in ("Alice", "the team", "finance", "me")]


def bench_models(servers: LocalServers, *, repeats: int = 5, max_tokens: int = 128
                 ) -> dict[str, Any]:
    """Generated tokens/s, embeddings/s for short goals, cached-call latency (medians).

    Each figure is the median over ``repeats`` runs, reported with n.
    """
    if servers.chat is None or servers.embed is None:
        raise ValueError("bench_models needs both the chat and the embedding server")
    out: dict[str, Any] = {"repeats": repeats}
    with ChatClient(servers.chat) as chat:
        chat.chat([{"role": "user", "content": "warm up"}], max_tokens=4)
        rates = []
        for i in range(repeats):
            t0 = time.perf_counter()
            r = chat.chat([{"role": "user", "content": f"Write a short story about tool "
                            f"number {i}."}], max_tokens=max_tokens, temperature=0.7, seed=i)
            rates.append(r.completion_tokens / (time.perf_counter() - t0))
        out["chat_tokens_per_s"] = {"median": statistics.median(rates), "n": repeats,
                                    "model": servers.chat.model, "max_tokens": max_tokens}
        rates = []
        for i in range(repeats):  # a ~600-token prompt, one generated token: prompt speed
            # each prompt differs from its first token, so the server's prompt cache
            # (longest common prefix) cannot skip any of it
            text = f"Batch {i * 7919}. " + " ".join(_GOALS[i % 5:] + _GOALS[:i % 5]) * 2 + \
                " Summarise these requests in one word."
            t0 = time.perf_counter()
            r = chat.chat([{"role": "user", "content": text}], max_tokens=1)
            rates.append(int(r.usage.get("prompt_tokens") or 0) / (time.perf_counter() - t0))
        out["prompt_tokens_per_s"] = {"median": statistics.median(rates), "n": repeats,
                                      "model": servers.chat.model}
    with Embedder(servers.embed) as emb:
        emb.embed(["warm up"])
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            emb.embed(_GOALS)
            rates.append(len(_GOALS) / (time.perf_counter() - t0))
        out["embeddings_per_s"] = {"median": statistics.median(rates), "n": repeats,
                                   "batch": len(_GOALS), "model": servers.embed.model}
    with tempfile.TemporaryDirectory() as tmp, CallCache(Path(tmp) / "cache.db") as cache, \
            ChatClient(servers.chat, cache=cache) as chat:
        msgs = [{"role": "user", "content": "Name one fruit."}]
        chat.chat(msgs, max_tokens=16)
        lat = []
        for _ in range(max(repeats, 20)):
            t0 = time.perf_counter()
            assert chat.chat(msgs, max_tokens=16).cached
            lat.append((time.perf_counter() - t0) * 1000)
        out["cached_call_ms"] = {"median": statistics.median(lat), "n": len(lat)}
    return out


def _synthetic_store(path: Path, n_sessions: int, rng: np.random.Generator) -> None:
    from .store import MemoryStore, now_iso

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
    from .pipeline.cluster import _components, _linkage, normalise_goal

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
    from .config import Thresholds
    from .pipeline import cluster as cl
    from .pipeline.detect import extract_sequences
    from .store import MemoryStore

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

    from .pipeline.recall import ProcedureIndex
    from .store import Procedure, encode_embedding

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
        from .errors import SkillsynthError

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
    from .config import Thresholds
    from .corpora.synthetic import generate_corpus
    from .evaluation.tuning.session import TuningSession

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
    from .pipeline.skill import MAX_NAME_CHARS, NAME_RE

    return name is not None and bool(NAME_RE.match(name)) and len(name) <= MAX_NAME_CHARS


def bench_distill(corpora: dict[str, str], llm: ChatModel, embedder: Embeds,
                  config: Thresholds, *, k: int = 3, max_clusters: int = 8,
                  mode: DistillMode = "json",
                  log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Distillation quality of one chat model on labelled corpora, per corpus.

    Each corpus's history (attempts 1..k) is detected and clustered with ``config``; the
    first ``max_clusters`` qualified clusters are distilled (one call each, cached calls
    are used but not timed). Per corpus: answers, parse rate (a skill or SKIP), kebab-case
    names among the answers that name something (valid or not), unique names among the skills, grounding (every required tool occurs among the
    cluster's calls), and the trigger test: the cosine of each skill's when_to_use to its
    own cluster's goals (mean) against its best mean cosine to another cluster's goals
    (``points_home``: own > best other). Seconds and completion tokens per uncached call.
    ``log`` (a callable taking a line) hears of each corpus as it starts.
    """
    from .errors import MalformedSkill, UngroundedSkill
    from .evaluation.point.split import build_history, load_split
    from .pipeline.cluster import cluster_by_goal
    from .pipeline.detect import extract_sequences
    from .pipeline.distill import distill
    from .store import MemoryStore

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
        rows: list[dict[str, Any]] = []
        for i, c in enumerate(clusters):
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
            row["completion_tokens"] = (getattr(last, "usage", None) or {}).get(
                "completion_tokens")
            row["name"] = _answer_name(getattr(last, "content", None), mode)
            if skill is not None:
                w = embedder.embed([skill.description], kind="query")[0]
                sims = [float(np.mean(g @ w)) for g in goal_vecs]
                row["own_cosine"] = round(sims[i], 4)
                others = [s for j, s in enumerate(sims) if j != i]
                row["best_other_cosine"] = round(max(others), 4) if others else None
                row["points_home"] = not others or sims[i] > max(others)
            rows.append(row)
        skills = [r for r in rows if r["outcome"] == "skill"]
        parsed = [r for r in rows if r["outcome"] in ("skill", "ungrounded")]
        named = [r for r in rows if r["name"] is not None]
        timed = [r for r in rows if r["uncached"]]
        homed = [r for r in skills if r.get("points_home") is not None]
        out["corpora"][name] = {
            "clusters": len(clusters), "answers": len(rows),
            "parse_rate": _share(sum(r["outcome"] in ("skill", "skip", "ungrounded")
                                     for r in rows), len(rows)),
            "skip": sum(r["outcome"] == "skip" for r in rows),
            "kebab_names": _share(sum(_kebab(r["name"]) for r in named), len(named)),
            "unique_names": _share(len({r["name"] for r in skills}), len(skills)),
            "grounded": _share(len(skills), len(parsed)),
            "points_home": _share(sum(bool(r["points_home"]) for r in homed), len(homed)),
            "own_cosine_mean": _mean_of([r.get("own_cosine") for r in skills]),
            "best_other_cosine_mean": _mean_of([r.get("best_other_cosine") for r in skills]),
            "seconds_per_distillation": {"median": _median_of([r["seconds"] for r in timed]),
                                         "n": len(timed)},
            "completion_tokens": {"median": _median_of([r["completion_tokens"]
                                                        for r in timed]), "n": len(timed)},
            "rows": rows}
    return out


def _share(num: int, den: int) -> dict[str, Any]:
    return {"value": round(num / den, 4) if den else None, "n": den}


def _mean_of(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(float(np.mean(vals)), 4) if vals else None


def _median_of(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(float(statistics.median(vals)), 3) if vals else None


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)), 4)


def bench_worlds(worlds: list[str], *, llm: ChatModel | None = None, live_tasks: int = 2,
                 step_limit: int = 8, config: Thresholds | None = None,
                 policy: bool = True, max_tasks: int | None = None) -> dict[str, Any]:
    """Tool-call overhead per world, and seconds per live run per arm with a chat model.

    Overhead: every task's ground-truth calls executed on fresh episodes (median and p99 in
    ms over n calls), and the cost of a fresh episode and of tau2's scoring. Live runs (with
    ``llm``): the first ``live_tasks`` tasks, each in both arms: no memory, and a memory
    arm given one procedure naming the task's ground-truth tools (a stand-in for a recalled
    skill: it times the longer prompt, it is not recall). ``max_tasks`` bounds the tasks
    whose calls are timed (default every task).
    """
    from .evaluation.live.agent import run_agent
    from .evaluation.live.worlds import Tau2World, get_world
    from .pipeline.skill import Skill

    out: dict[str, Any] = {}
    for name in worlds:
        world = get_world(name)
        assert isinstance(world, Tau2World)  # every named world is one (WORLDS)
        call_ms: list[float] = []
        start_ms: list[float] = []
        score_ms: list[float] = []
        for task in list(world.tasks())[:max_tasks]:
            t0 = time.perf_counter()
            ep = world.start(task.task_id)
            start_ms.append((time.perf_counter() - t0) * 1000)
            for tool, args in world.gold_actions(task.task_id):
                t0 = time.perf_counter()
                ep.execute(tool, args)
                call_ms.append((time.perf_counter() - t0) * 1000)
        for task in list(world.tasks())[:min(10, max_tasks or 10)]:
            ep = world.start(task.task_id)
            t0 = time.perf_counter()
            ep.score([], "agent-stop")
            score_ms.append((time.perf_counter() - t0) * 1000)
        fig: dict[str, Any] = {
            "call_ms": {"median": _pct(call_ms, 50), "p99": _pct(call_ms, 99), "n": len(call_ms)},
            "fresh_episode_ms": {"median": _pct(start_ms, 50), "n": len(start_ms)},
            "score_ms": {"median": _pct(score_ms, 50), "n": len(score_ms)}}
        if llm is not None:
            runs: dict[str, list[dict[str, Any]]] = {"no-memory": [], "memory": []}
            for task in list(world.tasks())[:live_tasks]:
                tools = tuple(dict.fromkeys(t for t, _ in world.gold_actions(task.task_id)))
                skill = Skill(name="task-procedure", description=f"The user wants: {task.goal}",
                              body="\n".join(f"{i}. Call {t}" for i, t in enumerate(tools, 1)),
                              tools_required=tools)
                for arm, rec in (("no-memory", ()), ("memory", (skill,))):
                    r = run_agent(llm, world.start(task.task_id), tool_specs=world.tool_specs(),
                                  policy=world.policy() if policy else "", recalled=rec,
                                  config=config or Thresholds(), step_limit=step_limit,
                                  solo=True)
                    runs[arm].append({"task_id": task.task_id, "wall_s": r.wall_s,
                                      "steps": r.steps, "turns": r.turns,
                                      "prompt_tokens": r.prompt_tokens,
                                      "termination": r.termination, "reward": r.reward,
                                      "cache_hits": r.cache_hits})
            fig["live_run_s"] = {arm: {"median": _median_of([x["wall_s"] for x in rs]),
                                       "n": len(rs), "runs": rs} for arm, rs in runs.items()}
        out[name] = fig
    return out
