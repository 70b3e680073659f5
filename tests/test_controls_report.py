"""A run's designs read against its controls: the verdict takes the run's oracle point, the
report puts the arms side by side and says how much of the oracle's gain a design recovers."""

from __future__ import annotations

import pandas as pd
from test_intervals import _point

from skillsynth.evaluation.reporting.controls import (
    args_gain_over_mismatched,
    controls_table,
    decoding,
    gain_recovered,
    over_mismatched,
)
from skillsynth.evaluation.reporting.verdict import (
    run_control,
    run_negative,
    verdict,
    verdict_points,
)

GOOD = {"value": 0.3, "lo": 0.1, "hi": 0.5, "n": 30, "n_families": 10}
FLAT = {"value": 0.02, "lo": -0.05, "hi": 0.09, "n": 30, "n_families": 10}


def _pt(pid, strategy, proto="strict", **kpis):
    return dict(_point(**kpis), id=pid, strategy=strategy,
                params={"similarity_tau": 0.82, "min_occurrences": 3,
                        "max_recall_body_chars": 1500},
                protocol={"protocol": proto, "recall_key": "when_to_use", "rate": "calls"})


def test_a_designs_verdict_reads_the_runs_oracle_point_of_the_same_protocol():
    synth = _pt("s", "skillsynth", step_reduction=GOOD)
    flat_oracle = _pt("o", "oracle", replay_sensitivity_steps=FLAT)
    args = _pt("a", "oracle-args", replay_sensitivity_steps=GOOD)
    rolling_oracle = _pt("r", "oracle", "rolling", replay_sensitivity_steps=GOOD)
    points = [synth, args, rolling_oracle, flat_oracle]
    # the realistic oracle is preferred over tau2's upper bound, and only the same protocol
    assert run_control(points, synth) == ("oracle", flat_oracle)
    assert run_control([synth, args], synth) == ("oracle-args", args)
    assert run_control([synth], synth) is None
    ((_, pt),) = verdict_points(points)
    rows = {r.criterion: r for r in verdict(pt, run_control(points, pt))}
    steps = rows["Tool-step reduction"]
    assert steps.status == "INSENSITIVE" and "from the oracle point o" in steps.why
    # with the upper bound as the only control, which separates, the row is judged
    rows = {r.criterion: r for r in verdict(synth, run_control([synth, args], synth))}
    assert rows["Tool-step reduction"].status == "PASS"
    assert "separates from none" in rows["Tool-step reduction"].note


def _rows(point, arm, successes):
    """Live rows of one point and arm: probe p<i> in family f<i // 2>."""
    return [{"point": point, "arm": arm, "probe_session": f"p{i}", "family": f"f{i // 2}",
             "steps_method": "live", "success": s, "steps_recorded": 3, "steps": 3}
            for i, s in enumerate(successes)]


def test_gain_recovered_pairs_the_three_arms_per_probe():
    # 12 probes in 6 families: none solves 2, the oracle 10, the design 6
    none = [1, 1] + [0] * 10
    oracle = [1] * 10 + [0, 0]
    design = [1] * 6 + [0] * 6
    rows = pd.DataFrame(_rows("s", "no-memory", none) + _rows("s", "memory", design)
                        + _rows("o", "no-memory", none) + _rows("o", "memory", oracle))
    k = gain_recovered(rows, {"id": "s"}, {"id": "o"}, basis="success")
    # (6 - 2) / (10 - 2) = 0.5, worked by hand
    assert k.value == 0.5 and k.n == 12 and k.lo is not None and k.lo < 0.5 < k.hi
    # an oracle that gains nothing: the ratio is not measured, and says why
    rows = pd.DataFrame(_rows("s", "no-memory", none) + _rows("s", "memory", design)
                        + _rows("o", "memory", none))
    k = gain_recovered(rows, {"id": "s"}, {"id": "o"}, basis="success")
    assert k.value is None and "does not exclude 0" in k.note


def test_the_controls_table_orders_the_arms_from_lower_to_upper_bound():
    points = [_pt("o", "oracle-args", live_success_change=GOOD),
              _pt("s", "skillsynth", live_success_change=FLAT),
              _pt("m", "mismatched", live_success_change=FLAT)]
    table = controls_table(points, pd.DataFrame())
    assert list(table["strategy"]) == ["mismatched", "skillsynth", "oracle-args"]
    assert table.loc[2, "live_success_change"] == "0.30 [0.10, 0.50] n=30"


