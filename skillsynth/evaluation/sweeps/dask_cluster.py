"""Sweep points on a Dask cluster: one task per point, the papermill notebook run on a worker.

:func:`~.run.run_sweep` calls this module when it is given ``cluster``:

* ``"local"``: a :class:`distributed.LocalCluster` of ``workers`` single-threaded worker
  processes on this machine. The workers use the embedded models the sweep started once
  (they are on the same host), so results equal a serial run's.
* a scheduler address (``tcp://host:8786``): an existing cluster. The model backend
  resolves on each worker: ``local`` starts the embedded models once per worker process
  (kept for its later points, stopped when the worker closes), ``lemonade`` is each
  worker's own ``localhost`` Lemonade, ``endpoints`` names servers every worker uses. The
  goal-similarity figures (and a live-history corpus) are computed by a worker too, so the
  submitting machine needs no models.

Without ``cluster`` a sweep keeps its thread pool rather than defaulting to a LocalCluster:
every point is already its own kernel process, so worker processes only add their start-up
and their memory, and change no result (the measured cost is in docs/evaluation.md).

Before any point runs, every worker must import skillsynth at the submitting side's
version. How points reach the run folder is the ``transport``:

* ``shared`` (a LocalCluster, or workers all on this host): workers write the run folder
  and the call cache directly, so both must be on a path every worker can write. The call
  cache is one SQLite file in WAL mode: correct for any number of processes on one host
  (first stored answer wins), not over a network filesystem.
* ``shipped`` (chosen when any worker runs on another host; ``transport="shipped"`` asks
  for it on one host too): nothing shared at all. The corpus and the call cache (whole
  once, then only its new rows) travel to the workers, each point comes back packed, and the answers workers added
  are merged into this machine's cache (see :mod:`.shipping`). Each worker's model backend
  resolves on its own host, so N hosts with N model servers run N points at once.

A results folder at an fsspec URL is written by this process only, from a local mirror
(:mod:`.results_url`): workers never see the URL.

A point is written to a staging folder and renamed into ``points/<id>/`` when it ends: a
worker lost mid-point leaves no half-written point behind, the scheduler re-runs its task
on another worker (Dask's ``allowed-failures``), and if the lost worker's kernel still
finishes, the first finished copy wins. Dask's ``retries=`` is not used: a point that raised
fails deterministically (the notebook's error is recorded, as in a local sweep).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import EvaluationError
from ...models.backend import BackendSpec
from ..point.run import SUMMARY
from .backends import worker_backend
from .execute import execute_point, failure_text
from .shipping import MergeCounts, Shipper
from .spec import Point, SweepSpec

__all__ = [
    "CONNECT_TIMEOUT_S",
    "LOCAL",
    "TRANSPORTS",
    "ClusterFacts",
    "DaskPoints",
    "check_workers",
    "open_cluster",
]

#: The ``cluster`` value that starts a LocalCluster on this machine.
LOCAL = "local"
#: How long to try to reach a scheduler (and to wait for its first worker).
CONNECT_TIMEOUT_S = 10.0
#: How points reach the run folder (``auto`` settles on one of the other two).
TRANSPORTS = ("auto", "shared", "shipped")
#: Sends of a shipped point whose scattered data was lost (the first included).
RESHIP_TRIES = 3


@dataclass(frozen=True)
class ClusterFacts:
    """What the pre-flight check found.

    Attributes:
        address: the scheduler's address.
        workers: worker count.
        hosts: the workers' host names.
        local: True for a LocalCluster this sweep started (models shared from this process).
        transport: ``shared`` or ``shipped`` (see the module's docstring).
    """

    address: str
    workers: int
    hosts: tuple[str, ...]
    local: bool
    transport: str = "shared"


@contextlib.contextmanager
def open_cluster(cluster: str, *, workers: int, timeout_s: float = CONNECT_TIMEOUT_S
                 ) -> Iterator[tuple[Any, bool]]:
    """A connected ``distributed.Client`` and whether its cluster is a LocalCluster of ours.

    Raises:
        EvaluationError: the scheduler cannot be reached within ``timeout_s`` or has no
            worker (the message names the address).
    """
    from distributed import Client, LocalCluster

    if cluster == LOCAL:
        # one thread per worker: a point is a kernel process; threads would only queue
        # papermill calls inside one worker
        try:
            lc = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None, silence_logs=logging.ERROR)
        except (OSError, TimeoutError, RuntimeError) as exc:
            raise EvaluationError(f"cannot start a Dask LocalCluster of {workers} worker "
                                  f"process(es): {type(exc).__name__}: {exc}") from exc
        with lc, Client(lc) as client:
            yield client, True
        return
    try:
        client = Client(cluster, timeout=timeout_s)
    except (OSError, TimeoutError, ValueError) as exc:
        raise EvaluationError(f"cannot reach the Dask scheduler at {cluster} within "
                              f"{timeout_s:.0f} s ({type(exc).__name__}: {exc}); nothing was "
                              "started. Check the address and that `dask scheduler` runs "
                              "there") from exc
    try:
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except (OSError, TimeoutError) as exc:
            raise EvaluationError(f"the Dask scheduler at {cluster} has no worker after "
                                  f"{timeout_s:.0f} s; start one (`dask worker {cluster}`)"
                                  ) from exc
        yield client, False
    finally:
        client.close()


def check_workers(client: Any, address: str, local: bool, *, writable: Sequence[Path],
                  cache: str | None, transport: str = "auto") -> ClusterFacts:
    """Refuse a cluster whose workers cannot run this sweep (before any point runs), and
    settle the transport: ``auto`` is ``shared`` when every worker runs on this host (or the
    cluster is a LocalCluster), else ``shipped``.

    Raises:
        EvaluationError: a worker lacks skillsynth or has another version (both versions
            named); with the ``shared`` transport, a worker cannot write one of ``writable``
            (the path and the worker named) or the workers span several hosts while sharing
            one SQLite call cache.
    """
    if transport not in TRANSPORTS:
        raise EvaluationError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    import cloudpickle

    from ... import __version__
    from . import _worker_probe

    cloudpickle.register_pickle_by_value(_worker_probe)  # runs even without skillsynth
    try:
        facts: dict[str, Any] = client.run(_worker_probe.worker_facts,
                                           [str(p) for p in writable], on_error="return")
    finally:
        cloudpickle.unregister_pickle_by_value(_worker_probe)
    for worker, f in sorted(facts.items()):
        if isinstance(f, BaseException):
            raise EvaluationError(f"Dask worker {worker} (scheduler {address}) could not run "
                                  f"the pre-flight check: {type(f).__name__}: {f}")
        if f["skillsynth"] is None:
            raise EvaluationError(f"Dask worker {worker} on {f['host']} cannot import "
                                  f"skillsynth ({f['import_error']}); this sweep needs "
                                  f"skillsynth {__version__} on every worker")
        if f["skillsynth"] != __version__:
            raise EvaluationError(f"Dask worker {worker} on {f['host']} has skillsynth "
                                  f"{f['skillsynth']}, this sweep runs skillsynth "
                                  f"{__version__}; install the same version on every worker")
    hosts = tuple(sorted({f["host"] for f in facts.values()}))
    elsewhere = bool(set(hosts) - {socket.gethostname()})
    if transport == "auto":
        transport = "shipped" if elsewhere and not local else "shared"
    if transport == "shipped":
        if local:
            raise EvaluationError("a LocalCluster shares this machine's folders; the shipped "
                                  "transport is for workers that do not")
        return ClusterFacts(address=address, workers=len(facts), hosts=hosts, local=local,
                            transport="shipped")
    for worker, f in sorted(facts.items()):
        for path, err in f["unwritable"].items():
            raise EvaluationError(f"Dask worker {worker} on {f['host']} cannot write {path} "
                                  f"({err}); the run folder and the call cache must be on a "
                                  "path every worker can write (a shared filesystem), or use the "
                                  "shipped transport")
    if cache is not None and elsewhere:
        raise EvaluationError(f"the workers of {address} run on {', '.join(hosts)}: the call "
                              f"cache {cache} is one SQLite file, which is only safe for "
                              "writers on one host (its write-ahead log needs shared memory); "
                              "use the shipped transport (the default for such a cluster)")
    return ClusterFacts(address=address, workers=len(facts), hosts=hosts, local=local,
                        transport="shared")


def _point_task(point: Point, spec: SweepSpec, corpus: Path, backend: BackendSpec,
                run_dir: Path, notebook: Path) -> dict[str, Any]:
    """One point on a worker: executed in a staging folder, then renamed into place.

    Returns ``{"error": None}`` or the point's error text; never raises for a point's own
    failure (that would make Dask retry a deterministic error).
    """

    points = run_dir / "points"
    target = points / point.id
    if (target / SUMMARY).exists():  # a lost worker's copy finished after all
        return {"error": None}
    staging = points / f".staging-{point.id}-{uuid.uuid4().hex[:8]}"
    error: str | None = None
    try:
        execute_point(point, spec, corpus, worker_backend(backend), staging, notebook)
    except Exception as exc:  # noqa: BLE001 (recorded as the point's failure)
        error = failure_text(exc)
    return {"error": error if _into_place(staging, target) else None}


def _into_place(staging: Path, target: Path) -> bool:
    """Rename a point's finished attempt to ``target``; False when a copy that finished
    first is already there (it wins, this attempt is removed)."""
    if (target / SUMMARY).exists():
        shutil.rmtree(staging, ignore_errors=True)
        return False
    try:
        if target.exists():
            shutil.rmtree(target)  # an unfinished copy (no summary): replaced
        staging.rename(target)
    except OSError:
        if not (target / SUMMARY).exists():
            raise
        shutil.rmtree(staging, ignore_errors=True)  # another attempt renamed first: it wins
        return False
    return True


@dataclass
class DaskPoints:
    """The Dask transport (:class:`~.transport.Transport`): one task per point.

    ``shared``: a worker executes the point in a staging folder of the run folder and
    renames it into place. ``shipped`` (``shipper`` given): the corpus and the call cache's
    new rows travel with the task, the point comes back packed and is unpacked here, and the
    answers the worker added are merged into this machine's cache (counted in ``merged``).
    """

    client: Any
    facts: ClusterFacts
    spec: SweepSpec
    corpus: Path
    backend: BackendSpec
    run_dir: Path
    notebook: Path
    shipper: Shipper | None = None
    merged: MergeCounts = field(default_factory=MergeCounts)

    def run_phase(self, phase: Sequence[Point]) -> Iterator[tuple[Point, str | None]]:
        """Submit the phase's points; yield each as the cluster finishes it.

        Shipped: a point whose scattered corpus or cache left with every worker that held
        it (workers that joined after the scatter, then the holders lost) is sent again
        with the data re-scattered, up to ``RESHIP_TRIES`` times; it had not run wrong."""
        from concurrent.futures import CancelledError

        from distributed import as_completed

        args = self._args()
        futures = {self._submit(p, args): (p, args) for p in phase}
        tries = dict.fromkeys((p.id for p in phase), 1)
        pending = as_completed(futures)
        for fut in pending:
            p, sent = futures.pop(fut)
            try:
                result = fut.result()
                error = result["error"]
                if self.shipper is not None:
                    self.merged += self.shipper.take_back(result["answers"])
                    _place_shipped(result["folder"], self.run_dir / "points", p.id)
            except Exception as exc:  # noqa: BLE001 (a task the cluster gave up on)
                if (self.shipper is not None and isinstance(exc, CancelledError)
                        and self.shipper.lost([sent[1], *sent[2]])  # its corpus, cache
                        and tries[p.id] < RESHIP_TRIES):
                    tries[p.id] += 1
                    args = self._args()  # scatters what is lost (once for all its points)
                    again = self._submit(p, args)
                    futures[again] = (p, args)
                    pending.add(again)
                    continue
                error = f"{type(exc).__name__}: {exc}"
            yield p, error

    def _args(self) -> tuple[Any, ...]:
        """A point task's arguments after the point; shipped: what is new in the cache
        (phase 2 meets phase 1's answers) and the corpus, each scattered when not held."""
        if self.shipper is not None:
            return (self.spec, self.shipper.corpus(self.corpus), self.shipper.snapshots(),
                    self.backend)
        return (self.spec, self.corpus, self.backend, self.run_dir, self.notebook)

    def _submit(self, point: Point, args: tuple[Any, ...]) -> Any:
        from .shipping import shipped_point

        task: Callable[..., Any] = _point_task if self.shipper is None else shipped_point
        return self.client.submit(task, point, *args, pure=False,
                                  key=f"skillsynth-point-{point.id}-{uuid.uuid4().hex[:6]}")

    def finish(self, log: Callable[[str], Any]) -> None:
        """After the last phase: lost workers' staging folders go; conflicts are said."""
        for stale in (self.run_dir / "points").glob(".staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        if self.merged.conflicts:
            log(f"{self.merged.conflicts} answer(s) came back from two workers differently; "
                "the first stored is kept, the points that used the other are as they ran")


def _place_shipped(folder: bytes | None, points: Path, point_id: str) -> None:
    """Unpack a shipped point into ``points/<id>/`` (a finished copy already there wins)."""
    from .shipping import unpack_folder

    target = points / point_id
    if folder is None or (target / SUMMARY).exists():
        return
    staging = points / f".staging-{point_id}-{uuid.uuid4().hex[:8]}"
    unpack_folder(folder, staging)
    _into_place(staging, target)
