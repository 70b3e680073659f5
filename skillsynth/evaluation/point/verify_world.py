"""The ``world`` verifier: a candidate is tried with the live agent before it is activated.

Each try is a fresh episode of one of the candidate's own member tasks in the point's world,
run by :func:`~skillsynth.evaluation.live.agent.run_agent` with that procedure alone recalled
(greedy, seed 0, the point's step limit, policy and recall cut, the simulated user when the
point has one). The world's own score decides a try; :func:`~skillsynth.pipeline.verify.
threshold_verdict` decides the candidate. The synthesis pass receives it as its verifier
(:class:`~skillsynth.pipeline.verify.Verifier`), so the pipeline never imports the agent.

:func:`verify_kpis` reads a point's pass reports: the share of candidates verified, and the
model calls and seconds spent per verified procedure (the cost of the stage, any rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...config import Thresholds
from ...corpora.labels import SessionLabel
from ...errors import ConfigError, EvaluationError, LLMUnavailable, WorldError
from ...pipeline.cluster import Cluster
from ...pipeline.inject import RecallCut
from ...pipeline.skill import Skill
from ...pipeline.synthesize import PassReport
from ...pipeline.verify import (
    Attempt,
    TraceVerifier,
    Verdict,
    Verifier,
    VerifyCalls,
    VerifyRule,
    median_member_calls,
    threshold_verdict,
)
from ...protocols import ChatModel
from ..live.agent import run_agent
from ..live.gaia_context import RecallLayout
from ..live.user_sim import UserSimulator
from ..live.worlds import World, get_world
from .metrics import KPI, proportion_kpi
from .options import PointOptions

__all__ = ["WorldVerifier", "point_verifier", "task_ids_in_world",
           "verify_kpis"]


def task_ids_in_world(world: World, labels: Mapping[str, SessionLabel]) -> dict[str, str]:
    """Each labelled session's task id in ``world`` (sessions whose task it lacks left out)."""
    out: dict[str, str] = {}
    for sid, lab in labels.items():
        if lab.task_id is None:
            continue
        try:
            out[sid] = world.task(str(lab.task_id)).task_id
        except WorldError:
            continue
    return out


@dataclass(frozen=True)
class WorldVerifier:
    """Tries a candidate on up to ``tasks`` distinct member tasks (cluster order).

    ``calls``: ``median`` passes a try only when it also used no more tool calls than the
    median of the cluster's member sessions (issue 25's optional rule).

    A try that ends on a model error raises :class:`~skillsynth.errors.LLMUnavailable`: an
    outage must skip the pass, not reject every candidate.
    """

    llm: ChatModel
    world: World
    task_of: Mapping[str, str]
    config: Thresholds
    tasks: int = 3
    min_success: float = 0.5
    step_limit: int = 12
    policy: bool = True
    recall_cut: RecallCut = "raw"
    recall_layout: RecallLayout = "main"
    user: ChatModel | None = None
    calls: VerifyCalls = "none"
    rule: VerifyRule = "world"

    def __call__(self, skill: Skill, cluster: Cluster) -> Verdict:
        todo: dict[str, str] = {}  # task -> the first member session that attempted it
        for sid in cluster.session_ids:
            task = self.task_of.get(sid)
            if task is not None and task not in todo and len(todo) < self.tasks:
                todo[task] = sid
        specs = self.world.tool_specs()
        policy = self.world.policy() if self.policy else ""
        tries: list[Attempt] = []
        calls = hits = 0
        limit = median_member_calls(cluster) if self.calls == "median" else None
        for task, sid in todo.items():
            user = None if self.user is None else UserSimulator(
                self.user, self.world.task(task).instructions, seed=0)
            run = run_agent(self.llm, self.world.start(task), tool_specs=specs, policy=policy,
                            recalled=[skill], config=self.config, step_limit=self.step_limit,
                            solo=user is None, user=user, recall_cut=self.recall_cut,
                            recall_layout=self.recall_layout)
            if run.termination == "model-error":
                raise LLMUnavailable(f"verifying {skill.name} on task {task}: {run.error}")
            calls, hits = calls + run.llm_calls, hits + run.cache_hits
            ok = run.success is True and (limit is None or run.steps <= limit)
            detail = _detail(run.as_dict()) | ({} if limit is None
                                                else {"median_member_calls": limit})
            tries.append(Attempt(session=sid, ok=ok, task_id=task, detail=detail))
        return threshold_verdict(self.rule, tries, self.min_success, model_calls=calls,
                                 cache_hits=hits, passed_means="succeeded" if limit is None
                                 else f"succeeded within {limit:g} calls (the members' "
                                 "median)")


def _detail(run: Mapping[str, Any]) -> dict[str, Any]:
    """A try's record: the run without its transcript (the calls are kept)."""
    keep = ("steps", "calls", "failed_calls", "turns", "termination", "success", "reward",
            "llm_calls", "cache_hits", "wall_s", "error")
    return {k: run[k] for k in keep}


def point_verifier(cfg: PointOptions, llm: ChatModel, labels: Mapping[str, SessionLabel],
                   config: Thresholds, user: ChatModel | None = None) -> Verifier | None:
    """The verifier a point's ``verify`` option asks for (None for ``none``).

    Raises:
        EvaluationError: ``verify: world`` without a live world (the ``world`` option).
        ConfigError: ``verify: world`` and no labelled history session is a world task.
    """
    if cfg.verify == "none":
        return None
    if cfg.verify == "trace":
        return TraceVerifier()
    if cfg.world == "replay":
        raise EvaluationError("verify: world tries each candidate in a live world, and the "
                              "point's `world` option is replay; set `world` to a world from "
                              "`skillsynth world list`, or use verify: trace")
    world = get_world(cfg.world)
    task_of = task_ids_in_world(world, labels)
    if not task_of:
        raise ConfigError(f"verify: world found no labelled session whose task is a task of "
                          f"{world.name}", key="verify")
    return WorldVerifier(llm=llm, world=world, task_of=task_of, config=config,
                         tasks=cfg.verify_tasks, min_success=cfg.verify_min_success,
                         step_limit=cfg.step_limit, policy=cfg.policy, recall_cut=cfg.recall_cut,
                         recall_layout=cfg.recall_layout, user=user, calls=cfg.verify_calls)


def verify_kpis(reports: Sequence[PassReport]) -> list[KPI]:
    """``verified_share`` (of candidates), ``verify_calls_per_verified`` and
    ``verify_seconds_per_verified``; none for a point that does not verify."""
    ran = [r for r in reports if r.verify != "none"]
    if not ran:
        return []
    verified = sum(r.verified for r in ran)
    shares = [1.0] * verified + [0.0] * sum(r.rejected for r in ran)
    note = "" if verified else "no candidate was verified"

    def per(name: str, total: float, what: str) -> KPI:
        return KPI(name=name, value=round(total / verified, 4) if verified else None, lo=None,
                   hi=None, n=verified, unit="procedures", kind="ratio", note=note or what)

    calls = sum(r.verify_calls for r in ran)
    return [proportion_kpi("verified_share", shares, unit="candidates"),
            per("verify_calls_per_verified", calls,
                "uncached model requests of every try over the verified procedures"),
            per("verify_seconds_per_verified", sum(r.verify_seconds for r in ran),
                "verification wall seconds over the verified procedures")]
