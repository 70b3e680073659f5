"""The synthesis pass: detect -> cluster -> distill -> reconcile, with #887's fail-loud floors.

Floors (the seed's off-state table):

* memory disabled (``GAIA_MEMORY_DISABLED=1``): nothing happens, nothing is read;
* synthesis disabled (``enabled: false``): the pass is skipped and logged; stored
  procedures stay recallable;
* LLM unavailable: the whole pass is skipped and logged, the store unchanged (every model
  call comes before the first write);
* malformed model output: that cluster is skipped and logged, the others go on; a skill
  naming a tool its runs never called (ungrounded) is malformed and counted apart;
* embedder failure: raised (clustering without embeddings would be guessing), also before
  the first write.

No lock is held while the model answers: the pass distils every cluster first, embeds the
skills, then writes each reconciled procedure in its own short transaction, so GAIA, an
import or a second pass can write to the database meanwhile. Never a smaller-model or
other-backend swap.

Progress, as amd-gaia 0.25.1 keeps it (``synthesis_marks`` and the ``meta`` watermark): the
window is the sessions with at least ``min_steps`` successful calls newer than the
watermark; a session already marked is not clustered again; every session of a cluster
handed to the distiller is marked ``distilled`` (a skill came back) or ``unusable`` (SKIP,
malformed, ungrounded), and a window session without a goal ``unusable``; the watermark
then moves to the newest call of the oldest run of consumed sessions (never past one left
for later, never backwards). ``force`` ignores marks and watermark for one pass (GAIA's
``force=True``); ``MemoryStore.reset_synthesis_progress`` forgets them. One difference:
GAIA marks as it goes and keeps what a pass wrote before its model failed; this pass
writes marks last, with everything else, so a failed pass leaves the store unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..config import Thresholds
from ..errors import LLMError, MalformedSkill, UngroundedSkill
from ..protocols import ChatModel, Embeds
from ..store import MemoryStore
from .cluster import Cluster, Method, RateDefinition, cluster_by_goal
from .detect import SessionSequence, extract_sequences
from .distill import DistillArgs, Distiller, DistillMode, distill
from .reconcile import reconcile_and_store
from .skill import Skill
from .verify import (
    RejectedRecord,
    Verdict,
    Verifier,
    VerifyRule,
    candidate_key,
    rejected_keys,
    verify_path_for,
)

__all__ = ["LUMPED_SHARE", "NO_GOAL_DETAIL", "PassReport", "advance_watermark", "synthesize_skills"]

log = logging.getLogger("skillsynth.pipeline.synthesize")


@dataclass(frozen=True)
class PassReport:
    """Counts of one pass, and why anything was skipped.

    Of the ``distilled + ungrounded`` answers that parsed into a skill, ``ungrounded`` named
    a tool the cluster never called (rejected); ``repaired`` were kept after the one repair
    rule (a repeated tool dropped); ``duplicate_names`` were renamed because an active
    procedure had their name. ``llm_calls`` and ``cache_hits`` together count every
    distillation answer, malformed ones included, so a warm re-run counts what a cold one did.
    ``would_distill``: a dry run's clusters that would be distilled, as member session ids.
    ``handed``: the sessions this pass marked consumed: every member of a cluster whose
    distillation answer came back (a skill, SKIP, malformed or ungrounded) and every window
    session without a goal; no later pass clusters them. ``already_consumed``: window
    sessions earlier passes marked (skipped); ``marked_distilled`` / ``marked_unusable``:
    this pass's marks by outcome; ``watermark``: the stored watermark after the pass.
    ``failed_shares``: per qualified cluster, the share of members labelled as failed.
    ``largest_cluster_share``: the largest qualified cluster's sessions over all sessions
    clustered (no labels needed): near 1, one procedure would stand for everything.
    ``left_for_later``: qualified clusters this pass did not hand to the distiller (over a
    per-pass cap); a later pass may reach them.

    Verification (``verify`` names the rule; ``none``: every distilled skill is a procedure):
    of the ``candidates`` (the distilled skills), ``verified`` went on to reconcile and
    ``rejected`` to the side record; ``rejected_before``: qualified clusters skipped because
    an earlier pass rejected the same member set; ``verify_calls`` / ``verify_cache_hits`` /
    ``verify_seconds``: what the tries spent (not in ``llm_calls``).
    """

    status: Literal["ran", "memory-disabled", "synthesis-disabled", "llm-unavailable",
                    "dry-run"]
    sessions: int = 0
    sessions_without_goal: int = 0
    clusters: int = 0
    qualified: int = 0
    distilled: int = 0
    added: int = 0
    updated: int = 0
    noop: int = 0
    ungrounded: int = 0
    repaired: int = 0
    duplicate_names: int = 0
    skipped: tuple[tuple[str, str], ...] = ()
    llm_calls: int = 0
    cache_hits: int = 0
    procedure_ids: tuple[str, ...] = ()
    message: str = ""
    would_distill: tuple[tuple[str, ...], ...] = ()
    handed: tuple[str, ...] = ()
    failed_shares: tuple[float, ...] = ()
    largest_cluster_share: float | None = None
    left_for_later: int = 0
    already_consumed: int = 0
    marked_distilled: int = 0
    marked_unusable: int = 0
    watermark: str | None = None
    verify: VerifyRule = "none"
    candidates: int = 0
    verified: int = 0
    rejected: int = 0
    rejected_before: int = 0
    verify_calls: int = 0
    verify_cache_hits: int = 0
    verify_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``skillsynth synthesize --json``)."""
        from dataclasses import asdict

        return asdict(self)


