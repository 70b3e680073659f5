"""``skillsynth skill`` and ``skillsynth demo``: render and validate SKILL.md files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import SkillError, SkillsynthError
from ..pipeline.skill import PROFILES, Skill, validate_dir
from ._common import (
    EXIT_FAIL,
    EXIT_OK,
    UsageError,
    command,
    group,
)

__all__ = ["register"]


def _skill_validate(args: argparse.Namespace) -> int:
    skill_dir = Path(args.dir)
    if not skill_dir.is_dir():
        raise UsageError(f"{skill_dir}: not a directory (pass the folder that holds SKILL.md)")
    errors = validate_dir(skill_dir, args.profile)
    if errors:
        for e in errors:
            print(e)
        return EXIT_FAIL
    print(f"{skill_dir}: valid under {args.profile}")
    return EXIT_OK


def _skill_render(args: argparse.Namespace) -> int:
    src = Path(args.file)
    if not src.is_file():
        raise UsageError(f"{src}: no such file")
    try:
        skill = Skill.parse(src.read_text(encoding="utf-8"))
    except SkillsynthError as exc:
        raise SkillError(f"{src}: {exc}") from exc
    out = skill.write(args.out, args.profile, overwrite=args.overwrite)
    errors = validate_dir(out, args.profile)
    if errors:  # a Skill always renders valid; this guards the guarantee loudly
        for e in errors:
            print(e, file=sys.stderr)
        return EXIT_FAIL
    print(f"wrote {out / 'SKILL.md'} ({args.profile}, valid)")
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from ..demo import demo

    report = demo(args.out, overwrite=args.overwrite)
    print(f"memory.db: {report.db_path} (schema v{report.info.schema_version}, "
          f"rows {report.info.rows})")
    print(f"procedure: {report.procedure_id}")
    for (written, checked), errors in report.validity.items():
        verdict = "valid" if not errors else "INVALID: " + "; ".join(errors)
        print(f"{written:>11} file under {checked:<11} validator: {verdict}")
    for profile, d in report.skill_dirs.items():
        print(f"wrote {d / 'SKILL.md'} ({profile}); re-read to the same skill")
    return EXIT_OK

def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    sks = group(sub, "skill", "render and validate SKILL.md files")
    p = command(sks, "validate", "validate a skill directory; exit 1 with one error per line",
                _skill_validate)
    p.add_argument("dir", help="the skill directory (holds SKILL.md; named like the skill)")
    p.add_argument("--profile", choices=PROFILES, required=True,
                   help="gaia691: GAIA #691's rules; agentskills: the real skills-ref validator")
    p = command(sks, "render", "turn an LLM's intermediate skill into <out>/<name>/SKILL.md",
                _skill_render)
    p.add_argument("file", help="the intermediate document (name, when_to_use, tools_required)")
    p.add_argument("--profile", choices=PROFILES, required=True, help="the SKILL.md profile")
    p.add_argument("--out", required=True, help="the folder to write <name>/SKILL.md under")
    p.add_argument("--overwrite", action="store_true", help="replace an existing SKILL.md")
    p = command(sub, "demo", "build a small demo memory.db and skill files (no model calls)",
                _demo)
    p.add_argument("out", help="the folder to write memory.db and the skill files into")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier demo")
