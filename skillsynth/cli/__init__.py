"""The ``skillsynth`` command line: a thin layer over the Python API.

Each subcommand turns its options into keyword arguments and calls one public function;
the logic lives in the library so notebooks and tests use the same code. One module per
command group, each with its handlers, its output formatting and a ``register(sub)`` that
adds its commands. Exit codes: 0 success, 1 a failure the command reports (an invalid
skill, a broken database), 2 a usage error (bad options, a path that does not exist), 130
interrupted (Ctrl-C, or SIGTERM, which every command takes as Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import SkillsynthError
from . import bench, cache, config, corpus, db, evaluation, models, pipeline, skills, world
from ._common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UsageError, sigterm_as_interrupt

__all__ = ["build_parser", "main"]

#: The command groups in the order ``--help`` lists them.
GROUPS = (db, skills, config, models, cache, bench, pipeline, corpus, evaluation, world)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every command and option carries help text."""
    parser = argparse.ArgumentParser(
        prog="skillsynth",
        description="Skill auto-synthesis research toolkit over GAIA's memory.db.")
    parser.add_argument("--version", action="version", version=f"skillsynth {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():
            return int(args.func(args))
    except UsageError as exc:
        parser.exit(EXIT_USAGE, f"skillsynth: error: {exc}\n")
    except SkillsynthError as exc:
        print(f"skillsynth: error: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("skillsynth: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`skillsynth db info X | head`): not a failure of the command;
        # stdout goes to devnull so the interpreter's final flush cannot raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return EXIT_OK