#: A pass whose largest cluster holds more than this share of the sessions it clustered is
#: lumping: one procedure would stand for everything (the point-level guard uses it too).
LUMPED_SHARE = 0.5


def synthesize_skills(
    store: MemoryStore,
    llm: ChatModel,
    embedder: Embeds,
    config: Thresholds,
    *,
    method: Method = "agglomerative",
    rate: RateDefinition = "calls",
    mode: DistillMode = "yaml",
    outcomes: Mapping[str, bool] | None = None,
    force: bool = False,
    memory_disabled: bool = False,
    dry_run: bool = False,
    verifier: Verifier | None = None,
    args: DistillArgs = "none",
    distiller: Distiller = "llm",
) -> PassReport:
    """Run one synthesis pass over ``store``.

    Args:
        store: a writable memory database (read-only only with ``dry_run``).
        llm: the chat model (:class:`~skillsynth.protocols.ChatModel`).
        embedder: an :class:`~skillsynth.models.embed.Embedder`.
        config: the run's thresholds.
        method, rate: passed to :func:`~skillsynth.pipeline.cluster.cluster_by_goal`.
        mode: ``yaml`` (free-form) or ``json`` (schema-constrained) distillation.
        args, distiller: what the distiller sees of the calls' arguments, and who distils
            (:data:`~.distill.DistillArgs`, :data:`~.distill.Distiller`; GAIA: none, llm).
        outcomes: session success labels, where known.
        force: ignore the marks and the watermark this pass (they are still written).
        memory_disabled: GAIA's memory is off (``GAIA_MEMORY_DISABLED=1``, read by the
            caller at the edge: :func:`~skillsynth.config.gaia_memory_disabled`).
        dry_run: detect, cluster and report what would be distilled; no LLM call, no write.
        verifier: judges each distilled candidate before it is stored (:mod:`.verify`;
            None: GAIA's behaviour). A rejected one is kept in the side record beside the
            store; a later pass skips its cluster until its members change (or ``force``).
    """
    if memory_disabled:
        log.info("memory disabled (GAIA_MEMORY_DISABLED=1): synthesis does nothing")
        return PassReport("memory-disabled", message="GAIA_MEMORY_DISABLED=1")
    if not config.enabled:
        log.warning("skill synthesis disabled in config: pass skipped; stored procedures "
                    "stay recallable")
        return PassReport("synthesis-disabled", message="skill_synthesis.enabled is false")
    p = _plan(store, embedder, config, method, rate, outcomes, force, verifier)
    base, todo = p.base, p.todo
    if dry_run:
        return PassReport("dry-run", **base, skipped=tuple(p.over),
                          would_distill=tuple(tuple(c.session_ids) for c in todo))
    calls_before, hits_before = llm.calls, llm.cache_hits
    try:
        if todo and distiller == "llm":
            llm.ensure_ready()  # probe before writing anything
        # 1. every model call first, holding no lock: GAIA, an import or a second pass can
        #    write to the database meanwhile; a model failure here leaves it untouched
        d = _distill_all(todo, llm, config, mode, args, distiller)
        base |= {"llm_calls": llm.calls - calls_before,
                 "cache_hits": llm.cache_hits - hits_before}
        # 1b. verification (issue 25), still before any write: its tries may call models too
        v = _verify_all(d.kept, verifier)
        # 2. the skills' vectors, still before any write (an embedder failure raises here)
        vecs = list(embedder.embed([sk.description for _, _, sk in v.kept], kind="document")
                    if v.kept else [])
        # 3. each reconciled procedure in its own short transaction, in cluster order (so
        #    each sees the ones before it, as one long transaction did)
        counts = _store_all(v.kept, vecs, store, embedder, config, user_data=args == "values")
    except LLMError as exc:
        log.error("LLM unavailable: synthesis pass skipped, store unchanged: %s", exc)
        base.setdefault("llm_calls", llm.calls - calls_before)
        base.setdefault("cache_hits", llm.cache_hits - hits_before)
        return PassReport("llm-unavailable", **base, message=str(exc))
    v.write(verify_path_for(store.path))
    marks = _consume(store, p.window, p.marked, p.goalless, d.unusable,
                     [c for _, c, _ in v.kept]) if p.progress else \
        _Consumed(handed=(), distilled=0, unusable=0, watermark=base["watermark"])
    return PassReport("ran", **base | {"watermark": marks.watermark}, **counts,
                      distilled=len(d.kept), ungrounded=d.ungrounded, repaired=d.repaired,
                      skipped=tuple(p.over + d.skipped + v.skipped), handed=marks.handed,
                      marked_distilled=marks.distilled, marked_unusable=marks.unusable,
                      **v.counts())


