"""The live arms of an evaluation point: which world each probe runs in, and the runs.

A probe runs its own task in a named world (tau2), or its recorded goal against the
corpus's recordings (the replay world). Each arm is a fresh episode; every run's full record
goes to the point's ``runs.jsonl`` as soon as it is done. See METHODS.md section 3b.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

from ...errors import EvaluationError, WorldError
from ...pipeline.recall import skill_from_procedure
from ...pipeline.skill import Skill
from ...protocols import ChatModel
from ...store import MemoryStore, ToolCall
from ..live.agent import AgentRun, loaded_tools, run_agent
from ..live.gaia_context import recall_block
from ..live.plan_tool import recalled_forms
from ..live.user_sim import UserSimulator
from ..live.worlds import ReplayWorld, World, get_world, task_order
from ..strategies import Recaller
from .complete import require_run
from .context import EvalConfig, PointContext
from .control_checks import gold_share_matched, gold_writes_matched
from .metrics import ProbeResult
from .recall_plans import MemberPlans

__all__ = ["live_rows", "live_world", "terminations"]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _some(probes: Sequence[str], cfg: EvalConfig, have: Sequence[str | None]) -> None:
    if not probes:
        ids = sorted({str(t) for t in have})
        raise EvaluationError(f"{cfg.corpus}: no probe has a task id in "
                              f"{', '.join(cfg.tasks or ())} (probes' task ids: "
                              f"{', '.join(ids[:12])}{', ...' if len(ids) > 12 else ''})")


def live_world(ctx: PointContext, store: MemoryStore, recorded: Sequence[ToolCall],
               probe_calls: Mapping[str, Sequence[ToolCall]], goals: Mapping[str, str]
               ) -> tuple[World, dict[str, str], dict[str, Any]]:
    """The world live probes run in, each probe's task id there, and what was matched.

    In a named world a probe runs its own task: its label's task id must be the world's and
    its goal the task's (its reason for the call, or the whole prompt for a history the
    agent generated); a probe that is not is counted and left out of the live arms.
    """
    cfg, labels, split = ctx.cfg, ctx.labels, ctx.split
    probes = [p.session_id for p in split.probes if p.session_id in goals]
    have = [labels[s].task_id for s in probes]
    if cfg.world == "replay":
        if cfg.tasks is not None:
            probes = [s for s in probes if labels[s].task_id in cfg.tasks]
            _some(probes, cfg, have)
        semantic = [t for t, _ in Counter(c.tool_name for c in store.tool_calls()).most_common()]
        world: World = ReplayWorld(recorded, {s: (goals[s], str(split.family(s)), probe_calls[s],
                                                  labels[s]) for s in probes}, semantic)
        return world, {s: s for s in probes}, {"world": "replay", "probes": len(probes),
                                               "not_in_world": []}
    world = get_world(cfg.world)
    wanted = None if cfg.tasks is None else {world.task(t).task_id for t in cfg.tasks}
    task_of: dict[str, str] = {}
    missing: list[str] = []
    seen: set[str] = set()
    for s in probes:
        try:
            task = world.task(str(labels[s].task_id))
        except WorldError:
            missing.append(s)
            continue
        seen.add(task.task_id)
        if wanted is not None and task.task_id not in wanted:
            continue
        if _norm(goals[s]) in (_norm(task.goal), _norm(task.prompt)):
            task_of[s] = task.task_id
        else:
            missing.append(s)
    if wanted is not None:
        _some(list(task_of) + missing, cfg, have)
        if absent := sorted(wanted - seen, key=task_order):
            raise EvaluationError(
                f"{cfg.corpus}: tasks {', '.join(absent)} have no probe (a task needs more "
                f"than k attempts in the corpus); probes' task ids: "
                f"{', '.join(sorted(seen, key=task_order))}")
    if not task_of:
        raise WorldError(f"{cfg.corpus}: none of its {len(probes)} probes is a task of "
                         f"{world.name} (task ids and goals must match the world's tasks)")
    return world, task_of, {"world": world.name, "probes": len(task_of),
                            "not_in_world": missing}


def live_rows(ctx: PointContext, world: World, task_of: Mapping[str, str],
              replay: Sequence[ProbeResult], recaller: Recaller) -> list[ProbeResult]:
    """Both arms of every probe under the live agent, ``repeats`` runs each.

    One row per probe, arm and repeat (``steps_method`` live); every run's full record
    (calls, results, answer, the world's score) goes to the point's ``runs.jsonl``. With
    nothing recalled the memory arm is the no-memory run, unless the strategy runs an empty
    memory arm (the inert control: that second run is what its check compares). The gold
    source gives each row's ``gold_matched`` and ``gold_writes_matched`` (graded progress on
    every gold action and on the writes, paired across points by the report); the context's
    user plays each run's user (None: solo). With ``procedure_form``
    plan or both, a recalled synthesized procedure carries the plan its member runs give
    (:mod:`.recall_plans`).
    """
    cfg, llm, th, user, gold = ctx.cfg, ctx.llm, ctx.th, ctx.user, ctx.gold
    rerun_empty = ctx.strategy.runs_empty_memory_arm
    specs, policy = world.tool_specs(), world.policy() if cfg.policy else ""
    solo = cfg.world != "replay"
    todo = [r for r in replay if r.arm == "memory" and r.probe_session in task_of]
    plans = MemberPlans(ctx.history_db, specs, ctx.outcomes, choices=cfg.plan_choices) \
        if cfg.procedure_form != "prose" and ctx.history_db.exists() else None
    out: list[ProbeResult] = []
    ctx.runs_expected_file.write_text(str(2 * cfg.repeats * len(todo)), encoding="utf-8")
    with ctx.runs_file.open("w", encoding="utf-8") as fh:
        for r in tqdm(todo, desc=f"live {world.name}", leave=False,
                      disable=not ctx.progress):
            task_id = task_of[r.probe_session]
            recalled = [h.procedure for h in recaller(r.goal, r.probe_session)]
            skills = [skill_from_procedure(p) if plans is None else
                      plans.skill(p, skill_from_procedure(p)) for p in recalled]
            shown = _shown(skills, specs, cfg, th)  # the same for every repeat
            for rep in range(cfg.repeats):
                temp = 0.0 if cfg.repeats == 1 else cfg.temperature
                kw: dict[str, Any] = {"tool_specs": specs, "policy": policy, "config": th,
                                      "step_limit": cfg.step_limit, "temperature": temp,
                                      "seed": rep, "solo": solo,
                                      "recall_cut": cfg.recall_cut,
                                      "recall_layout": cfg.recall_layout,
                                      "procedure_form": cfg.procedure_form}
                base = run_agent(llm, world.start(task_id),
                                 user=_user(user, world, task_id, rep), **kw)
                # nothing recalled: the memory arm's inputs are the no-memory arm's, so is its run
                mem = run_agent(llm, world.start(task_id), recalled=skills,
                                user=_user(user, world, task_id, rep), **kw) \
                    if skills or rerun_empty else base
                for arm, run, block in (("no-memory", base, ""),
                                        ("memory", mem, shown)):
                    require_run(run, f"{world.name} task {task_id}, {arm} arm, run {rep}")
                    fh.write(json.dumps({"probe_session": r.probe_session, "task_id": task_id,
                                         "world": world.name, "arm": arm, "repeat": rep,
                                         "recalled_ids": list(r.recalled_ids) if skills else [],
                                         **run.as_dict()}, ensure_ascii=False,
                                        default=str) + "\n")
                    fh.flush()  # a run's record is on disk as soon as the run is done
                    acts = gold.actions(r.probe_session)
                    out.append(_live_row(r, arm, run, block, rep, world.name,
                                         (gold_share_matched(acts, run.calls),
                                          gold_writes_matched(acts, run.calls))))
    return out


def _shown(skills: Sequence[Skill], specs: Sequence[Mapping[str, Any]], cfg: EvalConfig,
           th: Any) -> str:
    """What the memory arm adds to the agent's prompt, as the run shows it: the recalled
    prose block (plan blocks left out) and the plan tools' schemas ("" for nothing)."""
    if not skills:
        return ""
    prose, plans = recalled_forms(skills, loaded_tools(specs, skills), cfg.procedure_form)
    block = recall_block(prose, th, cut=cfg.recall_cut, layout=cfg.recall_layout)
    return block + "".join(json.dumps(t, ensure_ascii=False) for t in plans.specs)


