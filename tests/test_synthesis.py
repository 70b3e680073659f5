"""Distill, reconcile and the synthesis pass with its floors, on real SQLite stores.

The LLM and embedder here are FAKES (named so) that return fixed answers; the real-model
path is in test_models_local.py. The LLM-down floor uses a real closed port.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
from dataclasses import dataclass

import numpy as np
import pytest
from fakes import FakeChatModel

from skillsynth.config import Thresholds
from skillsynth.errors import EmbedderError, MalformedSkill
from skillsynth.models.chat import ChatClient
from skillsynth.models.llm import Endpoint
from skillsynth.pipeline.cluster import cluster_by_goal
from skillsynth.pipeline.detect import extract_sequences
from skillsynth.pipeline.distill import PROMPT_VERSION, build_messages, distill_cluster
from skillsynth.pipeline.reconcile import reconcile_and_store
from skillsynth.pipeline.skill import Skill
from skillsynth.pipeline.synthesize import synthesize_skills

ANSWER = """<think>hmm</think>
```markdown
---
name: find-invoice
when_to_use: "The user wants to find an invoice"
tools_required:
  - search_file
  - read_file
---

1. Call search_file with the invoice number.
2. Call read_file on the match.

## Edge cases
- No match: ask the user.
```"""


@dataclass
class FakeResult:
    content: str
    cached: bool = False


class FakeLLM(FakeChatModel):
    """FAKE chat client: returns queued answers and records the calls."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0
        self.seen = []

    def chat(self, messages, **kw):
        self.calls += 1
        self.seen.append((messages, kw))
        return FakeResult(self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])


class FakeEmbedder:
    """FAKE embedder: texts mentioning 'invoice' point one way, 'mail' another."""

    embedder_id = "fake-invoice-mail:3"

    def __init__(self, fail=False):
        self.fail = fail

    def embed(self, texts, *, kind="document", progress=False):
        if self.fail:
            raise EmbedderError("embedding server down (fake)")
        out = []
        for t in texts:
            h = int(hashlib.sha256(t.encode()).hexdigest()[:4], 16) / 65535 * 0.05
            base = [1, h, 0] if "invoice" in t.lower() else [0, h, 1]
            v = np.array(base, dtype=np.float32)
            out.append(v / np.linalg.norm(v))
        return np.vstack(out)


def _sessions(store, n, goal="find invoice {i}", tools=("search_file", "read_file", "reply"),
              prefix="inv"):
    for i in range(n):
        with store.transaction():
            for t in tools:
                store.log_tool_call(f"{prefix}{i}", t, {"q": i}, "ok", True)
            store.add_turn(f"{prefix}{i}", "user", goal.format(i=i))


def _dump(path):
    import sqlite3

    conn = sqlite3.connect(path)
    out = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
           for t in ("procedures", "tool_history", "conversations", "meta", "synthesis_marks")}
    conn.close()
    return out


def test_three_similar_sessions_make_one_procedure_with_provenance(store):
    _sessions(store, 3)
    rep = synthesize_skills(store, FakeLLM(ANSWER), FakeEmbedder(), Thresholds())
    assert (rep.status, rep.qualified, rep.distilled, rep.added) == ("ran", 1, 1, 1)
    (proc,) = store.procedures()
    assert proc.provenance == {"source": "skillsynth", "from_sessions": ["inv0", "inv1", "inv2"]}
    assert proc.tools_required == ("search_file", "read_file")
    assert [s["tool"] for s in proc.tool_sequence] == ["search_file", "read_file", "reply"]
    assert (proc.success_count, proc.attempt_count) == (3, 3)
    assert proc.vector() is not None
    assert store.get_meta("embedder_id") == "fake-invoice-mail:3"  # recorded with the vector


