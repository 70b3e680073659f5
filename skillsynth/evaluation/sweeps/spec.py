"""A sweep spec: the YAML file that names a corpus, a backend, a grid and the live options,
parsed and checked before anything runs, and the grid expanded into points."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...config import Thresholds, calibration_for, read_config_file
from ...errors import ConfigError
from ...models.backend import AGENT_PLAYS_USER, BackendSpec
from ..point.options import PointOptions

__all__ = ["CALIBRATED", "GRID_KEYS", "PROTOCOL_KEYS", "RUN_ONLY_KEYS", "Point", "SweepSpec",
           "expand_points"]

#: A ``similarity_tau`` value that means "the embedder's calibrated taus".
CALIBRATED = "calibrated"
#: The options a grid may vary besides the strategy (each also a top-level key: the default
#: of every point), declared in :class:`~.options.PointOptions`.
PROTOCOL_KEYS = tuple(k for k in PointOptions.sweepable() if k != "strategy")
#: What a grid may vary: the sweepable options (the strategy, the protocol settings) and
#: the three thresholds the KPIs are swept over.
GRID_KEYS = ("strategy", "similarity_tau", "min_occurrences", "max_recall_body_chars",
             *PROTOCOL_KEYS)
#: A spec's own keys; every other top-level key is a point option (every point's default).
_SPEC_ONLY_KEYS = ("name", "description", "corpus", "backend", "workers", "base", "grid",
                   "points", "point_timeout_s", "user")
_SPEC_KEYS = {*_SPEC_ONLY_KEYS, *PointOptions.names()}
#: Keys that change how a run executes, not what it measures: a resumed run may differ in them.
RUN_ONLY_KEYS = ("workers", "point_timeout_s")


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (see ``eval/sweeps/README.md`` for every key).

    Attributes:
        name: the run folder's name.
        corpus: ``{"synthetic": {...}}``, ``{"import": {"format", "files", "tasks"}}``,
            ``{"db": path}`` (relative paths are relative to the spec file's folder) or, with
            ``history: live``, ``{"live": {"tasks": [...], "temperature": 0.7}}``: the agent
            runs k+1 attempts of each task in ``world`` and those runs are the corpus. With
            ``history: ideal`` (an ``import`` or ``db`` corpus of ``world``'s tasks, or
            ``{"world": "all"}``: every task of ``world`` with its gold calls) each task's
            reference run is executed k+1 times in ``world`` and those are the corpus
            (:func:`~skillsynth.evaluation.point.ideal.ideal_history`).
        backend: ``local`` or ``lemonade`` (with optional ``chat_model``/``embed_model``).
        grid: key -> values; every combination is a point.
        points: extra explicit points (each over the grid's first values).
        base: thresholds fixed for every point.
        options: every point's options (:class:`~.options.PointOptions`; each is a
            top-level key of the file); the grid may vary the sweepable ones.
        user: a simulated user for live probes in a tau2 world: an endpoint
            ``{base_url, model[, backend]}``, ``agent`` (the agent's own model plays the
            user on its endpoint), or None (solo).
        calibration: the backend's embedder's calibrated taus (its file in
            ``skillsynth/data/calibration/``, if any), used by ``similarity_tau: calibrated``.
        workers: points run at once.
        source: the spec file.
    """

    name: str
    corpus: Mapping[str, Any]
    grid: Mapping[str, Sequence[Any]]
    points: tuple[Mapping[str, Any], ...] = ()
    base: Mapping[str, Any] = field(default_factory=dict)
    backend: Mapping[str, Any] = field(default_factory=lambda: {"backend": "local"})
    options: PointOptions = field(default_factory=PointOptions)
    workers: int = 2
    user: Mapping[str, Any] | str | None = None
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
        # the backend's embedder's calibrated taus, for `similarity_tau: calibrated` only:
        # a spec that sets no tau runs GAIA's (the calibration lumps goals on held-out
        # corpora; config.py says why). Lemonade's EmbeddingGemma has one once
        # `scripts/calibrate.sh --backend lemonade` has written it.
        calibration = calibration_for(set(), _embed_model(backend))
        options = PointOptions.from_mapping(
            {k: v for k, v in data.items() if k in PointOptions.names()}, source=str(p))
        spec = cls(name=str(data["name"]), corpus=data["corpus"], grid=data["grid"],
                   points=tuple(data.get("points") or ()), base=base,
                   calibration=calibration, backend=backend, options=options,
                   workers=_int(data.get("workers", 2), "workers", p),
                   user=data.get("user"),
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
        if self.workers < 1:
            raise ConfigError("workers must be >= 1", key="workers", source=src)
        if self.point_timeout_s is not None and self.point_timeout_s < 1:
            raise ConfigError("point_timeout_s must be >= 1 second (or null: no limit)",
                              key="point_timeout_s", source=src)
        self.backend_spec()
        kinds = set(self.corpus) if isinstance(self.corpus, Mapping) else set()
        if len(kinds) != 1 or not kinds <= {"synthetic", "import", "db", "live", "world"}:
            raise ConfigError("corpus must have exactly one of 'synthetic', 'import', 'db', "
                              "'live', 'world'", key="corpus", source=src)
        opts = self.options  # its values were checked when it was made
        if (opts.history == "live") != ("live" in kinds):
            raise ConfigError("history: live goes with corpus: {live: {tasks: [...]}} (the "
                              "agent's own runs are the corpus), and only with it",
                              key="history", source=src)
        if opts.history == "ideal" and not kinds <= {"import", "db", "world"}:
            raise ConfigError("history: ideal executes the tasks of a recorded corpus in "
                              "`world`: give corpus: {import: ...}, {db: ...} or "
                              "{world: all}", key="history", source=src)
        if "world" in kinds and (opts.history != "ideal" or self.corpus["world"] != "all"):
            raise ConfigError("corpus: {world: all} (every task of `world`, its gold calls "
                              "the reference) goes with history: ideal", key="corpus.world",
                              source=src)
        if opts.history == "live" and (not isinstance(
                self.corpus["live"], Mapping) or not self.corpus["live"].get("tasks")):
            raise ConfigError("history: live needs a tau2 world and corpus.live.tasks",
                              key="corpus.live", source=src)
        if self.user is not None and (opts.world == "replay" or (
                self.user != AGENT_PLAYS_USER and (not isinstance(self.user, Mapping) or not {
                    "base_url", "model"} <= set(self.user)))):
            raise ConfigError(f"user needs {{base_url, model[, backend]}} or "
                              f"{AGENT_PLAYS_USER!r}, and a tau2 world", key="user", source=src)
        imp = self.corpus.get("import")
        if "import" in kinds and (not isinstance(imp, Mapping) or "format" not in imp
                                  or not isinstance(imp.get("files"), list)):
            raise ConfigError("corpus.import needs 'format' and a list of 'files'",
                              key="corpus.import", source=src)
        for pt in expand_points(self):
            pt.thresholds()
            try:  # the point's options, checked as the point will check them
                pt.point_options(self)
            except ConfigError as exc:
                raise ConfigError(f"point {pt.id}: {exc.args[0]}", key=exc.key,
                                  source=src) from None

    def backend_spec(self, cache: str | None = None) -> BackendSpec:
        """The backend this spec names, with ``cache``; nothing is started.

        Raises:
            ConfigError: an unknown backend or key, or ``endpoints`` without its URLs.
        """
        conf = dict(self.backend)
        name = conf.pop("backend", "local")
        src = self.source or None
        if name not in ("local", "lemonade", "endpoints"):
            raise ConfigError(f"sweep backend must be local, lemonade or endpoints, got "
                              f"{name!r}", key="backend", source=src)
        known = {"chat_model", "embed_model", "chat_url", "embed_url", "decoding"}
        if set(conf) - known - {"timeout_s"}:
            raise ConfigError(f"unknown backend key(s) {sorted(set(conf) - known - {'timeout_s'})}"
                              f"; known: backend, timeout_s, {', '.join(sorted(known))}",
                              key="backend", source=src)
        timeout = float(conf.pop("timeout_s", 300.0))
        try:
            return BackendSpec(name, cache=cache, timeout_s=timeout, **conf)
        except ConfigError as exc:
            raise ConfigError(exc.args[0], key=f"backend.{exc.key}", source=src) from None

    def as_dict(self) -> dict[str, Any]:
        """JSON/YAML-ready (what ``spec.yaml`` in the run folder holds)."""
        d = asdict(self)
        d.pop("source")
        d.pop("options")
        d["points"] = [dict(p) for p in self.points]
        return d | self.options.to_json()


def _int(value: Any, key: str, source: Path) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a whole number, got {value!r}", key=key,
                          source=str(source)) from None


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
    """One grid point: a strategy, the thresholds it runs with, and the protocol settings
    the grid varies (``options``; the others are the spec's)."""

    strategy: str
    values: Mapping[str, Any]
    base: Mapping[str, Any]
    calibration: Mapping[str, float] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Readable and unique: strategy, the swept values, and a hash of everything."""
        swept = dict(self.values) | dict(self.options)
        parts = [self.strategy] + [f"{_short(k)}{v}" for k, v in sorted(swept.items())]
        ident: list[Any] = [self.strategy, dict(self.values), dict(self.base)]
        if self.options:  # ids of points without protocol options stay what they were
            ident.append(dict(self.options))
        if (dict(self.base) | dict(self.values)).get("similarity_tau") == CALIBRATED:
            # the taus it stands for: a refitted calibration is another point, not a resume
            ident.append({"calibration": dict(self.calibration)})
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:8]
        return "-".join(parts) + "-" + digest

    def settings(self, spec: SweepSpec) -> dict[str, Any]:
        """The point's protocol settings: the grid's values, else the spec's."""
        return {k: self.options.get(k, getattr(spec.options, k)) for k in PROTOCOL_KEYS}

    def point_options(self, spec: SweepSpec) -> PointOptions:
        """Every option of the point: the spec's, with the grid's values and the strategy.

        Raises:
            ConfigError: the combination is not a valid point.
        """
        return spec.options.replace(strategy=self.strategy, **self.options)

    @property
    def synthesis_key(self) -> str:
        """Equal for points whose synthesis passes are identical: they differ only in
        settings of a later stage (the declared roles of the thresholds and options)."""
        th = self.thresholds().to_settings_block()
        for recall_only in Thresholds.with_role("recall"):
            th.pop(recall_only, None)
        synth = {k: v for k, v in self.options.items()
                 if PointOptions.role(k) in ("synthesis", "verify")}
        return json.dumps([self.strategy, th, synth], sort_keys=True)

    def thresholds(self) -> Thresholds:
        """The point's thresholds (base, then the point's values).

        ``similarity_tau: calibrated`` stands for the embedder's calibrated
        ``similarity_tau``, ``recall_tau`` and ``reconcile_tau`` (a recall or reconcile tau
        the spec sets wins); a number is GAIA's one-tau rule.
        """
        base, values = dict(self.base), dict(self.values)
        if (base | values).get("similarity_tau") == CALIBRATED:
            if not self.calibration:
                raise ConfigError("similarity_tau: calibrated needs a calibration of the "
                                  "backend's embedder (skillsynth/data/calibration/<embedder>"
                                  ".json: `scripts/calibrate.sh`, with `--backend lemonade` "
                                  "for Lemonade's)", key="similarity_tau")
            base.pop("similarity_tau", None)
            values.pop("similarity_tau", None)
            base = dict(self.calibration) | base
        elif base.get("similarity_tau") == CALIBRATED:
            base.pop("similarity_tau")
        return Thresholds().merge(base, source="sweep base").merge(
            values, source=f"sweep point {self.strategy}")


