"""Control arms: oracle, oracle-args, mismatched and inert (FAKE models, real stores)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from corpus_kinds import GOLD_TASKS, gold_corpus, tiny_corpus
from fakes import FakeDistiller, FakeFamilyEmbedder, FakeProcedureFollower

from skillsynth.config import Thresholds
from skillsynth.corpora import SessionLabel
from skillsynth.errors import ArmSkipped, EvaluationError
from skillsynth.evaluation import EvalConfig, run_point
from skillsynth.evaluation.point.control_checks import (
    first_write_at,
    gold_share_matched,
    gold_writes_matched,
    inert_check,
)
from skillsynth.evaluation.point.controls import (
    GoldAction,
    GoldSource,
    action_matches,
    mismatched_session,
    one_line,
    oracle_skill,
)
from skillsynth.evaluation.point.metrics import ProbeResult
from skillsynth.evaluation.strategies import get_strategy
from skillsynth.pipeline.inject import HEADER, inject

RETAIL_GOLD = (
    {"name": "find_user_id_by_name_zip",
     "arguments": {"first_name": "Mei", "last_name": "Kovacs", "zip": "28236"}},
    {"name": "get_user_details", "arguments": {"user_id": "mei_kovacs_8020"}},
    {"name": "get_order_details", "arguments": {"order_id": "#W6390527"}},
    {"name": "get_order_details", "arguments": {"order_id": "#W7800651"}},
    {"name": "return_delivered_order_items",
     "arguments": {"order_id": "#W6390527", "item_ids": ["8538875209"],
                   "payment_method_id": "paypal_7644869"}},
)


def _label(sid, task, actions=None, attempt=4):
    return SessionLabel(sid, "test", task, attempt, actions=actions)


def _source(labels, **kw):
    return GoldSource({x.session_id: x for x in labels},
                      {x.session_id: str(x.task_id) for x in labels}, **kw)


def test_an_oracle_procedure_names_exactly_its_tasks_gold_tools_in_order(tmp_path):
    gold = _source([_label("p", "5", RETAIL_GOLD)], skills_dir=tmp_path,
                   descriptions={"get_user_details": "Get the details of a user."})
    proc = gold.recall("oracle", "p")
    steps = [line for line in proc.markdown_body.splitlines() if line[:1].isdigit()]
    assert [s.split("Call ", 1)[1].split(":", 1)[0] for s in steps] == [
        "find_user_id_by_name_zip", "get_user_details", "get_order_details",
        "get_order_details", "return_delivered_order_items"]
    assert proc.tools_required == ("find_user_id_by_name_zip", "get_user_details",
                                   "get_order_details", "return_delivered_order_items")
    # the world's own description where it has one, else a line made from the name
    assert steps[1] == "2. Call get_user_details: Get the details of a user."
    assert steps[0] == "1. Call find_user_id_by_name_zip: Find user id by name zip."
    # no task-specific value anywhere in what is recalled
    text = inject([_skill(proc)], Thresholds())
    for value in ("Mei", "Kovacs", "28236", "mei_kovacs", "W6390527", "8538875209", "paypal"):
        assert value not in text
    assert text.startswith(HEADER) and proc.name == "return-delivered-order-items"
    assert proc.when_to_use == "The user wants to return delivered order items"
    # rendered through the #691 path: the file is there and reads back to what is recalled
    (skill_md,) = tmp_path.glob("oracle/p/*/SKILL.md")
    assert "metadata:\n  gaia:\n    tools_required:" in skill_md.read_text()
    assert proc.id == "oracle:oracle:p" and proc.provenance["families"] == ["5"]


def _skill(proc):
    from skillsynth.pipeline.recall import skill_from_procedure

    return skill_from_procedure(proc)


def test_oracle_args_carries_the_gold_arguments_and_is_cut_like_any_recall():
    gold = _source([_label("p", "5", RETAIL_GOLD)])
    proc = gold.recall("oracle-args", "p")
    assert ('5. Call return_delivered_order_items with {"order_id": "#W6390527", "item_ids": '
            '["8538875209"], "payment_method_id": "paypal_7644869"}: Return delivered order '
            'items.') in proc.markdown_body
    assert 'with {"first_name": "Mei", "last_name": "Kovacs", "zip": "28236"}' \
        in proc.markdown_body
    # the same body cap as a synthesized procedure's
    block = inject([_skill(proc)], Thresholds(max_recall_body_chars=40))
    assert "… (truncated)" in block and "paypal" not in block


def test_a_probe_without_gold_actions_is_skipped_with_its_reason():
    gold = _source([_label("p", "5", None), _label("q", "6", ())])
    for probe in ("p", "q"):
        with pytest.raises(ArmSkipped, match="no gold actions"):
            gold.recall("oracle", probe)
    assert gold.skipped == {"p": "no gold actions", "q": "no gold actions"}
    with pytest.raises(ArmSkipped):
        oracle_skill((), {}, with_args=False)


def test_mismatched_picks_another_family_by_seed_and_never_the_probes_own():
    acts = {"a": [{"name": "get_x", "arguments": {}}, {"name": "cancel", "arguments": {}}],
            "b": [{"name": "book", "arguments": {}}],
            "c": [{"name": "get_y", "arguments": {}}, {"name": "refund", "arguments": {}}],
            "d": [{"name": "list_z", "arguments": {}}, {"name": "exchange", "arguments": {}}],
            # same state-changing tools as the probe's family: the same procedure, never picked
            "e": [{"name": "get_w", "arguments": {}}, {"name": "cancel", "arguments": {}}]}
    labels = [_label(f"{t}-{i}", t, tuple(a)) for t, a in acts.items() for i in (1, 2)]
    picks = {}
    for seed in range(12):
        gold = _source(labels, seed=seed)
        got = mismatched_session(gold, "a-2")
        assert got == mismatched_session(_source(labels, seed=seed), "a-2")  # deterministic
        picks[seed] = got
        proc = gold.recall("mismatched", "a-2")
        assert proc.provenance["families"] == [got.split("-")[0]]
        assert proc.tools_required == tuple(a["name"] for a in acts[got.split("-")[0]])
    assert set(picks.values()) == {"b-1", "c-1", "d-1"}  # the seed decides; never a, never e
    lone = _source([_label("a-1", "a", tuple(acts["a"])), _label("e-1", "e", tuple(acts["e"]))])
    with pytest.raises(ArmSkipped, match="no other family"):
        lone.recall("mismatched", "a-1")
    assert lone.skipped == {"a-1": "no other family with a different procedure"}


def test_action_matching_follows_tau2s_rule():
    g = GoldAction("cancel", {"order_id": "#1", "reason": "no longer needed"})
    assert action_matches(g, "cancel", {"order_id": "#1", "reason": "no longer needed"})
    assert action_matches(g, "cancel", '{"order_id": "#1"}')  # keys the call passed
    assert not action_matches(g, "cancel", {"order_id": "#2"})
    assert not action_matches(g, "cancel", {"order_id": "#1", "extra": 1})  # not in gold
    assert not action_matches(g, "refund", {"order_id": "#1"})
    assert not action_matches(g, "cancel", "not json")
    assert action_matches(GoldAction("t", {"a": 1}, compare_args=()), "t", {"a": 2})
    gold = [GoldAction("get_order", {"id": 1}), g]
    calls = [("get_order", '{"id": 2}'), ("get_order", '{"id": 1}'),
             ("cancel", '{"order_id": "#1"}')]
    assert gold_share_matched(gold, calls) == 1.0
    assert gold_share_matched(gold, calls[:2]) == 0.5
    assert first_write_at(gold, calls) == 3 and first_write_at(gold, calls[:2]) is None
    # the writes alone: the read matched counts for nothing here; no write, no figure
    assert gold_writes_matched(gold, calls[:2]) == 0.0 and gold_writes_matched(gold, calls) == 1.0
    assert gold_writes_matched(gold[:1], calls) is None
    assert one_line("Find a user.  It returns\nan id. More.") == "Find a user."


def _row(arm, probe="p", **kw):
    base = {"strategy": "inert", "arm": arm, "probe_session": probe, "family": "f",
            "goal": "g", "recalled_ids": (), "recalled_scores": (), "recalled_right": 0,
            "family_has_procedure": False, "steps_recorded": 3, "steps": 3,
            "steps_method": "recorded", "success": True}
    return ProbeResult(**{**base, **kw})


def _run(arm, turns, **kw):
    return {"probe_session": "p", "arm": arm, "repeat": 0, "termination": "agent-stop",
            "steps": 2, "prompt_tokens": 40, "transcript": turns, **kw}


def test_the_inertness_check_catches_a_planted_difference():
    calls = [{"kind": "call", "name": "search", "arguments": {"q": 1}, "result": "ok",
              "ok": True, "content": "", "timestamp": "t0"},
             {"kind": "call", "name": "read", "arguments": {"f": 1}, "result": "ok",
              "ok": True, "content": "", "timestamp": "t1"}]
    same = [_run("no-memory", calls), _run("memory", [dict(c, timestamp="t9") for c in calls])]
    rows = [_row("no-memory"), _row("memory")]
    ok = inert_check(rows, same)
    assert (ok.identical, ok.n, ok.share, ok.divergences) == (2, 2, 1.0, ())  # times differ only
    planted = [dict(c) for c in calls]
    planted[1]["arguments"] = {"f": 2}
    bad = inert_check([_row("no-memory"), _row("memory", prompt_chars=120)],
                      [same[0], _run("memory", planted)])
    assert (bad.identical, bad.n, bad.share) == (0, 2, 0.0)
    replay, live = bad.divergences
    assert (replay.where, replay.turn) == ("replay", 0)
    assert '"prompt_chars": 0' in replay.no_memory and '"prompt_chars": 120' in replay.inert
    assert (live.where, live.probe_session, live.repeat, live.turn) == ("live", "p", 0, 1)
    assert '"f": 1' in live.no_memory and '"f": 2' in live.inert
    # the same transcript but a different prompt shows at the run's end (after the last turn)
    tokens = inert_check([], [same[0], _run("memory", calls, prompt_tokens=55)])
    assert tokens.divergences[0].turn == 2 and "55" in tokens.divergences[0].inert
    # one run longer than the other: the shorter run's end is where they part
    longer = inert_check([], [same[0], _run("memory", calls + calls[:1])])
    assert longer.divergences[0].turn == 2
    assert len(json.dumps(bad.as_dict())) < 4000


def _cfg(db, strategy, **kw):
    return EvalConfig(str(db), strategy=strategy, thresholds=Thresholds(similarity_tau=0.8),
                      n_boot=300, **kw)


def test_a_values_point_validates_its_procedures_in_its_own_folder_and_marks_them(tmp_path):
    from skillsynth.errors import ExportRefused
    from skillsynth.pipeline.export import export_skill
    from skillsynth.store import MemoryStore

    db = gold_corpus(tmp_path)
    res = run_point(_cfg(db, "skillsynth", distill_args="values"), FakeDistiller(),
                    FakeFamilyEmbedder(), tmp_path / "v")
    # the point's own export passes (it asked for the values), and every procedure is valid
    assert res.kpis["validity_gaia691"].value == 1.0 and res.kpis["validity_gaia691"].n > 0
    with MemoryStore.open(tmp_path / "v" / "history.db", read_only=True) as store:
        procs = store.procedures()
        assert procs and all(p.provenance["user_data"] is True for p in procs)
        with pytest.raises(ExportRefused):  # anyone else's export is refused
            export_skill(store, procs[0].id, tmp_path / "out")
    assert list((tmp_path / "v" / "skills" / "agentskills").glob("*/*/SKILL.md"))


def test_an_oracle_replay_point_shows_the_sensitivity_worked_out_by_hand(tmp_path):
    db = gold_corpus(tmp_path)
    res = run_point(_cfg(db, "oracle"), FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "o")
    k = res.kpis["replay_sensitivity_steps"]
    # invoice 4 -> 3 (the failed search), mail 4 -> 3 (the repeated read), jira 2 -> 2
    assert k.value == pytest.approx((0.25 + 0.25 + 0.0) / 3) and k.estimate and k.n == 3
    assert k.value > 0 and k.lo <= k.value <= k.hi
    assert res.kpis["recall_hit_rate"].value == 1.0  # each probe got its own family's
    mem = {r.family: r for r in res.rows if r.arm == "memory"}
    assert mem["invoice"].recalled_ids == ("oracle:oracle:invoice-4",)
    assert mem["invoice"].prompt_chars > 0 and mem["jira"].steps == 2
    # the oracle never reaches the history store: no synthesis ran, nothing was written
    with sqlite3.connect(tmp_path / "o" / "history.db") as c:
        assert c.execute("SELECT COUNT(*) FROM procedures").fetchone()[0] == 0
    assert res.summary["controls"] == {"strategy": "oracle", "gold_from": "labels",
                                       "descriptions": "tool names", "skipped": {},
                                       "skipped_probes": []}
    assert len(list((tmp_path / "o" / "skills" / "controls").glob("*/*/*/SKILL.md"))) == 3
    # against none on the same corpus: nothing recalled, nothing saved
    none = run_point(_cfg(db, "none"), FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "n")
    assert none.kpis["step_reduction"].value == 0.0
    assert "replay_sensitivity_steps" not in none.kpis


def test_mismatched_costs_steps_in_replay(tmp_path):
    db = gold_corpus(tmp_path)
    res = run_point(_cfg(db, "mismatched"), FakeDistiller(), FakeFamilyEmbedder(),
                    tmp_path / "m")
    mem = [r for r in res.rows if r.arm == "memory"]
    assert all(r.recalled_right == 0 and len(r.recalled_ids) == 1 for r in mem)
    assert res.kpis["recall_hit_rate"].value == 0.0
    assert res.kpis["step_reduction"].value < 0  # the wrong tools are charged, none saved
    assert "replay_sensitivity_steps" not in res.kpis


def test_probes_without_gold_are_skipped_and_counted_and_a_corpus_without_any_is_an_error(
        tmp_path):
    db = gold_corpus(tmp_path, without_gold=("jira",))
    res = run_point(_cfg(db, "oracle-args"), FakeDistiller(), FakeFamilyEmbedder(),
                    tmp_path / "o")
    assert sorted({r.family for r in res.rows}) == ["invoice", "mail"] and len(res.rows) == 4
    assert res.summary["controls"]["skipped"] == {"no gold actions": 1}
    assert res.summary["controls"]["skipped_probes"] == ["jira-4"]
    assert res.kpis["replay_sensitivity_steps"].value == pytest.approx(0.25)
    with pytest.raises(EvaluationError, match="none of the 3 probes has any"):
        run_point(_cfg(tiny_corpus(tmp_path), "oracle"), FakeDistiller(),
                  FakeFamilyEmbedder(), tmp_path / "t")
    one_family = gold_corpus(tmp_path / "g", without_gold=("jira", "mail"))
    with pytest.raises(EvaluationError, match="strategy mismatched recalls .* fewer than two"):
        run_point(_cfg(one_family, "mismatched"), FakeDistiller(), FakeFamilyEmbedder(),
                  tmp_path / "g2")
    # the plan control traces the drawn family's calls in a world: replay needs a tau2 corpus
    with pytest.raises(EvaluationError, match="mismatched-plan executes a task's calls"):
        run_point(_cfg(one_family, "mismatched-plan", procedure_form="plan"), FakeDistiller(),
                  FakeFamilyEmbedder(), tmp_path / "g3")
    with pytest.raises(EvaluationError, match="inside an evaluation point"):
        get_strategy("oracle").recaller(None, None, Thresholds())("a goal")  # type: ignore[arg-type]


def test_inert_reproduces_the_no_memory_arm_exactly_in_replay(tmp_path):
    (tmp_path / "c").mkdir()
    db = gold_corpus(tmp_path / "c")
    llm = FakeDistiller()
    res = run_point(_cfg(db, "inert"), llm, FakeFamilyEmbedder(), tmp_path / "i")
    assert llm.calls == 2  # skillsynth's synthesis ran (invoice, mail), recall stayed empty
    none = run_point(_cfg(db, "none"), FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "n")

    def table(rows):
        return sorted((r.probe_session, r.arm, r.recalled_ids, r.prompt_chars, r.steps,
                       r.steps_method, r.success) for r in rows)

    assert table(res.rows) == table(none.rows)
    k = res.kpis["inert_identical"]
    assert (k.value, k.n, k.lo, k.hi) == (1.0, 3, None, None)
    assert res.summary["controls"]["inert"]["replay"] == {"identical": 3, "n": 3}
    for name in ("step_reduction", "recall_hit_rate"):
        assert res.kpis[name].value == none.kpis[name].value == 0.0


def test_live_controls_on_the_replay_world_give_graded_kpis_and_a_checked_inert_arm(tmp_path):
    db = gold_corpus(tmp_path)
    res = run_point(_cfg(db, "oracle-args", live=True, step_limit=6), FakeProcedureFollower(),
                    FakeFamilyEmbedder(), tmp_path / "oa")
    k = res.kpis
    # guided: every gold call with its arguments (the recordings answer them); alone: one
    # call to a tool the world does not have, then an answer
    assert (k["live_sensitivity_success"].value, k["live_sensitivity_success"].n) == (1.0, 3)
    assert k["live_sensitivity_steps"].n == 0  # no probe succeeded without the procedure
    assert k["replay_sensitivity_steps"].value == pytest.approx(1 / 6)
    assert (k["live_gold_actions_matched_memory"].value,
            k["live_gold_actions_matched_no_memory"].value,
            k["live_gold_actions_matched_change"].value) == (1.0, 0.0, 1.0)
    assert k["live_sensitivity_progress"].value == 1.0
    # families are kept, so the small-n rules apply (3 families, every change 1.0: the
    # share of families that could differ, 3.841459 / 6.841459 = 0.561497, times the
    # distance to -1: 1 - 2 * 0.561497 = -0.122994, where resampling would say [1, 1])
    change = k["live_gold_actions_matched_change"]
    assert (change.n_families, change.method) == (3, "no-variation")
    assert (change.lo, change.hi) == (pytest.approx(-0.122994, abs=1e-6), 1.0)
    # each live row carries its run's share, which the report pairs across points
    live = [r for r in res.rows if r.steps_method == "live"]
    assert sorted((r.arm, r.gold_matched) for r in live) == \
        [("memory", 1.0)] * 3 + [("no-memory", 0.0)] * 3
    # the replay world answers the invoice probe's search as its own recording did first
    # (the timeout): 1 of its 3 calls failed; the other probes' calls all succeeded
    assert k["live_failed_call_rate_memory"].value == pytest.approx((1 / 3 + 0 + 0) / 3)
    assert k["live_failed_call_rate_no_memory"].value == 1.0
    # first state-changing gold call: reply (3rd), draft_reply (3rd), jira_search (1st)
    assert k["live_calls_to_first_write_memory"].value == pytest.approx(7 / 3)
    assert k["live_calls_to_first_write_no_memory"].n == 0
    # every gold write made with the gold calls, none without; each row carries its share
    assert (k["live_gold_writes_matched_memory"].value,
            k["live_gold_writes_matched_no_memory"].value,
            k["live_gold_writes_matched_change"].value) == (1.0, 0.0, 1.0)
    assert sorted((r.arm, r.gold_writes_matched) for r in live) == \
        [("memory", 1.0)] * 3 + [("no-memory", 0.0)] * 3
    assert k["live_calls_to_first_write_change"].n == 0
    # without the arguments the follower guesses them: the tools are right, the calls fail
    bare = run_point(_cfg(db, "oracle", live=True, step_limit=6), FakeProcedureFollower(),
                     FakeFamilyEmbedder(), tmp_path / "o")
    assert bare.kpis["live_gold_actions_matched_memory"].value == 0.0
    assert bare.kpis["live_failed_call_rate_memory"].value == 1.0
    # inert: the memory arm runs again with nothing recalled, and matches turn by turn
    llm = FakeProcedureFollower()
    inert = run_point(_cfg(db, "inert", live=True, step_limit=6), llm, FakeFamilyEmbedder(),
                      tmp_path / "i")
    runs = [json.loads(x) for x in (tmp_path / "i" / "runs.jsonl").read_text().splitlines()]
    assert sorted(r["arm"] for r in runs) == ["memory"] * 3 + ["no-memory"] * 3
    # 3 probes x 2 arms x (explore, answer): the arm really ran (the 2 other requests are
    # the synthesis pass's distillations, which this fake cannot answer)
    assert sum(1 for _, tools in llm.requests if tools) == 12
    assert inert.summary["controls"]["inert"]["live"] == {"identical": 3, "n": 3}
    assert (inert.kpis["inert_identical"].value, inert.kpis["inert_identical"].n) == (1.0, 6)


@pytest.mark.live
def test_action_matching_agrees_with_tau2s_own_check():
    from tau2.data_model.message import ToolCall
    from tau2.data_model.tasks import Action

    gold = {"order_id": "#1", "item_ids": ["a", "b"]}
    calls = [{}, {"order_id": "#1"}, {"order_id": "#2"}, gold, {**gold, "x": 1},
             {"order_id": "#1", "item_ids": ["b", "a"]}]
    for compare in (None, [], ["order_id"]):
        for name in ("exchange", "return"):
            for args in calls:
                theirs = Action(action_id="a", name="exchange", arguments=gold,
                                compare_args=compare).compare_with_tool_call(
                    ToolCall(id="c", name=name, arguments=args))
                ours = action_matches(GoldAction("exchange", gold, None if compare is None
                                                 else tuple(compare)), name, args)
                assert ours == theirs, (compare, name, args)


@pytest.mark.live
def test_an_oracle_in_a_tau2_world_reads_the_worlds_gold_and_descriptions(tmp_path):
    from skillsynth.evaluation.live.worlds import get_world
    from skillsynth.evaluation.point.controls import tool_descriptions

    world = get_world("tau2:airline")
    label = _label("p", "airline/12")  # a history the agent generated: no actions in labels
    gold = GoldSource({"p": label}, {"p": "12"}, world,
                      tool_descriptions(world.tool_specs()))
    proc = gold.recall("oracle", "p")
    steps = [line for line in proc.markdown_body.splitlines() if line[:1].isdigit()]
    search = "Search for direct flights between two cities on a specific date."
    assert steps == [
        "1. Call get_reservation_details: Get the details of a reservation.",
        f"2. Call search_direct_flight: {search}",
        f"3. Call search_direct_flight: {search}",
        "4. Call calculate: Calculate the result of a mathematical expression.",
        "5. Call update_reservation_baggages: Update the baggage information of a reservation."]
    assert gold.origin() == "world" and "YAX4DR" not in proc.markdown_body


@pytest.mark.live
def test_the_positive_control_shows_in_a_live_tau2_world_with_a_perfect_follower(tmp_path):
    # history generated in tau2:airline (the follower alone explores and stops); probes run
    # live: with the gold procedure and its arguments the follower does the task
    from skillsynth.evaluation.live.history import live_history
    from skillsynth.evaluation.live.worlds import get_world

    world = get_world("tau2:airline")
    db = tmp_path / "live.db"
    live_history(world, FakeProcedureFollower(), db, tasks=["9", "12"], attempts=2,
                 step_limit=8)
    cfg = EvalConfig(str(db), strategy="oracle-args", k=1, live=True, world="tau2:airline",
                     history="live", step_limit=8, policy=False, n_boot=200)
    res = run_point(cfg, FakeProcedureFollower(), FakeFamilyEmbedder(), tmp_path / "pt")
    runs = {(r["task_id"], r["arm"]): r for r in
            map(json.loads, (tmp_path / "pt" / "runs.jsonl").read_text().splitlines())}
    assert [c[0] for c in runs["9", "memory"]["calls"]] == ["cancel_reservation",
                                                           "search_direct_flight"]
    assert runs["9", "memory"]["success"] and not runs["9", "no-memory"]["success"]
    k = res.kpis
    assert k["live_gold_actions_matched_memory"].value == 1.0
    assert k["live_gold_actions_matched_no_memory"].value == 0.0
    assert (k["live_sensitivity_success"].value, k["live_sensitivity_success"].n) == (1.0, 2)
    # first state-changing gold call: cancel_reservation (1st), update_reservation_baggages
    # (5th; calculate is named like a read)
    assert k["live_calls_to_first_write_memory"].value == 3.0
    assert res.summary["controls"]["gold_from"] == "world"
    assert res.summary["controls"]["descriptions"] == "world"


@pytest.mark.live
def test_a_requested_task_without_a_probe_is_refused_by_name(tmp_path):
    # a task list is what the user asked to measure: one that cannot run is an error, never
    # a smaller n found later in the summary
    from skillsynth.evaluation.live.history import live_history
    from skillsynth.evaluation.live.worlds import get_world

    db = tmp_path / "live.db"
    live_history(get_world("tau2:airline"), FakeProcedureFollower(), db, tasks=["9"],
                 attempts=2, step_limit=8)
    cfg = EvalConfig(str(db), strategy="oracle", k=1, live=True, world="tau2:airline",
                     history="live", step_limit=8, policy=False, tasks=("9", "12"))
    with pytest.raises(EvaluationError, match=r"tasks 12 have no probe.*probes' task ids: 9$"):
        run_point(cfg, FakeProcedureFollower(), FakeFamilyEmbedder(), tmp_path / "pt")


def test_oracle_run_recalls_the_tasks_successful_history_run_and_needs_one(tmp_path):
    """The point reads the history's successful runs for oracle-run (as for the traced arms):
    each probe recalls its task's run with its values, the failed calls left out."""
    from skillsynth.corpora import labels_path_for

    db = gold_corpus(tmp_path)
    with sqlite3.connect(db) as conn:  # the invoice task's first run failed a call first
        conn.execute("INSERT INTO tool_history (session_id, tool_name, args, result_summary, "
                     "success, error, timestamp) SELECT session_id, tool_name, args, "
                     "result_summary, 0, 'timeout', timestamp FROM tool_history "
                     "WHERE session_id = 'invoice-1' LIMIT 1")
    res = run_point(_cfg(db, "oracle-run"), FakeDistiller(), FakeFamilyEmbedder(),
                    tmp_path / "r")
    mem = [r for r in res.rows if r.arm == "memory"]
    assert sorted(r.family for r in mem) == ["invoice", "jira", "mail"]
    assert all(list(r.recalled_ids) == [f"oracle:oracle-run:{r.probe_session}"] for r in mem)
    body = next((tmp_path / "r" / "skills" / "controls" / "oracle-run").glob(
        "invoice*/*/SKILL.md")).read_text()
    assert body.count("Call ") == len(GOLD_TASKS["invoice"][1])  # the failed call left out
    assert all(json.dumps(a, ensure_ascii=False) in body for _, a in GOLD_TASKS["invoice"][1])
    with sqlite3.connect(labels_path_for(db)) as conn:
        conn.execute("UPDATE session_labels SET success = 0 WHERE attempt < 4")
    with pytest.raises(EvaluationError, match="oracle-run recalls a successful history run"):
        run_point(_cfg(db, "oracle-run"), FakeDistiller(), FakeFamilyEmbedder(),
                  tmp_path / "none")
