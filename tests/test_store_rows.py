"""tool_history, conversations and procedures CRUD with GAIA's semantics."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from skillsynth.errors import StoreError
from skillsynth.store import Procedure, decode_embedding, encode_embedding


def test_tool_call_logging_follows_gaia(store):
    long = "x" * 900
    rid = store.log_tool_call("s1", "query_documents", {"query": long}, long, False,
                              error=long, duration_ms=7)
    store.log_tool_call("s1", "list_inbox", {}, None, True)
    a, b = store.tool_calls("s1")
    assert a.id == rid and not a.success and a.duration_ms == 7
    assert len(a.result_summary) == len(a.error) == 500
    # GAIA 0.25.1 shortens a long value rather than cutting the JSON: it still parses
    assert json.loads(a.args) == {"query": "x" * 200 + "...", "_truncated": True}
    assert b.args is None  # empty args -> NULL
    assert store.tool_calls(after_id=rid) == [b]
    assert store.session_ids() == ["s1"]
    long_text = '{"query": "' + "y" * 900 + '"}'  # an importer's already-serialised args
    store.log_tool_call("s1", "query_documents", long_text, "ok", True)
    store.log_tool_call("s1", "run", "not json " * 100, "ok", True)
    c, d = store.tool_calls("s1")[2:]
    assert json.loads(c.args)["_truncated"] is True and len(d.args) == 500


def test_goal_is_first_user_turn(store):
    store.add_turn("s1", "assistant", "hello")
    store.add_turn("s1", "user", "first goal")
    store.add_turn("s1", "user", "second goal")
    assert store.first_user_turns()["s1"].content == "first goal"


def test_transaction_rolls_back_everything(store):
    with pytest.raises(RuntimeError), store.transaction():
        store.log_tool_call("s1", "a")
        store.add_turn("s1", "user", "goal")
        raise RuntimeError("boom")
    assert store.tool_calls() == [] and store.turns() == []


def test_embedding_blob_is_little_endian_float32(store):
    v = np.array([0.6, 0.8, 0.0])
    blob = encode_embedding(v)
    assert blob == np.array([0.6, 0.8, 0.0], dtype="<f4").tobytes()
    assert np.allclose(decode_embedding(blob), v)
    with pytest.raises(StoreError, match="norm"):
        encode_embedding([1.0, 1.0])
    with pytest.raises(StoreError, match="NaN"):
        encode_embedding([float("nan"), 1.0])


def test_procedure_lifecycle(store):
    p = store.put_procedure(Procedure(
        name="find-invoice", when_to_use="user wants an invoice", markdown_body="1. search",
        tools_required=("search_file", "read_file"), tool_sequence=({"tool": "search_file"},),
        provenance={"source": "skillsynth", "from_sessions": ["s1", "s2", "s3"]}))
    assert p.id.startswith("proc_") and len(p.id) == 5 + 32
    row = store.execute("SELECT tools_required, version, enabled, success_count FROM procedures")
    assert row == [(json.dumps(["search_file", "read_file"]), "1.0.0", 1, 0)]
    got = store.get_procedure(p.id)
    assert got == p
    store.set_procedure_embedding(p.id, [0.0, 1.0])
    assert np.allclose(store.get_procedure(p.id).vector(), [0.0, 1.0])
    store.record_outcome(p.id, True)
    store.record_outcome(p.id, False)
    got = store.get_procedure(p.id)
    assert (got.success_count, got.attempt_count) == (1, 2)
    store.touch_procedure(p.id, "2026-12-03T10:00:00.000000+00:00")
    assert store.get_procedure(p.id).last_used_at == "2026-12-03T10:00:00.000000+00:00"

    q = store.put_procedure(Procedure(name="find-invoice-v2", when_to_use="an invoice",
                                      markdown_body="1. search better"))
    assert [x.id for x in store.search_procedures("invoice")] == [p.id, q.id]
    store.supersede_procedure(p.id, q.id)
    assert [x.id for x in store.search_procedures("invoice")] == [q.id]
    assert store.get_procedure(p.id).superseded_by == q.id  # kept, never deleted
    store.set_procedure_enabled(q.id, False)
    assert store.search_procedures() == []
    assert len(store.procedures()) == 2
    with pytest.raises(StoreError, match="no procedure"):
        store.touch_procedure("proc_missing")
    with pytest.raises(StoreError, match="itself"):
        store.supersede_procedure(q.id, q.id)


def test_withdrawing_a_procedure_deletes_it_and_undoes_its_supersede(store):
    def put(name):
        return store.put_procedure(Procedure(name=name, when_to_use="an invoice",
                                             markdown_body="1. search")).id

    old, new, other = put("find-invoice"), put("find-invoice-2"), put("other")
    store.supersede_procedure(old, new)
    with pytest.raises(StoreError, match="no procedure with id 'proc_missing' to withdraw"):
        store.withdraw_procedure("proc_missing")
    assert store.get_procedure(old).superseded_by == new  # a refused withdrawal changes nothing
    assert store.withdraw_procedure(new) == [old]
    assert store.get_procedure(new) is None
    assert [p.id for p in store.procedures(active_only=True)] == [old, other]
    assert store.withdraw_procedure(other) == []


def test_execute_refuses_writes(store):
    with pytest.raises(StoreError, match="reads"):
        store.execute("DELETE FROM tool_history")


def test_outcome_feedback_is_all_or_nothing(store):
    from skillsynth.pipeline.outcome import record_outcome

    a = store.put_procedure(Procedure(name="a", when_to_use="w", markdown_body="b"))
    b = store.put_procedure(Procedure(name="b", when_to_use="w", markdown_body="b"))
    assert record_outcome(store, [a.id, b.id, a.id], True) == 2
    assert (store.get_procedure(a.id).success_count, store.get_procedure(a.id).attempt_count) \
        == (1, 1)
    with pytest.raises(StoreError):
        record_outcome(store, [b.id, "proc_missing"], False)
    assert store.get_procedure(b.id).attempt_count == 1  # rolled back


def test_info_says_how_much_history_gaias_passes_consumed(store):
    for sid in ("a", "b", "c"):
        store.log_tool_call(sid, "read_file", {"p": sid}, "ok", True)
    with sqlite3.connect(store.path) as conn:  # as GAIA's pass marks them
        conn.execute("INSERT INTO synthesis_marks (session_id, outcome, marked_at) VALUES "
                     "('a', 'distilled', 't'), ('b', 'unusable', 't'), ('gone', 'distilled', 't')")
    assert store.info().synthesis == {"distilled": 1, "unusable": 1, "not_consumed": 1,
                                      "orphan_marks": 1}  # 'gone' has no calls left
