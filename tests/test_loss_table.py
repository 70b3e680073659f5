"""The loss table: a design's shortfall from the gold arguments' gain, probe by probe, put at
recall, content or the agent; worked by hand on a run folder with real SQLite files."""

from __future__ import annotations

import pandas as pd
import pytest

from skillsynth.corpora.labels import LabelStore, SessionLabel
from skillsynth.errors import EvaluationError
from skillsynth.evaluation.point.controls import gold_actions
from skillsynth.evaluation.reporting.loaded import Run
from skillsynth.evaluation.reporting.loss import gold_in_text, loss_table, loss_tables
from skillsynth.store import MemoryStore, Procedure

GOLD = ({"name": "find_user_id_by_email", "arguments": {"email": "a@b.c"}},
        {"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "no"}})
FULL = ("1. Call find_user_id_by_email with the email the customer gives.\n"
        "2. Call cancel_pending_order: order_id from the customer, reason as they say.")


def test_gold_in_text_counts_tools_in_order_and_argument_names():
    gold = gold_actions(GOLD)
    assert gold_in_text(FULL, gold) == (2, 2, 3, 3)
    # the write named before the read: only one of them is in order
    assert gold_in_text("cancel_pending_order then find_user_id_by_email", gold)[0] == 1
    assert gold_in_text("nothing relevant", gold) == (0, 2, 0, 3)


def _run(tmp_path, bodies, live):
    """A run folder: labels in corpus/, the design's history.db, and the rows."""
    (tmp_path / "corpus").mkdir()
    with LabelStore(tmp_path / "corpus" / "corpus.db.labels.sqlite", create=True) as lab:
        lab.add([SessionLabel(p, "tau2", f"t{p}", 4, actions=GOLD) for p in live])
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
                      "recalled_ids": rec, "recalled_right": right if point == "s" else 1}
                     for v in values]
    points = pd.DataFrame([{"point": p, "strategy": s, "max_recall_body_chars": 200}
                           for p, s in (("s", "skillsynth"), ("m", "mismatched"),
                                        ("a", "oracle-args"))])
    return Run(path=tmp_path, summary=None, points=points, rows=pd.DataFrame(rows),
               similarity={})


def test_each_probes_lost_gain_is_put_at_the_first_stage_that_explains_it(tmp_path):
    run = _run(tmp_path, {"full": FULL, "names": "Call cancel_pending_order.",
                          "late": "find_user_id_by_email email cancel_pending_order order_id"
                                  + " " * 200 + "reason"},
               {"p0": (0, ["names"], [0.0], [0.0], [1.0]),  # nothing of its own recalled
                "p1": (1, ["full"], [0.5, 0.5], [0.0], [0.5]),  # all there: the agent's
                "p2": (1, ["names"], [0.0, 0.0], [0.5], [1.0]),  # names one tool only
                "p3": (1, ["late"], [0.0], [0.0], [0.0])})  # "reason" past the cut
    t = loss_table(run, "s", mismatched="m", upper="a")
    by = t.probes.set_index("probe")
    assert list(by["stage"]) == ["recall", "agent", "content", "content"]
    # lost = (oracle-args - mismatched) - (design - mismatched), by hand
    assert list(by["lost"]) == [1.0, 0.0, 1.0, 0.0]
    assert by.loc["p2", "gold_tools_named"] == "1/2" and by.loc["p3", "gold_args_named"] == "2/3"
    assert t.upper_gain == 2.0
    stages = t.stages.set_index("stage")
    assert list(stages.index) == ["recall", "content", "agent"]
    assert list(stages["probes"]) == [1, 2, 1]
    assert list(stages["share_of_upper_gain"]) == [0.5, 0.5, 0.0]
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
