"""What the command groups share: exit codes, output helpers, model options, thresholds."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..config import Thresholds, load_thresholds

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
HOME_HELP = "models home (default $SKILLSYNTH_HOME or ~/.cache/skillsynth)"
Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command-line mistake: reported with exit status 2."""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM stops the command as Ctrl-C does, through its finally blocks.

    A sweep started in the background by a script ignores SIGINT (POSIX), so ``kill`` is how
    it is stopped; raised as KeyboardInterrupt, it stops the points' kernels and the model
    servers and leaves the run resumable instead of leaving them running. Only the main
    thread can install a handler; elsewhere the block changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:  # None: a handler not set from Python, which cannot be put back from it
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def print_json(obj: Any) -> None:
    """Indented, key-sorted JSON on stdout."""
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def num(x: float | None) -> str:
    """A figure in a six-character column (``-`` when there is none)."""
    return "   -  " if x is None else f"{x:6.3f}"


def command(group: Any, name: str, help_: str, fn: Handler) -> argparse.ArgumentParser:
    """One subcommand whose help is its description and whose handler is ``fn``."""
    p: argparse.ArgumentParser = group.add_parser(name, help=help_, description=help_)
    p.set_defaults(func=fn)
    return p


def chat_names_text() -> str:
    """The embedded chat model names, for help texts."""
    from ..models.chat_models import chat_model_names

    return ", ".join(chat_model_names())


def chat_help_text() -> str:
    """The help of a ``--chat NAME`` option."""
    from ..models.chat_models import DEFAULT_CHAT_MODEL

    return f"embedded chat model ({chat_names_text()}; default {DEFAULT_CHAT_MODEL})"


def model_options(p: argparse.ArgumentParser) -> None:
    """The options of every command that talks to models, and of its thresholds."""
    from ..models.chat_models import DEFAULT_CHAT_MODEL

    p.add_argument("--backend", choices=("local", "lemonade"), default="local",
                   help="local: the embedded llama-server models; lemonade: Lemonade Server")
    p.add_argument("--model", default=None,
                   help=f"chat model: local, an embedded name ({chat_names_text()}; default "
                   f"{DEFAULT_CHAT_MODEL}); lemonade, a model id (default Gemma-4-E4B-it-GGUF)")
    p.add_argument("--embed-model", default=None, help="embedding model id (lemonade)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per model request (a first Lemonade load can take minutes)")
    p.add_argument("--cache", default=None,
                   help="call cache file (default <models home>/cache.db)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--config", default=None,
                   help="memory_settings.json or YAML thresholds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one threshold (repeatable)")
    p.add_argument("--calibrated", action="store_true",
                   help="take the taus no other setting gives from the embedder's shipped "
                   "calibration (default: GAIA's thresholds; the calibration lumps goals on "
                   "held-out corpora, see docs/models.md)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def parse_sets(pairs: Sequence[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as a dict, each value read as YAML would read it."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise UsageError(f"--set {pair!r}: expected KEY=VALUE")
        out[key.strip()] = _yaml_scalar(raw)
    return out


def _yaml_scalar(raw: str) -> Any:
    """Read one command-line value as YAML would (``0.9`` -> float, ``true`` -> bool)."""
    import yaml

    return yaml.safe_load(raw) if raw.strip() else raw


@contextlib.contextmanager
def clients(args: argparse.Namespace) -> Iterator[tuple[Any, Any]]:
    """The chat client and embedder of the chosen backend (never a fallback)."""
    from ..models.backend import BackendSpec, open_clients
    from ..models.serve import default_cache_path

    cache = None if args.no_cache else str(args.cache or default_cache_path())
    spec = BackendSpec(args.backend, chat_model=args.model, embed_model=args.embed_model,
                       cache=cache, timeout_s=args.timeout)
    with open_clients(spec) as pair:
        yield pair


def user_options(p: argparse.ArgumentParser) -> None:
    """The options of a simulated user on a second endpoint (default: solo, no user)."""
    p.add_argument("--user-url", default=None, metavar="URL",
                   help="a simulated user's OpenAI-compatible endpoint (e.g. Lemonade's "
                   ".../api/v1); default solo mode: the task's facts are the first message")
    p.add_argument("--user-model", default=None, help="the simulated user's model id")
    p.add_argument("--user-backend", choices=("lemonade", "local"), default="lemonade",
                   help="what serves the simulated user")


@contextlib.contextmanager
def user_client(args: argparse.Namespace) -> Iterator[Any]:
    """The simulated user's chat client, or None (solo)."""
    from ..models.backend import open_user
    from ..models.serve import default_cache_path

    cache = None if args.no_cache else str(args.cache or default_cache_path())
    with open_user(args.user_url, args.user_model, backend=args.user_backend, cache=cache,
                   timeout_s=args.timeout) as user:
        yield user


def embed_model_id(args: argparse.Namespace) -> str:
    """The embedding model the chosen backend will use (its calibration applies)."""
    if args.backend == "local":
        from ..models.serve import EMBED_MODEL_ID

        return EMBED_MODEL_ID
    from ..models.llm import LEMONADE_EMBED_MODEL

    return str(args.embed_model or LEMONADE_EMBED_MODEL)


def thresholds_of(args: argparse.Namespace) -> Thresholds:
    """--config and --set over (with --calibrated) the backend's embedder calibration over
    GAIA's defaults."""
    return load_thresholds(args.config, overrides=parse_sets(args.set),
                           embedder=embed_model_id(args),
                           calibrated=bool(getattr(args, "calibrated", False)))


def group(sub: Any, name: str, help_: str, *, description: str | None = None,
          metavar: str = "ACTION") -> Any:
    """A command group (``skillsynth NAME ACTION``): the subparsers its actions go into."""
    p = sub.add_parser(name, help=help_, description=description or
                       help_[0].upper() + help_[1:] + ".")
    return p.add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)
