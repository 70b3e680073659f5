"""Verify: a distilled candidate earns activation by working first (issue 25).

GAIA activates every procedure its distiller writes; ASI (COLM 2025) and Memento-Skills keep
only skills that work. This stage sits between distillation and reconcile: a *verifier*
judges each candidate against its cluster and returns a :class:`Verdict`. Two rules:

* ``world`` (built in the evaluation, which owns the live agent and the worlds: it is handed
  to the pass as a :class:`Verifier`): the candidate is tried on its own member tasks in
  fresh episodes; :func:`threshold_verdict` decides from the tries.
* ``trace`` (here, :class:`TraceVerifier`; for replayed corpora, where no world exists): the
  procedure's ordered tools (:func:`procedure_tools`) must be realisable in a held-out
  successful member session (:func:`realisable`). Weaker: it checks the procedure is
  consistent with a run that worked, never that following it works.

A rejected candidate is never written to GAIA's ``procedures`` table, so reconcile and
recall never see it (inside GAIA's own pass, which writes before it can be asked, the row is
withdrawn again: :mod:`skillsynth.evaluation.strategies.gaia_verify`). It is kept in skillsynth's own side file beside the store
(:class:`RejectedRecord`, ``<db>.verify.sqlite``), not in a table or column of GAIA's
database: GAIA's schema stays exactly GAIA's, and deleting the file forgets every rejection.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, Self

from ..store import ToolCall, now_iso
from .cluster import Cluster
from .detect import SessionSequence
from .skill import Skill

__all__ = ["VERIFY_CALLS", "VERIFY_RULES", "Attempt", "RejectedRecord", "TraceVerifier",
           "Verdict", "Verifier", "VerifyCalls", "VerifyRule", "candidate_key", "held_out",
           "median_member_calls", "procedure_tools", "realisable", "rejected_keys",
           "threshold_verdict", "verify_path_for"]

VerifyRule = Literal["none", "world", "trace"]
#: ``none`` is GAIA's behaviour: every distilled procedure is activated.
VERIFY_RULES: tuple[VerifyRule, ...] = ("none", "world", "trace")
#: What else a ``world`` try must show besides the world's success: nothing, or no more
#: tool calls than the median of its cluster's member sessions (a procedure that works but
#: makes the agent slower than the runs it was distilled from saves nothing).
VerifyCalls = Literal["none", "median"]
VERIFY_CALLS: tuple[VerifyCalls, ...] = ("none", "median")

_STEP_RE = re.compile(r"^\s*\d+[.)]\s+(.*)$")
_EDGE_RE = re.compile(r"^##\s+edge cases\s*$", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class Attempt:
    """One try of a candidate: the member session (and world task) it was tried on, whether
    it passed, and what the try recorded (JSON-ready)."""

    session: str
    ok: bool
    task_id: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """A verifier's decision on one candidate.

    ``model_calls`` / ``cache_hits``: the model requests the tries spent (0 for ``trace``).
    """

    rule: VerifyRule
    verified: bool
    reason: str
    tries: tuple[Attempt, ...] = ()
    model_calls: int = 0
    cache_hits: int = 0


class Verifier(Protocol):
    """Judges a distilled candidate against the cluster it was distilled from.

    ``rule`` names it in reports and in the rejected record's key. May raise
    :class:`~skillsynth.errors.LLMError` (the pass is then skipped, the store unchanged).
    """

    @property
    def rule(self) -> VerifyRule: ...

    def __call__(self, skill: Skill, cluster: Cluster) -> Verdict: ...


def threshold_verdict(rule: VerifyRule, tries: Sequence[Attempt], min_success: float, *,
                      model_calls: int = 0, cache_hits: int = 0,
                      passed_means: str = "succeeded") -> Verdict:
    """Verified when at least ``min_success`` (a share in (0, 1]) of ``tries`` passed.

    No try at all (no member task could be run) is a rejection: nothing was shown to work.
    ``passed_means`` says in the reason what a passing try showed.
    """
    passed = sum(t.ok for t in tries)
    if not tries:
        return Verdict(rule=rule, verified=False, reason="no member task could be tried", tries=(),
                       model_calls=model_calls, cache_hits=cache_hits)
    ok = passed / len(tries) >= min_success
    return Verdict(rule=rule, verified=ok,
                   reason=f"{passed} of {len(tries)} tries {passed_means} (at least "
                   f"{min_success:g} needed)", tries=tuple(tries), model_calls=model_calls,
                   cache_hits=cache_hits)


def median_member_calls(cluster: Cluster) -> float:
    """The median number of tool calls of ``cluster``'s member sessions (``VerifyCalls``)."""
    return float(statistics.median(len(m.calls) for m in cluster.members))


def procedure_tools(skill: Skill) -> tuple[str, ...]:
    """The tools the procedure's numbered steps name, in step order (a step naming two tools
    names them in the order written); ``tools_required`` when no step names one."""
    body = _EDGE_RE.split(skill.body, maxsplit=1)[0]
    pats = {t: re.compile(rf"(?<![A-Za-z0-9_.\-]){re.escape(t)}(?![A-Za-z0-9_\-])")
            for t in skill.tools_required}
    out: list[str] = []
    for line in body.splitlines():
        step = _STEP_RE.match(line)
        if step is None:
            continue
        hits = sorted((m.start(), t) for t, rx in pats.items() for m in rx.finditer(step[1]))
        out += [t for _, t in hits]
    return tuple(out) or skill.tools_required


