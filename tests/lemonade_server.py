"""A real Lemonade Server (``lemond``) for the ``lemonade`` test tier: found, or built, then
started on a free loopback port with the prepared GGUFs, and stopped. Not a fake.

Where things are (environment, never this module's guess):

* ``SKILLSYNTH_LEMONADE_BUILD``: the work folder of Lemonade's offline ``build.sh``
  (default ``$HOME/.cache/lemonade-build``); ``lemond`` is its ``build/lemond``.
* ``SKILLSYNTH_LEMONADE_SOURCE``: the folder holding Lemonade's source archive with its
  ``build.sh`` and ``serve.sh``. ``serve.sh PORT WORK_DIR`` starts ``lemond`` with
  skillsynth's own llama-server as its ``system`` llama.cpp backend and the prepared models
  registered as user models; with no build yet, ``build.sh WORK_DIR`` makes one first
  (about 10 minutes on 2 cores; a finished build is kept).

With neither a build nor the source, :func:`locate` says why, and the tier skips with it; a
source folder named but without ``serve.sh`` is an error (a setting to fix, not a machine
without Lemonade).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: The public ids serve.sh registers (Lemonade lists user models by their bare name).
CHAT_MODEL = "Qwen2.5-Coder-0.5B-Instruct-GGUF"
EMBED_MODEL = "all-MiniLM-L6-v2-GGUF"


@dataclass(frozen=True)
class Located:
    """Where the tier's ``lemond`` is, or why it cannot run (``skip``, or ``error``: a
    setting that names something that is not there)."""

    work: Path
    source: Path | None
    skip: str | None = None
    error: str | None = None

    @property
    def lemond(self) -> Path:
        return self.work / "build" / "lemond"


def locate(env: dict[str, str] | None = None) -> Located:
    """The build folder and the source folder the environment names (see the module doc)."""
    env = dict(os.environ if env is None else env)
    work = Path(env.get("SKILLSYNTH_LEMONADE_BUILD")
                or Path.home() / ".cache" / "lemonade-build").expanduser()
    raw = env.get("SKILLSYNTH_LEMONADE_SOURCE")
    source = Path(raw).expanduser() if raw else None
    if source is not None and not (source / "serve.sh").is_file():
        return Located(work, None, error=f"SKILLSYNTH_LEMONADE_SOURCE={raw} has no serve.sh "
                       "(name the folder with Lemonade's source archive, build.sh and "
                       "serve.sh, or unset it)")
    built = (work / "build" / "lemond").is_file()
    if source is None:
        why = (f"a lemond build is at {work} but SKILLSYNTH_LEMONADE_SOURCE does not name "
               "the folder with its serve.sh" if built else
               f"no Lemonade Server: no lemond build in {work} (SKILLSYNTH_LEMONADE_BUILD) "
               "and no source (SKILLSYNTH_LEMONADE_SOURCE, the folder with Lemonade's "
               "source archive, build.sh and serve.sh)")
        return Located(work, None, why)
    return Located(work, source)


def build(where: Located, log: Path) -> None:
    """Run the source's ``build.sh`` into the work folder unless a build is there."""
    if where.lemond.is_file():
        return
    assert where.source is not None
    with open(log, "w") as out:
        rc = subprocess.call(["bash", str(where.source / "build.sh"), str(where.work)],
                             stdout=out, stderr=subprocess.STDOUT)
    if rc != 0 or not where.lemond.is_file():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"build.sh exited with {rc}; the end of {log}:\n{tail}")


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    """One started ``lemond``."""

    pid: int
    port: int
    run_dir: Path
    api_key: str | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root."""
        return f"http://127.0.0.1:{self.port}/api/v1"

    @property
    def log(self) -> Path:
        return self.run_dir / "lemond.log"

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def serve(where: Located, *, api_key: str | None = None, timeout_s: float = 120.0) -> Running:
    """Start ``lemond`` with the source's ``serve.sh`` on a free port (healthy on return).

    ``api_key`` is given to the server as ``LEMONADE_API_KEY`` (it then wants the key as
    Bearer on every route).
    """
    assert where.source is not None
    port = free_port()
    env = dict(os.environ)
    env.pop("LEMONADE_API_KEY", None)
    if api_key:
        env["LEMONADE_API_KEY"] = api_key
    proc = subprocess.run(["bash", str(where.source / "serve.sh"), str(port), str(where.work)],
                          env=env, capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    run_dir = where.work / f"run-{port}"
    pid_file = run_dir / "lemond.pid"
    if proc.returncode != 0:
        if pid_file.is_file():
            stop(Running(int(pid_file.read_text()), port, run_dir))
        raise RuntimeError(f"serve.sh exited with {proc.returncode}: {proc.stderr[-2000:]}"
                           f"{proc.stdout[-1000:]}")
    found = re.search(r"lemond pid (\d+)", proc.stdout)
    pid = int(found.group(1)) if found else int(pid_file.read_text())
    return Running(pid, port, run_dir, api_key)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (lemond's llama-servers)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop(server: Running, *, grace_s: float = 15.0) -> None:
    """Stop ``lemond`` (it stops its llama-servers); while a request is still generating it
    does not exit, so after ``grace_s`` it and its children are killed. Its run folder goes."""
    kids = _children(server.pid)
    if _alive(server.pid):
        os.kill(server.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _alive(server.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    for pid in [*_children(server.pid), *kids, server.pid]:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    shutil.rmtree(server.run_dir, ignore_errors=True)
