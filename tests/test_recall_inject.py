"""Recall precision guard and the injection cap, on a real SQLite store."""

from __future__ import annotations

import numpy as np
import pytest

from skillsynth.config import Thresholds
from skillsynth.errors import EmbedderError, ReadOnlyStoreError
from skillsynth.pipeline.inject import TRUNCATION_MARKER, inject, tools_for_turn
from skillsynth.pipeline.recall import ProcedureIndex, recall, recall_skill
from skillsynth.pipeline.skill import Skill
from skillsynth.store import MemoryStore, Procedure, encode_embedding


class FakeEmbedder:
    """FAKE: maps known texts to fixed unit vectors (unit tests only)."""

    embedder_id = "fake-table:2"

    def __init__(self, table):
        self.table = table

    def embed(self, texts, *, kind="document", progress=False):
        return np.vstack([self.table[t] for t in texts]).astype(np.float32)


def _unit(angle):
    return np.array([np.cos(angle), np.sin(angle)], dtype=np.float32)


def _put(store, name, angle, **kw):
    return store.put_procedure(Procedure(
        name=name, when_to_use=f"when {name}", markdown_body="1. do it\n\n## Edge cases\n- none",
        tools_required=("search_file",), embedding=encode_embedding(_unit(angle)), **kw))


@pytest.mark.parametrize("tau", [0.5, 0.82, 0.95])
def test_nothing_below_tau_and_never_disabled_or_superseded(store, tau):
    procs = [_put(store, f"p{i}", a) for i, a in enumerate(np.linspace(0, 1.5, 8))]
    store.set_procedure_enabled(procs[0].id, False)
    store.supersede_procedure(procs[1].id, procs[2].id)
    emb = FakeEmbedder({"goal": _unit(0.0)})
    cfg = Thresholds(similarity_tau=tau, recall_top_k=8)
    hits = recall(store, emb, "goal", cfg)
    assert all(h.score >= tau for h in hits)
    assert {procs[0].id, procs[1].id}.isdisjoint(h.procedure.id for h in hits)
    expected = [p.id for p, a in zip(procs, np.linspace(0, 1.5, 8), strict=True)
                if np.cos(a) >= tau and p.id not in (procs[0].id, procs[1].id)]
    assert [h.procedure.id for h in hits] == expected  # best first
    for h in hits:
        assert store.get_procedure(h.procedure.id).last_used_at is not None


def test_top_k_and_skills(store):
    for i in range(5):
        _put(store, f"p{i}", 0.01 * i)
    emb = FakeEmbedder({"goal": _unit(0.0)})
    skills = recall_skill(store, emb, "goal", Thresholds())
    assert [s.name for s in skills] == ["p0", "p1"]
    assert isinstance(skills[0], Skill)


def test_read_only_store_needs_touch_false(store, db_path):
    _put(store, "p0", 0.0)
    store.close()
    emb = FakeEmbedder({"goal": _unit(0.0)})
    with MemoryStore.open(db_path, read_only=True) as ro:
        with pytest.raises(ReadOnlyStoreError):
            recall(ro, emb, "goal", Thresholds())
        assert len(recall(ro, emb, "goal", Thresholds(), touch=False)) == 1


def test_dimension_mismatch_is_loud(store):
    _put(store, "p0", 0.0)
    idx = ProcedureIndex.from_store(store)
    with pytest.raises(EmbedderError, match="different embedders"):
        idx.search(np.ones(3, dtype=np.float32) / np.sqrt(3), top_k=2, tau=0.5)


@pytest.mark.parametrize("cap", [1, 10, 1500])
def test_injection_never_exceeds_cap_plus_marker(cap):
    body = "1. step\n" * 400
    s = Skill(name="long", description="d", body=body.strip(), tools_required=("a",))
    block = inject([s], Thresholds(max_recall_body_chars=cap))
    injected = block.split("Tools: a\n\n", 1)[1].rstrip("\n")
    assert len(injected) <= cap + len(TRUNCATION_MARKER)
    assert injected.endswith(TRUNCATION_MARKER)
    assert s.body.startswith(injected[: -len(TRUNCATION_MARKER)])
    assert inject([], Thresholds()) == ""


def test_tools_for_turn_priority_and_cap():
    s = Skill(name="x", description="d", body="b", tools_required=("read_file", "jira_search"))
    got = tools_for_turn(["remember", "read_file"], [s], ["web", "jira_search", "shell"], cap=4)
    assert got == ("remember", "read_file", "jira_search", "web")
