"""Intervals honest at small n, and the verdict statuses they feed: hand-worked cases."""

from __future__ import annotations

import json
import math

import pytest

from skillsynth.errors import EvaluationError
from skillsynth.evaluation.point.control_checks import oracle_gain_recovered
from skillsynth.evaluation.point.metrics import (
    MIN_FAMILIES,
    ProbeResult,
    cluster_t_interval,
    design_effect,
    mean_kpi,
    point_kpis,
    proportion_kpi,
    wilson_interval,
)
from skillsynth.evaluation.reporting.verdict import control_check, judge, verdict

# z = 1.959964 (the 97.5% normal quantile), z^2 = 3.841459 throughout.


def test_wilson_bounds_match_the_hand_computed_ones():
    # 3 of 3: p = 1, n = 3. den = 1 + z^2/3 = 2.280486;
    #   centre = (1 + z^2/6) / den = 1.640243 / 2.280486 = 0.719251;
    #   half = z * sqrt(0 + z^2/36) / den = 1.959964 * 0.326660 / 2.280486 = 0.280748;
    #   lo = 0.438503, hi = 1.0 (a bootstrap gives [1, 1]).
    assert wilson_interval(3, 3) == pytest.approx((0.438503, 1.0), abs=1e-5)
    # 1 of 4: p = 0.25. den = 1 + z^2/4 = 1.960365;
    #   centre = (0.25 + z^2/8) / den = 0.730182 / 1.960365 = 0.372473;
    #   half = z * sqrt(0.25 * 0.75 / 4 + z^2/64) / den = 1.959964 * sqrt(0.106898) / den
    #        = 1.959964 * 0.326952 / 1.960365 = 0.326885;  [0.045588, 0.699358]
    assert wilson_interval(1, 4) == pytest.approx((0.045588, 0.699358), abs=1e-5)
    # 1 of 1: den = 1 + z^2 = 4.841459; centre = (1 + z^2/2) / den = 0.603275;
    #   half = z * sqrt(z^2/4) / den = z^2 / 2 / den = 0.396725;  [0.206550, 1.0]
    assert wilson_interval(1, 1) == pytest.approx((0.206550, 1.0), abs=1e-5)
    assert wilson_interval(0, 0) == (None, None)


def test_the_design_effect_is_kish_with_the_anova_icc_and_widens_the_interval():
    # families A = [1, 1], B = [0, 0], C = [1, 0]: N = 6, G = 3, m = 2, grand mean 0.5.
    #   MSB = 2 * (0.25 + 0.25 + 0) / 2 = 0.5;  MSW = (0 + 0 + 2 * 0.25) / (6 - 3) = 1/6;
    #   m0 = (6 - 12/6) / 2 = 2;  ICC = (0.5 - 1/6) / (0.5 + 1 * 1/6) = 0.5;
    #   deff = 1 + (2 - 1) * 0.5 = 1.5, so n_eff = 4 and the share 0.5 is 2 of 4:
    #   Wilson(2, 4): centre 0.5, half = z * sqrt(0.0625 + z^2/64) / (1 + z^2/4)
    #   = 1.959964 * 0.350033 / 1.960365 = 0.349961 -> [0.150039, 0.849961].
    values, fams = [1, 1, 0, 0, 1, 0], ["A", "A", "B", "B", "C", "C"]
    deff, icc = design_effect(values, fams)
    assert (deff, icc) == (pytest.approx(1.5), pytest.approx(0.5))
    k = proportion_kpi("x", values, unit="probes", clusters=fams)
    assert (k.lo, k.hi) == (pytest.approx(0.150039, abs=1e-5), pytest.approx(0.849961, abs=1e-5))
    assert (k.kind, k.method, k.n_families, k.design_effect) == ("proportion", "wilson-deff", 3,
                                                                   1.5)
    alone = proportion_kpi("x", values, unit="probes")  # unclustered: n = 6, deff = 1
    assert alone.method == "wilson" and alone.design_effect == 1.0
    assert k.hi - k.lo > alone.hi - alone.lo
    # uncorrelated families (every family alike): the ICC clips at 0, the effect at 1
    assert design_effect([1, 0, 1, 0], ["A", "A", "B", "B"])[0] == 1.0
    # one family: its probes count as one observation, whatever their number
    one = proportion_kpi("x", [1.0] * 8, unit="probes", clusters=["A"] * 8)
    assert one.design_effect == 8.0 and (one.lo, one.hi) == pytest.approx(wilson_interval(1, 1))