def _user(user: ChatModel | None, world: World, task_id: str, rep: int
          ) -> UserSimulator | None:
    """A fresh simulated user for one run (None in solo mode)."""
    return None if user is None else UserSimulator(user, world.task(task_id).instructions,
                                                   seed=rep)


def _live_row(r: ProbeResult, arm: str, run: AgentRun, block: str, rep: int,
              world: str, matched: tuple[float | None, float | None]) -> ProbeResult:
    mem = arm == "memory"
    return ProbeResult(
        strategy=r.strategy, arm=arm, probe_session=r.probe_session,  # type: ignore[arg-type]
        family=r.family, goal=r.goal, recalled_ids=r.recalled_ids if mem else (),
        recalled_scores=r.recalled_scores if mem else (),
        recalled_right=r.recalled_right if mem else 0,
        family_has_procedure=r.family_has_procedure, steps_recorded=r.steps_recorded,
        steps=run.steps, steps_method="live", success=run.success, prompt_chars=len(block),
        tokens=run.tokens, llm_calls=run.llm_calls, cache_hits=run.cache_hits,
        wall_s=run.wall_s, failed_calls=run.failed_calls, turns=run.turns,
        prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
        reward=run.reward, termination=run.termination, repeat=rep, world=world,
        gold_matched=matched[0], gold_writes_matched=matched[1], decisions=run.decisions)


def terminations(rows: Sequence[ProbeResult]) -> dict[str, dict[str, int]]:
    """How the live runs ended, counted per arm (a ``context-limit`` or ``step-limit`` beside
    the finished runs says how many were cut off, and in which arm)."""
    ended = Counter((r.arm, r.termination) for r in rows if r.termination is not None)
    out: dict[str, dict[str, int]] = {}
    for (arm, how), n in ended.items():
        out.setdefault(arm, {})[how] = n
    return out