@dataclass(frozen=True)
class _Plan:
    """What a pass will do, before any model call: its window, marks and clusters to distil,
    and the report's counts so far."""

    progress: bool
    window: list[SessionSequence]
    marked: Mapping[str, Any]
    goalless: list[str]
    todo: list[Cluster]
    base: dict[str, Any]
    over: list[tuple[str, str]]


def _plan(store: MemoryStore, embedder: Embeds, config: Thresholds, method: Method,
          rate: RateDefinition, outcomes: Mapping[str, bool] | None, force: bool,
          verifier: Verifier | None) -> _Plan:
    """Detect and cluster the window; the clusters to distil (within the cap, without those
    an earlier pass rejected for the same member set)."""
    progress = store.has_synthesis_progress()
    since = None if force or not progress else store.synthesis_watermark()
    detected = extract_sequences(store, config, newer_than=since, outcomes=outcomes,
                                 advance=False)
    window = [q for q in detected.sequences if q.successful_calls >= config.min_steps]
    marked = {} if force else store.synthesis_marks(q.session_id for q in window)
    goalless = [q.session_id for q in window if q.goal is None and q.session_id not in marked]
    clusters = cluster_by_goal([q for q in detected.qualified if q.session_id not in marked],
                               embedder, config, method, rate=rate)
    qualified = [c for c in clusters if c.qualified]
    known = set() if verifier is None or force else rejected_keys(store.path)
    fresh = [c for c in qualified if verifier is None
             or candidate_key(verifier.rule, c) not in known]
    cap = config.max_clusters_per_pass if config.max_distill_calls_per_pass is None else \
        min(config.max_clusters_per_pass, config.max_distill_calls_per_pass)
    todo = fresh[:cap]
    base: dict[str, Any] = {
        "sessions": detected.sessions_read - len(marked),
        "sessions_without_goal": len(detected.without_goal),
        "clusters": len(clusters), "qualified": len(qualified),
        "failed_shares": tuple(round(c.failed_share, 4) for c in qualified),
        "largest_cluster_share": round(max(c.size for c in qualified)
                                       / sum(c.size for c in clusters), 4) if qualified else None,
        "left_for_later": len(fresh) - len(todo), "already_consumed": len(marked),
        "watermark": since, "rejected_before": len(qualified) - len(fresh)}
    limit = "max_clusters_per_pass" if cap == config.max_clusters_per_pass else \
        "max_distill_calls_per_pass"
    over = [("cluster", (f"{len(fresh) - len(todo)} qualified cluster(s) over "
             f"{limit} {cap}"))] if len(fresh) > len(todo) else []
    return _Plan(progress=progress, window=window, marked=marked, goalless=goalless, todo=todo,
                 base=base, over=over)


