"""Tool worlds: call, episode and scoring latency, and a live run per arm."""

from __future__ import annotations

import time
from typing import Any

from ..config import Thresholds
from ..protocols import ChatModel
from ._stats import median_of, pct

__all__ = ['bench_worlds']


def bench_worlds(worlds: list[str], *, llm: ChatModel | None = None, live_tasks: int = 2,
                 step_limit: int = 8, config: Thresholds | None = None,
                 policy: bool = True, max_tasks: int | None = None) -> dict[str, Any]:
    """Tool-call overhead per world, and seconds per live run per arm with a chat model.

    Overhead: every task's ground-truth calls executed on fresh episodes (median and p99 in
    ms over n calls), and the cost of a fresh episode and of tau2's scoring. Live runs (with
    ``llm``): the first ``live_tasks`` tasks, each in both arms: no memory, and a memory
    arm given one procedure naming the task's ground-truth tools (a stand-in for a recalled
    skill: it times the longer prompt, it is not recall). ``max_tasks`` bounds the tasks
    whose calls are timed (default every task).
    """
    from ..evaluation.live.agent import run_agent
    from ..evaluation.live.worlds import Tau2World, get_world
    from ..pipeline.skill import Skill

    out: dict[str, Any] = {}
    for name in worlds:
        world = get_world(name)
        assert isinstance(world, Tau2World)  # every named world is one (WORLDS)
        call_ms: list[float] = []
        start_ms: list[float] = []
        score_ms: list[float] = []
        for task in list(world.tasks())[:max_tasks]:
            t0 = time.perf_counter()
            ep = world.start(task.task_id)
            start_ms.append((time.perf_counter() - t0) * 1000)
            for tool, args in world.gold_actions(task.task_id):
                t0 = time.perf_counter()
                ep.execute(tool, args)
                call_ms.append((time.perf_counter() - t0) * 1000)
        for task in list(world.tasks())[:min(10, max_tasks or 10)]:
            ep = world.start(task.task_id)
            t0 = time.perf_counter()
            ep.score([], "agent-stop")
            score_ms.append((time.perf_counter() - t0) * 1000)
        fig: dict[str, Any] = {
            "call_ms": {"median": pct(call_ms, 50), "p99": pct(call_ms, 99), "n": len(call_ms)},
            "fresh_episode_ms": {"median": pct(start_ms, 50), "n": len(start_ms)},
            "score_ms": {"median": pct(score_ms, 50), "n": len(score_ms)}}
        if llm is not None:
            runs: dict[str, list[dict[str, Any]]] = {"no-memory": [], "memory": []}
            for task in list(world.tasks())[:live_tasks]:
                tools = tuple(dict.fromkeys(t for t, _ in world.gold_actions(task.task_id)))
                skill = Skill(name="task-procedure", description=f"The user wants: {task.goal}",
                              body="\n".join(f"{i}. Call {t}" for i, t in enumerate(tools, 1)),
                              tools_required=tools)
                for arm, rec in (("no-memory", ()), ("memory", (skill,))):
                    r = run_agent(llm, world.start(task.task_id), tool_specs=world.tool_specs(),
                                  policy=world.policy() if policy else "", recalled=rec,
                                  config=config or Thresholds(), step_limit=step_limit,
                                  solo=True)
                    runs[arm].append({"task_id": task.task_id, "wall_s": r.wall_s,
                                      "steps": r.steps, "turns": r.turns,
                                      "prompt_tokens": r.prompt_tokens,
                                      "termination": r.termination, "reward": r.reward,
                                      "cache_hits": r.cache_hits})
            fig["live_run_s"] = {arm: {"median": median_of([x["wall_s"] for x in rs]),
                                       "n": len(rs), "runs": rs} for arm, rs in runs.items()}
        out[name] = fig
    return out