def test_a_procedure_distilled_from_the_values_is_marked_and_exported_only_when_asked(
        store, tmp_path, capsys):
    from skillsynth.errors import ExportRefused
    from skillsynth.pipeline.export import export_skill
    from skillsynth.store import MemoryStore

    _sessions(store, 3)
    synthesize_skills(store, FakeLLM(ANSWER), FakeEmbedder(), Thresholds(), args="values")
    (proc,) = store.procedures()
    assert proc.provenance["user_data"] is True
    with MemoryStore.init(tmp_path / "trace.db") as traced:  # the rule's bound is marked too
        _sessions(traced, 3)
        synthesize_skills(traced, FakeLLM(), FakeEmbedder(), Thresholds(), args="values",
                          distiller="trace")
        (bound,) = traced.procedures()
        assert bound.provenance["user_data"] is True and '"q": ' in bound.markdown_body
    with pytest.raises(ExportRefused, match="distill_args: values"):
        export_skill(store, proc.id, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written
    assert (export_skill(store, proc.id, tmp_path / "out", allow_user_data=True)
            / "SKILL.md").is_file()
    # the command line says why and writes nothing unless asked
    from skillsynth.cli import main

    cli = [main(["procedures", "export", str(store.path), proc.id, "--out", str(tmp_path / d)]
                + extra) for d, extra in (("no", []), ("yes", ["--allow-user-data"]))]
    assert cli == [1, 0] and not (tmp_path / "no").exists()
    assert "may hold user data" in capsys.readouterr().err
    # sources only: no mark, exported as any procedure
    with MemoryStore.init(tmp_path / "provenance.db") as other:
        _sessions(other, 3)
        synthesize_skills(other, FakeLLM(ANSWER), FakeEmbedder(), Thresholds(),
                          args="provenance")
        (plain,) = other.procedures()
        assert "user_data" not in plain.provenance
        assert export_skill(other, plain.id, tmp_path / "plain").is_dir()


def test_two_sessions_do_not(store):
    _sessions(store, 2)
    llm = FakeLLM(ANSWER)
    rep = synthesize_skills(store, llm, FakeEmbedder(), Thresholds())
    assert rep.qualified == 0 and llm.calls == 0 and store.procedures() == []


def test_low_success_rate_does_not(store):
    _sessions(store, 3)
    for i in range(3):
        for _ in range(3):
            store.log_tool_call(f"inv{i}", "search_file", None, None, False, error="x")
    rep = synthesize_skills(store, FakeLLM(ANSWER), FakeEmbedder(), Thresholds())
    assert rep.clusters == 1 and rep.qualified == 0 and store.procedures() == []


def test_floor_memory_disabled_does_nothing(store, db_path):
    _sessions(store, 3)
    before = _dump(db_path)
    llm = FakeLLM(ANSWER)
    rep = synthesize_skills(store, llm, FakeEmbedder(fail=True), Thresholds(),
                            memory_disabled=True)
    assert rep.status == "memory-disabled" and llm.calls == 0 and _dump(db_path) == before


def test_floor_synthesis_disabled_is_logged_and_recall_still_works(store, caplog):
    _sessions(store, 3)
    synthesize_skills(store, FakeLLM(ANSWER), FakeEmbedder(), Thresholds())
    with caplog.at_level(logging.WARNING, "skillsynth.pipeline.synthesize"):
        rep = synthesize_skills(store, FakeLLM(ANSWER), FakeEmbedder(),
                                Thresholds(enabled=False))
    assert rep.status == "synthesis-disabled" and "disabled" in caplog.text
    from skillsynth.pipeline.recall import recall

    assert recall(store, FakeEmbedder(), "find invoice 9", Thresholds())


def test_floor_llm_down_skips_the_pass_and_leaves_the_store_unchanged(store, db_path, caplog,
                                                                      tmp_path):
    _sessions(store, 3)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = ChatClient(Endpoint("local", f"http://127.0.0.1:{port}/v1", "m", max_retries=1,
                              retry_backoff_s=0.01, connect_timeout_s=1))
    before = _dump(db_path)
    with caplog.at_level(logging.ERROR, "skillsynth.pipeline.synthesize"):
        rep = synthesize_skills(store, llm, FakeEmbedder(), Thresholds())
    assert rep.status == "llm-unavailable" and "unchanged" in caplog.text
    assert _dump(db_path) == before
    # no mark and no watermark: the sessions will be read again next pass
    assert store.synthesis_marks() == {} and store.synthesis_watermark() is None


def _invoice_and_mail(store) -> str:
    """Three invoice and three mail sessions; returns a good answer for the mail cluster."""
    _sessions(store, 3)
    _sessions(store, 3, goal="sort my mail {i}", tools=("list_inbox", "draft_reply", "send"),
              prefix="mail")
    return ANSWER.replace("find-invoice", "sort-mail").replace(
        "search_file", "list_inbox").replace("read_file", "draft_reply").replace(
        "find an invoice", "sort mail")


def test_floor_malformed_output_skips_that_cluster_only(store, caplog):
    good_mail = _invoice_and_mail(store)
    bad = ANSWER.replace("## Edge cases", "## Notes")
    with caplog.at_level(logging.WARNING, "skillsynth.pipeline.synthesize"):
        rep = synthesize_skills(store, FakeLLM(bad, good_mail), FakeEmbedder(), Thresholds())
    assert rep.qualified == 2 and rep.added == 1 and len(rep.skipped) == 1
    assert "Edge cases" in rep.skipped[0][1] and "malformed" in caplog.text
    assert [p.name for p in store.procedures()] == ["sort-mail"]


def test_floor_embedder_failure_raises(store):
    _sessions(store, 3)
    with pytest.raises(EmbedderError):
        synthesize_skills(store, FakeLLM(ANSWER), FakeEmbedder(fail=True), Thresholds())


def test_reconcile_add_noop_update(store):
    _sessions(store, 5)
    seqs = extract_sequences(store, Thresholds()).qualified
    emb, cfg = FakeEmbedder(), Thresholds()
    clusters = cluster_by_goal(seqs[:3], emb, cfg)
    skill = distill_cluster(clusters[0], FakeLLM(ANSWER), cfg)
    first = reconcile_and_store(skill, clusters[0], store, emb, cfg)
    assert first.action == "ADD"
    again = reconcile_and_store(skill, clusters[0], store, emb, cfg)
    assert again.action == "NOOP" and again.procedure_id == first.procedure_id
    stronger = cluster_by_goal(seqs, emb, cfg)[0]
    upd = reconcile_and_store(skill, stronger, store, emb, cfg)
    assert upd.action == "UPDATE" and upd.superseded_id == first.procedure_id
    old = store.get_procedure(first.procedure_id)
    assert old.superseded_by == upd.procedure_id  # kept, never deleted
    assert [p.id for p in store.procedures(active_only=True)] == [upd.procedure_id]


def test_distill_rejects_tools_no_run_used_and_accepts_skip(store):
    _sessions(store, 3)
    cfg = Thresholds()
    (c,) = cluster_by_goal(extract_sequences(store, cfg).qualified, FakeEmbedder(), cfg)
    with pytest.raises(MalformedSkill, match="write_file"):
        distill_cluster(c, FakeLLM(ANSWER.replace("  - read_file", "  - write_file")), cfg)
    assert distill_cluster(c, FakeLLM("SKIP"), cfg) is None
    llm = FakeLLM(json.dumps({"skip": False, "name": "find-invoice",
                              "when_to_use": "The user wants an invoice",
                              "tools_required": ["search_file"], "steps": ["search it"],
                              "edge_cases": ["none found: ask"]}))
    s = distill_cluster(c, llm, cfg, mode="json")
    assert s.tools_required == ("search_file",)
    assert llm.seen[0][1]["json_schema"]["properties"]["tools_required"]["items"]["enum"] == \
        ["read_file", "reply", "search_file"]
    assert llm.seen[0][1]["prompt_version"] == f"{PROMPT_VERSION}-json"
    skip = FakeLLM(json.dumps({"skip": True, "name": "x-y", "when_to_use": "w" * 10,
                               "tools_required": ["search_file"], "steps": ["abc"],
                               "edge_cases": ["abc"]}))
    assert distill_cluster(c, skip, cfg, mode="json") is None
    emoji = FakeLLM(json.dumps({"skip": False, "name": "find-invoice",  # escaped as JSON does
                                "when_to_use": "The user wants an invoice \u2708\ufe0f \U0001F680",
                                "tools_required": ["search_file"], "steps": ["search it 🧾"],
                                "edge_cases": ["none found: ask"]}))
    kept = distill_cluster(c, emoji, cfg, mode="json")  # not rejected as malformed
    assert kept.description.endswith("✈️ 🚀") and "🧾" in kept.body
    msgs = build_messages(c)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert Skill.parse(msgs[2]["content"]).name == "book-restaurant-table"  # the example parses
    user = msgs[-1]["content"]
    assert '"q"' not in user  # arguments never reach the prompt


def test_an_ungrounded_skill_is_rejected_and_counted_apart(store, caplog):
    good_mail = _invoice_and_mail(store)
    invented = ANSWER.replace("  - read_file", "  - get_invoice_details")
    with caplog.at_level(logging.WARNING, "skillsynth.pipeline.synthesize"):
        rep = synthesize_skills(store, FakeLLM(invented, good_mail), FakeEmbedder(),
                                Thresholds())
    assert (rep.qualified, rep.distilled, rep.ungrounded, rep.added) == (2, 1, 1, 1)
    assert rep.skipped[0][1].startswith("ungrounded:") and "get_invoice_details" in caplog.text
    assert [p.name for p in store.procedures()] == ["sort-mail"]


def test_a_repeated_tool_is_dropped_by_rule_and_recorded(store):
    from skillsynth.pipeline.distill import distill

    _sessions(store, 3)
    cfg = Thresholds()
    (c,) = cluster_by_goal(extract_sequences(store, cfg).qualified, FakeEmbedder(), cfg)
    twice = ANSWER.replace("  - read_file", "  - read_file\n  - search_file\n  - read_file")
    d = distill(c, FakeLLM(twice), cfg)
    assert d.skill.tools_required == ("search_file", "read_file")
    assert d.repairs == ("tools_required: dropped repeated search_file",
                         "tools_required: dropped repeated read_file")
    with pytest.raises(MalformedSkill, match="repeats"):  # parse itself still repairs nothing
        Skill.parse(twice.split("```markdown\n")[1].split("```")[0])
    rep = synthesize_skills(store, FakeLLM(twice), FakeEmbedder(), cfg)
    assert (rep.added, rep.repaired) == (1, 1)


def test_a_name_taken_by_another_active_procedure_is_renamed_and_counted(store):
    _invoice_and_mail(store)
    same_name = ANSWER.replace("search_file", "list_inbox").replace(
        "read_file", "draft_reply").replace("find an invoice", "sort mail")
    rep = synthesize_skills(store, FakeLLM(ANSWER, same_name), FakeEmbedder(), Thresholds())
    assert (rep.added, rep.duplicate_names) == (2, 1)
    assert sorted(p.name for p in store.procedures()) == ["find-invoice", "find-invoice-2"]
    from skillsynth.pipeline.reconcile import unique_name

    assert unique_name("a" * 64, {"a" * 64}) == "a" * 62 + "-2"
    assert unique_name("x", {"x", "x-2"}) == "x-3"


def test_a_cached_malformed_answer_counts_as_a_cache_hit_on_every_rerun(store, db_path,
                                                                       tmp_path):
    # A real ChatClient over a loopback server and a real call cache: the malformed answer
    # costs one call cold and one cache hit warm; it is never counted as neither.
    from fakes import FakeServer

    from skillsynth.models.cache import CallCache

    _sessions(store, 3)
    bad = ANSWER.replace("## Edge cases", "## Notes")
    body = {"choices": [{"message": {"role": "assistant", "content": bad},
                         "finish_reason": "stop"}], "usage": {}}
    routes = {("GET", "/api/v1/models"): (200, {"data": [{"id": "m"}]}),
              ("POST", "/api/v1/chat/completions"): (200, body)}
    with FakeServer(routes) as srv, CallCache(tmp_path / "cache.db") as cache:
        for expected in ((1, 0), (0, 1), (0, 1)):
            with ChatClient(Endpoint("local", srv.base_url, "m"), cache=cache) as llm:
                rep = synthesize_skills(store, llm, FakeEmbedder(), Thresholds(), force=True)
            assert (rep.llm_calls, rep.cache_hits) == expected
            assert rep.added == 0 and "malformed" in rep.skipped[0][1]


class FakeLLMWithAWriter(FakeLLM):
    """FAKE chat client: while it 'thinks', another process's connection writes to the db."""

    def __init__(self, db_path, *answers):
        super().__init__(*answers)
        self.db_path, self.wrote = db_path, 0

    def chat(self, messages, **kw):
        import sqlite3

        conn = sqlite3.connect(self.db_path, timeout=0)  # no waiting: a held lock fails now
        try:
            with conn:
                conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                             (f"gaia-wrote-{self.calls}", "during the model call"))
            self.wrote += 1
        finally:
            conn.close()
        return super().chat(messages, **kw)


def test_no_write_lock_is_held_while_the_model_answers(store, db_path):
    # GAIA, an import or a second pass must be able to write while a pass waits on the model
    good_mail = _invoice_and_mail(store)
    llm = FakeLLMWithAWriter(db_path, ANSWER, good_mail)
    rep = synthesize_skills(store, llm, FakeEmbedder(), Thresholds())
    assert llm.wrote == llm.calls == 2  # both writes went through, none hit "locked"
    assert (rep.status, rep.added) == ("ran", 2)
    assert {p.name for p in store.procedures()} == {"find-invoice", "sort-mail"}
    assert store.get_meta("gaia-wrote-0") == "during the model call"
