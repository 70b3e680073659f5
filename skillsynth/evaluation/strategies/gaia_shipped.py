"""The released GAIA's own synthesis pass, run unchanged on a history store (``gaia-shipped``).

amd-gaia's pass driver, ``ProceduralMemoryMixin._synthesize_skills``, runs as GAIA runs it at
a process start, on a small host object that inherits the mixin and gives the driver the
seams it reads from ``self``:

* ``_memory_store``: GAIA's own ``MemoryStore`` on the point's history database (skillsynth
  writes GAIA's schema, so GAIA opens it without migrating); GAIA's DETECT, marks,
  watermark, reconcile and writes all go through it;
* ``chat.send_messages``: sends GAIA's distillation request through skillsynth's chat model,
  so the call cache and the ``calls`` / ``cache_hits`` counters see every distillation;
* ``_embed_text``: skillsynth's embedder, one text per call, L2-normalised (GAIA's contract),
  embedded as a ``document`` for goals and when_to_use alike (GAIA has one embedding kind);
* the thresholds: GAIA reads them from ``memory_settings.json`` through
  ``gaia.agents.base.memory._load_memory_settings``. For the pass only, under a lock, that
  loader is replaced by one returning the point's ``skill_synthesis`` block, limited to the
  keys GAIA's ``SynthesisConfig`` has. Nothing else of GAIA is patched.

Two host methods observe without changing what GAIA does: ``_mark_cluster_consumed``
(GAIA's own, called through) notes each cluster handed to the distiller and its outcome, and
``_proc_faiss_add`` notes each stored procedure (the host keeps no FAISS index: skillsynth
recalls over ``procedures.embedding``, where GAIA stores the when_to_use vector).

With a verifier (``verify: trace | world``) the host also runs skillsynth's verification
stage at the mark, and holds back clusters rejected before in ``_drop_consumed_episodes``:
:mod:`.gaia_verify` says how, and where GAIA's own write is undone.

The :class:`~skillsynth.pipeline.synthesize.PassReport` is read off GAIA's own record:
``handed`` is the sessions this pass added to GAIA's ``synthesis_marks`` (goalless sessions
included), ``sessions`` the DETECT window the driver reads (past the watermark, unmarked),
``qualified`` and ``clusters`` both the clusters GAIA's ``cluster_by_goal`` returned (it
returns qualifying clusters only; with a verifier, plus those held back as rejected before),
``left_for_later`` those no distillation reached (``max_distill_calls_per_pass``,
``max_clusters_per_pass``, or an aborted pass); ``llm_calls`` / ``cache_hits`` count the
distillation requests only, and the verification fields are filled as skillsynth's pass
fills them (:meth:`.gaia_verify.GaiaVerification.counts`).
METHODS.md (section 2) lists every difference from ``gaia-greedy`` a report shows.

GAIA is imported on first use, never when skillsynth is: ``import gaia`` itself loads GAIA's
agent stack (about 1,300 modules, 2 s here, offline), so even the pure ``skill_synthesis``
module cannot be had alone; the mixin adds nothing to that.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import threading
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...config import Thresholds
from ...errors import EvaluationError, LLMError, ReadOnlyStoreError
from ...pipeline.skill import strip_wrappers
from ...pipeline.synthesize import PassReport
from ...pipeline.verify import Verifier
from ...protocols import ChatModel, Embeds
from ...store import MemoryStore
from ...store.gaia_release import GAIA_INSTALL_HINT, TESTED_GAIA_RANGE, installed_gaia_version
from .gaia_verify import GaiaVerification

__all__ = ["gaia_distill_cap", "gaia_distill_prompt_version", "gaia_settings_block",
           "gaia_shipped_pass", "require_gaia"]

log = logging.getLogger("skillsynth.evaluation.strategies.gaia_shipped")

#: One pass at a time per process: the settings loader is a module global of GAIA's.
_PASS_LOCK = threading.Lock()
#: The module whose settings loader the driver calls at pass time.
_SETTINGS_MODULE = "gaia.agents.base.memory"
#: Keyword arguments of GAIA's side calls that only route requests on a shared server.
_ROUTING_KWARGS = frozenset({"id_slot"})


def require_gaia() -> str:
    """The installed amd-gaia version; raise when it is missing, warn when it is untested.

    Raises:
        EvaluationError: amd-gaia is not installed (the message says how to install it).
    """
    found = installed_gaia_version()
    if found is None:
        raise EvaluationError("strategy gaia-shipped runs the released GAIA's own synthesis "
                              f"pass, and amd-gaia is not installed: {GAIA_INSTALL_HINT}")
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # packaging is near-universal but not ours to require
        return found
    if found not in SpecifierSet(TESTED_GAIA_RANGE):
        warnings.warn(f"amd-gaia {found} is installed; gaia-shipped was tested with "
                      f"{TESTED_GAIA_RANGE}. It runs, but GAIA's pass may differ from the one "
                      "the documentation describes", stacklevel=2)
    return found


def gaia_distill_prompt_version() -> str:
    """What names GAIA's distillation prompt in records and cache keys (the release)."""
    return f"amd-gaia-{require_gaia()}"