@dataclass(frozen=True)
class _Distilled:
    """What distilling a pass's clusters gave: skills kept, and clusters consumed without one
    (SKIP, malformed, ungrounded: every cluster whose answer came back is consumed)."""

    kept: list[tuple[str, Cluster, Skill]]
    unusable: list[tuple[Cluster, str]]
    skipped: list[tuple[str, str]]
    ungrounded: int
    repaired: int


def _distill_all(todo: Sequence[Cluster], llm: ChatModel, config: Thresholds,
                 mode: DistillMode, args: DistillArgs = "none",
                 distiller: Distiller = "llm") -> _Distilled:
    """Distil each cluster (a model failure raises and ends the pass, consuming nothing)."""
    kept: list[tuple[str, Cluster, Skill]] = []
    unusable: list[tuple[Cluster, str]] = []
    skipped: list[tuple[str, str]] = []
    ungrounded = repaired = 0
    for c in todo:
        label = _label(c)
        try:
            d = distill(c, llm, config, mode, args=args, distiller=distiller)
        except UngroundedSkill as exc:
            log.warning("cluster [%s]: ungrounded skill rejected: %s", label, exc)
            skipped.append((label, f"ungrounded: {exc}"))
            unusable.append((c, f"ungrounded: {exc}"))
            ungrounded += 1
            continue
        except MalformedSkill as exc:
            log.warning("cluster [%s]: malformed model output skipped: %s", label, exc)
            skipped.append((label, f"malformed: {exc}"))
            unusable.append((c, f"malformed: {exc}"))
            continue
        if d.skill is None:
            log.info("cluster [%s]: the model answered SKIP", label)
            skipped.append((label, "model answered SKIP"))
            unusable.append((c, "the distiller answered SKIP"))
            continue
        repaired += bool(d.repairs)
        kept.append((label, c, d.skill))
    return _Distilled(kept=kept, unusable=unusable, skipped=skipped, ungrounded=ungrounded,
                      repaired=repaired)


def _label(c: Cluster) -> str:
    return ",".join(c.session_ids[:3]) + ("…" if c.size > 3 else "")


@dataclass(frozen=True)
class _Verified:
    """What verification decided: the candidates kept, and the rejected ones to record.

    Rejected clusters are neither stored nor marked consumed: their members stay in later
    windows, and a cluster with a changed member set is verified again.
    """

    rule: VerifyRule
    kept: list[tuple[str, Cluster, Skill]]
    rejected: list[tuple[str, Cluster, Skill, Verdict]] = field(default_factory=list)
    calls: int = 0
    cache_hits: int = 0
    seconds: float = 0.0

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return [(label, f"verification ({v.rule}) rejected it: {v.reason}")
                for label, _, _, v in self.rejected]

    def counts(self) -> dict[str, Any]:
        if self.rule == "none":
            return {}
        return {"verify": self.rule, "candidates": len(self.kept) + len(self.rejected),
                "verified": len(self.kept), "rejected": len(self.rejected),
                "verify_calls": self.calls, "verify_cache_hits": self.cache_hits,
                "verify_seconds": round(self.seconds, 4)}

    def write(self, path: Path) -> None:
        """Remember this pass's rejections in the side record at ``path``, forget the keys it
        verified (the file is created only to hold a rejection)."""
        if self.rule == "none" or not (self.rejected or path.exists()):
            return
        with RejectedRecord(path) as record:
            for _, c, skill, v in self.rejected:
                record.put(candidate_key(self.rule, c), skill, c, v)
            for _, c, _ in self.kept:
                record.forget(candidate_key(self.rule, c))


