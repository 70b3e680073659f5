"""``skillsynth cache``: ship a sweep's model answers with its spec, and take them back.

A live sweep's answers are hours of a model's time on 2 cores; exported beside the spec and
imported on a fresh machine, they let the sweep resume where it stopped without the model
being asked again for anything it has answered.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import EXIT_OK, UsageError, command, group

__all__ = ["register"]


def _cache_path(args: argparse.Namespace) -> Path:
    from ..models.serve import default_cache_path

    return Path(args.cache) if args.cache else default_cache_path()


def _recorded_id(model: str | None) -> str | None:
    """The id answers are stored under: an embedded chat model's name becomes its id."""
    from ..models.chat_models import chat_model, chat_model_names

    return chat_model(model).model_id if model in chat_model_names() else model


def _cache_export(args: argparse.Namespace) -> int:
    from ..models.cache import export_answers

    cache = _cache_path(args)
    if not cache.exists():
        raise UsageError(f"{cache}: no call cache here (nothing has been asked of a model)")
    n = export_answers(cache, args.out, kinds=args.kind or ("chat",),
                       model=_recorded_id(args.model), since=args.since, until=args.until)
    print(f"wrote {n} answer(s) from {cache} to {args.out}")
    return EXIT_OK


def _cache_import(args: argparse.Namespace) -> int:
    from ..models.cache import import_answers

    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"{missing[0]}: no such file")
    counts = import_answers(_cache_path(args), args.files)
    print(f"{counts.added} answer(s) added, {counts.present} already here")
    if counts.differing:
        print(f"{counts.differing} key(s) already here with a different answer: kept this "
              "machine's (its runs used them); figures re-run here may differ from the "
              "shipped ones where those answers are asked")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    cache_help = "call cache file (default <models home>/cache.db)"
    g = group(sub, "cache", "export and import the call cache's model answers")
    p = command(g, "export", "write the cache's answers to a gzipped JSON-lines file "
                "(sorted by key: the same answers give the same bytes)", _cache_export)
    p.add_argument("out", help="the file to write (e.g. eval/answers/NAME.jsonl.gz)")
    p.add_argument("--cache", default=None, help=cache_help)
    p.add_argument("--kind", action="append", choices=("chat", "embed"), default=[],
                   help="answer kind to write (repeatable; default chat: embeddings are "
                   "cheap to recompute)")
    p.add_argument("--model", default=None,
                   help="only this model's answers: an embedded chat model's name (e.g. "
                   "qwen2.5-coder-1.5b) or the id answers are recorded under")
    p.add_argument("--since", default=None, metavar="ISO_TIME",
                   help="only answers stored at or after this UTC time (e.g. 2026-12-06T16:00)")
    p.add_argument("--until", default=None, metavar="ISO_TIME",
                   help="only answers stored before this UTC time (e.g. when a later sweep "
                   "with the same model began on this cache)")
    p = command(g, "import", "add exported answers to the cache, all or none; an answer "
                "already here wins", _cache_import)
    p.add_argument("files", nargs="+", help="files written by `skillsynth cache export`")
    p.add_argument("--cache", default=None, help=cache_help)
