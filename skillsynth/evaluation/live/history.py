"""#887's real loop, nothing recorded: the agent's own attempts become the history.

The agent runs attempts 1..k+1 of each task live in the world, without memory, and each
run is written to a GAIA ``memory.db`` as GAIA writes it (the calls to ``tool_history``,
the first user turn and the final answer to ``conversations``), with a labels file beside
it (task, attempt, the world's verdict). That database is a corpus like any imported one:
the protocol splits it (attempts 1..k are history, k+1 the probe), synthesizes on the
history and runs the probe live in both arms. Attempts are sampled (``temperature``,
seeded by attempt) so that k attempts are k different runs, as a real agent's would be.
A run already in the database is kept, so an interrupted generation resumes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ... import __version__
from ...corpora.importing import write_session
from ...corpora.labels import LabelStore, SessionLabel, labels_path_for
from ...corpora.records import SessionRecord, session_uuid
from ...errors import EvaluationError
from ...protocols import ChatModel
from ...store import MemoryStore, ToolCall, Turn, now_iso
from .agent import AgentRun, run_agent
from .worlds import World
from .worlds.base import Turn as WorldTurn

__all__ = ["SOURCE", "LiveHistoryReport", "live_history", "tool_rows"]

#: The labels' ``source`` of sessions the agent ran live.
SOURCE = "world"


@dataclass
class LiveHistoryReport:
    """What a generation ran and kept."""

    world: str
    db_path: str
    tasks: list[str]
    attempts: int
    ran: int = 0
    already_present: int = 0
    successes: int = 0
    calls: int = 0
    failed_calls: int = 0
    wall_s: float = 0.0
    runs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def tool_rows(session_id: str, turns: Iterable[WorldTurn]) -> tuple[ToolCall, ...]:
    """The world calls among ``turns`` as GAIA's ``tool_history`` rows (a failed call keeps
    its error, not a result)."""
    return tuple(ToolCall(session_id=session_id, tool_name=t.name,
                          args=json.dumps(dict(t.arguments)) if t.arguments else None,
                          result_summary=t.result if t.ok else None, success=t.ok,
                          timestamp=t.timestamp, error=None if t.ok else t.result)
                 for t in turns if t.kind == "call")


def _record(world: World, task_id: str, attempt: int, run: AgentRun, prompt: str,
            started: str, model: str | None) -> SessionRecord:
    sid = session_uuid(SOURCE, world.name, task_id, attempt)
    calls = tool_rows(sid, run.transcript)
    turns = [Turn(session_id=sid, role="user", content=prompt, timestamp=started)]
    if run.answer:
        last = next(t.timestamp for t in reversed(run.transcript) if t.kind == "answer")
        turns.append(Turn(session_id=sid, role="assistant", content=run.answer, timestamp=last))
    label = SessionLabel(session_id=sid, source=SOURCE, task_id=task_id, attempt=attempt,
                         success=run.success, reward=run.reward, started_at=started,
                         extra={"world": world.name, "termination": run.termination,
                                "chat_model": model, "steps": run.steps,
                                "failed_calls": run.failed_calls})
    return SessionRecord(session_id=sid, calls=calls, turns=tuple(turns), label=label)


def live_history(world: World, llm: ChatModel, db_path: str | Path, *, tasks: Sequence[str],
                 attempts: int, step_limit: int = 12, temperature: float = 0.7,
                 policy: bool = True, config: Any = None, model: str | None = None,
                 progress: bool = False) -> LiveHistoryReport:
    """Run ``attempts`` live attempts of every task and write them as a corpus.

    Args:
        world: the world the agent acts in.
        llm: the agent's chat model.
        db_path: the corpus database to write (created when missing; its labels file beside).
        tasks: the world's task ids.
        attempts: attempts per task (the protocol's k plus one for the probe).
        step_limit: most tool calls per attempt.
        temperature: sampling temperature of the attempts (seed = attempt number).
        policy: give the agent the world's policy.
        config: thresholds (unused without recall; kept for the prompt builder).
        model: the chat model's id, recorded in the labels.
        progress: show a progress bar.

    Raises:
        WorldError: an unknown task id (before anything runs).
        EvaluationError: ``attempts`` < 1.
    """
    if attempts < 1:
        raise EvaluationError(f"attempts must be >= 1, got {attempts}")
    tasks = [world.task(t).task_id for t in tasks]  # the world's ids; unknown ones fail now
    db = Path(db_path)
    db.parent.mkdir(parents=True, exist_ok=True)
    report = LiveHistoryReport(world=world.name, db_path=str(db), tasks=list(tasks),
                               attempts=attempts)
    specs, text = world.tool_specs(), world.policy() if policy else ""
    store = MemoryStore.open(db) if db.exists() else MemoryStore.init(db)
    begun = now_iso()
    with store, LabelStore(labels_path_for(db), create=True) as labels:
        present = labels.session_ids()
        todo = [(t, a) for t in tasks for a in range(1, attempts + 1)]
        for task_id, attempt in tqdm(todo, desc=f"live history {world.name}", unit="run",
                                     disable=not progress):
            if session_uuid(SOURCE, world.name, task_id, attempt) in present:
                report.already_present += 1
                continue
            episode = world.start(task_id)
            started = now_iso()
            run = run_agent(llm, episode, tool_specs=specs, policy=text, config=config,
                            step_limit=step_limit, temperature=temperature, seed=attempt,
                            solo=True)
            if run.termination == "model-error":
                raise EvaluationError(f"{world.name} task {task_id} attempt {attempt}: the "
                                      f"model failed ({run.error}); runs so far are kept")
            rec = _record(world, task_id, attempt, run, episode.task.prompt, started, model)
            write_session(store, rec)
            labels.add([rec.label])
            report.ran += 1
            report.successes += bool(run.success)
            report.calls += run.steps
            report.failed_calls += run.failed_calls
            report.wall_s += run.wall_s
            report.runs.append({"task_id": task_id, "attempt": attempt, "steps": run.steps,
                                "success": run.success, "reward": run.reward,
                                "termination": run.termination, "wall_s": run.wall_s})
        labels.record_build("live-history", begun, now_iso(), {
            "world": world.name, "skillsynth": __version__, "attempts": attempts,
            "step_limit": step_limit, "temperature": temperature, "policy": policy,
            "chat_model": model, "tasks": list(tasks), "ran": report.ran})
    return report
