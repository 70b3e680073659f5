"""Sweep overhead: where a warm point's time goes, and what a whole warm sweep costs.

A warm point asks the models nothing (every answer is in the call cache), so its time is
the sweep machinery's: kernel start-up, imports, and the point's own stages (corpus load,
clustering, recall, validation, live replay, floors, bootstrap, report), read from each
point's ``timings.json``. The target it is held to: a warm sweep of P points on W workers
takes under twice ``single point x P / W``, where the single point is one point run alone
(in this process's thread pool, whatever runs the sweep).
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from .run import run_sweep
from .spec import SweepSpec, expand_points

__all__ = ["STAGES", "bench_sweep"]

#: The stages reported, in the order a point runs them.
STAGES = ("kernel_start", "imports", "corpus_load", "clustering", "recall", "validate", "live",
          "floors", "bootstrap", "report", "other")


def _point_stages(timings: dict[str, Any]) -> dict[str, float]:
    out = {"kernel_start": timings["kernel_start_s"], "imports": timings["imports_s"]}
    out |= {k: float(v) for k, v in timings["stages_s"].items()}
    out["other"] = timings["notebook_s"] - sum(out.values())  # clients, display cells
    return out


def _median(xs: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(xs), 3) if xs else None, "n": len(xs)}


def bench_sweep(spec: str | Path, *, cache: str, repeats: int = 3, workers: int | None = None,
                cluster: str | None = None, results_root: str | Path | None = None,
                log: Any = print, transport: str = "auto") -> dict[str, Any]:
    """Time a warm sweep of ``spec`` and a warm single point, ``repeats`` times each.

    One untimed run first makes the cache warm (free when it already is). Each timed run
    writes a fresh results folder, so nothing is skipped as already done. ``transport`` is
    :func:`~.run.run_sweep`'s (with a scheduler address).

    Returns:
        ``stages`` (per-stage medians over every timed point, with n), ``single_point_s``
        (a lone warm point's notebook time), ``single_sweep_s`` and ``sweep_s`` (sweep wall
        times), ``points``, ``workers``, ``bound_s`` (2 x single point x points / workers)
        and ``ratio`` (sweep_s / (single point x points / workers); the target is < 2).
    """
    full = SweepSpec.load(spec)
    single = dataclasses.replace(full, name=f"{full.name}-single", points=(),
                                 grid={k: [v[0]] for k, v in full.grid.items()})
    n_points = len(expand_points(full))
    n_workers = max(1, min(workers or full.workers, n_points))
    root = Path(results_root) if results_root else Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    kw: dict[str, Any] = {"cache": cache, "progress": False, "log": lambda *_: None,
                          "workers": n_workers, "cluster": cluster, "transport": transport}
    log(f"warm-up: {full.name}, {n_points} point(s)")
    run_sweep(full, results_root=root / "warm-up", **kw)
    # the single point is the point's own cost: one worker of the thread pool, never a
    # cluster (a fresh cluster's start-up is the sweep's overhead, not the point's)
    kw_single = kw | {"cluster": None, "workers": 1, "transport": "auto"}
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    single_point, single_sweep, sweep_s = [], [], []
    settled: str | None = None
    try:
        for i in range(repeats):
            rep = run_sweep(single, results_root=root / f"single-{i}", **kw_single)
            single_sweep.append(rep.wall_s)
            for t in _timings(rep.run_dir):
                single_point.append(t["notebook_s"])
            log(f"single point {i + 1}/{repeats}: {single_point[-1]:.1f} s")
            t0 = time.perf_counter()
            rep = run_sweep(full, results_root=root / f"full-{i}", **kw)
            sweep_s.append(time.perf_counter() - t0)
            settled = rep.transport  # what ``auto`` chose
            n_workers = rep.workers  # a remote cluster's own count
            if rep.failed or rep.llm_calls:
                log(f"note: run {i + 1}: {len(rep.failed)} failed point(s), {rep.llm_calls} "
                    "model call(s) not cached")
            for t in _timings(rep.run_dir):
                for name, secs in _point_stages(t).items():
                    stages.setdefault(name, []).append(secs)
            log(f"sweep {i + 1}/{repeats}: {sweep_s[-1]:.1f} s")
    finally:
        if results_root is None:
            shutil.rmtree(root, ignore_errors=True)
    one = statistics.median(single_point)
    ideal = one * n_points / n_workers
    return {"spec": full.name, "points": n_points, "workers": n_workers, "cluster": cluster,
            "transport": settled if repeats else None,
            "stages": {k: _median(v) for k, v in stages.items() if v},
            "single_point_s": _median(single_point), "single_sweep_s": _median(single_sweep),
            "sweep_s": _median(sweep_s), "bound_s": round(2 * ideal, 2),
            "ratio": round(statistics.median(sweep_s) / ideal, 3)}


def _timings(run_dir: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(run_dir.glob("points/*/timings.json"))]
