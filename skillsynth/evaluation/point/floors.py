"""#887's floors, provoked on a finished history store: memory disabled, synthesis
disabled, the model unreachable, a disabled procedure never recalled. Each must leave the
store as it was (a disabled procedure is re-enabled after its check).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable, Iterator

from ...config import Thresholds
from ...models.chat import ChatClient
from ...models.embed import Embeds
from ...models.llm import Endpoint
from ...pipeline.distill import DistillMode
from ...protocols import ChatModel
from ...store import MemoryStore
from ..strategies import Recaller, Strategy

__all__ = ["check_floors"]


def _procedure_dump(store: MemoryStore) -> str:
    rows = store.execute("SELECT * FROM procedures ORDER BY id")
    calls = store.execute("SELECT COUNT(*) FROM tool_history")
    return repr((rows, calls))


def _closed_port_client() -> ChatClient:
    with socket.socket() as s:  # bind, learn the port, close: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return ChatClient(Endpoint(backend="local", base_url=f"http://127.0.0.1:{port}/v1",
                               model="none", timeout_s=2.0, connect_timeout_s=1.0, max_retries=0))


def check_floors(store: MemoryStore, strategy: Strategy, llm: ChatModel, embedder: Embeds,
                 config: Thresholds, mode: DistillMode, probe_goal: str | None,
                 recaller: Callable[[], Recaller]) -> dict[str, bool | None]:
    """Provoke #887's off-states on a finished history store; True where each behaved.

    The store ends as it began (a disabled procedure is re-enabled). None: the floor could
    not be provoked here (no synthesis in this design, nothing to distil, nothing recalled).
    """
    with _quiet(*_PASS_LOGGERS):  # the off-states below are provoked on purpose
        return _provoke(store, strategy, llm, embedder, config, mode, probe_goal, recaller)


#: The loggers of every synthesis pass a strategy runs (gaia-shipped's: GAIA's own driver).
_PASS_LOGGERS = ("skillsynth.pipeline.synthesize", "skillsynth.evaluation.strategies.gaia_shipped",
                 "gaia.agents.base.procedural_memory")


@contextlib.contextmanager
def _quiet(*names: str) -> Iterator[None]:
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _provoke(store: MemoryStore, strategy: Strategy, llm: ChatModel, embedder: Embeds,
             config: Thresholds, mode: DistillMode, probe_goal: str | None,
             recaller: Callable[[], Recaller]) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    if strategy.method is None:
        return {"memory-disabled": None, "synthesis-disabled": None,
                "llm-unavailable": None, "disabled-not-recalled": None}
    before = _procedure_dump(store)
    before_recall = recaller()(probe_goal) if probe_goal else []
    r = strategy.synthesize(store, llm, embedder, config, mode=mode,
                            memory_disabled=True)
    out["memory-disabled"] = (r is not None and r.status == "memory-disabled"
                              and _procedure_dump(store) == before)
    r = strategy.synthesize(store, llm, embedder, config.merge(enabled=False), mode=mode)
    still = recaller()(probe_goal) if probe_goal else []
    out["synthesis-disabled"] = (r is not None and r.status == "synthesis-disabled"
                                 and _procedure_dump(store) == before
                                 and [h.procedure.id for h in still]
                                 == [h.procedure.id for h in before_recall])
    with _closed_port_client() as down:
        # forced: the pass before consumed every cluster it distilled (synthesis marks)
        r = strategy.synthesize(store, down, embedder, config, mode=mode, force=True)
    if r is None or r.qualified == 0:
        out["llm-unavailable"] = None
    else:
        out["llm-unavailable"] = r.status == "llm-unavailable" and _procedure_dump(store) == before
    if before_recall and probe_goal:
        top = before_recall[0].procedure.id
        store.set_procedure_enabled(top, False)
        try:
            out["disabled-not-recalled"] = top not in {h.procedure.id
                                                       for h in recaller()(probe_goal)}
        finally:
            store.set_procedure_enabled(top, True)
    else:
        out["disabled-not-recalled"] = None
    return out
