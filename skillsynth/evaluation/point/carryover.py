"""How much of one task's gold write values another task holds: what a procedure that carries
values (``distill_args: values``) can bring to a recurrence that is not the same task.

The ideal-history scenario recalls the probe's own task three times over, so a values procedure
holds the probe's own ids: the bound of an exact recurrence. A goal that recurs as another
order of the same kind, or as the same customer's other request, shares only some values.
:func:`value_carryover` counts, for every ordered pair of tasks in one group (the history
task, the probe task), the share of the probe's gold write values (tool, argument, value; a
list's elements one by one) that the history task's gold writes hold too, and the share of
the probe's gold writes that one of the history task's matches by tau2's own check
(:func:`~.controls.action_matches`): what an agent that copied the other task's writes
verbatim would score. Intervals resample whole groups, since the pairs of one group are not
independent.

Groups: ``kind``, the tasks whose gold writes call the same set of state-changing tools (the
``tools`` family rule's); ``user``, the tasks whose gold calls pass the same ``user_id``
(tau2's worlds name the customer so; a task without one is left out).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Any, Literal

from ...errors import EvaluationError
from .controls import GoldAction, action_matches
from .intervals import N_BOOT, bootstrap_interval

__all__ = ["CARRYOVER_GROUPS", "Carryover", "CarryoverGroup", "group_of", "value_carryover",
           "write_values"]

CarryoverGroup = Literal["kind", "user"]
CARRYOVER_GROUPS: tuple[CarryoverGroup, ...] = ("kind", "user")


@dataclass(frozen=True)
class Carryover:
    """Write values shared between the tasks of one group, over ordered pairs.

    Attributes:
        group: ``kind`` or ``user``.
        tasks: tasks with a gold write and a group.
        groups: groups with at least two such tasks (the ones that give pairs).
        pairs: ordered pairs (history task, probe task) within a group.
        mean: mean share of the probe's write values the history task's writes hold (None
            without a pair).
        interval: its 95% interval, resampling whole groups.
        whole: pairs in which the history task holds every write value of the probe.
        matched: mean share of the probe's gold writes that a history task's gold write
            matches (tau2's check), None without a pair.
        matched_interval: its 95% interval, resampling whole groups.
    """

    group: str
    tasks: int
    groups: int
    pairs: int
    mean: float | None
    interval: tuple[float | None, float | None]
    whole: int
    matched: float | None = None
    matched_interval: tuple[float | None, float | None] = (None, None)

    def line(self) -> str:
        """The figure in one sentence, with its n."""
        if self.mean is None:
            return f"by {self.group}: no two tasks share a group ({self.tasks} tasks)"
        lo, hi = self.interval
        mlo, mhi = self.matched_interval
        return (f"by {self.group}: another task's gold writes hold {self.mean:.3f} "
                f"[{lo:.3f}, {hi:.3f}] of a task's write values, all of them in "
                f"{self.whole} pairs, and match {self.matched:.3f} [{mlo:.3f}, {mhi:.3f}] of "
                f"its gold writes (means over {self.pairs} ordered pairs in {self.groups} "
                f"groups of {self.tasks} tasks; intervals resample groups)")


def _scalars(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def write_values(actions: Sequence[GoldAction]) -> frozenset[tuple[str, str, str]]:
    """(tool, argument, value as JSON) of every state-changing action's arguments."""
    return frozenset((a.name, str(k), json.dumps(v, sort_keys=True))
                     for a in actions if a.state_changing
                     for k, raw in a.arguments.items() for v in _scalars(raw))


def group_of(actions: Sequence[GoldAction], by: CarryoverGroup) -> str | None:
    """The task's group (module docstring); None when it has none."""
    if by == "kind":
        tools = sorted({a.name for a in actions if a.state_changing})
        return "+".join(tools) or None
    if by == "user":
        return next((str(a.arguments["user_id"]) for a in actions
                     if a.arguments.get("user_id")), None)
    raise EvaluationError(f"carryover group must be one of {', '.join(CARRYOVER_GROUPS)}, "
                          f"got {by!r}")


def value_carryover(gold: Mapping[str, Sequence[GoldAction]], by: CarryoverGroup = "kind", *,
                    n_boot: int = N_BOOT, seed: int = 0) -> Carryover:
    """:class:`Carryover` over ``gold`` (task id -> its gold actions)."""
    # each task's writes and their values, once: (writes, values) per member of a group
    grouped: dict[str, list[tuple[list[GoldAction], frozenset[tuple[str, str, str]]]]] = \
        defaultdict(list)
    for actions in gold.values():
        key, values = group_of(actions, by), write_values(actions)
        if key is not None and values:
            grouped[key].append(([a for a in actions if a.state_changing], values))
    shares: list[float] = []
    matched: list[float] = []
    keys: list[str] = []
    for key, members in grouped.items():
        for (history, have), (probe, want) in permutations(members, 2):
            shares.append(len(want & have) / len(want))
            matched.append(sum(any(action_matches(g, h.name, h.arguments) for h in history)
                               for g in probe) / len(probe))
            keys.append(key)

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    return Carryover(group=by, tasks=sum(len(m) for m in grouped.values()),
                     groups=sum(len(m) > 1 for m in grouped.values()), pairs=len(shares),
                     mean=mean(shares), whole=sum(s == 1.0 for s in shares),
                     interval=bootstrap_interval(shares, mean, clusters=keys, n_boot=n_boot,
                                                 seed=seed),
                     matched=mean(matched),
                     matched_interval=bootstrap_interval(matched, mean, clusters=keys,
                                                         n_boot=n_boot, seed=seed))
