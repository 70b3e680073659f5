"""Export: write a stored procedure as ``<dir>/<name>/SKILL.md``.

Synthesis itself never writes files (#887's trust boundary); exporting is an explicit step
a person takes, and the written file is re-read by the profile's own parser. A body with a
plan block (:mod:`.plan`) is exported only if the plan parses back, strictly.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SkillValidationError, StoreError
from ..store import MemoryStore
from .plan import find_plan
from .recall import skill_from_procedure
from .skill import Profile, Skill, validate_dir

__all__ = ["export_skill"]


def export_skill(store: MemoryStore, procedure_id: str, out_dir: str | Path,
                 profile: Profile = "agentskills", *, overwrite: bool = False) -> Path:
    """Write procedure ``procedure_id`` under ``out_dir`` and return the skill directory.

    Raises:
        StoreError: no such procedure.
        MalformedSkill: the stored row is not a representable skill.
        PlanError: its body holds a plan block that is malformed (nothing is written).
        SkillValidationError: the written file fails its profile (never expected).
    """
    proc = store.get_procedure(procedure_id)
    if proc is None:
        raise StoreError(f"no procedure with id {procedure_id!r}", path=str(store.path))
    skill = skill_from_procedure(proc)
    plan = find_plan(skill.body)
    skill_dir = skill.write(out_dir, profile, overwrite=overwrite)
    errors = validate_dir(skill_dir, profile)
    if errors:
        raise SkillValidationError(str(skill_dir), profile, errors)
    back = Skill.read(skill_dir, profile)
    if back != skill or find_plan(back.body) != plan:
        raise SkillValidationError(str(skill_dir), profile, ["round trip changed it"])
    return skill_dir
