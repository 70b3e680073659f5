"""What a tool world is to the live agent: tasks, tools, a fresh state per run, a score.

A :class:`World` lists its tasks and starts an :class:`Episode` for one of them; an episode
owns a fresh copy of the world's state (nothing leaks between runs or arms), executes one
tool call at a time and scores the finished run by the world's own rule. Worlds are thin
adapters: the tools and the scoring are the world's, never re-implemented here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["FINISHED", "CallOutcome", "Episode", "Score", "Termination", "Turn", "World",
           "WorldTask", "task_order"]

#: How a run ended: the model answered without a call (solo) or the simulated user ended
#: the conversation; or the step limit, the user-turn limit, the model's context (the
#: conversation outgrew the server's window) or a model error cut it off.
Termination = Literal["agent-stop", "user-stop", "step-limit", "turn-limit", "context-limit",
                      "model-error"]
#: The endings a world scores as finished runs (tau2's AGENT_STOP and USER_STOP).
FINISHED: tuple[Termination, ...] = ("agent-stop", "user-stop")


@dataclass(frozen=True)
class WorldTask:
    """One task of a world.

    Attributes:
        task_id: the world's own id.
        goal: the task's goal as corpora of this world record it (the recall key of a probe
            whose history came from a corpus).
        prompt: what the agent is told in solo mode (the goal with the facts the user
            knows); the first user turn of a live run.
        family: the task family for scoring (the task id unless the world groups tasks).
        instructions: everything the user knows and wants, for a user simulator ("" when
            the world has no user side).
    """

    task_id: str
    goal: str
    prompt: str
    family: str
    instructions: str = ""


@dataclass(frozen=True)
class CallOutcome:
    """One executed call: the text the agent sees and whether the call succeeded."""

    result: str
    ok: bool


@dataclass(frozen=True)
class Turn:
    """One step of a finished run, as scoring sees it.

    ``kind`` is ``call`` (``name``, ``arguments``, ``result``, ``ok``; ``via``: the plan
    tool that made it, "" for the agent's own call), ``plan`` (the agent called a recalled
    plan as one tool: ``name``, its inputs as ``arguments``, the reply it read as ``result``;
    not a world call, so no world scores it), ``answer`` (``content``: text the agent said to
    the user) or ``user`` (``content``: what a simulated user said); ``timestamp`` is when it
    happened (GAIA's ISO format).
    """

    kind: Literal["call", "plan", "answer", "user"]
    name: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    result: str = ""
    ok: bool = True
    content: str = ""
    timestamp: str = ""
    via: str = ""


@dataclass(frozen=True)
class Score:
    """A finished run judged by the world.

    Attributes:
        success: the world's verdict (None: this world cannot judge the task).
        reward: the world's reward, where it has one.
        detail: the world's own breakdown (JSON-ready).
    """

    success: bool | None
    reward: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


class Episode(Protocol):
    """One run of one task, on a fresh state."""

    task: WorldTask

    def execute(self, name: str, arguments: Mapping[str, Any] | str) -> CallOutcome:
        """Run one call; bad arguments or a raising tool are a failed call, never a crash."""
        ...

    def score(self, turns: Sequence[Turn], termination: Termination) -> Score:
        """Judge the finished run (the world's own rule)."""
        ...


class World(Protocol):
    """A tool world: its tools, its policy, its tasks."""

    name: str

    def tool_specs(self) -> list[dict[str, Any]]:
        """Every tool as an OpenAI function schema, in the world's order."""
        ...

    def policy(self) -> str:
        """The domain policy the agent is given ("" when the world has none)."""
        ...

    def tasks(self) -> Sequence[WorldTask]:
        """Every task, in the world's order."""
        ...

    def task(self, task_id: str) -> WorldTask:
        """One task (raises :class:`~skillsynth.errors.WorldError` for an unknown id)."""
        ...

    def start(self, task_id: str) -> Episode:
        """A fresh episode of the task."""
        ...


def task_order(task_id: str) -> tuple[int, str]:
    """Sort key for task ids: numeric ids by number, then named ones (tau2's mock) by name."""
    return (int(task_id), "") if task_id.isdigit() else (1 << 30, task_id)
