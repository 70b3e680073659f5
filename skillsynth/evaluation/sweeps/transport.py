"""How a sweep's points get executed: one interface, one two-phase loop.

A :class:`Transport` runs one phase of points and yields each point as it finishes, with
its error text or None. :func:`run_points` is the plan every transport shares: points that
would ask the model the same distillation questions (the same strategy and synthesis
thresholds) run one of each first, the rest after, so the rest are cache hits rather than
concurrent duplicate requests; a progress bar; each finished point reported as it lands.
The thread pool is here (:class:`ThreadPool`); Dask's, shared or shipped, is
:class:`~.dask_cluster.DaskPoints`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...models.backend import BackendSpec
from .execute import execute_point, failure_text
from .spec import Point, SweepSpec

__all__ = ["ThreadPool", "Transport", "phases", "run_points"]


class Transport(Protocol):
    """Runs the points of one phase; yields ``(point, None)`` for one that finished and
    ``(point, error text)`` for one that failed, in the order they end."""

    def run_phase(self, phase: Sequence[Point]) -> Iterator[tuple[Point, str | None]]: ...


def phases(todo: Sequence[Point]) -> list[list[Point]]:
    """The points in two phases: the first of each synthesis, then the rest."""
    firsts: dict[str, Point] = {}
    for p in todo:
        firsts.setdefault(p.synthesis_key, p)
    first = list(firsts.values())
    return [first, [p for p in todo if p not in first]]


def run_points(todo: Sequence[Point], transport: Transport, *, label: str, progress: bool,
               log: Callable[[str], Any], on_point: Callable[[str], None] | None = None
               ) -> tuple[list[str], dict[str, str]]:
    """Every point of ``todo`` through ``transport``, in :func:`phases`; the ids that ran
    and the errors (first 2,000 characters) of those that failed. One failed point never
    stops the others."""
    ran: list[str] = []
    failed: dict[str, str] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=label, unit="point")
    for phase in phases(todo):
        if not phase:
            continue
        for p, error in transport.run_phase(phase):
            if error is None:
                ran.append(p.id)
                if on_point is not None:
                    on_point(p.id)
            else:
                failed[p.id] = error[:2000]
                log(f"point {p.id} failed: {failed[p.id].splitlines()[0]}")
                if bar is not None:
                    bar.set_postfix_str(f"{len(failed)} failed", refresh=False)
            if bar is not None:
                bar.update(1)
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
        """Execute the phase's points in a pool of ``workers`` threads."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
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
