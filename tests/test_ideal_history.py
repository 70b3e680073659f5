"""Ideal history (#887's planted attempts) built in the real tau2 retail world, on real SQLite:
a task's reference is its recorded success where it has one, else its gold calls; a
reference that does not reach the goal state is left out with its reason; attempts 1..k are
history and k+1 the probe, as for any corpus."""

from __future__ import annotations

import json

import pytest

from skillsynth.corpora.labels import LabelStore, SessionLabel, labels_path_for
from skillsynth.errors import EvaluationError
from skillsynth.evaluation.point.ideal import SOURCE, ideal_history, reached_goal_state
from skillsynth.evaluation.point.split import split_attempts
from skillsynth.store import MemoryStore, ToolCall


def _corpus(path, sessions):
    """A labelled corpus: (session, task, success, calls) with calls as (tool, args)."""
    with MemoryStore.init(path) as store, LabelStore(labels_path_for(path), create=True) as lab:
        for i, (sid, task, ok, calls) in enumerate(sessions):
            store.add_tool_calls([ToolCall(session_id=sid, tool_name=n, args=json.dumps(a),
                                           result_summary="r", success=True,
                                           timestamp=f"2026-01-0{i + 1}T00:00:0{j}")
                                  for j, (n, a) in enumerate(calls)])
            store.add_turn(sid, "user", f"goal of {task}", timestamp=f"2026-01-0{i + 1}T00:00:00")
            lab.add([SessionLabel(sid, "tau2", f"retail/{task}", 1, success=ok,
                                  actions=({"name": "x", "arguments": {}},))])


