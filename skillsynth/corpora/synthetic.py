"""A seeded generator of task families over GAIA's tool names, with known ground truth.

Each family has paraphrased goals and a true procedure (its essential tool steps). Every
session is one attempt at one family, with controllable noise: failed calls, retries,
exploratory calls, abandoned sessions. Near-miss families share tools with another
family but not its goal. Ground truth (family, essential steps, success) goes to the
labels file only, so clustering and recall precision are exactly scorable.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import CorpusError
from ..store import MemoryStore, now_iso
from .labels import LabelStore, SessionLabel, labels_path_for

__all__ = ["FAMILIES", "Family", "GenerateReport", "NoiseConfig", "generate_corpus"]


@dataclass(frozen=True)
class Family:
    """A task family: goal paraphrases (``{x}`` is filled per session) and its true steps."""

    id: str
    goals: tuple[str, ...]
    steps: tuple[str, ...]
    fillers: tuple[str, ...]


FAMILIES: tuple[Family, ...] = (
    Family(id="summarise-report",
           goals=("Summarise the {x} report", "Give me a summary of the {x} report",
                  "What are the key points of the {x} report?",
                  "I need a short summary of our {x} report"),
           steps=("search_file", "index_document", "query_documents"),
           fillers=("Q3 sales", "annual budget", "security audit", "hiring")),
    Family(id="find-invoice",
           goals=("Find the invoice from {x}", "Where is the {x} invoice?",
                  "Locate the latest invoice sent by {x}", "Can you dig up {x}'s invoice for me?"),
           steps=("search_file", "read_file"),
           fillers=("Acme", "Globex", "Initech", "Umbrella")),
    Family(id="reply-to-email",
           goals=("Reply to {x}'s last email", "Draft an answer to the mail from {x}",
                  "Write back to {x} about their message", "Answer {x}'s email in my inbox"),
           steps=("list_inbox", "read_file", "draft_reply"),
           fillers=("Alice", "Bob", "Carol", "Dan")),
    Family(id="jira-status",
           goals=("What is the status of the {x} ticket?", "Check Jira for the {x} issue",
                  "Is the {x} bug fixed yet?", "Look up ticket {x} in Jira"),
           steps=("jira_search", "read_file"),
           fillers=("PAY-101", "login crash", "API timeout", "OPS-7")),
    Family(id="run-tests",
           goals=("Run the {x} tests and tell me what failed", "Execute the {x} test suite",
                  "Do the {x} tests pass?", "Check whether {x} tests are green"),
           steps=("search_file", "run_shell_command", "read_file"),
           fillers=("unit", "integration", "backend", "frontend")),
    Family(id="save-notes",
           goals=("Write my notes about {x} to a file", "Save a note on {x}",
                  "Put my {x} notes into a document", "Create a notes file for {x}"),
           steps=("search_file", "write_file"),
           fillers=("the offsite", "the launch", "standup", "the demo")),
    Family(id="index-folder",
           goals=("Index the documents in the {x} folder",
                  "Add the {x} folder to my knowledge base", "Make the files under {x} searchable",
                  "Ingest everything in {x}"),
           steps=("search_file", "index_document", "index_document"),
           fillers=("contracts", "research", "manuals", "specs")),
    Family(id="compare-reports",
           goals=("Compare the {x} report with last year's",
                  "What changed between this and last year's {x} report?",
                  "Diff the {x} report against the previous one",
                  "How does the {x} report differ from last year?"),
           steps=("search_file", "index_document", "query_documents", "query_documents"),
           fillers=("Q3 sales", "annual budget", "security audit", "hiring")),
)
_EXPLORE = ("list_files", "search_file", "read_file", "query_documents")


@dataclass(frozen=True)
class NoiseConfig:
    """Probabilities per session (or per step) of the realistic mess in agent logs.

    Attributes:
        fail_rate: a step fails once and is retried (per essential step).
        explore_rate: an exploratory call is inserted before a step (per step).
        abandon_rate: the session stops before its last step and fails.
    """

    fail_rate: float = 0.1
    explore_rate: float = 0.1
    abandon_rate: float = 0.1

    def __post_init__(self) -> None:
        for name in ("fail_rate", "explore_rate", "abandon_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise CorpusError(f"NoiseConfig.{name}={v} must be between 0 and 1")


@dataclass(frozen=True)
class GenerateReport:
    """What :func:`generate_corpus` wrote."""

    db_path: Path
    labels_path: Path
    sessions: int
    families: int
    seed: int


def generate_corpus(db_path: str | Path, *, families: int = len(FAMILIES), seed: int = 0,
                    attempts: int = 5, noise: NoiseConfig | None = None,
                    labels_path: str | Path | None = None) -> GenerateReport:
    """Write a synthetic corpus: ``attempts`` sessions per family, interleaved in time.

    Raises:
        CorpusError: ``families`` exceeds the built-in families or the files exist.
    """
    if not 1 <= families <= len(FAMILIES):
        raise CorpusError(f"families must be between 1 and {len(FAMILIES)} (the built-in "
                              f"families), got {families}")
    if attempts < 1:
        raise CorpusError(f"attempts must be >= 1, got {attempts}")
    noise = noise or NoiseConfig()
    db = Path(db_path)
    lab_path = Path(labels_path) if labels_path else labels_path_for(db)
    if lab_path.exists():
        raise CorpusError(f"{lab_path} exists; choose another path")
    begun = now_iso()
    rng = np.random.default_rng(seed)
    chosen = FAMILIES[:families]
    order = [(f, a) for a in range(1, attempts + 1) for f in chosen]
    clock = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    labels: list[SessionLabel] = []
    with MemoryStore.init(db) as store:
        for n, (fam, attempt) in enumerate(order):
            sid = f"syn-{seed}-{n:05d}"
            started = (clock + timedelta(seconds=1)).isoformat(timespec="microseconds")
            goal = fam.goals[int(rng.integers(len(fam.goals)))].format(
                x=fam.fillers[int(rng.integers(len(fam.fillers)))])
            abandoned = bool(rng.random() < noise.abandon_rate)
            steps = fam.steps[:-1] if abandoned else fam.steps
            with store.transaction():
                for step_i, tool in enumerate(steps):
                    if rng.random() < noise.explore_rate:
                        clock += timedelta(seconds=3)
                        store.log_tool_call(sid, _EXPLORE[int(rng.integers(len(_EXPLORE)))],
                                            {"query": goal}, "nothing relevant", True,
                                            timestamp=clock.isoformat(timespec="microseconds"))
                    if rng.random() < noise.fail_rate:
                        clock += timedelta(seconds=2)
                        store.log_tool_call(sid, tool, {"step": step_i}, None, False,
                                            error="transient error",
                                            timestamp=clock.isoformat(timespec="microseconds"))
                    clock += timedelta(seconds=4)
                    store.log_tool_call(sid, tool, {"step": step_i, "goal": goal},
                                        json.dumps({"ok": True}), True, duration_ms=120,
                                        timestamp=clock.isoformat(timespec="microseconds"))
                clock += timedelta(seconds=1)
                store.add_turn(sid, "user", goal,
                               timestamp=clock.isoformat(timespec="microseconds"))
            clock += timedelta(minutes=7)
            labels.append(SessionLabel(session_id=sid, source="synthetic", task_id=fam.id,
                                       attempt=attempt, success=not abandoned,
                                       reward=None if abandoned else 1.0, essential_steps=fam.steps,
                                       started_at=started, source_file="generator",
                                       source_record=f"seed={seed} n={n}"))
    with LabelStore(lab_path, create=True) as ls:
        ls.add(labels)
        ls.record_build("generate", begun, now_iso(), {
            "families": [f.id for f in chosen], "seed": seed, "attempts": attempts,
            "noise": asdict(noise), "skillsynth": __version__})
    return GenerateReport(db_path=db, labels_path=lab_path, sessions=len(order), families=families,
                          seed=seed)
