"""The loss table: a design's shortfall from the gold arguments' gain, probe by probe, put at
recall, content, source or the agent; worked by hand on a run folder with real SQLite files."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from skillsynth.corpora.labels import LabelStore, SessionLabel
from skillsynth.errors import EvaluationError
from skillsynth.evaluation.point.controls import gold_actions
from skillsynth.evaluation.reporting.loaded import Run
from skillsynth.evaluation.reporting.loss import gold_in_text, loss_table, loss_tables
from skillsynth.evaluation.reporting.stated import gold_flows, sources_in_text, write_step
from skillsynth.pipeline.skill import Skill
from skillsynth.store import MemoryStore, Procedure, ToolCall

GOLD = ({"name": "find_user_id_by_email", "arguments": {"email": "a@b.c"}},
        {"name": "cancel_pending_order",
         "arguments": {"order_id": "#W1", "reason": "no longer needed"}})
FULL = ("1. Call find_user_id_by_email with the email the customer gives.\n"
        "2. Call cancel_pending_order: order_id from the customer, reason as they say.")
RIGHT = ("1. Call find_user_id_by_email with email from the customer\n"
         "2. Call get_user_details with user_id = step 1's result\n"
         "3. Call cancel_pending_order with order_id = the orders[] in step 2's result; "
         "reason \"no longer needed\"")
#: The probe's own run: the email is the customer's, the order id is in step 2's result, the
#: reason is in neither (no enums are known here, so it is "unknown").
CALLS = (("find_user_id_by_email", {"email": "a@b.c"}, "usr_1", True),
         ("get_user_details", {"user_id": "usr_1"}, '{"orders": ["#W1", "#W2"]}', True),
         ("cancel_pending_order", {"order_id": "#W2", "reason": "x"}, "not pending", False),
         ("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, "ok", True))
SAID = "Hi, my email is a@b.c and I want to cancel an order."


def _calls(session="p"):
    return [ToolCall(session_id=session, tool_name=t, args=json.dumps(a),
                     result_summary=r, success=ok, timestamp=f"2026-01-01T00:00:0{i}")
            for i, (t, a, r, ok) in enumerate(CALLS)]


def test_gold_flows_trace_each_gold_argument_in_the_probes_own_run():
    gold = gold_actions(GOLD)
    flows = gold_flows(gold, _calls(), SAID)
    assert flows[0] == {"email": (frozenset({("customer", None)}),)}
    # the failed call is not the match; the successful one's sources are (the reason is
    # found nowhere in the run)
    assert flows[1] == {"order_id": (frozenset({("step", "get_user_details")}),),
                        "reason": (frozenset(),)}
    # a value in several results has each as a source (the nearest first is not the only)
    find, details, _, cancel = _calls()
    order = ToolCall(session_id="p", tool_name="get_order_details", args='{"order_id": "#W1"}',
                     result_summary='{"order_id": "#W1"}', success=True, timestamp="")
    assert gold_flows(gold, [find, details, order, cancel], SAID)[1]["order_id"] == (frozenset(
        {("step", "get_user_details"), ("step", "get_order_details")}),)
    # a result the store cut at GAIA's 500 characters may hold it past the cut
    cut = ToolCall(session_id="p", tool_name="get_order_details", args='{"order_id": "#W1"}',
                   result_summary='{"items": "' + "x" * 486 + '", ', success=True, timestamp="")
    assert len(cut.result_summary) == 500
    assert gold_flows(gold, [find, cut, cancel], SAID)[1] == {
        "order_id": (frozenset({("step", "get_order_details")}),),
        "reason": (frozenset({("step", "get_order_details")}),)}
    # a gold action the run never made is not judged
    assert gold_flows(gold_actions([{"name": "return_delivered_order_items",
                                     "arguments": {"order_id": "#W1"}}]), _calls(), SAID) == [None]


def test_sources_in_text_reads_each_arguments_statement_by_the_rule():
    gold = gold_actions(GOLD)
    flows = gold_flows(gold, _calls(), SAID)
    assert sources_in_text(RIGHT, gold, flows) == (3, 3)
    # order_id sent to the customer instead of step 2's result; the reason not stated
    assert sources_in_text(FULL, gold, flows) == (1, 3)
    # "step 1" is find_user_id_by_email's line, not get_user_details's: wrong step
    wrong_step = RIGHT.replace("in step 2's result", "in step 1's result")
    assert sources_in_text(wrong_step, gold, flows) == (2, 3)
    # naming the source tool itself states it; saying "decide" never does
    by_tool = RIGHT.replace("the orders[] in step 2's result", "from get_user_details")
    assert sources_in_text(by_tool, gold, flows) == (3, 3)
    undecided = RIGHT.replace("= the orders[] in step 2's result",
                              "not found in the run: decide from the conversation")
    assert sources_in_text(undecided, gold, flows) == (2, 3)
    # the value itself states it; an unknown source named as a step is taken, unconfirmed
    valued = RIGHT.replace("the orders[] in step 2's result", "#W1")
    assert sources_in_text(valued, gold, flows) == (3, 3)
    unconfirmed = RIGHT.replace('reason "no longer needed"', "reason = step 2's result")
    assert sources_in_text(unconfirmed, gold, flows) == (3, 3)
    # an action without a flow is not judged
    assert sources_in_text(RIGHT, gold, [None, flows[1]]) == (2, 2)


def test_a_short_value_states_its_argument_only_as_a_whole_token():
    """A state's code or a small count is the value when it stands alone ("NC"), not when
    the letters sit inside a word ("once") or a longer number ("10")."""
    gold = gold_actions([{"name": "modify_pending_order_address",
                          "arguments": {"order_id": "#W5270061", "state": "NC", "count": 1}}])
    run = [ToolCall(session_id="p", tool_name="modify_pending_order_address",
                    args=json.dumps(gold[0].arguments), result_summary="ok", success=True,
                    timestamp="")]
    flows = gold_flows(gold, run, "please move my order")
    assert flows[0]["state"] == (frozenset(),)  # found nowhere: only the value states it
    valued = ('1. Call modify_pending_order_address with {"order_id": "#W5270061", '
              '"state": "NC", "count": 1}')
    assert sources_in_text(valued, gold, flows) == (3, 3)
    inside = ('1. Call modify_pending_order_address with order_id "#W5270061"; '
              'state set once; count 10')
    assert sources_in_text(inside, gold, flows) == (1, 3)
    # in its own case only ("IN" is not the word "in"), and never when it says "decide"
    lower = valued.replace('"NC"', '"nc"')
    assert sources_in_text(lower, gold, flows) == (2, 3)
    undecided = valued.replace('"NC"', '"NC" or decide from the conversation')
    assert sources_in_text(undecided, gold, flows) == (2, 3)


def test_write_step_is_the_first_numbered_line_naming_the_write_anywhere_in_it():
    gold = gold_actions(GOLD)  # the write: cancel_pending_order
    assert write_step(RIGHT, gold) == 3
    late = "1. Call get_order_details.\n2. Using its status, call cancel_pending_order.\n"
    assert write_step(late, gold) == 2  # named after another tool on its line
    joined = RIGHT + "\n" + "1. Call cancel_pending_order with the order id."
    assert write_step(joined, gold) == 1  # a second recalled procedure numbers from 1
    assert write_step("Call cancel_pending_order.", gold) is None  # on no numbered line
    assert write_step(RIGHT, gold_actions(GOLD[:1])) is None  # no gold write


def test_gold_in_text_counts_tools_in_order_and_argument_names():
    gold = gold_actions(GOLD)
    assert gold_in_text(FULL, gold) == (2, 2, 3, 3)
    # the write named before the read: only one of them is in order
    assert gold_in_text("cancel_pending_order then find_user_id_by_email", gold)[0] == 1
    assert gold_in_text("nothing relevant", gold) == (0, 2, 0, 3)


def _run(tmp_path, bodies, live):
    """A run folder: the corpus (each probe's own run) and labels in corpus/, the design's
    history.db, and the rows."""
    (tmp_path / "corpus").mkdir()
    with LabelStore(tmp_path / "corpus" / "corpus.db.labels.sqlite", create=True) as lab:
        lab.add([SessionLabel(p, "tau2", f"t{p}", 4, actions=GOLD) for p in live])
    with MemoryStore.init(tmp_path / "corpus" / "corpus.db") as corpus:
        for p in live:
            corpus.add_tool_calls(_calls(p))
            corpus.add_turn(p, "user", SAID)
    (tmp_path / "points" / "s").mkdir(parents=True)
    with MemoryStore.init(tmp_path / "points" / "s" / "history.db") as store:
        for pid, body in bodies.items():
            store.put_procedure(Procedure(name=pid, when_to_use="w", markdown_body=body,
                                          id=pid))
    rows = []
    for probe, (right, ids, design, wrong, upper) in live.items():
        for point, values, rec in (("s", design, ids), ("m", wrong, ["x"]), ("a", upper, ["y"])):
            rows += [{"point": point, "arm": "memory", "probe_session": probe,
                      "family": f"t{probe}", "steps_method": "live", "gold_matched": v,
                      "steps": 1,
                      "recalled_ids": rec, "recalled_right": right if point == "s" else 1}
                     for v in values]
            rows.append({"point": point, "arm": "memory", "probe_session": probe,  # replay
                         "family": f"t{probe}", "steps_method": "replay-v1", "steps": 9,
                         "recalled_ids": rec, "recalled_right": right if point == "s" else 1})
    points = pd.DataFrame([{"point": p, "strategy": s, "max_recall_body_chars": 300}
                           for p, s in (("s", "skillsynth"), ("m", "mismatched"),
                                        ("a", "oracle-args"))])
    return Run(path=tmp_path, summary=None, points=points, rows=pd.DataFrame(rows),
               similarity={})


def test_each_probes_lost_gain_is_put_at_the_first_stage_that_explains_it(tmp_path):
    run = _run(tmp_path, {"full": FULL, "names": "Call cancel_pending_order.", "right": RIGHT,
                          "late": "find_user_id_by_email email cancel_pending_order order_id"
                                  + " " * 300 + "reason"},
               {"p0": (0, ["names"], [0.0], [0.0], [1.0]),  # nothing of its own recalled
                "p1": (1, ["full"], [0.5, 0.5], [0.0], [0.5]),  # names all, a source wrong
                "p2": (1, ["names"], [0.0, 0.0], [0.5], [1.0]),  # names one tool only
                "p3": (1, ["late"], [0.0], [0.0], [0.0]),  # "reason" past the cut
                "p4": (1, ["right"], [0.0], [0.0], [0.5])})  # all there: the agent's
    t = loss_table(run, "s", mismatched="m", upper="a")
    by = t.probes.set_index("probe")
    assert list(by["stage"]) == ["recall", "source", "content", "content", "agent"]
    # lost = (oracle-args - mismatched) - (design - mismatched), by hand
    assert list(by["lost"]) == [1.0, 0.0, 1.0, 0.0, 0.5]
    assert by.loc["p2", "gold_tools_named"] == "1/2" and by.loc["p3", "gold_args_named"] == "2/3"
    assert by.loc["p1", "gold_sources_stated"] == "1/3" and \
        by.loc["p4", "gold_sources_stated"] == "3/3"
    # which: p1's text sends order_id to the customer and says nothing of the reason
    assert by.loc["p1", "sources_not_stated"] == \
        "cancel_pending_order.order_id; cancel_pending_order.reason"
    assert by.loc["p4", "sources_not_stated"] == ""
    assert t.unstated_at_source().to_dict() == {"cancel_pending_order.order_id": 1,
                                                "cancel_pending_order.reason": 1}
    twice = dataclasses.replace(t, probes=t.probes.assign(sources_not_stated=(
        "a.x; a.x; b.y", "", "a.x", "", ""), stage=("source", "source", "content", "source",
                                                    "agent")))
    assert twice.unstated_at_source().to_dict() == {"a.x": 1, "b.y": 1}  # probes, not mentions
    # where the text puts the first gold write, against the calls the agent made (1 a run)
    assert by.loc["p4", "write_step"] == 3 and by.loc["p1", "write_step"] == 2
    assert pd.isna(by.loc["p2", "write_step"])  # named, but on no numbered line
    assert by.loc["p4", "calls_made"] == 1.0 and by.loc["p4", "runs_reaching_write"] == 0
    assert t.stopped_before_write() == (1, 1)
    assert dataclasses.replace(t, probes=t.probes.assign(runs_reaching_write=1)
                               ).stopped_before_write() == (0, 1)
    # at source: p1's text puts the write at step 2, and its one run made 1 call
    assert by.loc["p1", "runs_reaching_write"] == 0
    assert t.stopped_before_write("source") == (1, 1)
    assert t.stopped_before_write("recall") == (0, 0)  # p0's text numbers no write
    with pytest.raises(EvaluationError, match="no stage 'agents'"):
        t.stopped_before_write("agents")
    assert t.upper_gain == 2.5
    stages = t.stages.set_index("stage")
    assert list(stages.index) == ["recall", "content", "source", "agent"]
    assert list(stages["probes"]) == [1, 2, 1, 1]
    assert list(stages["share_of_upper_gain"]) == [0.4, 0.4, 0.0, 0.2]
    # the stages' lost gains add up to the upper bound's gain minus the design's
    design_gain = sum(by["design"] - by["mismatched"])
    assert stages["lost_gain"].sum() == pytest.approx(t.upper_gain - design_gain)
    assert list(loss_tables(run)) == ["s"]  # the design; the controls get none
    planned = Run(path=tmp_path, summary=None, points=run.points.assign(
        procedure_form=["plan", "prose", "prose"]), rows=run.rows, similarity={})
    assert loss_tables(planned) == {}  # what it was shown is not the stored prose


def test_a_run_without_its_history_or_graded_rows_is_refused_by_name(tmp_path):
    run = _run(tmp_path, {"full": FULL}, {"p1": (1, ["full"], [0.5], [0.0], [0.5])})
    (tmp_path / "points" / "s" / "history.db").unlink()
    with pytest.raises(EvaluationError, match="point s has no history.db"):
        loss_table(run, "s", mismatched="m", upper="a")
    bare = Run(path=tmp_path, summary=None, points=run.points, rows=pd.DataFrame(),
               similarity={})
    with pytest.raises(EvaluationError, match="no graded live rows"):
        loss_table(bare, "s", mismatched="m", upper="a")
    assert loss_tables(bare) == {}


def test_a_prose_rung_of_the_ladder_gets_a_table_from_the_skill_it_wrote(tmp_path):
    run = _run(tmp_path, {"full": FULL}, {"p1": (1, ["full"], [0.0], [0.0], [0.5])})
    (tmp_path / "points" / "d").mkdir()
    Skill(name="cancel", description="Cancel an order.", body=RIGHT,
          tools_required=("cancel_pending_order",)).write(
        tmp_path / "points" / "d" / "skills" / "controls" / "oracle-dataflow" / "p1")
    mine = run.rows[run.rows["point"] == "s"]
    rows = mine.assign(point="d", recalled_ids=[["oracle:oracle-dataflow:p1"]] * len(mine),
                       gold_matched=0.25)
    points = pd.concat([run.points, pd.DataFrame([{"point": "d", "strategy": "oracle-dataflow",
                                                   "max_recall_body_chars": 300}])])
    ladder = Run(path=tmp_path, summary=None, points=points,
                 rows=pd.concat([run.rows, rows]), similarity={})
    tables = loss_tables(ladder)
    assert sorted(tables) == ["d", "s"]
    row = tables["d"].probes.iloc[0]
    # its body (read from the SKILL.md it wrote, no history.db) states every source
    assert (row["gold_sources_stated"], row["stage"], row["lost"]) == ("3/3", "agent", 0.25)
    # the sweep record holds the rung's share of the arguments' gain, as a design's; over
    # one family the upper bound's gain has no interval, so the share is not measured, said
    from skillsynth.evaluation.reporting.measured import _ladder

    figures = _ladder(ladder)
    rung = figures["d: args_gain_over_mismatched"]
    assert (rung["value"], rung["n"]) == (None, 1) and "not measured" in rung["note"]
    assert "s: args_gain_over_mismatched" in figures
    assert not any(k.startswith(("m: args_gain", "a: args_gain")) for k in figures)


def test_the_sweep_record_counts_the_probes_stopped_before_the_write_at_source_and_agent(tmp_path):
    from skillsynth.evaluation.reporting.measured import _ladder

    run = _run(tmp_path, {"full": FULL, "right": RIGHT},
               {"p1": (1, ["full"], [0.5, 0.5], [0.0], [0.5]),  # source: 1 call, write at 2
                "p4": (1, ["right"], [0.0], [0.0], [0.5]),  # agent: 1 call, write at 3
                "p5": (1, ["full"], [0.0], [0.0], [0.5])})  # source, as p1
    figures = _ladder(run)
    assert {k: figures["s: source stopped before the write's step"][k]
            for k in ("value", "n")} == {"value": 2, "n": 2}
    assert figures["s: agent stopped before the write's step"] == {
        "value": 1, "n": 1, "unit": "probes put at agent none of whose runs made as many "
                                    "calls as the step at which their text puts the first "
                                    "gold write (count)"}
