"""How a sweep's points get executed: one interface, one two-phase loop.

A :class:`Transport` runs one phase of points and yields each point as it finishes, with
its error text or None. :func:`run_points` is the plan every transport shares: points that
would ask the model the same distillation questions (the same strategy and synthesis
thresholds) run one of each first, the rest after, so the rest are cache hits rather than
concurrent duplicate requests (one point at a time, the spec's order is kept); a progress
bar over points which, where the points' folders are on this machine, also counts the live
runs of the points still running and estimates their time left (a live point can take an
hour); each finished point reported as it lands.
The thread pool is here (:class:`ThreadPool`); Dask's, shared or shipped, is
:class:`~.dask_cluster.DaskPoints`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...models.backend import BackendSpec
from ..point.context import RUNS_EXPECTED
from .execute import execute_point, failure_text
from .spec import Point, SweepSpec

__all__ = ["ThreadPool", "Transport", "live_progress", "phases", "run_points"]

#: Seconds between two looks at the running points' live runs.
_POLL_S = 15.0
#: Live runs written before the bar estimates the time left.
PACE_AFTER = 5


class Transport(Protocol):
    """Runs the points of one phase; yields ``(point, None)`` for one that finished and
    ``(point, error text)`` for one that failed, in the order they end."""

    def run_phase(self, phase: Sequence[Point]) -> Iterator[tuple[Point, str | None]]: ...


def phases(todo: Sequence[Point], concurrent: bool = True) -> list[list[Point]]:
    """The points in two phases: the first of each synthesis, then the rest. Only points
    run side by side need the split; one at a time (``concurrent`` False), the spec's own
    order already puts the first of each synthesis before the rest, so it is kept (a spec
    orders its points on purpose: the controls a design is read against come first)."""
    if not concurrent:
        return [list(todo)]
    firsts: dict[str, Point] = {}
    for p in todo:
        firsts.setdefault(p.synthesis_key, p)
    first = list(firsts.values())
    return [first, [p for p in todo if p not in first]]


def live_progress(points_dir: Path, ids: Sequence[str], since: float = 0.0,
                  now: float | None = None) -> str:
    """The live runs written so far over those expected, summed over the points ``ids``
    that began their live arms at or after ``since`` (a time stamp: a folder left by an
    earlier, interrupted sweep is not progress); "" where none has. Once
    :data:`PACE_AFTER` runs are written, an estimate of the time those points have left at
    the pace so far (each point's runs over the time since it began them, summed: points
    run side by side add up); it says it is one: runs answered from the call cache go
    faster than the model, so a resumed point's first estimate is short."""
    now = time.time() if now is None else now
    done = expected = 0
    pace = 0.0  # runs a second
    for pid in ids:
        folder = points_dir / pid
        try:
            begun = (folder / RUNS_EXPECTED).stat().st_mtime
            if begun < since:
                continue
            want = int((folder / RUNS_EXPECTED).read_text(encoding="utf-8"))
            with (folder / "runs.jsonl").open("rb") as fh:
                got = sum(1 for _ in fh)
        except (OSError, ValueError):
            continue  # not begun, or being written: the next look counts it
        done, expected = done + min(got, want), expected + want
        if got < want:
            pace += got / max(now - begun, 1.0)
    if not expected:
        return ""
    text = f"live runs {done}/{expected}"
    if done >= PACE_AFTER and pace > 0:  # a pace means a point still has runs to write
        text += f", about {_left((expected - done) / pace)} left"
    return text


def _left(seconds: float) -> str:
    """A coarse duration: an estimate is not worth its seconds."""
    minutes = max(1, round(seconds / 60))
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def run_points(todo: Sequence[Point], transport: Transport, *, label: str, progress: bool,
               log: Callable[[str], Any], on_point: Callable[[str], None] | None = None,
               points_dir: Path | None = None, concurrent: bool = True
               ) -> tuple[list[str], dict[str, str]]:
    """Every point of ``todo`` through ``transport``, in :func:`phases`; the ids that ran
    and the errors (first 2,000 characters) of those that failed. One failed point never
    stops the others. ``points_dir``: where the points write their folders, when on this
    machine (the bar then shows :func:`live_progress` of the points not yet finished).
    ``concurrent``: whether the transport may run points side by side."""
    ran: list[str] = []
    failed: dict[str, str] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=label, unit="point")
    # a second's slack: file times lag the clock by a tick (an earlier sweep is far older)
    running, started = [p.id for p in todo], time.time() - 1.0
    stop = threading.Event()

    def postfix() -> None:
        if bar is None:
            return
        live = live_progress(points_dir, list(running), started) \
            if points_dir is not None else ""
        bar.set_postfix_str(", ".join(x for x in (live, f"{len(failed)} failed"
                                                  if failed else "") if x))

    def watch() -> None:
        while not stop.wait(_POLL_S):
            postfix()

    watcher = threading.Thread(target=watch, daemon=True) if bar is not None \
        and points_dir is not None else None
    if watcher is not None:
        watcher.start()
    try:
        for phase in phases(todo, concurrent):
            for p, error in transport.run_phase(phase) if phase else ():
                running.remove(p.id)
                if error is None:
                    ran.append(p.id)
                    if on_point is not None:
                        on_point(p.id)
                else:
                    failed[p.id] = error[:2000]
                    log(f"point {p.id} failed: {failed[p.id].splitlines()[0]}")
                postfix()
                if bar is not None:
                    bar.update(1)
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
        if bar is not None:
            bar.close()
    return ran, failed


@dataclass(frozen=True)
class ThreadPool:
    """Points on this machine: ``workers`` at once, each its own notebook kernel process
    (so threads suffice: the work is in the kernels)."""

    spec: SweepSpec
    corpus: Path
    backend: BackendSpec
    run_dir: Path
    notebook: Path
    workers: int

    def run_phase(self, phase: Sequence[Point]) -> Iterator[tuple[Point, str | None]]:
        """Execute the phase's points in a pool of ``workers`` threads.

        On Ctrl-C (or any error here) the points' kernels are stopped before the pool is
        left: they are processes of their own that the terminal's interrupt does not reach,
        and the pool would otherwise wait for each running point to finish (a live point
        takes an hour). A stopped point has no summary, so a re-run resumes it.
        """
        before = _descendants()
        pool = ThreadPoolExecutor(max_workers=self.workers)
        try:
            futures = {pool.submit(execute_point, p, self.spec, self.corpus, self.backend,
                                   self.run_dir / "points" / p.id, self.notebook): p
                       for p in phase}
            for fut in as_completed(futures):
                try:
                    fut.result()
                except Exception as exc:  # noqa: BLE001 (a point's failure is its result)
                    yield futures[fut], failure_text(exc)
                else:
                    yield futures[fut], None
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            _stop_processes(_descendants() - before)
            raise
        finally:
            pool.shutdown(wait=True)


def _descendants() -> set[Any]:
    """This process's child processes and theirs (psutil handles)."""
    import psutil

    return set(psutil.Process().children(recursive=True))


def _stop_processes(procs: Iterable[Any], *, grace_s: float = 10.0) -> None:
    """Terminate ``procs`` (psutil handles), and kill those still alive after ``grace_s``."""
    import psutil

    procs = list(procs)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
