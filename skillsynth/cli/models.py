"""``skillsynth models``: prepare, serve and check the model backends."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import (
    EXIT_FAIL,
    EXIT_OK,
    HOME_HELP,
    chat_help_text,
    chat_names_text,
    command,
    group,
    print_json,
)

__all__ = ["register"]


def _models_prepare(args: argparse.Namespace) -> int:
    from ..models.serve import prepare_models

    prepare_models(args.home, chat=args.chat or None)
    return EXIT_OK


def _models_serve(args: argparse.Namespace) -> int:
    import time

    from ..models.serve import locate_models, serve_local

    # SIGTERM reaches here as KeyboardInterrupt (main), so the servers are stopped
    with serve_local(locate_models(args.home, chat=args.chat), chat=not args.no_chat,
                     embed=not args.no_embed, threads=args.threads) as servers:
        for role, d in servers.describe().items():
            print(f"{role:<6} {d['base_url']}  model {d['model']}  (pid {d['pid']}, "
                  f"log {d['log']})", flush=True)
        try:  # a signal that lands while this line is printed is still caught
            print("serving; Ctrl-C stops both servers", flush=True)
            while all(s.process.poll() is None for s in servers.servers):
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("stopping", flush=True)
            return EXIT_OK
    print("skillsynth: error: a server exited; see its log", file=sys.stderr)
    return EXIT_FAIL


def _models_status(args: argparse.Namespace) -> int:
    from ..models.llm import Endpoint
    from ..models.status import models_status

    status = models_status(lemonade=Endpoint.lemonade(base_url=args.lemonade_url),
                           home=args.home, start_local=not args.no_start, chat=args.chat)
    if args.json:
        print_json(status)
        return EXIT_OK
    lem = status["lemonade"]
    # the error without its "lemonade at URL (model M): " prefix, which the line already says
    why = str(lem.get("error", "")).partition("): ")[2] or lem.get("error", "")
    if lem.get("key_rejected"):
        print(f"lemonade  reachable at {lem['base_url']}, but it rejected the key (check "
              f"LEMONADE_API_KEY): {why}")
    elif lem["reachable"]:
        served = "served" if lem["model_served"] else "NOT served"
        print(f"lemonade  reachable at {lem['base_url']}; {lem['model']} {served}; "
              f"models: {', '.join(lem['models']) or '-'}")
    else:
        print(f"lemonade  unreachable at {lem['base_url']}: {why}")
    loc = status["local"]
    for entry in loc.get("manifest_missing", []):
        print(f"local     the manifest names a missing file: {entry} (run `skillsynth models "
              "prepare` to rewrite it)")
    if loc["prepared"]:
        print(f"local     prepared: chat {loc['chat_id']} ({loc['chat_model']}), "
              f"embed {loc['embed_id']} ({loc['embed_model']}), server {loc['llama_server']}")
        servers = loc.get("servers", {})
        if "error" in servers:
            print(f"local     servers did not start: {servers['error']}")
        for role, probe in servers.items() if "error" not in servers else ():
            state = (f"reachable, serves {', '.join(probe['models'])}" if probe["reachable"]
                     else f"unreachable: {probe['error']}")
            print(f"local     {role:<5} {state}")
    else:
        print(f"local     not prepared: {loc['error']}")
    return EXIT_OK

def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    from ..models.chat_models import DEFAULT_CHAT_MODEL

    home_help = HOME_HELP
    chat_names = chat_names_text()
    chat_help = chat_help_text()
    mos = group(sub, "models", "prepare, serve and check the model backends")
    p = command(mos, "prepare", "install or locate llama-server and the embedded models "
                "(idempotent)", _models_prepare)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--chat", action="append", default=[], metavar="NAME",
                   help=f"embedded chat model to prepare (repeatable; {chat_names}; default "
                   f"{DEFAULT_CHAT_MODEL})")
    p = command(mos, "serve", "run the embedded chat and embedding servers until Ctrl-C",
                _models_serve)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--chat", default=None, metavar="NAME", help=chat_help)
    p.add_argument("--no-chat", action="store_true", help="do not start the chat server")
    p.add_argument("--no-embed", action="store_true", help="do not start the embedding server")
    p.add_argument("--threads", type=int, default=None, help="CPU threads per server")
    p = command(mos, "status", "which backends and models are reachable, with their ids",
                _models_status)
    p.add_argument("--home", default=None, help=home_help)
    p.add_argument("--lemonade-url", default=None,
                   help="Lemonade base URL (default $LEMONADE_BASE_URL or "
                   "http://localhost:13305/api/v1)")
    p.add_argument("--no-start", action="store_true",
                   help="do not start the embedded servers to probe them")
    p.add_argument("--chat", default=None, metavar="NAME", help=chat_help)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
