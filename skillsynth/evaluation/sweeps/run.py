"""Sweeps: a grid of evaluation points, each executed as a papermill notebook.

A sweep spec (YAML, ``eval/sweeps/NAME.yaml``) names a corpus, a backend and a grid; every
combination is one point. :func:`run_sweep` builds the corpus once, starts the embedded
models once (their URLs go to every point), executes the packaged notebook
``notebooks/sweep_point.ipynb`` per point in parallel workers and writes
``<results>/<name>/``:

* ``spec.yaml``: the spec the run was started with (a resumed run must use the same one);
* ``corpus/``: the corpus the points read (unless the spec names an existing database);
* ``points/<id>/``: the executed notebook and :func:`~skillsynth.evaluation.run_point`'s
  files; a point with a ``summary.json`` is done and is skipped when the sweep is re-run,
  so a killed sweep resumes where it stopped;
* ``similarity.json``: same-family and different-family goal similarities (where tau sits);
* ``results.jsonl`` and ``summary.json``: every point's rows and KPIs together (rewritten as
  each point finishes, so a running or stopped sweep can be reported on).

The spec itself (keys, checks, grid expansion) is :mod:`.spec`; points on a Dask
cluster (``cluster=``) are :mod:`.dask_cluster`.

Distillations are shared across points through the call cache: points that differ only in
recall settings (tau for recall, max_recall_body_chars) ask the model the same questions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import EvaluationError, SkillsynthError
from ...models.backend import BackendSpec, open_clients
from ..point.record import RunRecord, utc_now
from ..point.summary import SUMMARY, PointSummary
from .notebooks import find_notebook
from .results_url import is_url
from .resume import check_fresh, check_resume
from .shipping import MergeCounts, Shipper
from .similarity import similarities_with
from .spec import GRID_KEYS, Point, SweepSpec, expand_points
from .summary import PointEntry, SweepSummary
from .transport import ThreadPool, run_points

__all__ = [
    "GRID_KEYS",
    "Point",
    "SweepReport",
    "SweepSpec",
    "aggregate",
    "expand_points",
    "find_notebook",
    "run_sweep",
]


def _build_corpus(spec: SweepSpec, run_dir: Path, log: Any) -> Path:
    """The corpus the points read: the spec's (imported, generated or named), or under
    ``history: ideal`` the ideal attempts of its tasks, or of every task of the world
    (``corpus/ideal.db``, no model)."""
    db = None if "world" in spec.corpus else _source_corpus(spec, run_dir, log)
    if db is not None and spec.options.history != "ideal":
        return db
    from ..live.worlds import get_world
    from ..point.ideal import ideal_attempts, ideal_history

    rep = ideal_history(get_world(spec.options.world), db, run_dir / "corpus" / "ideal.db",
                        attempts=ideal_attempts(spec.options.k, spec.options.family))
    if rep.already_present:
        log(f"ideal history: {rep.already_present} task(s) as built before")
    else:
        log(f"ideal history: {len(rep.tasks)} task(s) x {rep.attempts} attempts "
            f"({rep.from_recorded} from a recorded success, {rep.from_gold} from gold calls); "
            f"{len(rep.left_out)} left out: {rep.left_out}")
        log(f"ideal history: {rep.sources_line()}")
    return Path(rep.db_path)


def _source_corpus(spec: SweepSpec, run_dir: Path, log: Any) -> Path:
    kind, conf = next(iter(spec.corpus.items()))
    root = Path(spec.source).resolve().parent if spec.source else Path.cwd()
    if kind == "db":
        db = Path(conf)
        db = db if db.is_absolute() else root / db
        if not db.exists():
            raise EvaluationError(f"corpus database {db} not found (spec {spec.source})")
        return db
    db = run_dir / "corpus" / "corpus.db"
    if (run_dir / "corpus" / "BUILT").exists():
        return db
    if (run_dir / "corpus").exists():
        import shutil

        shutil.rmtree(run_dir / "corpus")  # a build that did not finish
    (run_dir / "corpus").mkdir(parents=True)
    conf = dict(conf or {})
    if kind == "synthetic":
        from ...corpora.synthetic import NoiseConfig, generate_corpus

        noise = conf.pop("noise", None)
        generate_corpus(db, noise=NoiseConfig(**noise) if noise else None, **conf)
    else:
        from ...corpora.importing import import_corpus

        files = [f if Path(f).is_absolute() else str(root / f) for f in conf.pop("files")]
        tasks = conf.pop("tasks", None)
        tasks = str(root / tasks) if tasks and not Path(tasks).is_absolute() else tasks
        rep = import_corpus(conf.pop("format"), files, db, tasks=tasks, **conf)
        log(f"imported {rep.sessions_imported} sessions into {db}")
    (run_dir / "corpus" / "BUILT").write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return db


def _live_corpus(spec: SweepSpec, run_dir: Path, backend: BackendSpec, progress: bool,
                 log: Any) -> Path:
    """The agent's k+1 live attempts per task (resumable: finished runs are kept)."""
    from ..live.history import live_history
    from ..live.worlds import get_world

    conf, opts = dict(spec.corpus["live"]), spec.options
    db = run_dir / "corpus" / "corpus.db"
    with open_clients(backend) as (chat, _):
        rep = live_history(get_world(opts.world), chat, db, tasks=[str(t) for t in conf["tasks"]],
                           attempts=opts.k + 1,
                           step_limit=int(conf.get("step_limit", opts.step_limit)),
                           temperature=float(conf.get("temperature", 0.7)), policy=opts.policy,
                           model=backend.chat_model, progress=progress)
    log(f"live history: {rep.ran} run(s) now, {rep.already_present} kept; "
        f"{rep.successes} succeeded")
    return db


