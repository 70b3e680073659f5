"""``skillsynth db``: create, migrate and inspect GAIA memory.db files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..store import MemoryStore
from ._common import (
    EXIT_OK,
    UsageError,
    command,
    group,
    print_json,
)

__all__ = ["register"]


def _db_init(args: argparse.Namespace) -> int:
    with MemoryStore.init(args.path) as store:
        version = store.schema_version()
    print(f"created {args.path} (GAIA memory schema v{version})")
    return EXIT_OK


def _db_migrate(args: argparse.Namespace) -> int:
    if not Path(args.path).exists():
        raise UsageError(f"{args.path}: no such file")
    report = MemoryStore.migrate_file(args.path, dry_run=args.dry_run)
    if not report.steps:
        print(f"{args.path}: already at schema v{report.from_version}; nothing to do")
        return EXIT_OK
    verb = "would migrate" if report.dry_run else "migrated"
    print(f"{args.path}: {verb} v{report.from_version} -> v{report.to_version}")
    for step in report.steps:
        print(f"  {step}")
    return EXIT_OK


def _db_info(args: argparse.Namespace) -> int:
    if not Path(args.path).exists():
        raise UsageError(f"{args.path}: no such file")
    with MemoryStore.open(args.path, read_only=True) as store:
        info = store.info()
    if args.json:
        print_json(info.as_dict())
        return EXIT_OK
    print(f"path:            {info.path}")
    print(f"schema version:  {info.schema_version}")
    print(f"embedder id:     {info.embedder_id or '-'}")
    print(f"sessions:        {info.tool_history_sessions} (with tool calls)")
    if info.synthesis is not None:
        parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in info.synthesis.items())
        print(f"synthesis:       {parts}")
        print(f"watermark:       {info.synthesis_watermark or '- (no pass consumed anything)'}")
    print("rows:")
    for table, n in info.rows.items():
        print(f"  {table:<16} {'(absent)' if n is None else n}")
    return EXIT_OK

def _db_reset_synthesis(args: argparse.Namespace) -> int:
    if not Path(args.path).exists():
        raise UsageError(f"{args.path}: no such file")
    with MemoryStore.open(args.path) as store:
        out = store.reset_synthesis_progress()
    print(f"{args.path}: {out['marks_cleared']} synthesis mark(s) cleared, watermark "
          f"{'cleared' if out['watermark_cleared'] else 'was not set'}; the next pass "
          "re-reads the whole history (procedures are kept)")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    dbs = group(sub, "db", "create, migrate and inspect GAIA memory.db files")
    p = command(dbs, "init", "create a new memory.db with GAIA's current (v7) schema", _db_init)
    p.add_argument("path", help="the database file to create (must not exist)")
    p = command(dbs, "migrate", "migrate a memory.db to v7 additively (no row changes)",
                _db_migrate)
    p.add_argument("path", help="the database file to migrate (back it up first)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the steps without changing the file")
    p = command(dbs, "info", "schema version and row counts (opens read-only)", _db_info)
    p.add_argument("path", help="the database file to inspect")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = command(dbs, "reset-synthesis",
                "forget GAIA's synthesis marks and watermark (procedures are kept)",
                _db_reset_synthesis)
    p.add_argument("path", help="the database file (written)")
