"""Verified procedures (issue 25): the decision rules, the rejected record, the pass and a
point (FAKE models and worlds, real SQLite)."""

from __future__ import annotations

import sqlite3

import pytest
from fakes import FakeChatModel, FakeScriptedAgent

from skillsynth.config import Thresholds
from skillsynth.errors import EvaluationError, LLMUnavailable
from skillsynth.evaluation.live.worlds import CallOutcome, Score, WorldTask
from skillsynth.evaluation.point.verify_world import WorldVerifier, point_verifier
from skillsynth.pipeline.cluster import Cluster
from skillsynth.pipeline.detect import SessionSequence
from skillsynth.pipeline.skill import Skill
from skillsynth.pipeline.verify import (
    Attempt,
    RejectedRecord,
    TraceVerifier,
    candidate_key,
    procedure_tools,
    realisable,
    threshold_verdict,
    verify_path_for,
)
from skillsynth.store import ToolCall


def _calls(sid, *spec):
    """Calls from names; a name ending in '!' failed."""
    return tuple(ToolCall(sid, n.rstrip("!"), "{}", None, not n.endswith("!"),
                          f"2026-01-01T00:00:{i:02d}") for i, n in enumerate(spec))


def _seq(sid, *spec, ok=True):
    calls = _calls(sid, *spec)
    return SessionSequence(sid, f"goal {sid}", calls, tuple(c for c in calls if c.success), ok)


def _cluster(*members):
    return Cluster(tuple(members), "test", "calls", 1.0, True)


def _skill(*tools, body=None):
    steps = body or "\n".join(f"{i}. Call {t}" for i, t in enumerate(tools, 1))
    return Skill(name="do-it", description="The user wants it done",
                 body=f"{steps}\n\n## Edge cases\n- retry", tools_required=tuple(dict.fromkeys(tools)))


# ------------------------------------------------------------------ the trace rule
def test_procedure_tools_follow_the_steps_not_the_frontmatter():
    sk = Skill(name="x", description="d", tools_required=("read", "search", "read_all"),
               body="1. Call search, then read_all\n2. Call read on it\n3. Call search again"
                    "\n\n## Edge cases\n- Call read if search fails")
    assert procedure_tools(sk) == ("search", "read_all", "read", "search")
    assert procedure_tools(_skill("b", body="1. Just think")) == ("b",)


def test_in_order_passes_out_of_order_and_a_failure_between_fail():
    assert realisable(("search", "read"), _calls("s", "search", "list", "read"))
    assert not realisable(("read", "search"), _calls("s", "search", "read"))
    assert not realisable(("search", "read"), _calls("s", "search", "read!", "read"))
    # a failed call before the first matched step is no failure *between* steps
    assert realisable(("search", "read"), _calls("s", "search!", "search", "read"))
    assert realisable(("a", "b"), _calls("s", "a", "x!", "a", "b"))  # the later run realises it


def test_trace_checks_held_out_members_and_says_when_none_is():
    rep = _seq("r", "search", "read")              # shortest: the distiller saw it
    good = _seq("g", "search", "list", "read")
    bad = _seq("b", "read", "search", "x")
    failed = _seq("f", "search", "read", "y", ok=False)  # not a successful member
    v = TraceVerifier()(_skill("search", "read"), _cluster(bad, rep, good, failed))
    assert v.verified and [t.session for t in v.tries] == ["b", "g"]
    assert [t.ok for t in v.tries] == [False, True] and "held-out member g" in v.reason
    assert v.model_calls == 0
    no = TraceVerifier()(_skill("read", "search"), _cluster(rep, good))
    assert not no.verified and "read > search not realised" in no.reason
    alone = TraceVerifier()(_skill("search", "read"), _cluster(rep, failed))
    assert alone.verified and "no held-out member" in alone.reason
    assert alone.tries[0].detail == {"held_out": False}