def test_the_cluster_t_interval_is_the_t_interval_of_family_means_for_equal_families():
    # family means 0.3, 0.6, 0.0: mean 0.3, s = sqrt((0 + 0.09 + 0.09) / 2) = 0.3,
    # se = 0.3 / sqrt(3) = 0.173205; t(0.975, 2 df) = 4.302653; half = 0.745241
    values, fams = [0.2, 0.4, 0.5, 0.7, 0.0, 0.0], ["A", "A", "B", "B", "C", "C"]
    lo, hi = cluster_t_interval(values, fams)
    assert (lo, hi) == (pytest.approx(0.3 - 0.745241, abs=1e-5),
                        pytest.approx(0.3 + 0.745241, abs=1e-5))
    assert cluster_t_interval([1.0, 2.0], ["A", "A"]) == (None, None)


def test_mean_intervals_depend_on_how_many_families_there_are():
    one = mean_kpi("m", [0.5, 0.5, 0.5], unit="probes", clusters=["A"] * 3)
    assert (one.value, one.lo, one.hi, one.method) == (0.5, None, None, "unavailable")
    few = mean_kpi("m", [0.2, 0.4, 0.5, 0.7, 0.0, 0.0], unit="probes",
                   clusters=["A", "A", "B", "B", "C", "C"])
    assert few.method == "cluster-t" and few.n_families == 3 and few.hi - few.lo > 1.0
    fams = [f"f{i}" for i in range(MIN_FAMILIES)]
    many = mean_kpi("m", [0.1 * i for i in range(MIN_FAMILIES)], unit="probes",
                    clusters=fams, n_boot=500)
    assert many.method == "cluster-bootstrap" and many.lo < many.value < many.hi
    again = mean_kpi("m", [0.1 * i for i in range(MIN_FAMILIES)], unit="probes",
                     clusters=fams, n_boot=500)
    assert again == many  # seeded
    # the same family means as a share's change: the t interval (-0.45, 1.05) is clipped to
    # what a mean of values in [-1, 1] can be; a bound on one side clips only that side
    bounded = mean_kpi("m", [0.2, 0.4, 0.5, 0.7, 0.0, 0.0], unit="probes",
                       clusters=["A", "A", "B", "B", "C", "C"], bounds=(-1.0, 1.0))
    assert (bounded.lo, bounded.hi) == (pytest.approx(few.lo), 1.0)
    low_only = mean_kpi("m", [0.2, 0.4, 0.5, 0.7, 0.0, 0.0], unit="probes",
                        clusters=["A", "A", "B", "B", "C", "C"], bounds=(0.0, None))
    assert (low_only.lo, low_only.hi) == (0.0, pytest.approx(few.hi))


def _probe(family, i, *, fired=True, right=1, recorded=4, steps=3):
    return ProbeResult("skillsynth", "memory", f"{family}-{i}", family, "g",
                       ("p",) * right, (0.9,) * right, right, fired, recorded, steps,
                       "replay-v1", True)


