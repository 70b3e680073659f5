"""skillsynth's verification stage inside GAIA's own pass (``gaia-shipped`` with ``verify``).

GAIA's driver (``_synthesize_skills``) distils, reconciles and stores each cluster in one
loop iteration, then calls the host's ``_mark_cluster_consumed``. skillsynth's pass verifies
a candidate before it writes anything (:mod:`skillsynth.pipeline.synthesize`); GAIA's loop
has no seam there, so the host (:mod:`.gaia_shipped`) verifies at the mark, through
:class:`GaiaVerification`:

* the row GAIA added since the last mark (none: a NOOP, GAIA activated nothing, so nothing
  is verified and the mark goes through) is read as a :class:`~skillsynth.pipeline.skill.
  Skill` and judged against skillsynth's :class:`~skillsynth.pipeline.cluster.Cluster` of
  the same member sessions, read by :func:`~skillsynth.pipeline.detect.extract_sequences`
  over GAIA's window as skillsynth's pass reads them;
* verified: the mark goes through, and an earlier rejection of the same key is forgotten;
* rejected: the row is withdrawn (deleted, and the row its UPDATE superseded made active
  again: :meth:`~skillsynth.store.MemoryStore.withdraw_procedure`), the rejection is kept
  in the side file as skillsynth's pass keeps it (same :func:`~skillsynth.pipeline.verify.
  candidate_key`), and the cluster is not marked: its sessions stay pending and GAIA's
  watermark stops below them. GAIA itself never deletes a procedure; this is skillsynth's
  verification undoing a write of the same pass, the nearest GAIA's loop comes to "never
  written".

A later pass skips a cluster rejected with the same key, as skillsynth's pass does (not under
``force``): the host's ``_drop_consumed_episodes``, GAIA's step before clustering, runs
GAIA's own ``cluster_by_goal`` on the pending sessions and holds back the members of a
cluster whose key is recorded (neither pending nor consumed). GAIA's greedy clustering takes
seeds in goal-text order and a seed takes every later session within tau, so taking one
whole cluster out leaves every other cluster as it was; the held-back sessions are not
distilled, not marked, and spend none of GAIA's distillations.

Where the report differs from skillsynth's pass: a NOOP candidate is not verified and not a
``candidate``; a stored row skillsynth cannot read as a SKILL.md is withdrawn and its
cluster marked ``unusable``, as skillsynth's pass marks a malformed answer; a model failure
during a try withdraws that row, leaves its cluster unmarked and ends the pass at GAIA's next
distillation (``llm-unavailable``; what was written before stays, as with any failure in
GAIA's pass).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...config import Thresholds
from ...errors import EvaluationError, LLMError, MalformedSkill
from ...pipeline.cluster import Cluster
from ...pipeline.detect import SessionSequence, extract_sequences
from ...pipeline.recall import skill_from_procedure
from ...pipeline.verify import (
    RejectedRecord,
    Verifier,
    VerifyRule,
    candidate_key,
    rejected_keys,
    verify_path_for,
)
from ...store import MemoryStore

__all__ = ["GaiaCluster", "GaiaVerification", "Judged"]

log = logging.getLogger("skillsynth.evaluation.strategies.gaia_verify")


class GaiaCluster(Cluster):
    """skillsynth's :class:`Cluster` of one of GAIA's clusters (members in GAIA's order)."""

    def representative(self) -> SessionSequence:
        """GAIA's exemplar: the member with the most successful calls (first on ties), the
        run GAIA's prompt showed the distiller, so the trace rule holds out the others."""
        return max(self.members, key=lambda m: m.successful_calls)


@dataclass(frozen=True)
class Judged:
    """What the host does with a cluster GAIA stored a row for: mark it ``distilled`` (call
    through), leave it unmarked (``rejected``) or mark it ``unusable``; ``why`` for the
    report's ``skipped``."""

    outcome: Literal["distilled", "rejected", "unusable"]
    why: str = ""


@dataclass
class GaiaVerification:
    """One GAIA pass's verification: the window as skillsynth reads it, and the counts.

    ``known``: the procedure ids at the last look; ``withdrawn``: the ids this pass deleted
    (GAIA still hands them to ``_proc_faiss_add``).
    """

    store: MemoryStore
    verifier: Verifier
    sequences: Mapping[str, SessionSequence]
    rejected_keys: frozenset[str]
    known: set[str]
    withdrawn: set[str] = field(default_factory=set)
    verified: int = 0
    rejected: int = 0
    rejected_before: int = 0
    calls: int = 0
    cache_hits: int = 0
    seconds: float = 0.0

    @classmethod
    def start(cls, store: MemoryStore, verifier: Verifier, config: Thresholds,
              since: str | None, outcomes: Mapping[str, bool], force: bool
              ) -> GaiaVerification:
        """Before GAIA's pass: read its window (calls after ``since``, GAIA's watermark or
        None under ``force``), the recorded rejections (none under ``force``) and the ids."""
        detected = extract_sequences(store, config, newer_than=since, outcomes=outcomes,
                                     advance=False)
        keys = frozenset() if force else frozenset(rejected_keys(store.path))
        return cls(store=store, verifier=verifier,
                   sequences={q.session_id: q for q in detected.sequences}, rejected_keys=keys,
                   known={p.id for p in store.procedures()})

    @property
    def rule(self) -> VerifyRule:
        """The verifier's rule (the report's ``verify``)."""
        return self.verifier.rule

    def cluster(self, gaia_cluster: Any) -> GaiaCluster:
        """skillsynth's cluster of a GAIA ``GoalCluster`` (qualified: GAIA returned it).

        Raises:
            EvaluationError: GAIA clustered a session skillsynth's read of the window lacks.
        """
        try:
            members = tuple(self.sequences[s] for s in gaia_cluster.from_sessions)
        except KeyError as exc:
            raise EvaluationError(f"{self.store.path}: GAIA clustered session {exc.args[0]!r}"
                                  ", which skillsynth's read of the same window lacks") from None
        return GaiaCluster(members, "gaia-shipped", "calls", float(gaia_cluster.success_rate),
                           True)

    def hold_back(self, pending: list[dict[str, Any]], clusters: Sequence[Any]
                  ) -> list[dict[str, Any]]:
        """``pending`` without the members of the ``clusters`` (GAIA's, of ``pending``) an
        earlier pass rejected with the same key; counts them in ``rejected_before``."""
        held: set[str] = set()
        for c in clusters:
            if candidate_key(self.rule, self.cluster(c)) in self.rejected_keys:
                log.info("cluster [%s]: rejected before with the same members: skipped",
                         ",".join(c.from_sessions[:3]))
                held.update(c.from_sessions)
                self.rejected_before += 1
        return [s for s in pending if s["session_id"] not in held]

    def judge(self, gaia_cluster: Any) -> Judged | None:
        """Verify the row GAIA stored for ``gaia_cluster`` (None: it stored none, a NOOP).

        Raises:
            EvaluationError: GAIA added more than one row for one cluster.
            LLMError: the verifier's model failed (the row is withdrawn first).
        """
        ids = {p.id for p in self.store.procedures()}
        new, self.known = sorted(ids - self.known), ids
        if not new:
            return None
        if len(new) > 1:
            raise EvaluationError(f"{self.store.path}: GAIA added procedures "
                                  f"{', '.join(new)} for one cluster; one was expected")
        pid, c = new[0], self.cluster(gaia_cluster)
        proc = self.store.get_procedure(pid)
        assert proc is not None  # just listed; nothing else writes during the pass
        try:
            skill = skill_from_procedure(proc)
        except MalformedSkill as exc:
            self._withdraw(pid)
            return Judged(outcome="unusable", why=f"malformed: procedure {pid} is not a SKILL.md "
                          f"skillsynth can try: {exc}")
        t0 = time.perf_counter()
        try:
            v = self.verifier(skill, c)
        except LLMError:
            self._withdraw(pid)
            raise
        finally:
            self.seconds += time.perf_counter() - t0
        self.calls, self.cache_hits = self.calls + v.model_calls, self.cache_hits + v.cache_hits
        path = verify_path_for(self.store.path)
        if v.verified:
            self.verified += 1
            with RejectedRecord(path, create=False) as record:
                record.forget(candidate_key(self.rule, c))
            return Judged("distilled")
        log.info("cluster [%s]: verification (%s) rejected %s: %s",
                 ",".join(c.session_ids[:3]), v.rule, skill.name, v.reason)
        self._withdraw(pid)
        self.rejected += 1
        with RejectedRecord(path) as record:
            record.put(candidate_key(self.rule, c), skill, c, v)
        return Judged(outcome="rejected", why=f"verification ({v.rule}) rejected it: {v.reason}")

    def _withdraw(self, pid: str) -> None:
        self.store.withdraw_procedure(pid)
        self.known.discard(pid)
        self.withdrawn.add(pid)

    def counts(self) -> dict[str, Any]:
        """The report's verification fields, as skillsynth's pass fills them."""
        return {"verify": self.rule, "candidates": self.verified + self.rejected,
                "verified": self.verified, "rejected": self.rejected,
                "rejected_before": self.rejected_before, "verify_calls": self.calls,
                "verify_cache_hits": self.cache_hits,
                "verify_seconds": round(self.seconds, 4)}