def test_graded_progress_is_judged_against_the_oracles_change_in_it():
    live = {"live_success_change": FLAT, "live_step_reduction": FLAT}
    synth = _pt("s", "skillsynth", live_gold_actions_matched_change=GOOD,
                live_failed_call_rate_change=FLAT, **live)
    # an oracle point summarised before the sensitivity KPI existed: its own change is read
    oracle = _pt("o", "oracle", live_gold_actions_matched_change=GOOD, **live)
    rows = {r.criterion: r for r in verdict(synth, run_control([synth, oracle], synth))}
    progress = rows["Graded progress (beside #887)"]
    assert progress.status == "PASS" and "separates from none" in progress.note
    assert "live_failed_call_rate_change 0.02" in progress.note
    # the binary reward's control is flat, so the success rows read INSENSITIVE meanwhile
    assert rows["No harm"].status == "INSENSITIVE"
    flat = _pt("o", "oracle", live_sensitivity_progress=FLAT, **live)
    rows = {r.criterion: r for r in verdict(synth, run_control([synth, flat], synth))}
    assert rows["Graded progress (beside #887)"].status == "INSENSITIVE"
    # the mismatched control's change is shown beside it
    wrong = _pt("m", "mismatched", live_gold_actions_matched_change=GOOD, **live)
    assert run_negative([synth, oracle, wrong], synth) is wrong
    row = {r.criterion: r for r in verdict(synth, run_control([synth, oracle], synth),
                                           wrong)}["Graded progress (beside #887)"]
    assert "mismatched control 0.30 [0.10, 0.50] (width 0.40) n=30" in row.note
    # a replay-only point has no progress row at all
    replay = _pt("r", "skillsynth", step_reduction=GOOD)
    assert "Graded progress (beside #887)" not in {r.criterion for r in verdict(replay)}


def test_gain_recovered_on_graded_progress_reads_each_runs_gold_share():
    # 12 probes in 6 families, success 0 everywhere: the share of gold actions done moves
    def rows(point, arm, shares):
        return [dict(r, gold_matched=g) for r, g in
                zip(_rows(point, arm, [0] * len(shares)), shares, strict=True)]
    none = [0.0] * 12
    oracle = [0.5] * 6 + [0.75] * 6
    design = [0.25] * 6 + [0.0] * 6
    table = pd.DataFrame(rows("s", "no-memory", none) + rows("s", "memory", design)
                         + rows("o", "no-memory", none) + rows("o", "memory", oracle))
    k = gain_recovered(table, {"id": "s"}, {"id": "o"}, basis="progress")
    # (0.125 - 0) / (0.625 - 0) = 0.2, worked by hand
    assert k.name == "oracle_gain_recovered_progress" and abs(k.value - 0.2) < 1e-9
    # the oracle's gain the same 0.5 in each of the 6 families: up to 3.841459 / 9.841459 =
    # 0.390333 of families could differ, down to -1, so 0.5 - 0.390333 * 1.5 < 0: a gain
    # that may be nothing, not a denominator (a resampling interval would say [0.5, 0.5])
    flat = pd.DataFrame(rows("s", "no-memory", none) + rows("s", "memory", design)
                        + rows("o", "no-memory", none) + rows("o", "memory", [0.5] * 12))
    flat_k = gain_recovered(flat, {"id": "s"}, {"id": "o"}, basis="progress")
    assert flat_k.value is None and "[-0.09, 0.70]" in flat_k.note
    assert gain_recovered(table, {"id": "s"}, {"id": "o"}, basis="success").value is None
    # rows written before graded progress existed: nothing to pair
    assert gain_recovered(table.drop(columns="gold_matched"), {"id": "s"}, {"id": "o"},
                          basis="progress").n == 0


def test_progress_over_mismatched_pairs_each_probe_with_the_wrong_procedures_run():
    def rows(point, arm, shares):
        return [dict(r, gold_matched=g) for r, g in
                zip(_rows(point, arm, [0] * len(shares)), shares, strict=True)]
    # the oracle's 0.5 on every probe against a wrong procedure's 0.5 on half of them
    table = pd.DataFrame(rows("o", "no-memory", [0.0] * 12) + rows("o", "memory", [0.5] * 12)
                         + rows("m", "no-memory", [0.0] * 12)
                         + rows("m", "memory", [0.5] * 6 + [0.0] * 6))
    points = [_pt("o", "oracle", live_success_change=FLAT),
              _pt("m", "mismatched", live_success_change=FLAT)]
    k = over_mismatched(table, points[0], points[1])
    assert abs(k.value - 0.25) < 1e-9 and k.n == 12 and k.n_families == 6
    shown = controls_table(points, table).set_index("strategy")["progress_over_mismatched"]
    assert shown["oracle"].startswith("0.25 [") and shown["mismatched"] == "-"
    # rows without the writes column (written before it) show no figure
    assert controls_table(points, table).set_index("strategy").loc[
        "oracle", "writes_over_mismatched"] == "-"
    writes = table.assign(gold_writes_matched=[0.0] * 36 + [0.0] * 6 + [1.0] * 6)
    k = over_mismatched(writes, points[0], points[1], basis="writes")
    # the mismatched arm made the write on its last 6 probes, the oracle on none: -0.5
    assert k.name == "writes_over_mismatched" and abs(k.value + 0.5) < 1e-9 and k.n == 12
    assert controls_table(points, writes).set_index("strategy").loc[
        "oracle", "writes_over_mismatched"].startswith("-0.50 [")