def test_a_mean_without_variation_gets_a_width_from_the_families_that_could_differ():
    # 20 families, no change in any: Wilson's upper bound for 0 of 20 is
    # z^2 / (20 + z^2) = 3.841459 / 23.841459 = 0.161125, and a change in [-1, 1] at 0 can
    # move that share of 1 either way: [-0.161125, 0.161125], never [0, 0].
    fams = [f"f{i}" for i in range(20)]
    none = mean_kpi("change", [0.0] * 20, unit="probes", clusters=fams, bounds=(-1.0, 1.0))
    assert none.method == "no-variation" and none.value == 0.0
    assert (none.lo, none.hi) == (pytest.approx(-0.161125, abs=1e-6),
                                  pytest.approx(0.161125, abs=1e-6))
    # at a bound only the other side opens: shares of 0 in [0, 1] over 7 families,
    # 3.841459 / 10.841459 = 0.354330 (the Wilson interval of 0 of 7)
    floor = mean_kpi("share", [0.0] * 14, unit="probes",
                     clusters=[f"f{i // 2}" for i in range(14)], bounds=(0.0, 1.0))
    assert (floor.lo, floor.hi) == (0.0, pytest.approx(0.354330, abs=1e-6))
    assert floor.hi == pytest.approx(wilson_interval(0, 7)[1])
    # 0.5 everywhere in [0, 1], 3 families: 0.5 -+ 0.5 * 3.841459 / 6.841459 = 0.280749
    mid = mean_kpi("m", [0.5] * 3, unit="probes", clusters=["A", "B", "C"], bounds=(0.0, 1.0))
    assert (mid.lo, mid.hi) == (pytest.approx(0.5 - 0.280749, abs=1e-6),
                                pytest.approx(0.5 + 0.280749, abs=1e-6))
    # no bound on the values: nothing limits an unseen value, so no interval, said
    open_ = mean_kpi("steps", [2.0] * 6, unit="probes", clusters=fams[:6], bounds=(1.0, None))
    assert (open_.lo, open_.hi, open_.method) == (None, None, "no-variation")
    assert "no bound" in open_.note
    # one family stays without an interval; any variation goes back to resampling
    assert mean_kpi("m", [0.0] * 3, unit="probes", clusters=["A"] * 3,
                    bounds=(-1.0, 1.0)).method == "unavailable"
    assert mean_kpi("m", [0.0] * 19 + [1.0], unit="probes", clusters=fams,
                    bounds=(-1.0, 1.0), n_boot=200).method == "cluster-bootstrap"
    # the verdict reads the honest width: no change over 20 families does not pass "no harm"
    assert judge(none, -0.05, strict=False)[0] == "INCONCLUSIVE"


def test_point_kpis_declare_a_kind_per_kpi_and_keep_the_old_keys():
    rows = [_probe(f"f{i % 3}", i, fired=i % 2 == 0) for i in range(6)]
    k = point_kpis(rows, [], {"memory-disabled": True}, n_boot=200)
    kinds = {name: v.kind for name, v in k.items()}
    assert kinds["synthesis_fired_rate"] == kinds["recall_hit_rate"] == "proportion"
    assert kinds["recall_precision"] == kinds["share_made_worse"] == "proportion"
    assert kinds["floors_behaved"] == kinds["validity_gaia691"] == "proportion"
    assert kinds["step_reduction"] == kinds["steps_saved"] == "mean"
    assert kinds["llm_calls"] == kinds["duplicate_name_count"] == "count"
    d = k["synthesis_fired_rate"].as_dict()
    assert {"name", "value", "lo", "hi", "n", "unit", "estimate"} <= set(d)
    assert d["n_families"] == 3 and d["n"] == 6
    # every probe's steps fell by 1 of 4: no variation, and a reduction has no lower bound
    # (a run can take any number of steps more), so no interval rather than [0.25, 0.25]
    assert k["step_reduction"].value == pytest.approx(0.25)
    assert k["step_reduction"].method == "no-variation" and k["step_reduction"].lo is None
    json.dumps({n: v.as_dict() for n, v in k.items()})