# ------------------------------------------------------------------ the world rule
def test_threshold_is_a_share_of_the_tries_made():
    tries = [Attempt("a", True), Attempt("b", False), Attempt("c", True)]
    assert threshold_verdict("world", tries, 0.5).verified
    assert threshold_verdict("world", tries, 2 / 3).verified
    assert not threshold_verdict("world", tries, 0.7).verified
    none = threshold_verdict("world", [], 0.1)
    assert not none.verified and "no member task" in none.reason


class _Episode:
    def __init__(self, task, wins):
        self.task, self.wins, self.calls = task, wins, []

    def execute(self, name, arguments):
        self.calls.append(name)
        return CallOutcome("ok", True)

    def score(self, turns, termination):
        done = [t.name for t in turns if t.kind == "call"]
        return Score(self.wins and done == ["find", "book"])


class _World:
    """FAKE world: task t1 is won by find then book, t2 never, t3 like t1."""

    name = "fake"

    def __init__(self):
        self.started = []

    def tool_specs(self):
        return [{"type": "function", "function": {"name": n, "parameters": {}}}
                for n in ("find", "book")]

    def policy(self):
        return ""

    def task(self, task_id):
        return WorldTask(task_id, "g", f"do {task_id}", task_id)

    def start(self, task_id):
        self.started.append(task_id)
        return _Episode(self.task(task_id), task_id != "t2")


def _world_verifier(world, llm, tasks, least):
    task_of = {"s1": "t1", "s2": "t2", "s2b": "t2", "s3": "t3"}
    return WorldVerifier(llm, world, task_of, Thresholds(), tasks, least, step_limit=4)


def test_world_tries_own_member_tasks_in_fresh_episodes_and_applies_the_threshold():
    members = _cluster(_seq("s1", "find", "book"), _seq("s2", "find", "book"),
                       _seq("s2b", "find", "book"), _seq("s3", "find", "book"),
                       _seq("s9", "find", "book"))  # s9: no task in the world
    agent = FakeScriptedAgent([("find", {})], guided=[("find", {}), ("book", {})])
    world = _World()
    v = _world_verifier(world, agent, 3, 0.6)(_skill("find", "book"), members)
    assert world.started == ["t1", "t2", "t3"]  # distinct tasks, one episode each
    assert [(t.session, t.task_id, t.ok) for t in v.tries] == [
        ("s1", "t1", True), ("s2", "t2", False), ("s3", "t3", True)]
    assert v.verified and v.model_calls == agent.calls > 0 and v.rule == "world"
    assert "RECALLED PROCEDURES" in agent.requests[0][0][0]["content"]
    assert not _world_verifier(_World(), agent, 3, 0.7)(_skill("find", "book"), members).verified
    one = _world_verifier(_World(), agent, 1, 1.0)(_skill("find", "book"), members)
    assert one.verified and len(one.tries) == 1
    assert one.tries[0].detail["steps"] == 2 and one.tries[0].detail["calls"]


def test_the_median_rule_also_needs_a_try_within_the_members_median_calls():
    task_of = {"s1": "t1", "s3": "t3"}
    agent = FakeScriptedAgent([("find", {})], guided=[("find", {}), ("book", {})])
    # the guided try wins in 2 calls; members made 2 and 3 calls (median 2.5): passes
    slow = _cluster(_seq("s1", "find", "book"), _seq("s3", "find", "find", "book"))
    v = WorldVerifier(agent, _World(), task_of, Thresholds(), 2, 1.0, step_limit=4,
                      calls="median")(_skill("find", "book"), slow)
    assert v.verified and v.tries[0].detail["median_member_calls"] == 2.5
    assert "within 2.5 calls" in v.reason
    # members that did it in one call each (median 1): the same winning tries fail the rule
    fast = _cluster(_seq("s1", "book"), _seq("s3", "book"))
    v = WorldVerifier(agent, _World(), task_of, Thresholds(), 2, 0.5, step_limit=4,
                      calls="median")(_skill("find", "book"), fast)
    assert not v.verified and [t.ok for t in v.tries] == [False, False]
    assert "0 of 2 tries succeeded within 1 calls" in v.reason


