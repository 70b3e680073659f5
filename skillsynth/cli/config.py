"""``skillsynth config``: the resolved thresholds."""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Thresholds, load_thresholds
from ._common import (
    EXIT_OK,
    command,
    group,
    parse_sets,
    print_json,
)

__all__ = ["register"]


def _config_show(args: argparse.Namespace) -> int:
    th = load_thresholds(args.settings, overrides=parse_sets(args.set), embedder=args.embedder,
                         calibrated=args.embedder is not None)
    if args.json:
        print_json(th.to_settings_block())
        return EXIT_OK
    docs = Thresholds.describe()
    for key, value in th.to_settings_block().items():
        print(f"{key:<24} {value!s:<8} {docs[key]['doc']}")
    return EXIT_OK

def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    cfgs = group(sub, "config", "show resolved thresholds")
    p = command(cfgs, "show", "thresholds after file, SKILLSYNTH_* environment and --set",
                _config_show)
    p.add_argument("--settings", default=None,
                   help="a GAIA memory_settings.json or a YAML file of thresholds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one threshold (repeatable)")
    p.add_argument("--embedder", default=None, metavar="MODEL_ID",
                   help="apply this embedder's shipped calibration (e.g. all-MiniLM-L6-v2-f16, "
                   "the embedded one); default: none, GAIA's defaults")
    p.add_argument("--json", action="store_true",
                   help="print the memory_settings.json skill_synthesis block")