def _point(**kpis):
    base = {"validity_gaia691": {"value": 1.0, "lo": 0.4, "hi": 1.0, "n": 3},
            "validity_agentskills": {"value": 1.0, "lo": 0.4, "hi": 1.0, "n": 3},
            "grounded_tools_rate": {"value": 1.0, "lo": 0.4, "hi": 1.0, "n": 3},
            "provenance_integrity": {"value": 1.0, "lo": 0.4, "hi": 1.0, "n": 3}}
    return {"id": "p", "strategy": "skillsynth", "params": {}, "kpis": base | kpis,
            "floors": {"recall-threshold-and-state": True, "disabled-not-recalled": True}}


def _rows(point):
    return {r.criterion: r for r in verdict(point)}


def test_one_family_never_passes_however_many_probes_agree():
    rows = [_probe("only", i, recorded=4, steps=1) for i in range(12)]
    k = {n: v.as_dict() for n, v in point_kpis(rows, [], {}, n_boot=200).items()}
    assert k["synthesis_fired_rate"]["value"] == 1.0 and k["synthesis_fired_rate"]["lo"] < 0.25
    assert k["recall_precision"]["lo"] < 1.0  # the "1.00 [1.00, 1.00] n=1" of old
    got = _rows(_point(**k))
    for criterion in ("Auto-synthesis fires", "Tool-step reduction"):
        assert got[criterion].status == "INCONCLUSIVE", criterion
        assert "1 family < 6" in got[criterion].why
    assert got["Tool-step reduction"].lo is None  # a mean over one family has no interval
    # the same outcomes over enough families pass
    rows = [_probe(f"f{i}", i, recorded=4, steps=1 + i % 2) for i in range(12)]
    k = {n: v.as_dict() for n, v in point_kpis(rows, [], {}, n_boot=300).items()}
    got = _rows(_point(**k))
    assert got["Auto-synthesis fires"].status == got["Tool-step reduction"].status == "PASS"
    assert got["Tool-step reduction"].n_families == 12


def test_the_rule_reads_inconclusive_where_the_interval_or_n_cannot_decide():
    def k(value, lo, hi, n=40, fams=10):
        return {"value": value, "lo": lo, "hi": hi, "n": n, "n_families": fams}

    assert judge(k(0.2, 0.1, 0.3), 0.0, strict=True) == ("PASS", "")
    assert judge(k(-0.2, -0.3, 0.0), 0.0, strict=True) == ("FAIL", "")
    assert judge(k(0.0, 0.0, 0.1), 0.0, strict=False) == ("PASS", "")  # at the target passes
    status, why = judge(k(0.1, -0.1, 0.3), 0.0, strict=True)
    assert status == "INCONCLUSIVE" and "[-0.10, 0.30] (width 0.40)" in why and "n=40" in why
    status, why = judge(k(0.5, 0.4, 0.6, n=5, fams=5), 0.0, strict=True)
    assert status == "INCONCLUSIVE" and "5 families < 6" in why
    assert judge(k(0.5, None, None), 0.0, strict=True)[0] == "INCONCLUSIVE"
    assert judge(k(None, None, None, n=0, fams=0), 0.0, strict=True)[0] == "NOT MEASURED"
    # a run written before n_families: n is an upper bound on the families
    old = {"value": 0.0, "lo": 0.0, "hi": 0.0, "n": 2}
    status, why = judge(old, 0.0, strict=False)
    assert status == "INCONCLUSIVE" and "n=2 < 6" in why
    assert judge(dict(old, n=10), 0.0, strict=False)[0] == "PASS"


def _live(change, steps, **extra):
    return _point(live_success_change=change, live_step_reduction=steps,
                  live_share_made_worse={"value": 0.1, "lo": 0.0, "hi": 0.3, "n": 20,
                                         "n_families": 10}, **extra)


GOOD = {"value": 0.3, "lo": 0.1, "hi": 0.5, "n": 20, "n_families": 10}
HARM = {"value": -0.3, "lo": -0.5, "hi": -0.1, "n": 20, "n_families": 10}


