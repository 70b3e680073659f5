"""Export: write a stored procedure as ``<dir>/<name>/SKILL.md``.

Synthesis itself never writes files (#887's trust boundary); exporting is an explicit step
a person takes, and the written file is re-read by the profile's own parser. A body with a
plan block (:mod:`.plan`) is exported only if the plan parses back, strictly; a procedure
whose distiller saw the runs' argument values only when asked for.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ExportRefused, SkillValidationError, StoreError
from ..store import MemoryStore
from .plan import find_plan
from .recall import skill_from_procedure
from .reconcile import USER_DATA
from .skill import Profile, Skill, validate_dir

__all__ = ["export_skill"]


def export_skill(store: MemoryStore, procedure_id: str, out_dir: str | Path,
                 profile: Profile = "agentskills", *, overwrite: bool = False,
                 allow_user_data: bool = False) -> Path:
    """Write procedure ``procedure_id`` under ``out_dir`` and return the skill directory.

    A procedure distilled from the runs' argument values (its provenance marks it: ``distill_args:
    values``, an upper bound that shows user data to the model) is exported only with
    ``allow_user_data``.

    Raises:
        StoreError: no such procedure.
        ExportRefused: the procedure may hold user data and ``allow_user_data`` is false.
        MalformedSkill: the stored row is not a representable skill.
        PlanError: its body holds a plan block that is malformed (nothing is written).
        SkillValidationError: the written file fails its profile (never expected).
    """
    proc = store.get_procedure(procedure_id)
    if proc is None:
        raise StoreError(f"no procedure with id {procedure_id!r}", path=str(store.path))
    if (proc.provenance or {}).get(USER_DATA) and not allow_user_data:
        raise ExportRefused(f"procedure {proc.name!r} ({proc.id}) was distilled from the runs' "
                            "argument values (distill_args: values) and may hold user data; "
                            "nothing written (export it with allow_user_data=True, "
                            "--allow-user-data on the command line)")
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