def test_a_model_outage_while_verifying_raises_rather_than_rejects():
    class Down(FakeChatModel):
        def chat(self, messages, **kw):
            raise LLMUnavailable("FAKE: down")

    with pytest.raises(LLMUnavailable, match="verifying do-it"):
        _world_verifier(_World(), Down(), 3, 0.5)(_skill("find", "book"),
                                                   _cluster(_seq("s1", "find", "book")))


def test_verify_world_needs_a_live_world_and_names_the_option():
    from skillsynth.evaluation.point.options import PointOptions

    opts = PointOptions(verify="world")
    with pytest.raises(EvaluationError, match="`world` option"):
        point_verifier(opts, FakeChatModel(), {}, Thresholds())
    assert point_verifier(PointOptions(), FakeChatModel(), {}, Thresholds()) is None
    assert isinstance(point_verifier(PointOptions(verify="trace"), FakeChatModel(), {},
                                     Thresholds()), TraceVerifier)


# ------------------------------------------------------------------ the rejected record
def test_the_rejected_record_keeps_reason_and_tries_once_per_member_set(tmp_path):
    db = tmp_path / "memory.db"
    c = _cluster(_seq("a", "x", "y"), _seq("b", "x", "y"))
    key = candidate_key("trace", c)
    assert key == candidate_key("trace", _cluster(*reversed(c.members)))  # order-free
    assert key != candidate_key("world", c)
    assert key != candidate_key("trace", _cluster(*c.members, _seq("n", "x", "y")))
    v = TraceVerifier()(_skill("y", "x"), c)
    with RejectedRecord(verify_path_for(db)) as rec:
        rec.put(key, _skill("y", "x"), c, v)
        rec.put(key, _skill("y", "x"), c, v)  # again: one row
    assert verify_path_for(db).name == "memory.db.verify.sqlite"
    with RejectedRecord(verify_path_for(db), create=False) as rec:
        (row,) = rec.rejected()
        assert rec.keys() == {key}
    assert row["reason"] == v.reason and row["members"] == ["a", "b"]
    assert [t["session"] for t in row["tries"]] == ["b"] and row["rule"] == "trace"
    assert row["skill"].startswith("---\nname:")
    with RejectedRecord(verify_path_for(db)) as rec:
        rec.forget(key)
        assert rec.rejected() == []
    with RejectedRecord(tmp_path / "none.sqlite", create=False) as rec:
        assert rec.keys() == set()
    assert not (tmp_path / "none.sqlite").exists()
    assert sqlite3.connect(verify_path_for(db)).execute(
        "SELECT COUNT(*) FROM rejected_candidates").fetchone() == (0,)


# ------------------------------------------------------------------ the pass
def _history(db, families, n=3, start=1):
    """Sessions ``<fam>-<i>`` for i in start..start+n-1, each calling the family's tools."""
    from skillsynth.store import MemoryStore

    with MemoryStore.open(db, create=True) as s:
        for fam, (goal, tools) in families.items():
            for i in range(start, start + n):
                ts = f"2026-01-{i:02d}T10:00:00.000000+00:00"
                with s.transaction():
                    for t in tools:
                        s.log_tool_call(f"{fam}-{i}", t, {}, "ok", True, timestamp=ts)
                    s.add_turn(f"{fam}-{i}", "user", goal.format(i=i), timestamp=ts)


#: FakeDistiller names a cluster's tools sorted: mail's runs call them in that order (the
#: trace rule verifies it), invoice's do not (rejected).
FAMILIES = {"invoice": ("find the invoice {i}", ("search_file", "read_file", "reply")),
            "mail": ("answer the mail {i}", ("draft_reply", "list_inbox", "read_file"))}


def _pass(db, llm, **kw):
    from fakes import FakeFamilyEmbedder

    from skillsynth.pipeline.synthesize import synthesize_skills
    from skillsynth.store import MemoryStore

    with MemoryStore.open(db) as s:
        r = synthesize_skills(s, llm, FakeFamilyEmbedder(), Thresholds(similarity_tau=0.8),
                              mode="json", verifier=TraceVerifier(), **kw)
        return r, [p.name for p in s.procedures()], s.synthesis_marks(
            [f"{f}-{i}" for f in FAMILIES for i in range(1, 6)])