def test_the_controls_say_how_the_live_arms_were_decoded():
    assert decoding({"live": False, "repeats": 3}) == ""
    assert "one greedy run per arm" in decoding({"live": True})
    assert "one greedy run" in decoding({"live": True, "repeats": 1, "temperature": 0.7})
    sampled = decoding({"live": True, "repeats": 3, "temperature": 0.3})
    assert "3 runs per arm" in sampled and "temperature 0.3" in sampled


def _graded(point, matched):
    """Memory-arm rows of one point, graded: probe p<i> in family f<i // 2>."""
    return [{"point": point, "arm": arm, "probe_session": f"p{i}", "family": f"f{i // 2}",
             "steps_method": "live", "success": 0.0, "gold_matched": g if arm == "memory"
             else 0.0, "steps_recorded": 3, "steps": 3}
            for i, g in enumerate(matched) for arm in ("memory", "no-memory")]


def test_the_ladder_reads_the_dataflow_rung_as_a_share_of_the_arguments_gain():
    # 12 probes in 6 families: a wrong procedure matches 0.1 of the gold actions, the gold
    # arguments 0.5 (0.4 in three families, 0.6 in three), the dataflow rung 0.3: (0.3-0.1)/(0.5-0.1) = 0.5
    wrong, best, rung = [0.1] * 12, [0.4] * 6 + [0.6] * 6, [0.3] * 12
    rows = pd.DataFrame(_graded("m", wrong) + _graded("a", best) + _graded("d", rung))
    k = args_gain_over_mismatched(rows, {"id": "d"}, {"id": "m"}, {"id": "a"})
    assert k.value == 0.5 and k.n == 12 and k.lo is not None and k.lo < 0.5 < k.hi
    live = {"live_success_change": FLAT, "live_gold_actions_matched_change": GOOD}
    points = [_pt("a", "oracle-args", **live), _pt("d", "oracle-dataflow", **live),
              _pt("m", "mismatched", **live)]
    table = controls_table(points, rows)
    assert list(table["strategy"]) == ["mismatched", "oracle-dataflow", "oracle-args"]
    assert table.loc[1, "args_gain_over_mismatched"].startswith("0.50 [")
    assert list(table.loc[[0, 2], "args_gain_over_mismatched"]) == ["-", "-"]
    # an upper bound no better than the wrong procedure: the share is not measured
    rows = pd.DataFrame(_graded("m", wrong) + _graded("a", wrong) + _graded("d", rung))
    k = args_gain_over_mismatched(rows, {"id": "d"}, {"id": "m"}, {"id": "a"})
    assert k.value is None and "does not exclude 0" in k.note


def test_points_that_showed_the_distiller_values_are_named():
    from skillsynth.evaluation.reporting.controls import user_data_note

    pts = pd.DataFrame({"point": ["a", "v", "p"], "distill_args": ["none", "values",
                                                                    "provenance"]})
    note = user_data_note(pts)
    assert note.startswith("user data: v showed the distiller") and " a," not in note
    assert user_data_note(pts[pts["point"] != "v"]) == ""
    assert user_data_note(pd.DataFrame({"point": ["a"]})) == ""  # runs before the option


def test_a_plan_point_is_also_read_against_the_mismatched_plan_of_its_own_form():
    def plan(pid, strategy, form, choices=True):
        pt = _pt(pid, strategy, live_success_change=FLAT)
        return pt | {"protocol": pt["protocol"] | {"procedure_form": form,
                                                   "plan_choices": choices}}
    # the task's plan 0.3 on every probe; prose mismatched 0.1; the plan form's control 0.2
    rows = pd.DataFrame(_graded("m", [0.1] * 12) + _graded("mp", [0.2] * 12)
                        + _graded("op", [0.3] * 12) + _graded("ob", [0.3] * 12)
                        + _graded("on", [0.3] * 12) + _graded("pr", [0.3] * 12))
    points = [_pt("m", "mismatched", live_success_change=FLAT),
              plan("mp", "mismatched-plan", "plan"), plan("op", "oracle-plan", "plan"),
              plan("ob", "oracle-plan", "both"), plan("on", "oracle-plan", "plan", False),
              _pt("pr", "oracle", live_success_change=FLAT)]
    table = controls_table(points, rows).set_index("point")
    # over prose mismatched 0.2; over the control of its own form (plan, choices) 0.1
    assert table.loc["op", "progress_over_mismatched"].startswith("0.20 [")
    assert table.loc["op", "progress_over_form_control"].startswith("0.10 [")
    # another form, choices withheld, prose, the control itself: no control of their form
    assert list(table.loc[["ob", "on", "pr", "mp", "m"], "progress_over_form_control"]) \
        == ["-"] * 5
