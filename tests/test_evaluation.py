"""The 4th-attempt protocol, the replay rule and the KPIs (FAKE models, real stores)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from corpus_kinds import build_corpus, tiny_corpus
from fakes import (
    FakeAgentAnswer,
    FakeChatModel,
    FakeDistiller,
    FakeFamilyEmbedder,
    FakeToolAgent,
)

from skillsynth.config import Thresholds
from skillsynth.corpora import (
    LabelStore,
    SessionLabel,
    corpus_digest,
    generate_corpus,
    labels_path_for,
)
from skillsynth.errors import SkillsynthError, WorldError
from skillsynth.evaluation import (
    EvalConfig,
    bootstrap_interval,
    build_history,
    estimate_steps,
    load_split,
    point_kpis,
    run_point,
    split_attempts,
)
from skillsynth.evaluation.live.agent import run_agent
from skillsynth.evaluation.live.worlds import CallOutcome, ReplayWorld, judge_success
from skillsynth.evaluation.point.metrics import ProbeResult
from skillsynth.evaluation.point.record import RunRecord
from skillsynth.evaluation.point.split import family_of
from skillsynth.evaluation.strategies.keyword import KeywordIndex
from skillsynth.models.cache import file_sha256
from skillsynth.pipeline.skill import Skill
from skillsynth.store import Procedure, ToolCall, installed_gaia_version


def _lab(sid, task, attempt):
    return SessionLabel(sid, "test", task, attempt, started_at=f"2026-01-0{attempt}T00:00:00")


def test_split_puts_k_attempts_in_history_and_the_next_one_out():
    labels = [_lab(f"{t}{a}", t, a) for t in "ab" for a in (1, 2, 3, 4, 5)]
    labels += [_lab("c1", "c", 1), SessionLabel("u", "gaia-db", None, None)]
    s = split_attempts(labels, k=3)
    assert [p.session_id for p in s.probes] == ["a4", "b4"]
    assert s.history == {"a1", "a2", "a3", "b1", "b2", "b3", "c1", "u"}
    assert s.left_out == {"a5", "b5"}  # after the probe: never history
    assert not s.history & {p.session_id for p in s.probes}
    with pytest.raises(SkillsynthError, match="k must be"):
        split_attempts(labels, k=0)


def test_history_store_holds_no_probe_row(tmp_path):
    gen = generate_corpus(tmp_path / "c.db", families=3, attempts=5, seed=2)
    split = load_split(gen.db_path, k=3)
    assert len(split.probes) == 3
    n = build_history(gen.db_path, split, tmp_path / "h.db")
    conn = sqlite3.connect(tmp_path / "h.db")
    seen = {r[0] for r in conn.execute("SELECT session_id FROM tool_history UNION "
                                       "SELECT session_id FROM conversations")}
    conn.close()
    assert len(seen) == n == 9 and seen <= split.history
    assert not seen & ({p.session_id for p in split.probes} | split.left_out)
    with LabelStore(gen.labels_path) as ls:  # the probes are the 4th attempts
        assert {ls.get(p.session_id).attempt for p in split.probes} == {4}
    with pytest.raises(SkillsynthError, match="exists"):
        build_history(gen.db_path, split, tmp_path / "h.db")


# ---------------------------------------------------------------- every corpus type
@pytest.mark.parametrize("kind", ["synthetic", "taubench", "tau2-airline", "tau2-retail",
                                  "jsonl", "gaia-db"])
def test_no_probe_reaches_the_history_for_any_corpus_type(tmp_path, kind):
    db = build_corpus(kind, tmp_path)
    k = 1 if kind.startswith("tau2") else 3  # the tau2 files hold 1-2 trials per task
    split = load_split(db, k=k)
    with LabelStore(labels_path_for(db)) as ls:
        labels = {x.session_id: x for x in ls.all()}
    probes = {p.session_id for p in split.probes}
    assert not probes & split.history and not split.left_out & split.history
    assert probes | split.history | split.left_out == set(labels)
    for p in split.probes:  # the probe is the task's (k+1)-th attempt in time
        earlier = [x for x in labels.values() if x.task_id == p.task_id
                   and x.session_id in split.history]
        assert len(earlier) == k
        assert all((x.started_at or "") <= (p.started_at or "") for x in earlier)
    build_history(db, split, tmp_path / "h.db")
    conn = sqlite3.connect(tmp_path / "h.db")
    seen = {r[0] for r in conn.execute("SELECT session_id FROM tool_history UNION "
                                       "SELECT session_id FROM conversations")}
    conn.close()
    assert seen and seen <= split.history and not seen & (probes | split.left_out)
    if kind == "gaia-db":
        assert not probes  # no ground truth: nothing to evaluate against
    else:
        assert probes


# ---------------------------------------------------------------- the replay rule
def _call(tool, ok=True, args="{}"):
    return ToolCall("s", tool, args, "r", ok, "2026-01-01T00:00:00.000000+00:00")


def test_replay_rule_removes_failures_and_repeats_of_named_tools_and_charges_unused_ones():
    calls = [_call("search", ok=False), _call("search"), _call("search"), _call("explore"),
             _call("explore", ok=False), _call("read", args='{"a": 1}')]
    none = estimate_steps(calls, None)
    assert (none.baseline, none.estimate, none.saved, none.extra) == (6, 6, 0, 0)
    e = estimate_steps(calls, ["search", "read", "write"])
    # saved: the failed search and the repeated identical search; the explore calls are
    # kept (not named); extra: write was never used successfully
    assert (e.saved, e.extra, e.estimate) == (2, 1, 5)
    assert e.reduction == pytest.approx(1 / 6) and e.rule == "replay-v1"
    assert estimate_steps([], ["x"]).reduction is None


# ---------------------------------------------------------------- bootstrap and KPIs
def _mean(xs):
    return sum(xs) / len(xs)


def test_bootstrap_resamples_whole_clusters_and_is_seeded():
    stat = _mean
    units = [1.0, 1.0, 0.0, 0.0]
    lo, hi = bootstrap_interval(units, stat, clusters=["a", "a", "b", "b"], seed=3)
    assert bootstrap_interval(units, stat, clusters=["a", "a", "b", "b"], seed=3) == (lo, hi)
    # two clusters: a resample's mean can only be 0, 0.5 or 1
    assert lo == 0.0 and hi == 1.0
    assert bootstrap_interval([0.5] * 5, stat) == (0.5, 0.5)
    assert bootstrap_interval([], stat) == (None, None)


def test_point_kpis_on_a_hand_built_corpus_are_exact(tmp_path):
    db = tiny_corpus(tmp_path)
    cfg = EvalConfig(str(db), thresholds=Thresholds(similarity_tau=0.8), n_boot=500)
    llm = FakeDistiller()
    res = run_point(cfg, llm, FakeFamilyEmbedder(), tmp_path / "pt")
    k = {n: v for n, v in res.kpis.items()}
    want = {"synthesis_fired_rate": 2 / 3, "recall_hit_rate": 2 / 3, "recall_precision": 1.0,
            "step_reduction": (0.25 + 0 + 0) / 3, "steps_saved": 1 / 3,
            "share_made_worse": 0.0, "validity_gaia691": 1.0, "validity_agentskills": 1.0,
            "provenance_integrity": 1.0, "floors_behaved": 1.0, "grounded_tools_rate": 1.0}
    for name, value in want.items():
        assert k[name].value == pytest.approx(value), name
        assert k[name].lo <= k[name].value <= k[name].hi, name
    assert (k["synthesis_fired_rate"].n, k["recall_precision"].n, k["validity_gaia691"].n) \
        == (3, 2, 2)
    assert k["step_reduction"].estimate and not k["recall_hit_rate"].estimate
    assert k["llm_calls"].value == 2 == llm.calls
    assert (k["grounded_tools_rate"].n, k["duplicate_name_count"].value) == (2, 0)
    assert res.summary["pass"]["ungrounded"] == 0
    assert res.summary["floors"] == {
        "memory-disabled": True, "synthesis-disabled": True, "llm-unavailable": True,
        "disabled-not-recalled": True, "recall-threshold-and-state": True,
        "malformed-skipped": None}
    rows = [json.loads(x) for x in (tmp_path / "pt" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["arm"] for r in rows} == {"no-memory", "memory"}
    by = {(r["family"], r["arm"]): r for r in rows}
    assert (by["invoice", "memory"]["steps"], by["invoice", "no-memory"]["steps"]) == (3, 4)
    assert by["jira", "memory"]["recalled_ids"] == []
    # the recall diagnostic: own-family procedure near 1, none for jira, others near 0
    assert by["invoice", "memory"]["best_right_score"] > 0.95
    assert by["jira", "memory"]["best_right_score"] is None
    assert by["jira", "memory"]["best_wrong_score"] < 0.1
    summary = json.loads((tmp_path / "pt" / "summary.json").read_text())
    assert summary["corpus"]["sha256"] == corpus_digest(db)  # content, not file bytes
    assert summary["corpus"]["file_sha256"] == file_sha256(db)
    assert summary["config"]["thresholds"]["similarity_tau"] == 0.8
    rec = RunRecord.from_dict(summary["record"])  # how the point was produced
    assert rec.kind == "point" and rec.inputs["corpus"]["sha256"] == corpus_digest(db)
    assert rec.started_utc.endswith("Z") and rec.started_utc <= rec.finished_utc
    assert rec.config["thresholds"]["similarity_tau"] == 0.8 and rec.prompts["distill"]
    assert rec.models["embed"]["model"] == "fake-family:10" and rec.models["user"] is None
    assert rec.packages["numpy"] == np.__version__
    assert rec.packages["amd-gaia"] == installed_gaia_version()  # the GAIA checked against
    # every exported skill was re-read by both profiles' parsers
    assert len(list((tmp_path / "pt" / "skills").glob("*/*/*/SKILL.md"))) == 4
    with pytest.raises(SkillsynthError, match="this point is done"):
        run_point(cfg, llm, FakeFamilyEmbedder(), tmp_path / "pt")


def test_peer_strategies_run_through_the_same_protocol(tmp_path):
    db = tiny_corpus(tmp_path)
    got = {}
    for name in ("gaia-greedy", "cortexprism", "pheron", "none"):
        cfg = EvalConfig(str(db), strategy=name, thresholds=Thresholds(similarity_tau=0.8),
                         n_boot=200)
        llm = FakeDistiller()
        res = run_point(cfg, llm, FakeFamilyEmbedder(), tmp_path / name)
        got[name] = (res.kpis["recall_hit_rate"].value, llm.calls)
    # cortexprism distils each history session with >= 2 calls on its own (jira included)
    # and merges same-family extractions; none never calls the model
    assert got["cortexprism"] == (1.0, 9)
    assert got["gaia-greedy"][1] == got["pheron"][1] == 2
    assert got["none"] == (0.0, 0)
    with pytest.raises(SkillsynthError, match="unknown strategy"):
        EvalConfig(str(db), strategy="nope")


def test_keyword_recall_ranks_by_overlap_without_a_threshold():
    procs = [Procedure("find-invoice", "The user wants to find an invoice", "x", id="a"),
             Procedure("reply-mail", "The user wants to answer a mail", "x", id="b",
                       success_count=5),
             Procedure("old", "find invoice", "x", id="c", enabled=False)]
    idx = KeywordIndex(procs)
    hits = idx.search("Please find the Acme invoice", top_k=3)
    assert [h.procedure.id for h in hits] == ["a"] and hits[0].score == pytest.approx(2 / 3)
    assert idx.search("the of and", top_k=3) == []


# ---------------------------------------------------------------- the live agent
def _replay(rec, own=(), label=None, order=None):
    label = label or SessionLabel("p", "t", "x", 4)
    return ReplayWorld(rec, {"p": ("find it", "x", own, label)}, order)


def test_replay_world_answers_recorded_calls_and_refuses_others():
    rec = [ToolCall("o", "search", '{"q": "x", "n": 1}', "found", True, "t"),
           ToolCall("o", "read", '{"f": 1}', None, False, "t", error="denied")]
    own = [ToolCall("p", "search", '{"q": "x", "n": 1}', "own answer", True, "t")]
    ep = _replay(rec, own).start("p")
    assert ep.execute("search", {"n": 1, "q": "x"}) == CallOutcome("own answer", True)
    assert _replay(rec).start("p").execute("search", '{"n": 1, "q": "x"}').result == "found"
    denied = ep.execute("read", '{"f": 1}')  # a recorded failure is a failed call
    assert json.loads(denied.result) == {"error": "denied"} and not denied.ok
    miss = ep.execute("search", '{"q": "y"}')
    assert not miss.ok and "no recorded result for search" in miss.result and ep.unknown == 1
    spec = _replay(rec).tool_specs()[0]["function"]
    assert spec["name"] == "search" and set(spec["parameters"]["properties"]) == {"q", "n"}
    with pytest.raises(WorldError, match="no probe session 'q'"):
        _replay(rec).start("q")


def test_success_is_judged_against_ground_truth_actions_then_steps():
    actions = SessionLabel("s", "t", "x", 1, actions=({"name": "book", "arguments": {"id": 2}},))
    assert judge_success(actions, [("look", "{}"), ("book", '{"id": 2}')])
    assert not judge_success(actions, [("book", '{"id": 3}')])
    steps = SessionLabel("s", "t", "x", 1, essential_steps=("index", "index", "query"))
    assert judge_success(steps, [("index", "{}"), ("query", "{}"), ("index", "{}")])
    assert not judge_success(steps, [("index", "{}"), ("query", "{}")])
    assert judge_success(SessionLabel("s", "t", "x", 1), [("a", "{}")]) is None


def test_agent_loop_follows_the_injected_procedure_and_respects_the_step_limit():
    rec = [ToolCall("p", "search", '{"q": 1}', "hit", True, "t"),
           ToolCall("p", "read", '{"f": 1}', "text", True, "t"),
           ToolCall("o", "write", '{"w": 1}', "ok", True, "t")]
    label = SessionLabel("p", "t", "x", 4, essential_steps=("search", "read"))
    world = _replay(rec, label=label, order=["write", "search", "read"])
    llm = FakeToolAgent(["search", "read"], {"search": '{"q": 1}', "read": '{"f": 1}'})
    skill = Skill(name="find-it", description="The user wants to find it",
                  body="1. Call search\n2. Call read", tools_required=("read", "search"))
    cfg = Thresholds()
    specs = world.tool_specs()
    base = run_agent(llm, world.start("p"), tool_specs=specs, config=cfg)
    assert [t["function"]["name"] for t in llm.requests[-1][1]] == ["write", "search", "read"]
    mem = run_agent(llm, world.start("p"), tool_specs=specs, recalled=[skill], config=cfg)
    assert (base.steps, base.failed_calls, base.success, base.termination) == (
        3, 1, True, "agent-stop")
    assert (mem.steps, mem.failed_calls, mem.success) == (2, 0, True)
    loaded = [t["function"]["name"] for t in llm.requests[-1][1]]
    assert loaded == ["read", "search", "write"]  # the skill's tools first (GAIA's order)
    assert "RECALLED PROCEDURES" in llm.requests[-1][0][0]["content"]
    assert [t.kind for t in mem.transcript] == ["call", "call", "answer"]
    cut = run_agent(llm, world.start("p"), tool_specs=specs, config=cfg, step_limit=1)
    assert (cut.steps, cut.finished, cut.termination, cut.success) == (
        1, False, "step-limit", False)


def test_tool_calls_written_as_json_text_are_taken_when_they_name_an_offered_tool():
    from skillsynth.models.text_calls import tool_calls_in_content

    fenced = '```json\n{"name": "search", "arguments": {"q": 1}}\n```'
    (c,) = tool_calls_in_content(fenced, ["search", "read"])
    assert c["function"] == {"name": "search", "arguments": '{"q": 1}'}
    tagged = ('<tool_call>[{"name": "read", "arguments": "{\\"f\\": 1}"}, '
              '{"name": "drop_db", "arguments": {}}]</tool_call>')
    assert [x["function"]["name"] for x in tool_calls_in_content(tagged, ["read"])] == ["read"]
    assert tool_calls_in_content('I would call {"name": "search"} but no.', ["read"]) == ()
    # any name: only call-shaped objects (name beside arguments) count
    guess = '{"name": "find_user_by_zip", "arguments": {"zip": "1"}}'
    assert tool_calls_in_content(guess, ["read"]) == ()
    assert [c["function"]["name"] for c in tool_calls_in_content(guess, None)] == [
        "find_user_by_zip"]
    assert tool_calls_in_content('{"name": "Ann", "age": 3}', None) == ()
    assert tool_calls_in_content("Done. {not json", ["read"]) == ()
    assert tool_calls_in_content(None, ["read"]) == ()


class FakeTextCaller(FakeChatModel):
    """FAKE chat client that writes each call as JSON text (as Qwen2.5-Coder does here)."""

    def __init__(self, plan):
        self.plan, self.calls = plan, 0

    def chat(self, messages, **kw):
        self.calls += 1
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= len(self.plan):
            return FakeAgentAnswer("All done.", ())
        name, args = self.plan[done]
        return FakeAgentAnswer(json.dumps({"name": name, "arguments": args}), ())


def test_the_agent_executes_calls_written_in_the_answer_text():
    rec = [ToolCall("p", "search", '{"q": 1}', "hit", True, "t"),
           ToolCall("p", "read", '{"f": 1}', "text", True, "t")]
    label = SessionLabel("p", "t", "x", 4, essential_steps=("search", "read"))
    llm = FakeTextCaller([("search", {"q": 1}), ("read", {"f": 1})])
    world = _replay(rec, label=label)
    run = run_agent(llm, world.start("p"), tool_specs=world.tool_specs(), config=Thresholds())
    assert (run.steps, run.content_calls, run.failed_calls, run.success) == (2, 2, 0, True)
    assert run.finished


def test_live_kpis_pair_the_arms_per_probe():
    def row(probe, arm, steps, ok):
        return ProbeResult("s", arm, probe, probe, "g", (), (), 0, False, 4, steps, "live", ok)
    rows = [row("a", "no-memory", 4, True), row("a", "memory", 2, True),
            row("b", "no-memory", 3, True), row("b", "memory", 5, False),
            row("c", "no-memory", 5, False), row("c", "memory", 3, True)]
    k = point_kpis(rows, [], {}, n_boot=300)
    assert k["live_step_reduction"].value == pytest.approx(0.5)  # only a succeeded in both
    assert k["live_step_reduction"].n == 1
    assert k["live_success_change"].value == pytest.approx(0.0)  # b lost, c gained
    assert k["live_share_made_worse"].value == pytest.approx(1 / 3)
    assert k["live_share_success_lost"].value == pytest.approx(1 / 3)  # b
    assert k["step_reduction"].n == 0  # live rows never enter the replay KPIs


def test_more_calls_to_the_same_success_is_made_worse_but_no_success_lost():
    def row(probe, arm, steps, ok):
        return ProbeResult("s", arm, probe, probe, "g", (), (), 0, False, 4, steps, "live", ok)
    rows = [row("x", "no-memory", 3, True), row("x", "memory", 6, True),  # costlier
            row("y", "no-memory", 3, True), row("y", "memory", 8, False),  # lost
            row("z", "no-memory", 8, False), row("z", "memory", 8, False)]  # unchanged
    k = point_kpis(rows, [], {}, n_boot=300)
    assert k["live_share_made_worse"].value == pytest.approx(2 / 3)
    assert k["live_share_success_lost"].value == pytest.approx(1 / 3)
    assert k["live_share_success_lost"].n == 3


# ---------------------------------------------------------------- cross-task families
def test_tools_rule_groups_tasks_by_their_state_changing_ground_truth():
    lab = SessionLabel("s", "t", "7", 1, actions=(
        {"name": "get_user_details", "arguments": {}},
        {"name": "cancel_reservation", "arguments": {"id": "X"}}))
    assert family_of(lab, "tools") == "tools:cancel_reservation"
    assert family_of(lab, "task") == "7"
    reads = SessionLabel("s", "t", "8", 1, actions=({"name": "get_flight", "arguments": {}},))
    assert family_of(reads, "tools") == "tools:read-only"
    assert family_of(SessionLabel("s", "t", "9", 1), "tools") is None
    with pytest.raises(SkillsynthError, match="family rule"):
        family_of(lab, "kind")


@pytest.mark.parametrize("kind", ["synthetic", "taubench"])
def test_tools_families_span_tasks_and_still_never_leak(tmp_path, kind):
    if kind == "synthetic":
        db = generate_corpus(tmp_path / "s8.db", families=8, attempts=5, seed=1).db_path
    else:
        db = build_corpus(kind, tmp_path)
    split = load_split(db, k=3, family="tools")
    with LabelStore(labels_path_for(db)) as ls:
        labels = {x.session_id: x for x in ls.all()}
    probes = {p.session_id for p in split.probes}
    assert probes and not probes & split.history and not split.left_out & split.history
    for p in split.probes:  # the probe is its family's 4th session in time
        fam = split.family(p.session_id)
        members = sorted((x for x in labels.values() if split.family(x.session_id) == fam),
                         key=lambda x: (x.started_at or "", x.attempt or 0, x.session_id))
        assert members[3].session_id == p.session_id
        assert {x.session_id for x in members[:3]} <= split.history
    if kind == "synthetic":  # three tasks that all index documents are one family
        fam = {labels[s].task_id for s, f in split.families.items()
               if f == "tools:index_document"}
        assert fam == {"summarise-report", "compare-reports", "index-folder"}
        assert len(split.probes) == 6  # 8 tasks, 6 tool families


def test_every_later_attempt_can_be_a_probe_against_the_same_history():
    from skillsynth.errors import ConfigError
    from skillsynth.evaluation.point.context import families_without_probe
    from skillsynth.evaluation.point.ideal import ideal_attempts
    from skillsynth.evaluation.point.options import PointOptions
    from skillsynth.evaluation.point.split import split_attempts

    def lab(sid, task, when):
        return SessionLabel(sid, "t", task, 1, started_at=when, actions=(
            {"name": "return_items", "arguments": {"order": task}},))

    # one kind, five tasks once each (an ideal history under family tools), and a lone task
    labels = [lab(f"s{i}", f"t{i}", f"2026-01-0{i}") for i in range(1, 6)]
    labels.append(SessionLabel("x", "t", "x", 1, actions=({"name": "cancel", "arguments": {}},)))
    first = split_attempts(labels, 3, family="tools")
    assert [p.session_id for p in first.probes] == ["s4"] and first.left_out == {"s5"}
    every = split_attempts(labels, 3, family="tools", probes="every")
    assert [p.session_id for p in every.probes] == ["s4", "s5"] and not every.left_out
    assert every.history == first.history == {"s1", "s2", "s3", "x"}
    # the lone task's family has no probe under either rule, and is counted so once
    assert families_without_probe(first) == families_without_probe(every) == 1
    with pytest.raises(SkillsynthError, match="probe rule"):
        split_attempts(labels, 3, probes="all")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="under rolling") as err:
        PointOptions(protocol="rolling", probes="every")
    assert err.value.key == "probes"
    # an ideal history writes each task k+1 times, but once where a kind is the family
    assert (ideal_attempts(3, "task"), ideal_attempts(3, "tools")) == (4, 1)


class FakePlanWriter(FakeChatModel):
    """FAKE chat client that writes its whole plan as JSON text in one answer, then stops."""

    def __init__(self, plan):
        self.plan = plan

    def chat(self, messages, **kw):
        if any(m["role"] == "tool" for m in messages):
            return FakeAgentAnswer("Done.", ())
        return FakeAgentAnswer("\n".join(json.dumps({"name": n, "arguments": a})
                                         for n, a in self.plan), ())


def test_a_plan_written_in_one_answer_runs_its_first_call_and_counts_the_rest():
    rec = [ToolCall("p", "search", '{"q": 1}', "hit", True, "t"),
           ToolCall("p", "read", '{"f": 1}', "text", True, "t")]
    label = SessionLabel("p", "t", "x", 4, essential_steps=("search", "read"))
    world = _replay(rec, label=label)
    llm = FakePlanWriter([("search", {"q": 1}), ("read", {"f": 1}), ("read", {"f": 2})])
    run = run_agent(llm, world.start("p"), tool_specs=world.tool_specs(), config=Thresholds())
    assert (run.steps, run.content_calls, run.text_calls_not_run) == (1, 1, 2)
    assert [c for c, _ in run.calls] == ["search"] and run.finished


def test_tau2_instructions_are_told_about_the_customer_in_the_third_person():
    from skillsynth.evaluation.live.framing import solo_request, third_person

    text = ("You want to exchange the lamp. You also want to know your total. If the agent "
            "asks, tell you nothing. You name is Ava and your zip code is 94128. "
            "You're in a hurry and you have two orders.")
    assert third_person(text) == (
        "The customer wants to exchange the lamp. The customer also wants to know their "
        "total. If the agent asks, tell the customer nothing. The customer's name is Ava and their "
        "zip code is 94128. The customer is in a hurry and the customer has two orders.")
    first = solo_request("You want a refund.", "You are mei_kovacs_8020 in zipcode 28236.")
    assert first == ("A customer needs help. Their request: The customer wants a refund.\n\n"
                     "What the customer told you about themselves: The customer is "
                     "mei_kovacs_8020 in zipcode 28236.")
    assert solo_request("You want a refund.", None).endswith("wants a refund.")


@pytest.mark.live
def test_no_tau2_task_addresses_the_solo_agent_as_the_customer():
    import re

    from skillsynth.evaluation.live.worlds import get_world

    for name in ("tau2:retail", "tau2:airline"):
        world = get_world(name)
        for task in world.tasks():
            assert task.prompt.startswith("A customer needs help."), (name, task.task_id)
            facts = task.prompt.replace("What the customer told you about themselves:", "")
            assert not re.search(r"\b[Yy]ou(r|rs|'re)?\b", facts), (name, task.task_id)