def _verify_all(kept: list[tuple[str, Cluster, Skill]], verifier: Verifier | None
                ) -> _Verified:
    """Judge each candidate (every one passes without a verifier: GAIA's behaviour)."""
    if verifier is None:
        return _Verified(rule="none", kept=kept)
    t0 = time.perf_counter()
    ok: list[tuple[str, Cluster, Skill]] = []
    rejected: list[tuple[str, Cluster, Skill, Verdict]] = []
    calls = hits = 0
    for label, c, skill in kept:
        v = verifier(skill, c)
        calls, hits = calls + v.model_calls, hits + v.cache_hits
        if v.verified:
            ok.append((label, c, skill))
        else:
            log.info("cluster [%s]: verification (%s) rejected %s: %s", label, v.rule,
                     skill.name, v.reason)
            rejected.append((label, c, skill, v))
    return _Verified(rule=verifier.rule, kept=ok, rejected=rejected, calls=calls, cache_hits=hits,
                     seconds=time.perf_counter() - t0)


def _store_all(kept: Sequence[tuple[str, Cluster, Skill]], vecs: Sequence[Any],
               store: MemoryStore, embedder: Embeds, config: Thresholds, *,
               user_data: bool = False) -> dict[str, Any]:
    """Reconcile and store each kept skill (``user_data``: marked as distilled from the runs'
    values); the report's write counts."""
    n = {"ADD": 0, "UPDATE": 0, "NOOP": 0}
    renamed = 0
    ids: list[str] = []
    for (label, c, skill), vec in zip(kept, vecs, strict=True):
        r = reconcile_and_store(skill, c, store, embedder, config, vector=vec,
                                user_data=user_data)
        if r.renamed_from:
            log.info("cluster [%s]: name %s taken by an active procedure: stored as "
                     "its next free variant", label, r.renamed_from)
            renamed += 1
        n[r.action if r.action in n else "NOOP"] += 1
        if r.procedure_id:
            ids.append(r.procedure_id)
    return {"added": n["ADD"], "updated": n["UPDATE"], "noop": n["NOOP"],
            "duplicate_names": renamed, "procedure_ids": tuple(ids)}


@dataclass(frozen=True)
class _Consumed:
    handed: tuple[str, ...]
    distilled: int
    unusable: int
    watermark: str | None


#: The detail GAIA 0.25.1 writes on the mark of a window session without a user turn.
NO_GOAL_DETAIL = "no user turn, so there is no goal to cluster on"


def _consume(store: MemoryStore, window: Sequence[SessionSequence], marked: Mapping[str, Any],
             goalless: Sequence[str], unusable: Sequence[tuple[Cluster, str]],
             distilled: Sequence[Cluster]) -> _Consumed:
    """Write this pass's marks and advance the watermark, in one short transaction."""
    with store.transaction():
        store.mark_sessions(goalless, "unusable", detail=NO_GOAL_DETAIL)
        for c, why in unusable:
            store.mark_sessions(c.session_ids, "unusable", goal=c.goals[0], detail=why)
        for c in distilled:
            store.mark_sessions(c.session_ids, "distilled", goal=c.goals[0])
        handed = tuple(dict.fromkeys([*goalless, *(s for c, _ in unusable for s in c.session_ids),
                                      *(s for c in distilled for s in c.session_ids)]))
        stored = store.synthesis_watermark()
        moved = advance_watermark(window, set(marked) | set(handed), stored)
        if moved is not None:
            store.set_synthesis_watermark(moved)
    return _Consumed(handed=handed, distilled=sum(c.size for c in distilled),
                     unusable=len(goalless) + sum(c.size for c, _ in unusable),
                     watermark=moved or stored)


def advance_watermark(window: Sequence[SessionSequence], consumed: set[str],
                      stored: str | None) -> str | None:
    """The new watermark after a pass, or None when it does not move (GAIA 0.25.1's rule).

    It may only pass a contiguous run of consumed sessions: it stops below the first call
    of the oldest session left unconsumed (a cluster over the cap, a goal not yet recurring
    ``min_occurrences`` times), so nothing above it is skipped; it never moves backwards.
    """
    left = [q.started_at for q in window if q.session_id not in consumed]
    done = [q.last_at for q in window if q.session_id in consumed]
    if left:
        done = [t for t in done if t < min(left)]
    if not done:
        return None
    candidate = max(done)
    return None if stored is not None and candidate <= stored else candidate