def gaia_settings_block(config: Thresholds) -> dict[str, Any]:
    """The point's thresholds as GAIA's ``skill_synthesis`` block (keys GAIA reads only).

    skillsynth-only keys (``recall_top_k``, ``recall_tau``, ``reconcile_tau``) are left
    out: GAIA reconciles at ``similarity_tau``; recall is skillsynth's and reads them there.
    """
    synthesis = importlib.import_module("gaia.agents.base.skill_synthesis")
    known = {f.name for f in fields(synthesis.SynthesisConfig)}
    return {k: v for k, v in config.to_settings_block().items() if k in known}


def gaia_distill_cap(config: Thresholds) -> int:
    """The most distillations GAIA's pass spends at these settings: its
    ``max_distill_calls_per_pass`` (2 in 0.25.1 when the block leaves it unset) within its
    ``max_clusters_per_pass``, as GAIA resolves them."""
    block = gaia_settings_block(config)
    return min(int(_gaia_default("max_distill_calls_per_pass", block)),
               int(_gaia_default("max_clusters_per_pass", block)))


@dataclass
class _Reply:
    """What GAIA's ``distill_cluster`` reads of an answer: ``.text``."""

    text: str


@dataclass
class _ChatSeam:
    """GAIA's ``self.chat``: ``send_messages`` through skillsynth's chat model.

    Every answer and the first failure are kept, so the report can tell a SKIP from a
    document GAIA's parser rejected, and a model failure (which GAIA logs and swallows)
    from a clean pass. Once a failure is kept (a verifier's model failed too) every later
    request raises it, so GAIA's driver ends the pass as it does when its model is down.
    ``calls`` / ``cache_hits``: what the distillation requests cost (a world verifier's
    tries on the same model are counted apart).
    """

    llm: ChatModel
    prompt_version: str
    effective_model: str | None = None
    replies: list[str] = field(default_factory=list)
    error: Exception | None = None
    calls: int = 0
    cache_hits: int = 0

    def send_messages(self, messages: list[dict[str, Any]], system_prompt: str | None = None,
                      *, temperature: float = 0.1, max_tokens: int = 1024,
                      **kwargs: Any) -> _Reply:
        extra = sorted(set(kwargs) - _ROUTING_KWARGS)
        if extra:  # GAIA sends thinking switches only for models skillsynth does not serve
            log.warning("GAIA asked for request fields skillsynth's client cannot send: %s",
                        ", ".join(extra))
        if self.error is not None:
            raise self.error
        full = ([{"role": "system", "content": system_prompt}] if system_prompt else []) \
            + list(messages)
        calls, hits = self.llm.calls, self.llm.cache_hits
        try:
            answer = self.llm.chat(full, temperature=temperature, max_tokens=max_tokens,
                                   prompt_version=self.prompt_version)
        except Exception as exc:
            if self.error is None:
                self.error = exc
            raise  # GAIA's driver catches it and ends the pass, as with Lemonade down
        finally:
            self.calls += self.llm.calls - calls
            self.cache_hits += self.llm.cache_hits - hits
        text = answer.content or ""
        self.replies.append(text)
        return _Reply(text)


