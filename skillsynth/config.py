"""Thresholds: the one frozen configuration object every pipeline stage receives.

GAIA keeps these in ``~/.gaia/memory_settings.json`` under ``skill_synthesis``. GAIA
logs and ignores a bad value; skillsynth is a research tool, so a bad value is a
:class:`~skillsynth.errors.ConfigError` that names the key and the allowed range.

Precedence when loading (house rule 6): explicit override > ``SKILLSYNTH_*`` environment
> file > the embedder's calibration (only when asked for) > default. Stages never read the
environment themselves; only :func:`load_thresholds` does.

The calibration layer is opt-in (``calibrated=True``, ``--calibrated``, or
``similarity_tau: calibrated`` in a sweep spec): an embedder with a shipped calibration
(``data/calibration/<embed model id>.json``, made by ``skillsynth calibrate``) then gets its
calibrated ``similarity_tau``, ``recall_tau`` and ``reconcile_tau`` where the user sets no tau,
and a user's tau that differs from it is used as given, with a warning naming both. It is not
the default: the shipped calibration separates same- from different-family goal pairs but,
on every real corpus measured, lumps most of a history into one procedure (the calibration
file's ``validation`` says where), so GAIA's own thresholds are every embedder's default.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

__all__ = [
    "CALIBRATED_KEYS",
    "ENV_PREFIX",
    "OTHER_ENV",
    "SETTINGS_BLOCK",
    "Thresholds",
    "calibrated_defaults",
    "calibration_for",
    "gaia_memory_disabled",
    "load_thresholds",
    "read_config_file",
]

#: Prefix of the environment variables that override thresholds (``SKILLSYNTH_SIMILARITY_TAU``).
ENV_PREFIX = "SKILLSYNTH_"
#: The environment variables skillsynth reads besides the thresholds (after the prefix).
OTHER_ENV = ("HOME", "LLAMA_SERVER", "VENV")
#: The key of GAIA's ``memory_settings.json`` that holds the synthesis thresholds.
SETTINGS_BLOCK = "skill_synthesis"
#: The thresholds a calibration sets.
CALIBRATED_KEYS = ("similarity_tau", "recall_tau", "reconcile_tau")
log = logging.getLogger("skillsynth.config")


def read_config_file(path: str | Path, what: str) -> Any:
    """Parse a JSON (``.json``) or YAML file, or raise ConfigError naming it.

    ``what`` names the file in the not-found message (``"sweep spec"``, ``"baseline file"``).
    """
    p = Path(path)
    is_json = p.suffix.lower() == ".json"
    try:
        text = p.read_text(encoding="utf-8")
        return json.loads(text) if is_json else yaml.safe_load(text)
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} not found", source=str(p)) from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"{what} is a folder, not a file", source=str(p)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text (byte {exc.start})", source=str(p)) from exc
    except OSError as exc:
        raise ConfigError(f"{what} cannot be read: {exc.strerror}", source=str(p)) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc}", source=str(p)) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", source=str(p)) from exc


def _doc(text: str, lo: float | None = None, hi: float | None = None, *,
         role: str = "synthesis", short: str | None = None) -> dict[str, Any]:
    """A field's documentation, allowed range, stage (``synthesis``, or ``recall`` for a
    threshold only recall reads) and, for one a sweep's grid varies, how a point id
    abbreviates it."""
    return {"doc": text, "lo": lo, "hi": hi, "role": role, "short": short}


@dataclass(frozen=True)
class Thresholds:
    """GAIA's skill-synthesis thresholds, with GAIA's defaults (#887).

    Construct directly, with :meth:`merge`, or with :func:`load_thresholds`. Every value
    is checked on construction; an instance is always valid.
    """

    enabled: bool = field(default=True, metadata=_doc(
        "Run the synthesis pass at all. Stored procedures stay recallable when false."))
    min_steps: int = field(default=3, metadata=_doc(
        "Fewest successful tool calls a session's span needs to be worth distilling.", 1, None))
    min_occurrences: int = field(default=3, metadata=_doc(
        "Fewest similar successful sessions before a cluster qualifies.", 1, None,
        short="occ"))
    min_success_rate: float = field(default=0.80, metadata=_doc(
        "Lowest success rate a cluster may have to qualify (0..1).", 0.0, 1.0))
    similarity_tau: float = field(default=0.82, metadata=_doc(
        "Cosine threshold on goal embeddings, for clustering and for recall. "
        "Embedder-specific: calibrate it per embedder.", 0.0, 1.0, short="tau"))
    max_clusters_per_pass: int = field(default=10, metadata=_doc(
        "Most clusters distilled (LLM calls) in one pass; bounds cost.", 1, None))
    max_distill_calls_per_pass: int | None = field(default=None, metadata=_doc(
        "Most distillation calls one pass spends; the qualified clusters past it wait for "
        "a later pass. amd-gaia 0.25.1 ships 2 (each call takes the local model slot the "
        "user's own turn needs). Unset (null), a pass distils up to max_clusters_per_pass, "
        "as #887 specified.", 1, None))
    max_recall_body_chars: int = field(default=1500, metadata=_doc(
        "Longest procedure body injected into the planner prompt; longer bodies are "
        "cut with an explicit truncation marker (the stored body stays whole).", 1, None,
        role="recall", short="body"))
    recall_top_k: int = field(default=2, metadata=_doc(
        "Most procedures recalled for one goal.", 1, None, role="recall"))
    recall_tau: float | None = field(default=None, metadata=_doc(
        "Cosine threshold between a new goal and a procedure's when_to_use at recall. "
        "Unset (null), recall uses similarity_tau, exactly as GAIA does; set it when the "
        "calibration of your embedder and model proposes a different value.", 0.0, 1.0,
        role="recall"))
    reconcile_tau: float | None = field(default=None, metadata=_doc(
        "Cosine threshold between a new procedure's when_to_use and a stored one's: at or "
        "above it the new one updates or repeats the stored one instead of being added. "
        "Unset (null), similarity_tau, exactly as GAIA does. Trigger texts of different "
        "goals share phrasing ('The user wants to ...'), so at a low, goal-calibrated tau "
        "unrelated procedures would merge; calibrate it separately.", 0.0, 1.0))

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _check(f, getattr(self, f.name), source=None))

    @property
    def effective_recall_tau(self) -> float:
        """The recall threshold in force: ``recall_tau``, or ``similarity_tau`` when unset."""
        return self.similarity_tau if self.recall_tau is None else self.recall_tau

    @property
    def effective_reconcile_tau(self) -> float:
        """The reconcile threshold in force: ``reconcile_tau``, or ``similarity_tau``."""
        return self.similarity_tau if self.reconcile_tau is None else self.reconcile_tau

    # -- construction -------------------------------------------------------------
    def merge(self, overrides: Mapping[str, Any] | None = None, *, source: str = "override",
              **kwargs: Any) -> Thresholds:
        """Return a copy with the given values replaced; a ``None`` value means inherit.

        Raises:
            ConfigError: on an unknown key or an invalid value.
        """
        values = dict(overrides or {}) | kwargs
        clean = {k: v for k, v in values.items() if v is not None}
        _reject_unknown(clean, source)
        fields = {f.name: f for f in dataclasses.fields(self)}
        checked = {k: _check(fields[k], v, source=source) for k, v in clean.items()}
        return dataclasses.replace(self, **checked)

    @classmethod
    def from_memory_settings(cls, path: str | Path, *, base: Thresholds | None = None) -> Thresholds:
        """Read the ``skill_synthesis`` block of a GAIA ``memory_settings.json``.

        A file without the block gives GAIA's defaults (as GAIA does). Other top-level
        keys of the file belong to GAIA and are ignored.
        """
        return (base or cls()).merge(_settings_block(Path(path)), source=str(path))

    @classmethod
    def from_yaml(cls, path: str | Path, *, base: Thresholds | None = None) -> Thresholds:
        """Read thresholds from YAML: either the block itself or a ``skill_synthesis:`` key."""
        return (base or cls()).merge(_yaml_block(Path(path)), source=str(path))

    # -- export -------------------------------------------------------------------
    def to_settings_block(self) -> dict[str, Any]:
        """The values as GAIA's ``skill_synthesis`` block (JSON-ready; unset values left out)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def with_role(cls, role: str) -> tuple[str, ...]:
        """The thresholds of stage ``role`` (``synthesis`` or ``recall``), in field order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata["role"] == role)

    @classmethod
    def short(cls, name: str) -> str:
        """How a point id abbreviates threshold ``name`` (its value follows)."""
        short = next(f for f in dataclasses.fields(cls) if f.name == name).metadata["short"]
        return name if short is None else str(short)

    @classmethod
    def describe(cls) -> dict[str, dict[str, Any]]:
        """Every field with its default, allowed range and documentation (for help and docs)."""
        out: dict[str, dict[str, Any]] = {}
        for f in dataclasses.fields(cls):
            out[f.name] = {"default": f.default, "min": f.metadata["lo"],
                           "max": f.metadata["hi"], "doc": f.metadata["doc"]}
        return out


def _settings_block(path: Path) -> dict[str, Any]:
    """The ``skill_synthesis`` block of a GAIA ``memory_settings.json`` (``{}`` when absent)."""
    data = read_config_file(path, "settings file")
    if not isinstance(data, dict):
        raise ConfigError("top level must be a JSON object", source=str(path))
    if SETTINGS_BLOCK not in data:
        log.warning("%s has no '%s' block: its other settings are GAIA's, not skillsynth's; "
                    "the thresholds come from the other layers", path, SETTINGS_BLOCK)
    block = data.get(SETTINGS_BLOCK, {})
    if not isinstance(block, dict):
        raise ConfigError(f"'{SETTINGS_BLOCK}' must be an object", key=SETTINGS_BLOCK,
                          source=str(path))
    return block


def _yaml_block(path: Path) -> dict[str, Any]:
    """The thresholds of a YAML file: the block itself or under ``skill_synthesis:``."""
    data = read_config_file(path, "config file")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("top level must be a mapping", source=str(path))
    if SETTINGS_BLOCK in data:
        if set(data) != {SETTINGS_BLOCK}:
            extra = sorted(set(data) - {SETTINGS_BLOCK})
            raise ConfigError(f"unknown top-level keys {extra} beside '{SETTINGS_BLOCK}'",
                              source=str(path))
        data = data[SETTINGS_BLOCK]
        if not isinstance(data, dict):
            raise ConfigError(f"'{SETTINGS_BLOCK}' must be a mapping", key=SETTINGS_BLOCK,
                              source=str(path))
    return data


def _field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(Thresholds)]


def _reject_unknown(values: Mapping[str, Any], source: str | None) -> None:
    unknown = sorted(set(values) - set(_field_names()))
    if unknown:
        raise ConfigError(
            f"unknown threshold key(s) {unknown}; known keys are {_field_names()}",
            key=unknown[0], source=source)


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"between {lo} and {hi}"
    if lo is not None:
        return f">= {lo}"
    return "any value"


def _check(f: dataclasses.Field[Any], value: Any, *, source: str | None) -> Any:
    """Validate one field value; return it in its canonical Python type."""
    key = f"{SETTINGS_BLOCK}.{f.name}"
    lo, hi = f.metadata["lo"], f.metadata["hi"]
    if value is None and f.default is None:
        return None  # an optional threshold left unset
    if f.type in ("bool", bool):
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key} must be true or false, got {value!r}", key=key, source=source)
    if f.type in ("int", int, "int | None"):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(f"{key} must be an integer {_range_text(lo, hi)}, got {value!r}",
                                  key=key, source=source)
    elif f.type in ("float", float, "float | None"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} must be a number {_range_text(lo, hi)}, got {value!r}",
                              key=key, source=source)
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{key} must be finite, got {value!r}", key=key, source=source)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(f"{key}={value!r} is out of range: must be {_range_text(lo, hi)}",
                          key=key, source=source)
    return value


def _parse_env_value(f: dataclasses.Field[Any], raw: str, var: str) -> Any:
    text = raw.strip()
    if f.type in ("bool", bool):
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{var} must be true/false or 1/0, got {raw!r}", key=f.name, source=var)
    try:
        if f.default is None and text.lower() in ("", "null", "none"):
            return None
        return int(text) if f.type in ("int", int, "int | None") else float(text)
    except ValueError as exc:
        raise ConfigError(f"{var} must be a number, got {raw!r}", key=f.name, source=var) from exc


@cache
def calibrated_defaults(embed_model: str) -> dict[str, Any] | None:
    """The shipped calibration of the embedder ``embed_model`` (model id, ``:dim`` allowed).

    Lemonade's ``user.X`` and ``X`` are one model: the file is named by the recorded id
    (``X.json``, :func:`~skillsynth.models.llm.canonical_model_id`); a file named in the
    ``user.`` form (before issue 39) is found too.

    Returns the calibration file's content (``similarity_tau``, ``recall_tau``, ``corpora``,
    ``method``, ``created_at``, ...) or None when this embedder has none.
    """
    name = embed_model.split(":")[0].removeprefix("user.")
    for stem in (name, f"user.{name}"):
        ref = resources.files("skillsynth").joinpath(f"data/calibration/{stem}.json")
        if ref.is_file():
            data = json.loads(ref.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else None
    return None


def calibration_for(user_keys: set[str] | frozenset[str], embedder: str | None
                    ) -> dict[str, float]:
    """The calibrated values that apply when the user set ``user_keys``.

    None set: every calibrated tau. ``similarity_tau`` set: none (recall and reconcile then
    follow the user's tau, exactly as GAIA does, unless set too). Only ``recall_tau`` or
    ``reconcile_tau`` set: the calibrated values of the others.
    """
    cal = calibrated_defaults(embedder) if embedder else None
    if cal is None or "similarity_tau" in user_keys:
        return {}
    return {k: float(cal[k]) for k in CALIBRATED_KEYS
            if k not in user_keys and cal.get(k) is not None}


def _file_values(path: Path) -> dict[str, Any]:
    """The threshold values a settings (``.json``) or YAML file sets, checked; nothing else."""
    block = _settings_block(path) if path.suffix.lower() == ".json" else _yaml_block(path)
    th = Thresholds().merge(block, source=str(path))
    return {k: getattr(th, k) for k in block}


def load_thresholds(
    path: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    embedder: str | None = None,
    calibrated: bool = False,
) -> Thresholds:
    """Build the run's thresholds: overrides > ``SKILLSYNTH_*`` env > file > calibration >
    defaults.

    Args:
        path: a GAIA ``memory_settings.json`` (``.json``) or a YAML file; ``None`` for defaults.
        overrides: explicit values (e.g. from CLI flags); ``None`` values inherit.
        env: the environment to read ``SKILLSYNTH_<KEY>`` from; defaults to ``os.environ``.
            Pass ``{}`` to ignore the environment.
        embedder: the embedding model id of the run.
        calibrated: the embedder's shipped calibration (if any) supplies the taus no other
            layer sets (:func:`calibration_for`); off by default (module docstring).

    Raises:
        ConfigError: naming the key, the source and the allowed range.
    """
    layers: list[tuple[str, dict[str, Any]]] = []
    if path is not None:
        layers.append((str(path), _file_values(Path(path))))
    environ = os.environ if env is None else env
    fields = {f.name: f for f in dataclasses.fields(Thresholds)}
    for name, f in fields.items():
        var = ENV_PREFIX + name.upper()
        if var in environ:
            layers.append((var, {name: _parse_env_value(f, environ[var], var)}))
    known = {ENV_PREFIX + n.upper() for n in fields} | {ENV_PREFIX + n for n in OTHER_ENV}
    stray = sorted(v for v in environ if v.startswith(ENV_PREFIX) and v not in known)
    if stray:  # a typo in a threshold's variable would otherwise be ignored in silence
        log.warning("ignored: %s is not a skillsynth setting (thresholds: %s; also %s)",
                    ", ".join(stray), ", ".join(ENV_PREFIX + n.upper() for n in fields),
                    ", ".join(ENV_PREFIX + n for n in OTHER_ENV))
    if overrides:
        layers.append(("override", dict(overrides)))
    user_keys = {k for _, values in layers for k, v in values.items() if v is not None}
    if not calibrated:
        embedder = None
    result = Thresholds().merge(calibration_for(user_keys, embedder),
                                source=f"calibration of {embedder}")
    calibration = calibrated_defaults(embedder) if embedder else None
    for source, values in layers:
        result = result.merge(values, source=source)
        for key in CALIBRATED_KEYS:
            if calibration is None or values.get(key) is None:
                continue
            wanted = calibration.get(key)
            if wanted is not None and abs(float(values[key]) - float(wanted)) > 1e-9:
                log.warning("%s=%s from %s is used as given; the calibration of %s for this "
                            "embedder is %s=%s (skillsynth calibrate)", key, values[key],
                            source, embedder, key, wanted)
    return result


def gaia_memory_disabled(env: Mapping[str, str] | None = None) -> bool:
    """True when GAIA's memory is switched off: ``GAIA_MEMORY_DISABLED`` is exactly ``"1"``."""
    environ = os.environ if env is None else env
    return environ.get("GAIA_MEMORY_DISABLED") == "1"