def test_a_rejected_candidate_is_never_stored_and_is_recorded_once(tmp_path):
    from fakes import FakeDistiller

    db = tmp_path / "memory.db"
    _history(db, FAMILIES)
    llm = FakeDistiller()
    r, names, marks = _pass(db, llm)
    assert (r.verify, r.candidates, r.verified, r.rejected) == ("trace", 2, 1, 1)
    assert r.distilled == 2 and r.added == 1 and r.llm_calls == 2 and r.verify_calls == 0
    assert names == ["answer-the-mail-1"]  # invoice's candidate never reached GAIA's table
    assert any("verification (trace) rejected it" in why for _, why in r.skipped)
    assert set(marks) == {"mail-1", "mail-2", "mail-3"}  # rejected members stay unconsumed
    with RejectedRecord(verify_path_for(db), create=False) as rec:
        (row,) = rec.rejected()
    assert row["name"].startswith("find-the-invoice") and row["members"] == [
        "invoice-1", "invoice-2", "invoice-3"]
    assert "read_file > reply > search_file not realised" in row["reason"]
    assert len(row["tries"]) == 2  # the two held-out members
    # again, no new evidence: the cluster is skipped before distillation, nothing written
    r2, names2, _ = _pass(db, llm)
    assert (r2.rejected_before, r2.candidates, r2.llm_calls) == (1, 0, 0)
    assert names2 == names
    with RejectedRecord(verify_path_for(db), create=False) as rec:
        assert len(rec.rejected()) == 1
    # force tries it again (one row still)
    r3, _, _ = _pass(db, llm, force=True)
    assert (r3.rejected_before, r3.rejected) == (0, 1)
    with RejectedRecord(verify_path_for(db), create=False) as rec:
        assert len(rec.rejected()) == 1


def test_new_evidence_changes_the_member_set_and_earns_a_new_try(tmp_path):
    from fakes import FakeDistiller

    db = tmp_path / "memory.db"
    _history(db, {"invoice": FAMILIES["invoice"]})
    llm = FakeDistiller()
    assert _pass(db, llm)[0].rejected == 1
    _history(db, {"invoice": FAMILIES["invoice"]}, n=1, start=4)  # a fourth run arrives
    r, names, _ = _pass(db, llm)
    assert (r.rejected_before, r.candidates, r.rejected) == (0, 1, 1)
    with RejectedRecord(verify_path_for(db), create=False) as rec:
        assert [len(x["members"]) for x in rec.rejected()] == [3, 4]
    assert names == []


def test_without_a_verifier_the_pass_is_gaias_and_writes_no_side_file(tmp_path):
    from fakes import FakeDistiller, FakeFamilyEmbedder

    from skillsynth.pipeline.synthesize import synthesize_skills
    from skillsynth.store import MemoryStore

    db = tmp_path / "memory.db"
    _history(db, FAMILIES)
    with MemoryStore.open(db) as s:
        r = synthesize_skills(s, FakeDistiller(), FakeFamilyEmbedder(),
                              Thresholds(similarity_tau=0.8), mode="json")
    assert (r.verify, r.candidates, r.added) == ("none", 0, 2)
    assert not verify_path_for(db).exists()