@dataclass(frozen=True)
class _Handed:
    """One cluster the driver handed to the distiller: its outcome as its mark records it
    (``rejected`` / ``unverified``: verification left it unmarked), and why, where
    verification decided it."""

    sessions: tuple[str, ...]
    outcome: str
    why: str = ""


@functools.cache
def _host_type() -> type:
    """A class inheriting GAIA's mixin: the driver's ``self`` (defined once GAIA imports)."""
    mixin = importlib.import_module("gaia.agents.base.procedural_memory").ProceduralMemoryMixin
    synthesis = importlib.import_module("gaia.agents.base.skill_synthesis")

    class GaiaHost(mixin):  # type: ignore[misc,valid-type]
        """The seams ``_synthesize_skills`` reads from ``self``, and nothing else.

        ``verification``: skillsynth's verification stage (:mod:`.gaia_verify`), or None
        (GAIA's behaviour, every method below calls through or only observes).
        """

        def __init__(self, store: Any, chat: _ChatSeam, embedder: Embeds,
                     verification: GaiaVerification | None = None,
                     block: Mapping[str, Any] | None = None) -> None:
            self._memory_store = store
            self.chat = chat
            self._embedder = embedder
            self._memory_session_id = None  # no live session: every session is history
            self._proc_faiss_index = None
            self._proc_faiss_id_map: list[str] = []
            self.handed: list[_Handed] = []
            self.stored: list[str] = []
            self.verification = verification
            self._block = dict(block or {})
            self._vectors: dict[str, np.ndarray] = {}

        def _embed_text(self, text: str) -> np.ndarray:
            if self.verification is not None and text in self._vectors:
                return self._vectors[text]  # hold_back clustered this goal already
            vec = np.asarray(self._embedder.embed([text], kind="document")[0],
                             dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            vec = vec / norm if norm > 0 else vec
            if self.verification is not None:
                self._vectors[text] = vec
            return vec

        def _drop_consumed_episodes(self, store: Any, window: list[dict[str, Any]],
                                    force: bool) -> tuple[list[dict[str, Any]], set[str]]:
            pending, done = super()._drop_consumed_episodes(store, window, force)
            v = self.verification
            if v is None or force or not v.rejected_keys or not pending:
                return pending, done
            cfg = synthesis.load_synthesis_config({"skill_synthesis": self._block})
            clusters = synthesis.cluster_by_goal(
                pending, self._embed_text, similarity_tau=cfg.similarity_tau,
                min_occurrences=cfg.min_occurrences, min_success_rate=cfg.min_success_rate)
            return v.hold_back(pending, clusters), done

        def _mark_cluster_consumed(self, store: Any, cluster: Any, outcome: str,
                                   detail: str | None = None) -> list[str]:
            sessions = tuple(cluster.from_sessions)
            judged = None
            if self.verification is not None and outcome == "distilled":
                try:
                    judged = self.verification.judge(cluster)
                except LLMError as exc:  # ends the pass at GAIA's next distillation
                    self.chat.error = self.chat.error or exc
                    why = f"verification ({self.verification.rule}) failed: {exc}"
                    self.handed.append(_Handed(sessions=sessions, outcome="unverified", why=why))
                    return []
            if judged is not None and judged.outcome == "rejected":
                self.handed.append(_Handed(sessions=sessions, outcome="rejected", why=judged.why))
                return []  # unmarked: its sessions stay pending
            if judged is not None and judged.outcome == "unusable":
                outcome, detail = "unusable", judged.why
            ids = super()._mark_cluster_consumed(store, cluster, outcome, detail=detail)
            self.handed.append(_Handed(sessions=tuple(ids), outcome=outcome,
                                       why=judged.why if judged else ""))
            return list(ids)

        def _proc_faiss_add(self, procedure_id: str, vec: np.ndarray) -> None:
            if self.verification is None or procedure_id not in self.verification.withdrawn:
                self.stored.append(procedure_id)

    return GaiaHost


@contextlib.contextmanager
def _gaia_settings(block: Mapping[str, Any]) -> Iterator[None]:
    """GAIA's settings loader answers ``{"skill_synthesis": block}`` inside the block."""
    module: Any = importlib.import_module(_SETTINGS_MODULE)
    original = module._load_memory_settings
    module._load_memory_settings = lambda: {"skill_synthesis": dict(block)}
    try:
        yield
    finally:
        module._load_memory_settings = original


def gaia_shipped_pass(store: MemoryStore, llm: ChatModel, embedder: Embeds,
                      config: Thresholds, *, memory_disabled: bool = False,
                      outcomes: Mapping[str, bool] | None = None,
                      force: bool = False, verifier: Verifier | None = None) -> PassReport:
    """Run amd-gaia's own ``_synthesize_skills`` once on ``store`` and report it.

    Args:
        store: the writable history database (GAIA opens its own connection to the file).
        llm: the chat model GAIA's distillation requests are sent through.
        embedder: embeds GAIA's goals and when_to_use texts.
        config: the thresholds, handed to GAIA as its ``skill_synthesis`` settings.
        memory_disabled: run the driver without a store, as GAIA does with
            ``GAIA_MEMORY_DISABLED=1``.
        outcomes: session success labels, for ``failed_shares`` and the verifier's
            member sessions (GAIA qualifies clusters by its per-call rate).
        force: GAIA's ``force=True``: ignore its marks and watermark this pass (and, with
            a verifier, the recorded rejections).
        verifier: judges each procedure GAIA stores before its cluster is marked
            (:mod:`.gaia_verify`; None: GAIA's behaviour).

    Raises:
        EvaluationError: amd-gaia is not installed.
        ReadOnlyStoreError: ``store`` was opened read-only.
        Exception: whatever GAIA's pass raises (an embedder failure, fail-loud as in GAIA).
    """
    prompt_version = gaia_distill_prompt_version()
    host_type = _host_type()
    chat = _ChatSeam(llm=llm, prompt_version=prompt_version,
                     effective_model=llm.model_id)
    block = gaia_settings_block(config)
    if memory_disabled:
        with _PASS_LOCK, _gaia_settings(block):
            host_type(None, chat, embedder)._synthesize_skills()
        return PassReport("memory-disabled", message="GAIA_MEMORY_DISABLED=1: no store")
    if store.read_only:
        raise ReadOnlyStoreError(f"{store.path}: opened read-only; GAIA's pass writes "
                                 "procedures and marks, open it writable")
    gaia_store = importlib.import_module("gaia.agents.base.memory_store").MemoryStore(
        db_path=store.path)
    try:
        verification = None if verifier is None or not config.enabled else \
            GaiaVerification.start(store, verifier, config,
                                   None if force else gaia_store.get_synthesis_watermark(),
                                   outcomes or {}, force)
        with _PASS_LOCK, _gaia_settings(block):
            return _run(store, gaia_store,
                        host_type(gaia_store, chat, embedder, verification, block), chat,
                        config, block, outcomes or {}, force)
    finally:
        gaia_store.close()


def _run(store: MemoryStore, gaia_store: Any, host: Any, chat: _ChatSeam, config: Thresholds,
         block: Mapping[str, Any], outcomes: Mapping[str, bool], force: bool) -> PassReport:
    marks_before = gaia_store.get_synthesis_marks()
    past = gaia_store.iter_sessions(
        since=None if force else gaia_store.get_synthesis_watermark(),
        min_steps=config.min_steps)
    window = [s for s in past if force or s["session_id"] not in marks_before]
    before = {p.id: p.superseded_by for p in store.procedures()}
    result = host._synthesize_skills(force=force)
    if chat.error is not None and not isinstance(chat.error, LLMError):
        raise chat.error  # a fault, not an unavailable model: GAIA would have hidden it
    # new marks, and (forced) marks the pass wrote again
    new = {sid: m for sid, m in gaia_store.get_synthesis_marks().items()
           if marks_before.get(sid) != m}
    base = _counts(store, host, chat, result, window, before, block, outcomes)
    base.update(handed=tuple(sorted(new)), llm_calls=chat.calls, cache_hits=chat.cache_hits,
                already_consumed=len(past) - len(window),
                marked_distilled=sum(m["outcome"] == "distilled" for m in new.values()),
                marked_unusable=sum(m["outcome"] == "unusable" for m in new.values()),
                watermark=gaia_store.get_synthesis_watermark())
    if host.verification is not None:
        base.update(host.verification.counts())
    if not config.enabled:
        return PassReport("synthesis-disabled", message="skill_synthesis.enabled is false")
    if chat.error is not None:
        log.error("LLM unavailable: GAIA's pass stopped at the failed distillation: %s",
                  chat.error)
        return PassReport("llm-unavailable", **base, message=str(chat.error))
    return PassReport("ran", **base)


def _counts(store: MemoryStore, host: Any, chat: _ChatSeam, result: Mapping[str, Any],
            window: list[dict[str, Any]], before: Mapping[str, str | None],
            block: Mapping[str, Any], outcomes: Mapping[str, bool]) -> dict[str, Any]:
    """The report's counts, read off what GAIA did (its result, marks and rows), and with a
    verifier what verification decided (a rejected candidate was distilled, not stored)."""
    after = {p.id: p.superseded_by for p in store.procedures()}
    # an UPDATE is a stored row that superseded one (possibly one this pass added)
    updated = len({sup for pid, sup in after.items()
                   if sup in host.stored and before.get(pid) is None})
    ran = int(result.get("clusters", 0))  # GAIA's clusters, less those held back
    qualified = ran + (host.verification.rejected_before if host.verification else 0)
    marked = sum(h.outcome == "distilled" for h in host.handed)
    distilled = marked + sum(h.outcome in ("rejected", "unverified") for h in host.handed)
    skipped: list[tuple[str, str]] = []
    for h, reply in zip(host.handed, chat.replies, strict=False):
        label = ",".join(h.sessions[:3]) + ("…" if len(h.sessions) > 3 else "")
        if h.why:
            skipped.append((label, h.why))
        elif h.outcome == "unusable":
            why = "model answered SKIP" if strip_wrappers(reply).strip() == "SKIP" else \
                "malformed: GAIA's parser rejected the document"
            skipped.append((label, why))
    left = ran - len(host.handed)
    if left > 0:
        why = (f"{left} qualified cluster(s) left for a later pass (GAIA's "
               f"max_distill_calls_per_pass {_gaia_default('max_distill_calls_per_pass', block)}"
               f", max_clusters_per_pass {_gaia_default('max_clusters_per_pass', block)})")
        skipped.append(("cluster", why))
    shares = tuple(round(sum(1 for s in h.sessions if outcomes.get(s) is False)
                         / len(h.sessions), 4) for h in host.handed if h.sessions)
    return {"sessions": len(window),
            "sessions_without_goal": sum(1 for s in window
                                         if not str(s.get("goal") or "").strip()),
            "clusters": qualified, "qualified": qualified, "distilled": distilled,
            "added": len(host.stored) - updated, "updated": updated,
            "noop": marked - len(host.stored), "skipped": tuple(skipped),
            "procedure_ids": tuple(host.stored), "left_for_later": max(left, 0),
            "failed_shares": shares}


def _gaia_default(key: str, block: Mapping[str, Any]) -> Any:
    """A threshold as GAIA resolves it: the settings block's value, else GAIA's default."""
    synthesis = importlib.import_module("gaia.agents.base.skill_synthesis")
    return getattr(synthesis.load_synthesis_config({"skill_synthesis": dict(block)}), key)