def _short(key: str) -> str:
    """How a point id abbreviates a swept key: as its option or threshold declares."""
    if key in PointOptions.names():
        return PointOptions.short(key)
    if key in Thresholds.describe():
        return Thresholds.short(key)
    return key


def _embed_model(backend: Mapping[str, Any]) -> str:
    """The embedder a spec's backend runs (its calibration file's name)."""
    if backend.get("embed_model"):
        return str(backend["embed_model"])
    if backend.get("backend", "local") == "lemonade":
        from ...models.llm import LEMONADE_EMBED_MODEL

        return LEMONADE_EMBED_MODEL
    from ...models.serve import EMBED_MODEL_ID

    return EMBED_MODEL_ID


def expand_points(spec: SweepSpec) -> list[Point]:
    """Every point of the spec: the grid's product, then the explicit points."""
    keys = list(spec.grid)
    combos = [dict(zip(keys, vals, strict=True))
              for vals in itertools.product(*(spec.grid[k] for k in keys))]
    first = {k: v[0] for k, v in spec.grid.items()}
    combos += [first | dict(p) for p in spec.points]
    out: dict[str, Point] = {}
    for c in combos:
        strategy = str(c.pop("strategy", spec.options.strategy))
        options = {k: c.pop(k) for k in PROTOCOL_KEYS if k in c}
        p = Point(strategy=strategy, values=c, base=spec.base, calibration=spec.calibration,
                  options=options)
        out.setdefault(p.id, p)
    return list(out.values())