def test_an_insensitive_instrument_reads_insensitive_not_pass_or_fail():
    flat = {"value": 0.05, "lo": -0.1, "hi": 0.2, "n": 20, "n_families": 10}
    pt = _live(HARM, GOOD, live_sensitivity_success=flat, live_sensitivity_steps=flat)
    got = _rows(pt)
    for criterion, was in (("No harm", "FAIL"), ("Tool-step reduction", "PASS")):
        row = got[criterion]
        assert row.status == "INSENSITIVE", criterion
        assert "does not separate from none" in row.why and f"otherwise {was}" in row.why
    assert "live_sensitivity_steps 0.05 [-0.10, 0.20]" in got["Tool-step reduction"].why
    assert "live_sensitivity_success" in got["No harm"].why
    # a control that shows a gain leaves the status and says so
    pt = _live(HARM, GOOD, live_sensitivity_success=GOOD, live_sensitivity_steps=GOOD)
    got = _rows(pt)
    assert (got["No harm"].status, got["Tool-step reduction"].status) == ("FAIL", "PASS")
    assert "separates from none" in got["Tool-step reduction"].note
    # an ideal procedure that scores below none: the measure cannot show a gain
    got = _rows(_live(HARM, GOOD, live_sensitivity_success=GOOD, live_sensitivity_steps=HARM))
    assert got["Tool-step reduction"].status == "INSENSITIVE"
    assert "scores below none" in got["Tool-step reduction"].why
    # a replay point reads the replay control
    rp = _point(step_reduction=GOOD, replay_sensitivity_steps=flat)
    assert _rows(rp)["Tool-step reduction"].status == "INSENSITIVE"
    # a control over too few families cannot show sensitivity either
    few = dict(GOOD, n_families=2)
    assert control_check({"c": few}, "c")[0] is False


def test_without_a_control_the_rows_keep_their_status_and_say_it_was_not_run():
    got = _rows(_live(HARM, GOOD))
    assert (got["No harm"].status, got["Tool-step reduction"].status) == ("FAIL", "PASS")
    assert "positive control not run (live_sensitivity_steps absent)" in \
        got["Tool-step reduction"].note
    assert control_check({}, "live_sensitivity_success") == (
        None, "positive control not run (live_sensitivity_success absent)")
    # an unmeasured row stays NOT MEASURED, control or not
    none = {"value": None, "lo": None, "hi": None, "n": 0}
    got = _rows(_live(none, none, live_sensitivity_steps={"value": 0.0, "lo": -0.1,
                                                         "hi": 0.1, "n": 20, "n_families": 9}))
    assert got["Tool-step reduction"].status == "NOT MEASURED"


def test_the_gate_passes_undecided_rows_but_marks_them_and_fails_a_fail(tmp_path, capsys):
    from skillsynth.cli import main
    from skillsynth.evaluation.reporting.report import gate

    flat = {"value": 0.05, "lo": -0.1, "hi": 0.2, "n": 20, "n_families": 10}
    pt = _live(GOOD, {"value": 0.3, "lo": 0.1, "hi": 0.5, "n": 3, "n_families": 2},
               synthesis_fired_rate=GOOD, live_sensitivity_success=flat)
    pt["floors"] = {"recall-threshold-and-state": True, "disabled-not-recalled": True}
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"points": [pt], "failed": {}}))
    checks = {c.check: c for c in gate(run, verdict=True)}
    steps = checks["verdict (recommended): Tool-step reduction"]
    harm = checks["verdict (recommended): No harm"]
    assert steps.ok and steps.warn and "INCONCLUSIVE (2 families < 6" in steps.required
    assert harm.ok and harm.warn and "status INSENSITIVE" in harm.required
    assert not checks["verdict (recommended): Auto-synthesis fires"].warn
    assert main(["gate", str(run), "--verdict"]) == 0
    out = capsys.readouterr().out
    assert out.count("WARN ") == 2 and "2 undecided" in out
    pt["kpis"]["live_step_reduction"] = HARM  # decided, no control run: a FAIL fails
    (run / "summary.json").write_text(json.dumps({"points": [pt], "failed": {}}))
    assert main(["gate", str(run), "--verdict"]) == 1
    assert "FAIL p verdict (recommended): Tool-step reduction" in capsys.readouterr().out