@dataclass(frozen=True)
class SweepReport:
    """What one :func:`run_sweep` call did (``llm_calls`` and ``cache_hits``: over the points
    it ran; ``cluster``: the Dask scheduler's address, None for the thread pool)."""

    run_dir: Path
    points: int
    ran: tuple[str, ...]
    skipped: tuple[str, ...]
    failed: dict[str, str]
    wall_s: float
    llm_calls: int
    cache_hits: int
    cluster: str | None = None
    workers: int = 1
    transport: str | None = None
    answers_returned: MergeCounts | None = None
    results_url: str | None = None


def _backend_spec(spec: SweepSpec, cache: str | None) -> BackendSpec:
    """The spec's backend as configured, nothing started (a remote cluster's workers
    resolve ``local`` themselves)."""
    return spec.backend_spec(cache)


@contextlib.contextmanager
def _shared_backend(spec: SweepSpec, cache: str | None) -> Iterator[BackendSpec]:
    """Start the embedded models once for all points; Lemonade and named endpoints are
    shared as they are."""
    backend = _backend_spec(spec, cache)
    if backend.backend != "local":
        yield backend
        return
    from ...models.decoding import Decoding
    from ...models.serve import locate_models, serve_local

    with serve_local(locate_models(chat=backend.chat_model),
                     request_timeout_s=backend.timeout_s,
                     decoding=Decoding(backend.decoding)) as servers:  # type: ignore[arg-type]
        assert servers.chat is not None and servers.embed is not None
        yield BackendSpec("endpoints", chat_model=servers.chat.model,
                          embed_model=servers.embed.model, chat_url=servers.chat.base_url,
                          embed_url=servers.embed.base_url, cache=cache,
                          timeout_s=backend.timeout_s, chat_decoding=servers.chat.decoding)