# ------------------------------------------------------------------ a point
def test_a_point_with_verify_trace_activates_only_what_its_members_realise(tmp_path):
    import json

    from corpus_kinds import tiny_corpus
    from fakes import FakeDistiller, FakeFamilyEmbedder

    from skillsynth.evaluation import EvalConfig, run_point
    from skillsynth.store import MemoryStore

    db = tiny_corpus(tmp_path)
    th = Thresholds(similarity_tau=0.8)
    # steps in the runs' order: both candidates (invoice, mail) are realised and activated
    ok = run_point(EvalConfig(str(db), thresholds=th, n_boot=50, verify="trace"),
                   FakeDistiller(ordered=True), FakeFamilyEmbedder(), tmp_path / "ok")
    p = ok.summary["pass"]
    assert (p["verify"], p["candidates"], p["verified"], p["rejected"]) == ("trace", 2, 2, 0)
    k = ok.kpis
    assert (k["verified_share"].value, k["verified_share"].n) == (1.0, 2)
    assert k["verify_calls_per_verified"].value == 0.0
    assert k["verify_seconds_per_verified"].value >= 0.0
    assert k["recall_hit_rate"].value == pytest.approx(2 / 3)
    # steps sorted by name: neither family's runs call them in that order; nothing activated
    llm = FakeDistiller()
    no = run_point(EvalConfig(str(db), thresholds=th, n_boot=50, verify="trace"), llm,
                   FakeFamilyEmbedder(), tmp_path / "no")
    p = no.summary["pass"]
    assert (p["candidates"], p["verified"], p["rejected"], p["added"]) == (2, 0, 2, 0)
    assert no.kpis["verified_share"].value == 0.0
    assert no.kpis["verify_calls_per_verified"].value is None
    assert no.kpis["recall_hit_rate"].value == 0.0 and llm.calls == 2
    with MemoryStore.open(tmp_path / "no" / "history.db", read_only=True) as s:
        assert s.procedures() == []
    with RejectedRecord(tmp_path / "no" / "history.db.verify.sqlite", create=False) as rec:
        assert len(rec.rejected()) == 2
    summary = json.loads((tmp_path / "no" / "summary.json").read_text())
    assert summary["config"]["verify"] == "trace" and "verified_share" in summary["kpis"]
    # the default is GAIA's: no verification, no verify KPIs
    plain = run_point(EvalConfig(str(db), thresholds=th, n_boot=50), FakeDistiller(),
                      FakeFamilyEmbedder(), tmp_path / "plain")
    assert "verified_share" not in plain.kpis and plain.summary["pass"]["verify"] == "none"


def test_verify_options_are_checked():
    from skillsynth.errors import ConfigError
    from skillsynth.evaluation.point.options import PointOptions

    assert {"verify", "verify_tasks", "verify_min_success", "verify_calls"} <= \
        set(PointOptions.sweepable())
    for bad in ({"verify": "maybe"}, {"verify_tasks": 0}, {"verify_min_success": 0.0},
                {"verify_min_success": 1.5}, {"verify": "trace", "strategy": "none"},
                {"verify": "trace", "verify_calls": "median"}, {"verify_calls": "mean"},
                {"verify": "trace", "strategy": "oracle"}):
        with pytest.raises(ConfigError) as err:
            PointOptions(**bad)
        assert err.value.key in ("verify", "verify_tasks", "verify_min_success",
                                 "verify_calls")
    assert PointOptions(verify="trace", strategy="gaia-greedy").verify == "trace"
    assert PointOptions(verify="trace", strategy="inert").verify == "trace"
    from skillsynth.store import installed_gaia_version

    if installed_gaia_version() is not None:  # GAIA's own pass verifies at its mark
        for rule in ("trace", "world"):
            assert PointOptions(verify=rule, strategy="gaia-shipped").verify == rule


def test_a_rolling_point_verifies_every_pass_and_sums_the_counts(tmp_path):
    from corpus_kinds import tiny_corpus
    from fakes import FakeDistiller, FakeFamilyEmbedder

    from skillsynth.evaluation import EvalConfig, run_point

    db = tiny_corpus(tmp_path, attempts=5)
    cfg = EvalConfig(str(db), thresholds=Thresholds(similarity_tau=0.8), n_boot=50,
                     protocol="rolling", cadence=3, verify="trace")
    llm = FakeDistiller()
    res = run_point(cfg, llm, FakeFamilyEmbedder(), tmp_path / "roll")
    p = res.summary["pass"]
    assert p["verify"] == "trace" and p["passes"] > 1
    assert p["verified"] == 0 and p["rejected"] == p["candidates"] >= 2
    # a rejected cluster is distilled again only when its member set changed
    assert p["llm_calls"] == llm.calls == p["candidates"]
    assert res.kpis["verified_share"].n == p["candidates"]
