"""The 4th-attempt protocol: which sessions are history and which are probes.

From a labelled corpus, attempts 1..k of every family (k = 3 by default: #887's "after >= 3
similar successes") and every unlabelled session go into a fresh history store; attempt
k+1 of each family is held out as its probe. Later attempts are left out of both: they
happened after the probe, so putting them in the history would let the future leak into
what the probe is evaluated against; ``probes="every"`` makes each of them a probe too,
every one against the same history of the first k. The pipeline only ever opens the
history store.

A family is, by rule:

* ``task`` (default): the label's task id. Repeated trials of one task often share the goal
  text verbatim, so this tests recall of a known goal.
* ``tools``: the state-changing tools of the task's ground truth (its actions, else its
  essential steps; tools named like reads - ``get_``, ``list_``, ``search_`` ... - do not
  count). Different tasks of one kind share a family, so a probe's goal was never seen:
  this tests generalisation. Attempts are ordered by time across the family's tasks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ...corpora.gaiadb import read_gaia_db
from ...corpora.importing import write_session
from ...corpora.labels import LabelStore, SessionLabel, labels_path_for
from ...corpora.records import BadRecord
from ...errors import EvaluationError
from ...pipeline.detect import is_read
from ...store import MemoryStore, Procedure

__all__ = ["FAMILY_RULES", "PROBE_RULES", "FamilyRule", "ProbeRule", "Split", "build_history",
           "family_of", "load_split", "procedure_families", "split_attempts"]

FamilyRule = Literal["task", "tools"]
FAMILY_RULES: tuple[FamilyRule, ...] = ("task", "tools")
#: Which attempts after a family's k-th are probes: the k+1-th (#887's 4th attempt) or every one.
ProbeRule = Literal["first", "every"]
PROBE_RULES: tuple[ProbeRule, ...] = ("first", "every")


def family_of(label: SessionLabel, rule: FamilyRule = "task") -> str | None:
    """The label's family under ``rule`` (None: unlabelled under it, so history)."""
    if rule == "task":
        return label.task_id
    if rule != "tools":
        raise EvaluationError(f"family rule must be one of {', '.join(FAMILY_RULES)}, "
                              f"got {rule!r}")
    names = [str(a.get("name")) for a in label.actions] if label.actions else \
        list(label.essential_steps or ())
    if not names:
        return None
    changing = sorted({n for n in names if not is_read(n)})
    return "tools:" + ("+".join(changing) if changing else "read-only")


@dataclass(frozen=True)
class Split:
    """The protocol's partition of a corpus's sessions.

    Attributes:
        k: attempts per family that go into the history.
        history: session ids the pipeline may see.
        probes: per family that has an attempt k+1, that attempt (and under the ``every``
            rule each later one), by family.
        left_out: attempts after k+1 (in neither; none under ``every``).
        rule: the family rule.
        families: session id -> family, for every labelled session (scoring only).
    """

    k: int
    history: frozenset[str]
    probes: tuple[SessionLabel, ...]
    left_out: frozenset[str]
    rule: FamilyRule = "task"
    families: Mapping[str, str] = field(default_factory=dict)

    def family(self, session_id: str) -> str | None:
        """A session's family (None when it has none)."""
        return self.families.get(session_id)


def split_attempts(labels: list[SessionLabel], k: int = 3, *,
                   family: FamilyRule = "task", probes: ProbeRule = "first") -> Split:
    """Partition labelled sessions by attempt order within each family.

    Under ``task``, attempts are ordered by ``attempt`` then ``started_at``; under ``tools``
    (several tasks per family) by ``started_at`` then ``attempt``. A label without a family
    is history. ``probes``: the k+1-th attempt is the probe (``first``), or every attempt
    after the k-th is one (``every``).
    """
    if k < 1:
        raise EvaluationError(f"k must be >= 1, got {k}")
    if probes not in PROBE_RULES:
        raise EvaluationError(f"probe rule must be one of {', '.join(PROBE_RULES)}, "
                              f"got {probes!r}")
    by_family: dict[str, list[SessionLabel]] = defaultdict(list)
    history: set[str] = set()
    fams: dict[str, str] = {}
    for x in labels:
        f = family_of(x, family)
        if f is None:
            history.add(x.session_id)
        else:
            fams[x.session_id] = f
            by_family[f].append(x)
    chosen: list[SessionLabel] = []
    left_out: set[str] = set()
    for fam in sorted(by_family):
        if family == "task":
            ordered = sorted(by_family[fam], key=lambda x: (x.attempt is None, x.attempt or 0,
                                                            x.started_at or "", x.session_id))
        else:
            ordered = sorted(by_family[fam], key=lambda x: (x.started_at or "",
                                                            x.attempt or 0, x.session_id))
        history.update(x.session_id for x in ordered[:k])
        if probes == "every":
            chosen.extend(ordered[k:])
        elif len(ordered) > k:
            chosen.append(ordered[k])
            left_out.update(x.session_id for x in ordered[k + 1:])
    return Split(k=k, history=frozenset(history), probes=tuple(chosen),
                 left_out=frozenset(left_out), rule=family, families=fams)


def procedure_families(proc: Procedure, split: Split) -> tuple[str, ...]:
    """The most common family of the procedure's provenance (all of them on a tie)."""
    sessions = proc.provenance.get("from_sessions", []) if proc.provenance else []
    counts = Counter(f for f in (split.family(s) for s in sessions) if f is not None)
    if not counts:
        return ()
    top = max(counts.values())
    return tuple(sorted(str(f) for f, n in counts.items() if n == top))


def build_history(corpus_db: str | Path, split: Split, history_db: str | Path) -> int:
    """Copy the history sessions of ``corpus_db`` into a new store; returns how many.

    The corpus is opened read-only; probes and left-out sessions are never copied, nor
    are sessions without tool calls (detection cannot use them).

    Raises:
        EvaluationError: ``history_db`` exists (a history store is always built fresh).
    """
    out = Path(history_db)
    if out.exists():
        raise EvaluationError(f"{out} exists; a history store is built fresh for each run")
    n = 0
    with MemoryStore.init(out) as store:
        for rec in read_gaia_db(corpus_db, sessions=split.history):
            if isinstance(rec, BadRecord):  # not produced by this reader; typed for the union
                continue
            write_session(store, rec)
            n += 1
    return n


def load_split(corpus_db: str | Path, k: int = 3, *,
               labels_path: str | Path | None = None, family: FamilyRule = "task",
               probes: ProbeRule = "first") -> Split:
    """:func:`split_attempts` over a corpus's labels file."""
    with LabelStore(labels_path or labels_path_for(corpus_db)) as ls:
        return split_attempts(ls.all(), k, family=family, probes=probes)