def _shipped_live_corpus(client: Any, spec: SweepSpec, run_dir: Path, backend: BackendSpec,
                         shipper: Shipper) -> tuple[Path, MergeCounts]:
    """A live-history corpus built on a worker (shipped transport), kept in the run folder."""
    from .shipping import shipped_live_corpus

    db = run_dir / "corpus" / "corpus.db"
    if (run_dir / "corpus" / "BUILT").exists():
        return db, MergeCounts()
    live = functools.partial(_live_corpus, progress=False, log=print)
    out = client.submit(shipped_live_corpus, live, shipper.snapshots(), backend, spec,
                        pure=False).result()
    db.parent.mkdir(parents=True, exist_ok=True)
    for name, data in out["corpus"].files:  # the database and its labels
        part = db.with_name(f".{name}.part")
        part.write_bytes(data)
        part.rename(db.with_name(name))
    (run_dir / "corpus" / "BUILT").write_text("shipped\n", encoding="utf-8")
    return db, shipper.take_back(out["answers"])


def _shipped_similarities(client: Any, corpus: Path, spec: SweepSpec, backend: BackendSpec,
                          shipper: Shipper) -> tuple[dict[str, Any], MergeCounts]:
    """The goal similarities computed on a worker (shipped transport)."""
    from .shipping import shipped_call

    out = client.submit(shipped_call, similarities_with, shipper.corpus(corpus), shipper.snapshots(),
                        backend, spec.options.seed, spec.options.family, pure=False).result()
    return out["value"], shipper.take_back(out["answers"])


def run_sweep(spec: SweepSpec | str | Path, *, results_root: str | Path = "eval/results",
              workers: int | None = None, cache: str | None = None, progress: bool = True,
              log: Any = print, cluster: str | None = None,
              connect_timeout_s: float | None = None, transport: str = "auto",
              mirror: str | Path | None = None,
              on_point: Callable[[str], None] | None = None) -> SweepReport:
    """Run every point of ``spec`` not already done; aggregate all points.

    Args:
        spec: a :class:`SweepSpec` or the path of its YAML file.
        results_root: where ``<name>/`` is written: a folder, or an fsspec URL
            (``s3://bucket/runs``; see :mod:`.results_url`: the sweep runs in a local mirror
            and uploads each point as it finishes).
        workers: points at once (default: the spec's ``workers``); with ``cluster="local"``
            the LocalCluster's worker processes.
        cache: the call cache file (default ``<models home>/cache.db``).
        progress: show a progress bar over points.
        log: where progress lines go.
        cluster: None: this process runs the points in a thread pool (each point is its
            own kernel process); ``"local"``: a Dask LocalCluster of ``workers`` worker
            processes; else a Dask scheduler address (see :mod:`.dask_cluster`).
        connect_timeout_s: how long to try to reach the scheduler (default
            :data:`~.dask_cluster.CONNECT_TIMEOUT_S`).
        transport: with a scheduler address, how points reach the run folder: ``auto``
            (``shared`` when every worker runs on this host, else ``shipped``), ``shared``
            (workers write the run folder and the cache), ``shipped`` (corpus and cache
            travel to the workers, points come back; nothing shared).
        mirror: with a results URL, the local mirror's folder (default: under the models
            home, by URL).
        on_point: called with each point's id as soon as it has finished.

    Raises:
        ConfigError: the run folder holds a different spec (resume only the same sweep), or
            finished points another version of skillsynth ran (:func:`.resume.stale_points`).
        EvaluationError: the scheduler cannot be reached, or its workers lack skillsynth at
            this version or cannot write the run folder or the cache (nothing has run).
    """
    from ...models.serve import default_cache_path

    spec = spec if isinstance(spec, SweepSpec) else SweepSpec.load(spec)
    if is_url(results_root):
        return _run_sweep_at_url(spec, str(results_root), mirror, workers=workers, cache=cache,
                                 progress=progress, log=log, cluster=cluster,
                                 connect_timeout_s=connect_timeout_s, transport=transport)
    t0 = time.perf_counter()
    started = utc_now()
    run_dir = (Path(results_root) / spec.name).resolve()
    spec_text = check_resume(spec, run_dir)
    notebook = find_notebook("sweep_point.ipynb")
    points = expand_points(spec)
    check_fresh(spec, points, run_dir)
    todo = [p for p in points if not (run_dir / "points" / p.id / SUMMARY).exists()]
    skipped = tuple(p.id for p in points if p not in todo)
    n_workers = max(1, min(workers or spec.workers, len(todo) or 1))
    cache_path = cache or str(default_cache_path())
    with contextlib.ExitStack() as stack:
        site = _Site.open(stack, spec, run_dir, cache_path, cluster=cluster, workers=n_workers,
                          connect_timeout_s=connect_timeout_s, transport=transport, log=log)
        (run_dir / "spec.yaml").write_text(spec_text, encoding="utf-8")
        if skipped:
            log(f"{len(skipped)} of {len(points)} point(s) already done; running {len(todo)}")
        # an imported corpus is built before any model starts (a bad one fails fast)
        corpus = None if spec.options.history == "live" else \
            _build_corpus(spec, run_dir, log).resolve()
        site.start_models(stack, spec, cache_path)
        corpus = corpus or _live_corpus_at(site, spec, run_dir, progress, log)
        if not (run_dir / "similarity.json").exists():
            sims = _similarities_at(site, corpus, spec)
            (run_dir / "similarity.json").write_text(json.dumps(sims), encoding="utf-8")
        ran, failed = site.run_points(todo, spec, corpus, run_dir, notebook, n_workers,
                                      progress, log,
                                      _keeping_summary(run_dir, points, spec, started, on_point,
                                                       log))
    return _finish(run_dir, points, spec, started, t0, ran, skipped, failed, site, n_workers)


