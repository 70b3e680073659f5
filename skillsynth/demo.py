"""A small, self-contained tour of the foundation: store, SKILL.md profiles, validators.

``skillsynth demo OUT`` builds a GAIA ``memory.db`` with three successful sessions of
the same task, turns a hand-written intermediate skill into a canonical one, writes it
under both profiles, validates each file under both validators (showing where #691 and
skills-ref disagree), stores it as a procedure and reports what it did. It calls no
model; the model-backed pipeline is ``skillsynth.pipeline.synthesize`` (later issues).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import SkillError, StoreError
from .pipeline.skill import PROFILES, Profile, Skill, validate_dir
from .store import MemoryStore, Procedure, StoreInfo

__all__ = ["DemoReport", "demo"]

_GOAL_PHRASINGS = (
    "Summarise the Q3 sales report",
    "Give me a summary of the third-quarter sales report",
    "What does the Q3 sales report say? Summarise it",
)
_CALLS = (
    ("search_file", {"pattern": "*sales*q3*"}, "1 match: reports/sales-q3.pdf"),
    ("index_document", {"path": "reports/sales-q3.pdf"}, "indexed 14 chunks"),
    ("query_documents", {"query": "key figures and trends"}, "revenue up 8%; churn 2.1%"),
)
_INTERMEDIATE = """---
name: summarise-indexed-report
when_to_use: "The user asks for a summary of a named report or document: find it, index it, query it."
tools_required:
  - search_file
  - index_document
  - query_documents
---

1. Call `search_file` with a glob built from the report's name and period.
2. Call `index_document` on the best match.
3. Call `query_documents` for key figures, trends and risks; summarise the answer.

## Edge cases
- No match: ask the user for the file's location instead of guessing.
- Several matches: prefer the most recent, and say which one was used.
"""


@dataclass(frozen=True)
class DemoReport:
    """What :func:`demo` produced."""

    db_path: Path
    skill_dirs: dict[Profile, Path]
    validity: dict[tuple[Profile, Profile], list[str]]
    procedure_id: str
    info: StoreInfo


def demo(out_dir: str | Path, *, overwrite: bool = False) -> DemoReport:
    """Build the demo database and skill files under ``out_dir``.

    Raises:
        StoreError: when ``out_dir`` already holds a demo and ``overwrite`` is false.
    """
    out = Path(out_dir)
    db_path = out / "memory.db"
    if db_path.exists():
        if not overwrite:
            raise StoreError(f"{db_path} exists; choose another folder or pass --overwrite")
        for suffix in ("", "-wal", "-shm"):
            Path(str(db_path) + suffix).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    skill = Skill.parse(_INTERMEDIATE)
    with MemoryStore.init(db_path) as store:
        sessions = []
        for i, goal in enumerate(_GOAL_PHRASINGS):
            sid = f"demo-session-{i + 1}"
            sessions.append(sid)
            with store.transaction():
                for tool, args, result in _CALLS:
                    store.log_tool_call(sid, tool, args, result, True, duration_ms=40)
                store.add_turn(sid, "user", goal)
                store.add_turn(sid, "assistant", "Revenue rose 8% with churn at 2.1%.")
        proc = store.put_procedure(Procedure(
            name=skill.name, when_to_use=skill.description, markdown_body=skill.body,
            tools_required=skill.tools_required,
            tool_sequence=tuple({"tool": t} for t, _, _ in _CALLS),
            success_count=len(sessions), attempt_count=len(sessions),
            provenance={"source": "skillsynth-demo", "from_sessions": sessions}))
        info = store.info()
    dirs = {p: skill.write(out / p, p, overwrite=overwrite) for p in PROFILES}
    validity = {(written, checked): validate_dir(d, checked)
                for written, d in dirs.items() for checked in PROFILES}
    for p, d in dirs.items():
        if Skill.read(d, p) != skill:
            raise SkillError(f"round trip of {d} under {p} changed the skill")
    return DemoReport(db_path=db_path, skill_dirs=dirs, validity=validity,
                      procedure_id=proc.id, info=info)
