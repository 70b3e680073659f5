"""``skillsynth corpus``: build, describe and export replayed tool_history corpora."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import (
    EXIT_OK,
    command,
    group,
    print_json,
)

__all__ = ["register"]

#: Skipped records printed one by one (``--json`` carries every one).
_SHOW = 20
#: Exit status of an import that kept what it could read but left part of a file unread
#: (``--skip-bad`` over a cut file) or left alone a JSONL session whose id the corpus holds
#: with other content: not a failure, not a whole import either.
EXIT_PARTIAL = 3


def _corpus_generate(args: argparse.Namespace) -> int:
    from ..corpora import NoiseConfig, generate_corpus

    rep = generate_corpus(args.db, families=args.families, seed=args.seed,
                          attempts=args.attempts,
                          noise=NoiseConfig(fail_rate=args.fail_rate,
                                            explore_rate=args.explore_rate,
                                            abandon_rate=args.abandon_rate))
    print(f"wrote {rep.db_path} ({rep.sessions} sessions, {rep.families} families, seed "
          f"{rep.seed}) and labels {rep.labels_path}")
    return EXIT_OK


def _corpus_import(args: argparse.Namespace) -> int:
    from ..corpora import import_corpus

    rep = import_corpus(args.format, args.src, args.db, tasks=args.tasks,
                        skip_bad=args.skip_bad, labels_path=args.labels,
                        progress=not args.json and sys.stderr.isatty(), dry_run=args.dry_run)
    done = EXIT_PARTIAL if rep.status == "partial" else EXIT_OK
    if args.json:
        print_json(rep.as_dict())
        return done
    verb = "dry run, nothing written: would import" if args.dry_run else "imported"
    print(f"{verb} {rep.sessions_imported} sessions ({rep.calls_imported} tool calls) from "
          f"{len(rep.files)} file(s) into {rep.db_path}; labels in {rep.labels_path}")
    for what, n in (("sessions without a tool call (no tool_history rows)",
                     rep.sessions_without_calls),
                    ("sessions without a user turn (no goal; not guessed)",
                     rep.sessions_without_goal),
                    ("sessions already in the corpus, left alone", rep.already_present)):
        if n:
            print(f"  {n} {what}")
    for flag, n in rep.flags.items():
        print(f"  {n} sessions flagged {flag}")
    for f in rep.empty_files:
        print(f"  no record in {f}")
    if rep.skipped:
        shown = rep.skipped[:_SHOW]
        print(f"  {rep.records_skipped} bad records skipped"
              + (f" (the first {_SHOW}; --json lists all):" if len(rep.skipped) > _SHOW else ":"))
        for s in shown:
            held = "" if s["records"] == 1 else f" [{s['records']} records]"
            print(f"    {s['error']}{held}")
    if rep.partial_files:
        print(f"  partial import: {rep.unread_bytes} bytes of {', '.join(rep.partial_files)} "
              "could not be read (no later record could be found); exit status "
              f"{EXIT_PARTIAL}")
    if rep.conflicts:
        more = f" (the first {_SHOW}; --json lists all)" if len(rep.conflicts) > _SHOW else ""
        status = "" if args.dry_run else f"; exit status {EXIT_PARTIAL}"
        print(f"  {rep.sessions_conflicting} session(s) already in the corpus with other "
              f"content, left as they are{more}{status}:")
        for c in rep.conflicts[:_SHOW]:
            print(f"    {c['file']}, {c['record']}: session {c['session_id']!r}")
    return done


def _corpus_stats(args: argparse.Namespace) -> int:
    from ..corpora import corpus_stats

    st = corpus_stats(args.db, labels_path=args.labels)
    if args.json:
        print_json(st.as_dict())
        return EXIT_OK
    for k, v in st.as_dict().items():
        if isinstance(v, dict):
            v = ", ".join(f"{a} {b:g}" if isinstance(b, float) else f"{a} {b}"
                          for a, b in v.items()) or "-"
        elif isinstance(v, float):
            v = f"{v:.3f}"
        print(f"{k.replace('_', ' '):<24} {'-' if v is None else v}")
    return EXIT_OK


def _corpus_export(args: argparse.Namespace) -> int:
    from ..corpora import export_jsonl

    n = export_jsonl(args.db, args.out, labels_path=args.labels)
    print(f"wrote {n} tool calls to {args.out}")
    return EXIT_OK


def _corpus_ideal(args: argparse.Namespace) -> int:
    from ..evaluation.live.worlds import get_world
    from ..evaluation.point.ideal import ideal_history

    rep = ideal_history(get_world(args.world), args.corpus, args.db, attempts=args.attempts,
                        tasks=args.tasks, progress=not args.json and sys.stderr.isatty())
    if args.json:
        print_json(rep.as_dict() | {"by_result_chars": rep.limit_rows()})
        return EXIT_OK
    if rep.already_present:
        print(f"{rep.db_path} is a finished build of {rep.already_present} task(s), kept as "
              "it is (remove it to build and trace the references again)")
        return EXIT_OK
    print(f"wrote {len(rep.tasks)} task(s) x {rep.attempts} attempts ({rep.from_recorded} "
          f"from a recorded success, {rep.from_gold} from gold calls) to {rep.db_path}")
    for task, why in rep.left_out.items():
        print(f"  left out {task}: {why}")
    print("argument values of the references by source, per characters kept of each result "
          "(GAIA keeps 500):")
    print(f"  {'result chars':>12} {'step':>6} {'customer':>9} {'constant':>9} {'unknown':>8}"
          f" {'from a result':>14} {'stored chars per call':>22}")
    for r in rep.limit_rows():
        share = "-" if r["from_a_result"] is None else f"{r['from_a_result']:.2f}"
        print(f"  {r['result_chars']:>12} {r['step']:>6} {r['customer']:>9} "
              f"{r['constant']:>9} {r['unknown']:>8} {share:>14} "
              f"{'-' if r['mean_stored_chars'] is None else r['mean_stored_chars']:>22}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    cos = group(sub, "corpus", "build replayed tool_history corpora")
    p = command(cos, "generate", "a seeded synthetic corpus with ground-truth labels",
                _corpus_generate)
    p.add_argument("db", help="the memory.db to create (labels go to <db>.labels.sqlite)")
    p.add_argument("--families", type=int, default=8, help="task families (1-8 built in)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--attempts", type=int, default=5, help="sessions per family")
    p.add_argument("--fail-rate", type=float, default=0.1,
                   help="chance a step fails once and is retried")
    p.add_argument("--explore-rate", type=float, default=0.1,
                   help="chance of an exploratory call before a step")
    p.add_argument("--abandon-rate", type=float, default=0.1,
                   help="chance a session stops before its last step (fails)")

    p = command(cos, "import", "import agent trajectories or a GAIA memory.db as a corpus",
                _corpus_import)
    p.add_argument("--format", required=True, choices=("taubench", "tau2", "gaia-db", "jsonl"),
                   help="the source format (see the corpora section of the README)")
    p.add_argument("src", nargs="+", help="source files or folders (.json, .json.gz, .jsonl)")
    p.add_argument("db", help="the corpus memory.db (created when missing)")
    p.add_argument("--tasks", help="tau2: a tasks file for simulations whose file lacks "
                                   "their task")
    p.add_argument("--skip-bad", action="store_true",
                   help="skip and count bad records instead of stopping at the first")
    p.add_argument("--labels", help="the labels file (default <db>.labels.sqlite)")
    p.add_argument("--json", action="store_true", help="print the import report as JSON")
    p.add_argument("--dry-run", action="store_true",
                   help="read every record and say what would be imported, what is already "
                   "present and what would be skipped; write nothing")
    p = command(cos, "ideal", "ideal history: each task's reference run executed in a world "
                "and written N times as GAIA writes a session; prints where its arguments "
                "come from at each result length kept", _corpus_ideal)
    p.add_argument("corpus", help="a labelled corpus recorded in --world (its successful "
                   "sessions are the references; else the world's gold calls)")
    p.add_argument("db", help="the ideal corpus to write (labels beside it); an existing "
                   "finished build is kept")
    p.add_argument("--world", required=True, help="the world the corpus was recorded in "
                   "(tau2:retail, tau2:airline, tau2:mock)")
    p.add_argument("--attempts", type=int, default=4,
                   help="attempts per task: the protocol's k plus one for the probe")
    p.add_argument("--tasks", nargs="+", help="only these task ids, as the corpus's labels "
                   "name them (default: every task)")
    p.add_argument("--json", action="store_true", help="print the build report as JSON")
    p = command(cos, "stats", "what a corpus holds (read-only)", _corpus_stats)
    p.add_argument("db", help="the corpus memory.db")
    p.add_argument("--labels", help="the labels file (default <db>.labels.sqlite)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p = command(cos, "export", "write a corpus as skillsynth JSONL (one line per tool call)",
                _corpus_export)
    p.add_argument("db", help="the corpus memory.db (read-only)")
    p.add_argument("out", help="the .jsonl file to write")
    p.add_argument("--labels", help="the labels file (default <db>.labels.sqlite)")
