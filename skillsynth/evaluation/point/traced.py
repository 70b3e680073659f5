"""The traced control arms' runs: a task's calls executed in its world, and that run as a plan.

oracle-dataflow and oracle-plan (:mod:`.controls`) read a successful run of the probe's task
(a history run, else its gold calls) with the results the world gives, so that argument
values can be traced to where they come from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ...pipeline.detect import SessionSequence
from ...pipeline.induce import induce_plan
from ...pipeline.plan import Plan
from ...pipeline.provenance import TracedCall, enum_values
from ...store import ToolCall

__all__ = ["plan_shape", "summed", "trace_plan", "trace_run"]


class _World(Protocol):
    def task(self, task_id: str) -> Any: ...

    def start(self, task_id: str) -> Any: ...


def trace_run(world: _World, task_id: str, calls: Sequence[tuple[str, Mapping[str, Any]]]
              ) -> tuple[list[tuple[TracedCall, bool]], str]:
    """``calls`` executed in a fresh episode of the task: each with its result and whether
    it succeeded (a gold sequence may hold a call that fails), and the task's words to the
    agent (the customer).

    Raises:
        WorldError: the task cannot be started.
    """
    task, episode = world.task(task_id), world.start(task_id)
    out = []
    for name, args in calls:
        got = episode.execute(name, dict(args))
        out.append((TracedCall(name=name, arguments=args, result=got.result), bool(got.ok)))
    return out, "\n".join(t for t in (task.prompt, task.instructions) if t)


def trace_plan(probe: str, calls: Sequence[tuple[TracedCall, bool]], customer: str,
               tool_specs: Sequence[Mapping[str, Any]], *, choices: bool = False
               ) -> Plan | None:
    """The traced run's successful calls as a plan, induced from that one run with its
    whole results by synthesis's rule (:func:`~skillsynth.pipeline.induce.induce_plan`,
    ``choices`` as there); None when not even its first call can be bound."""
    rows = tuple(ToolCall(session_id=probe, tool_name=c.name,
                          args=json.dumps(dict(c.arguments)), result_summary=c.result,
                          success=ok, timestamp="") for c, ok in calls)
    run = SessionSequence(session_id=probe, goal=customer, calls=rows,
                          span=tuple(r for r in rows if r.success), outcome=True)
    return induce_plan([run], run, enums=enum_values(tool_specs), customer={probe: customer},
                       choices=choices)


def plan_shape(plan: Plan, calls: Sequence[tuple[TracedCall, bool]], origin: str
               ) -> dict[str, int]:
    """What a point's summary counts of one traced plan: complete or a prefix, its steps
    against the run's successful calls, inputs (the customer's), choices (where any), where
    the run came from (``from_history``, ``from_gold``) and why a prefix stops
    (``stop_<reason>``)."""
    return {"complete": int(plan.complete), "prefix": int(not plan.complete),
            "plan_steps": len(plan.steps), "run_steps": sum(ok for _, ok in calls),
            "inputs": len(plan.inputs) - len(plan.choices), f"from_{origin}": 1,
            **({"choices": len(plan.choices)} if plan.choices else {}),
            **({f"stop_{plan.stop.reason}": 1} if plan.stop is not None else {})}


def summed(cache: Mapping[Any, Any], kind: str, zero: Mapping[str, int]) -> dict[str, int]:
    """The counts of every ``(kind, probe)`` entry of a gold source's cache, added up."""
    total = dict(zero)
    for key, counts in cache.items():
        if isinstance(key, tuple) and key[0] == kind:
            for k, n in counts.items():
                total[k] = total.get(k, 0) + n
    return total
