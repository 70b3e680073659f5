"""The 4th-attempt protocol: which sessions are history and which are probes.

From a labelled corpus, attempts 1..k of every task (k = 3 by default: #887's "after >= 3
similar successes") and every unlabelled session go into a fresh history store; attempt
k+1 of each task is held out as its probe. Later attempts are left out of both: they
happened after the probe, so putting them in the history would let the future leak into
what the probe is evaluated against. The pipeline only ever opens the history store.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..corpora.gaiadb import read_gaia_db
from ..corpora.importing import write_session
from ..corpora.labels import LabelStore, SessionLabel, labels_path_for
from ..corpora.records import BadRecord
from ..errors import SkillsynthError
from ..store import MemoryStore

__all__ = ["Split", "build_history", "load_split", "split_attempts"]


@dataclass(frozen=True)
class Split:
    """The protocol's partition of a corpus's sessions.

    Attributes:
        k: attempts per task that go into the history.
        history: session ids the pipeline may see.
        probes: one label per task that has an attempt k+1 (that attempt), by task id.
        left_out: attempts after k+1 (in neither).
    """

    k: int
    history: frozenset[str]
    probes: tuple[SessionLabel, ...]
    left_out: frozenset[str]


def split_attempts(labels: list[SessionLabel], k: int = 3) -> Split:
    """Partition labelled sessions by attempt order within each task.

    Attempts are ordered by ``attempt`` then ``started_at``; a label without a task is
    history.
    """
    if k < 1:
        raise SkillsynthError(f"k must be >= 1, got {k}")
    by_task: dict[str, list[SessionLabel]] = defaultdict(list)
    history: set[str] = set()
    for x in labels:
        if x.task_id is None:
            history.add(x.session_id)
        else:
            by_task[x.task_id].append(x)
    probes: list[SessionLabel] = []
    left_out: set[str] = set()
    for task in sorted(by_task):
        ordered = sorted(by_task[task], key=lambda x: (x.attempt is None, x.attempt or 0,
                                                       x.started_at or "", x.session_id))
        history.update(x.session_id for x in ordered[:k])
        if len(ordered) > k:
            probes.append(ordered[k])
            left_out.update(x.session_id for x in ordered[k + 1:])
    return Split(k, frozenset(history), tuple(probes), frozenset(left_out))


def build_history(corpus_db: str | Path, split: Split, history_db: str | Path) -> int:
    """Copy the history sessions of ``corpus_db`` into a new store; returns how many.

    The corpus is opened read-only; probes and left-out sessions are never copied, nor
    are sessions without tool calls (detection cannot use them).

    Raises:
        SkillsynthError: ``history_db`` exists (a history store is always built fresh).
    """
    out = Path(history_db)
    if out.exists():
        raise SkillsynthError(f"{out} exists; a history store is built fresh for each run")
    n = 0
    with MemoryStore.init(out) as store:
        for rec in read_gaia_db(corpus_db, sessions=split.history):
            if isinstance(rec, BadRecord):  # not produced by this reader; typed for the union
                continue
            write_session(store, rec)
            n += 1
    return n


def load_split(corpus_db: str | Path, k: int = 3, *,
               labels_path: str | Path | None = None) -> Split:
    """:func:`split_attempts` over a corpus's labels file."""
    with LabelStore(labels_path or labels_path_for(corpus_db)) as ls:
        return split_attempts(ls.all(), k)