def realisable(tools: Sequence[str], calls: Sequence[ToolCall]) -> bool:
    """``tools`` appear, in order, among successful ``calls`` with no failed call between two
    matched ones: i.e. as a subsequence of one run of calls between failures."""
    run: list[str] = []
    for c in [*calls, None]:
        if c is None or not c.success:
            it = iter(run)
            if all(t in it for t in tools):  # subsequence test (consumes the iterator)
                return True
            run = []
        else:
            run.append(c.tool_name)
    return False


def held_out(cluster: Cluster) -> tuple[tuple[SessionSequence, ...], bool]:
    """The members the trace rule checks, and whether they are held out.

    The distiller is shown the representative's calls (:meth:`Cluster.representative`);
    the others are held out: every other successful member, in cluster order. A cluster
    with no other successful member falls back to the representative (not held out).
    """
    rep = cluster.representative()
    others = tuple(m for m in cluster.members
                   if m.succeeded and m.session_id != rep.session_id)
    return (others, True) if others else ((rep,), False)


@dataclass(frozen=True)
class TraceVerifier:
    """The ``trace`` rule: verified when a held-out successful member realises the
    procedure's ordered tools (:func:`realisable`); every checked member is a try."""

    rule: VerifyRule = "trace"

    def __call__(self, skill: Skill, cluster: Cluster) -> Verdict:
        tools = procedure_tools(skill)
        members, out = held_out(cluster)
        tries = tuple(Attempt(session=m.session_id, ok=realisable(tools, m.calls),
                              detail={"held_out": out}) for m in members)
        chain = " > ".join(tools)
        where = "held-out member" if out else "representative (no held-out member)"
        hit = next((t.session for t in tries if t.ok), None)
        if hit is not None:
            return Verdict(rule=self.rule, verified=True,
                           reason=f"{chain} realised in {where} {hit}", tries=tries)
        return Verdict(rule=self.rule, verified=False,
                       reason=f"{chain} not realised in any {where} ({len(tries)} checked)",
                       tries=tries)


def verify_path_for(db_path: str | Path) -> Path:
    """The rejected record beside a memory database: ``<db>.verify.sqlite``."""
    p = Path(db_path)
    return p.with_name(p.name + ".verify.sqlite")


def rejected_keys(db_path: str | Path) -> set[str]:
    """The keys of the candidates an earlier pass on the store at ``db_path`` rejected (none
    without a side record)."""
    with RejectedRecord(verify_path_for(db_path), create=False) as record:
        return record.keys()


def candidate_key(rule: VerifyRule, cluster: Cluster) -> str:
    """What a rejection is remembered by: the rule and the member set (order-free). A later
    pass whose cluster gains or loses a member has new evidence, so a new key."""
    text = json.dumps([rule, sorted(cluster.session_ids)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS rejected_candidates (
    key        TEXT PRIMARY KEY,
    rule       TEXT NOT NULL,
    name       TEXT NOT NULL,
    members    TEXT NOT NULL,
    skill      TEXT NOT NULL,
    reason     TEXT NOT NULL,
    tries      TEXT NOT NULL,
    rejected_at TEXT NOT NULL
);
"""


class RejectedRecord:
    """Candidates verification rejected, with their reason and tries (skillsynth's side file).

    One row per :func:`candidate_key`: a pass skips a cluster whose key is here (no
    distillation, no tries: nothing new to learn); a rejected again candidate (``force``)
    replaces its row; a verified one removes it. Rejected members are not marked consumed,
    so they stay in later windows and rejoin a cluster as new sessions arrive.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        if create or self.path.exists():
            self._conn = sqlite3.connect(self.path)
            self._conn.executescript(_SCHEMA)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (a record opened without ``create`` on no file holds none)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def keys(self) -> set[str]:
        """Every remembered rejection's key."""
        if self._conn is None:
            return set()
        return {k for (k,) in self._conn.execute("SELECT key FROM rejected_candidates")}

    def rejected(self) -> list[dict[str, Any]]:
        """Every row, oldest first (members and tries decoded)."""
        if self._conn is None:
            return []
        cur = self._conn.execute("SELECT * FROM rejected_candidates ORDER BY rejected_at, key")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur]
        for r in rows:
            r["members"], r["tries"] = json.loads(r["members"]), json.loads(r["tries"])
        return rows

    def put(self, key: str, skill: Skill, cluster: Cluster, verdict: Verdict) -> None:
        """Remember a rejection (replacing the key's earlier row)."""
        assert self._conn is not None, "opened without create on a missing file"
        with self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO rejected_candidates VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, verdict.rule, skill.name, json.dumps(list(cluster.session_ids)),
                 skill.to_intermediate(), verdict.reason,
                 json.dumps([asdict(t) for t in verdict.tries], default=str), now_iso()))

    def forget(self, key: str) -> None:
        """Drop a key's row (its candidate was verified)."""
        if self._conn is not None:
            with self._conn:
                self._conn.execute("DELETE FROM rejected_candidates WHERE key = ?", (key,))