def _keeping_summary(run_dir: Path, points: Sequence[Point], spec: SweepSpec, started: str,
                     on_point: Callable[[str], None] | None,
                     log: Callable[[str], Any] = print) -> Callable[[str], None]:
    """``on_point`` that first rewrites ``summary.json`` over the points finished so far: a
    sweep still running, or stopped, can be reported on (its header says how many points
    finished, and the gate fails until all have). A rewrite that fails is said and the
    sweep goes on: the points still run, and the summary at the end is written again."""
    def finished(point_id: str) -> None:
        try:
            aggregate(run_dir, points, spec, started_utc=started).write(run_dir)
        except (OSError, ValueError, SkillsynthError) as exc:
            log(f"summary.json not rewritten after point {point_id}: {exc}")
        if on_point is not None:
            on_point(point_id)
    return finished


def _finish(run_dir: Path, points: list[Point], spec: SweepSpec, started: str, t0: float,
            ran: Sequence[str], skipped: tuple[str, ...], failed: dict[str, str], site: _Site,
            n_workers: int) -> SweepReport:
    """Aggregate every point, record this invocation's traffic and executor, and report."""
    summary = aggregate(run_dir, points, spec, started_utc=started)
    ran_entries = summary.entries(ran)
    llm_calls = sum(e.llm_calls for e in ran_entries)
    cache_hits = sum(e.cache_hits for e in ran_entries)
    facts, merged = site.facts, site.merged
    # this invocation's model traffic (a resumed sweep's earlier points are in their own)
    this_run = {"ran": list(ran), "llm_calls": llm_calls, "cache_hits": cache_hits,
                "executor": "thread pool" if facts is None else "dask",
                "cluster": None if facts is None else facts.address,
                "workers": n_workers if facts is None else facts.workers,
                "transport": None if facts is None else facts.transport,
                "answers_returned": None if merged is None else asdict(merged)}
    dataclasses.replace(summary, failed=failed, this_run=this_run).write(run_dir)
    return SweepReport(run_dir=run_dir, points=len(points), ran=tuple(ran), skipped=skipped,
                       failed=failed, wall_s=round(time.perf_counter() - t0, 2),
                       llm_calls=llm_calls, cache_hits=cache_hits,
                       cluster=None if facts is None else facts.address,
                       workers=n_workers if facts is None else facts.workers,
                       transport=None if facts is None else facts.transport,
                       answers_returned=merged)