def test_the_state_rule_asks_every_state_check_and_not_communication():
    assert reached_goal_state({"breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}}, False)
    assert not reached_goal_state({"breakdown": {"DB": 0.0}}, False)
    assert not reached_goal_state({"breakdown": {"DB": 1.0}, "assertion_error": "x"}, True)
    assert reached_goal_state({"breakdown": {}}, True)  # no state check: the world's verdict
    assert not reached_goal_state({}, None)


@pytest.mark.live
def test_ideal_attempts_are_the_reference_executed_and_judged_in_the_world(tmp_path):
    from skillsynth.evaluation.live.worlds import get_world

    retail = get_world("tau2:retail")
    wrong = [("get_user_details", {"user_id": "mei_kovacs_8020"})]  # a read: no return made
    harm = [("cancel_pending_order", {"order_id": "#W9348897", "reason": "no longer needed"})]
    src = tmp_path / "corpus.db"
    _corpus(src, [("a", "5", True, retail.gold_actions("5")),  # a recorded success
                  ("b", "39", False, wrong),  # no success recorded: the gold calls
                  ("c", "70", True, wrong),  # "successful" but it changes nothing: the gold
                  ("d", "24", True, harm)])  # a wrong write, and the task has no gold calls
    rep = ideal_history(retail, src, tmp_path / "ideal.db", attempts=4)
    assert sorted(rep.tasks) == ["retail/39", "retail/5", "retail/70"]
    assert (rep.from_recorded, rep.from_gold) == (1, 2)
    assert rep.left_out["retail/24"].startswith("its recorded reference does not reach the "
                                                "goal state")
    with LabelStore(labels_path_for(tmp_path / "ideal.db")) as lab:
        labels = lab.all()
    assert len(labels) == 12 and {x.source for x in labels} == {SOURCE}
    assert all(x.success and x.actions for x in labels)  # gold actions kept for scoring
    assert {x.task_id: x.extra["reference"] for x in labels} == {
        "retail/5": "recorded", "retail/39": "gold", "retail/70": "gold"}
    split = split_attempts(labels, 3)
    assert len(split.history) == 9 and sorted(p.attempt for p in split.probes) == [4, 4, 4]
    with MemoryStore.open(tmp_path / "ideal.db", read_only=True) as store:
        sid = next(x.session_id for x in labels if x.task_id == "retail/39")
        calls = store.tool_calls(sid)
        turns = store.turns(sid)
    assert [c.tool_name for c in calls] == [n for n, _ in retail.gold_actions("39")]
    # the world's own results, and its failed call recorded as failed
    assert [c.success for c in calls] == [False, True, True, True, True]
    assert "fatima_taylor_3452" in (calls[1].result_summary or "")
    assert [t.content for t in turns] == [retail.task("39").prompt]  # the goal, once
    # the references' argument values by source: the same values, and fewer traced to an
    # earlier result once results are cut as GAIA stores them (an order's item ids lie past
    # its first 500 characters)
    assert sum(rep.sources_whole.values()) == sum(rep.sources_stored.values()) > 0
    assert rep.sources_stored["step"] < rep.sources_whole["step"]
    assert rep.sources_line().startswith("argument values of the references by source")
    # the curve over characters kept: GAIA's 500 first, whole last; never fewer values found
    # in an earlier result as more of each result is kept, and the ends are the two above
    rows = rep.limit_rows()
    assert [r["result_chars"] for r in rows] == ["500", "1000", "2000", "4000", "8000", "whole"]
    steps = [r["step"] for r in rows]
    assert steps == sorted(steps) and steps[0] == rep.sources_stored["step"] and \
        steps[-1] == rep.sources_whole["step"]
    assert len({r["values"] for r in rows}) == 1
    assert rows[-1]["from_a_result"] == pytest.approx(steps[-1] / rows[-1]["values"])
    # the cost: characters stored per call never fall as more is kept, and 500 bounds the first
    cost = [r["mean_stored_chars"] for r in rows]
    assert cost == sorted(cost) and 0 < cost[0] <= 500 and rep.results * 4 == rep.calls
    # a finished build is kept as it is; a bad request fails before anything is written
    again = ideal_history(retail, src, tmp_path / "ideal.db", attempts=4)
    assert again.already_present == 3 and not again.tasks
    with pytest.raises(EvaluationError, match="holds an ideal history of 4 attempt"):
        ideal_history(retail, src, tmp_path / "ideal.db", attempts=2)
    with pytest.raises(EvaluationError, match="no labelled session"):
        ideal_history(retail, src, tmp_path / "other.db", attempts=4, tasks=["retail/1"])
    assert not (tmp_path / "other.db").exists()
    with pytest.raises(EvaluationError, match="no task .* reaches its goal state"):
        ideal_history(retail, src, tmp_path / "none.db", attempts=4, tasks=["retail/24"])
    assert not (tmp_path / "none.db").exists()


def test_the_command_line_asks_for_a_world_and_its_own_labels(tmp_path, capsys):
    from skillsynth.cli import main

    src = tmp_path / "corpus.db"
    _corpus(src, [("a", "5", True, [("get_user_details", {"user_id": "u"})])])
    for extra, says in (([], "--world tau2:DOMAIN"),
                        (["--world", "tau2:retail", "--labels", "l.sqlite"], "leave out --labels")):
        with pytest.raises(SystemExit) as stop:
            main(["eval", str(src), str(tmp_path / "out"), "--history", "ideal", *extra])
        assert stop.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.live
def test_corpus_ideal_builds_and_prints_the_sources_per_result_length(tmp_path, capsys):
    from skillsynth.cli import main
    from skillsynth.evaluation.live.worlds import get_world

    src = tmp_path / "corpus.db"
    _corpus(src, [("a", "5", True, get_world("tau2:retail").gold_actions("5"))])
    out = tmp_path / "ideal.db"
    assert main(["corpus", "ideal", str(src), str(out), "--world", "tau2:retail",
                 "--attempts", "2"]) == 0
    text = capsys.readouterr().out
    assert f"wrote 1 task(s) x 2 attempts (1 from a recorded success, 0 from gold calls) " \
           f"to {out}" in text
    rows = [line.split() for line in text.splitlines()[-6:]]
    assert [r[0] for r in rows] == ["500", "1000", "2000", "4000", "8000", "whole"]
    assert int(rows[0][1]) <= int(rows[-1][1])  # found in an earlier result: never fewer
    assert main(["corpus", "ideal", str(src), str(out), "--world", "tau2:retail",
                 "--attempts", "2"]) == 0
    assert "finished build of 1 task(s), kept as it is" in capsys.readouterr().out


@pytest.mark.live
def test_every_task_of_the_world_is_a_corpus_with_its_gold_calls(tmp_path):
    from skillsynth.evaluation.live.worlds import get_world

    retail = get_world("tau2:retail")
    rep = ideal_history(retail, None, tmp_path / "ideal.db", attempts=1,
                        tasks=["70", "24", "39"])
    assert rep.tasks == ["70", "39"] and rep.from_gold == 2 and rep.from_recorded == 0
    assert rep.left_out["24"] == "no recorded successful run and no gold calls"
    with LabelStore(labels_path_for(tmp_path / "ideal.db")) as lab:
        labels = {x.task_id: x for x in lab.all()}
    assert set(labels) == {"70", "39"}  # the world's own ids, written in the order asked
    gold = retail.gold_actions("39")
    assert labels["39"].essential_steps == tuple(n for n, _ in gold)
    assert [(a["name"], a["arguments"]) for a in labels["39"].actions] == gold
    assert labels["39"].attempt == 1 and labels["39"].extra["reference"] == "gold"
    with pytest.raises(EvaluationError, match="tau2:retail has no task"):
        ideal_history(retail, None, tmp_path / "other.db", attempts=1, tasks=["9999"])
    assert not (tmp_path / "other.db").exists()