def test_oracle_gain_recovered_on_hand_made_arms():
    fams = [f"f{i}" for i in range(6)]
    none = [0.0] * 6
    oracle = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]  # mean 5/6
    synth = [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # mean 2/6
    k = oracle_gain_recovered(none, synth, oracle, fams, n_boot=500)
    assert k.value == pytest.approx((2 / 6) / (5 / 6))  # 0.4
    assert k.kind == "ratio" and k.method == "cluster-bootstrap"
    assert k.lo < k.value < k.hi and k.n == 6 and k.n_families == 6
    # arms are resampled together: synthesis equal to the oracle recovers exactly all of it
    same = oracle_gain_recovered(none, oracle, oracle, fams, n_boot=500)
    assert (same.value, same.lo, same.hi) == (1.0, 1.0, 1.0)
    # an oracle no better than none: the denominator's interval spans 0, not measured
    flat = oracle_gain_recovered(none, synth, [1.0, -1.0, 1.0, -1.0, 0.0, 0.0], fams,
                                 n_boot=500)
    assert flat.value is None and "does not exclude 0" in flat.note
    row_status, _ = judge(flat.as_dict(), 0.0, strict=True)
    assert row_status == "NOT MEASURED"
    # few families: the figure without an interval
    few = oracle_gain_recovered([0.0] * 3, [0.5, 0.5, 0.0], [1.0, 1.0, 0.9], ["a", "b", "c"])
    assert few.value == pytest.approx(1.0 / 2.9) and few.lo is None and "3 families" in few.note
    with pytest.raises(EvaluationError, match="one value per probe"):
        oracle_gain_recovered([0.0], [0.0, 1.0], [1.0], ["a"])


def test_a_proportion_with_repeats_uses_each_probes_rate():
    # success rates over 2 repeats per probe, 6 families of one probe: deff 1, Wilson(3, 6)
    k = proportion_kpi("rate", [0.5, 0.5, 1.0, 0.0, 0.5, 0.5], unit="probes",
                       clusters=[f"f{i}" for i in range(6)])
    assert k.value == pytest.approx(0.5)
    assert (k.lo, k.hi) == pytest.approx(wilson_interval(3, 6))
    assert not math.isclose(k.hi - k.lo, 0.0)


def test_the_report_shows_families_and_why_and_reads_runs_written_before_them(tmp_path):
    from skillsynth.evaluation.reporting.report import kpi_table, load_run, verdict_table

    rows = [_probe("only", i, recorded=4, steps=1) for i in range(4)]
    kpis = {n: v.as_dict() for n, v in point_kpis(rows, [], {}, n_boot=100).items()}
    pt = _point(**kpis) | {"params": {"similarity_tau": 0.5, "min_occurrences": 3,
                                      "max_recall_body_chars": 1500},
                           "wall_s": 1.0, "split": {"probes": 4}}
    old = json.loads(json.dumps(pt)) | {"id": "old"}
    for k in old["kpis"].values():  # as a run written before kinds and families
        for key in ("kind", "method", "n_families", "design_effect", "note"):
            k.pop(key, None)
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(
        {"name": "t", "finished": 2, "n_points": 2, "points": [pt, old], "failed": {}}))
    r = load_run(run)
    fams = r.points["synthesis_fired_rate_families"]
    assert fams[0] == 1 and math.isnan(fams[1])
    table = verdict_table(r)
    fires = table[table.criterion == "Auto-synthesis fires"].iloc[0]
    assert fires.status == "INCONCLUSIVE" and "(1 family)" in fires.measured
    assert "1 family < 6" in fires.why
    assert len(kpi_table(r)) == 2