@dataclass
class _Site:
    """Where a sweep's work runs: this machine (no ``client``), or a Dask cluster whose
    workers share this host (``facts.local``) or not, the shipped transport's ``shipper``
    carrying what they need. Answers to one question: does a model call run here?"""

    client: Any = None
    facts: Any = None
    shipper: Shipper | None = None
    merged: MergeCounts | None = None
    backend: BackendSpec = field(default_factory=lambda: BackendSpec("local"))

    @classmethod
    def open(cls, stack: contextlib.ExitStack, spec: SweepSpec, run_dir: Path,
             cache_path: str, *, cluster: str | None, workers: int,
             connect_timeout_s: float | None, transport: str, log: Any) -> _Site:
        """Reach the cluster (first: an unreachable scheduler fails before anything runs)
        and check its workers; the models start later (:meth:`start_models`)."""
        client = facts = None
        if cluster is not None:
            from .dask_cluster import CONNECT_TIMEOUT_S, check_workers, open_cluster

            client, local = stack.enter_context(open_cluster(
                cluster, workers=workers, timeout_s=connect_timeout_s or CONNECT_TIMEOUT_S))
        (run_dir / "points").mkdir(parents=True, exist_ok=True)
        Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
        if client is not None:
            facts = check_workers(client, str(cluster), local,
                                  writable=[run_dir / "points", Path(cache_path).parent],
                                  cache=cache_path, transport=transport)
            log(f"Dask: {facts.workers} worker(s) on {', '.join(facts.hosts)}; points "
                f"{'travel through the scheduler' if facts.transport == 'shipped' else 'are written in place'}"
                f" ({facts.transport} transport)")
        shipper = Shipper(client, cache_path) \
            if facts is not None and facts.transport == "shipped" else None
        return cls(client=client, facts=facts, shipper=shipper)

    def start_models(self, stack: contextlib.ExitStack, spec: SweepSpec, cache_path: str
                     ) -> None:
        """Start the models here, or have each remote worker start its own."""
        if self.remote:
            from .backends import register_model_servers

            self.backend = _backend_spec(spec, cache_path)  # the workers resolve the models
            register_model_servers(self.client, self.backend)
        else:
            self.backend = stack.enter_context(_shared_backend(spec, cache_path))

    @property
    def remote(self) -> bool:
        """Model calls run on Dask workers on other hosts, with the backend they resolve."""
        return self.facts is not None and not self.facts.local

    def on_worker(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, backend=..., **kwargs)`` on a worker (remote) or here."""
        if self.remote:
            from .backends import on_worker

            return self.client.submit(on_worker, functools.partial(fn, **kwargs),
                                      self.backend, *args, pure=False).result()
        return fn(*args, backend=self.backend, **kwargs)

    def take_back(self, answers: MergeCounts) -> None:
        self.merged = answers + (self.merged or MergeCounts())

    def run_points(self, todo: Sequence[Point], spec: SweepSpec, corpus: Path, run_dir: Path,
                   notebook: Path, workers: int, progress: bool, log: Any,
                   on_point: Callable[[str], None] | None) -> tuple[list[str], dict[str, str]]:
        """The points through this site's transport (:func:`~.transport.run_points`)."""
        if self.facts is None:
            pool = ThreadPool(spec=spec, corpus=corpus, backend=self.backend, run_dir=run_dir,
                              notebook=notebook, workers=workers)
            return run_points(todo, pool, label=f"sweep {spec.name}", progress=progress,
                              log=log, on_point=on_point, points_dir=run_dir / "points",
                              concurrent=workers > 1)
        from .dask_cluster import DaskPoints

        dask = DaskPoints(client=self.client, facts=self.facts, spec=spec, corpus=corpus,
                          backend=self.backend, run_dir=run_dir, notebook=notebook,
                          shipper=self.shipper)
        ran, failed = run_points(todo, dask, progress=progress, log=log, on_point=on_point,
                                 label=f"sweep {spec.name} ({self.facts.workers} Dask workers)")
        dask.finish(log)
        if self.shipper is not None:
            self.take_back(dask.merged)
        return ran, failed


def _live_corpus_at(site: _Site, spec: SweepSpec, run_dir: Path, progress: bool, log: Any
                    ) -> Path:
    """The agent's own runs as the corpus: they need the model, so they run where the
    models do."""
    if site.shipper is not None:
        corpus, merged = _shipped_live_corpus(site.client, spec, run_dir, site.backend,
                                              site.shipper)
        site.take_back(merged)
        return corpus
    if site.remote:
        return Path(site.on_worker(_live_corpus, spec, run_dir, progress=False,
                                   log=print)).resolve()
    return _live_corpus(spec, run_dir, site.backend, progress, log).resolve()


def _similarities_at(site: _Site, corpus: Path, spec: SweepSpec) -> dict[str, Any]:
    """The corpus's goal similarities, embedded where the models run."""
    if site.shipper is not None:
        sims, answers = _shipped_similarities(site.client, corpus, spec, site.backend,
                                              site.shipper)
        site.take_back(answers)
        return sims
    return dict(site.on_worker(similarities_with, corpus, spec.options.seed, spec.options.family))


def _run_sweep_at_url(spec: SweepSpec, url: str, mirror: str | Path | None,
                      **kwargs: Any) -> SweepReport:
    """:func:`run_sweep` with its run folder at an fsspec URL (see :mod:`.results_url`)."""
    from .results_url import open_results_url

    res = open_results_url(url, spec.name, mirror)
    log = kwargs["log"]
    pulled = res.pull()
    if pulled:
        log(f"{pulled} finished point(s) taken from {res.url}")
    try:
        rep = run_sweep(spec, results_root=res.local.parent, on_point=res.push_point, **kwargs)
    finally:
        res.push_run()
    log(f"run folder {res.url} (local mirror {res.local})")
    return dataclasses.replace(rep, results_url=res.url)


def aggregate(run_dir: Path, points: Sequence[Point], spec: SweepSpec, *,
              started_utc: str | None = None) -> SweepSummary:
    """Write ``results.jsonl`` over every finished point; return the run summary (with the
    sweep's :class:`~..point.record.RunRecord`). Each point's summary is read once."""
    rows_out = run_dir / "results.jsonl"
    tmp = rows_out.with_suffix(".jsonl.tmp")  # replaced whole: a report may be reading it
    entries: list[PointEntry] = []
    first: PointSummary | None = None
    with tmp.open("w", encoding="utf-8") as fh:
        for p in points:
            pdir = run_dir / "points" / p.id
            if not (pdir / SUMMARY).exists():
                continue
            s = PointSummary.load(pdir / SUMMARY)
            first = first or s
            params = {"point": p.id, "strategy": p.strategy,
                      "corpus_sha256": s.corpus.sha256,
                      **p.thresholds().to_settings_block(), **p.settings(spec)}
            for line in (pdir / "results.jsonl").read_text(encoding="utf-8").splitlines():
                fh.write(json.dumps(params | json.loads(line), ensure_ascii=False) + "\n")
            entries.append(PointEntry.of(p, spec, s))
    os.replace(tmp, rows_out)
    record = RunRecord(kind="sweep", config=spec.as_dict(), started_utc=started_utc or utc_now(),
                       finished_utc=utc_now(),
                       models=first.record.get("models", {}) if first else {},
                       inputs={"corpus": first.corpus.to_json() if first else None})
    return SweepSummary(name=spec.name, spec=spec.as_dict(), points=tuple(entries),
                        n_points=len(points), finished=len(entries), record=record.as_dict())
