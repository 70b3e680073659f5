"""The verdict table: #887's criteria against their targets, hand-worked points."""

from __future__ import annotations

from skillsynth.evaluation.reporting.verdict import (
    GAIA_DEFAULTS,
    gaia_default_point,
    recommend,
    verdict,
)


def _k(value, lo=None, hi=None, n=10):
    return {"value": value, "lo": value if lo is None else lo,
            "hi": value if hi is None else hi, "n": n}


def _point(pid, *, params=None, strategy="skillsynth", **kpis):
    base = {"synthesis_fired_rate": _k(0.4, 0.2, 0.6), "step_reduction": _k(-0.3, -0.5, -0.1),
            "share_made_worse": _k(0.6), "validity_gaia691": _k(1.0, n=3),
            "validity_agentskills": _k(1.0, n=3), "grounded_tools_rate": _k(1.0, n=3),
            "floors_behaved": _k(1.0, n=4), "recall_precision": _k(0.5, 0.3, 0.7),
            "provenance_integrity": _k(1.0, n=3)}
    return {"id": pid, "strategy": strategy, "params": params or {"similarity_tau": 0.5},
            "kpis": base | kpis,
            "floors": {"memory-disabled": True, "synthesis-disabled": True,
                       "llm-unavailable": True, "disabled-not-recalled": True,
                       "recall-threshold-and-state": True, "malformed-skipped": None}}


def _status(rows):
    return {r.criterion: (r.status, r.kpi, r.basis) for r in rows}


def test_replay_only_point_judges_steps_on_the_labelled_estimate():
    s = _status(verdict(_point("a")))
    assert s["Auto-synthesis fires"][0] == "PASS"  # [0.2, 0.6] clears 0
    assert s["Tool-step reduction"] == ("FAIL", "step_reduction", "replay estimate")
    assert s["No harm"][0] == "NOT MEASURED"  # no live arm
    assert {s[f"Format validity ({p})"][0] for p in ("gaia691", "agentskills")} == {"PASS"}
    assert s["No silent fallback"][0] == s["Recall precision"][0] == "PASS"


def test_live_point_uses_the_live_figures_and_intervals_decide():
    pt = _point("b", live_step_reduction=_k(0.2, -0.1, 0.5), live_success_change=_k(0.0, -0.2, 0.1),
                live_share_made_worse=_k(0.25), validity_gaia691=_k(0.5, n=2))
    rows = {r.criterion: r for r in verdict(pt)}
    steps = rows["Tool-step reduction"]
    assert (steps.status, steps.kpi, steps.basis) == ("INCONCLUSIVE", "live_step_reduction", "live")
    assert "live_share_made_worse 0.25" in steps.note
    assert rows["No harm"].status == "INCONCLUSIVE"  # [-0.2, 0.1] spans 0
    assert rows["Format validity (gaia691)"].status == "FAIL"
    # live arms but no probe that succeeded in both: the live figure is missing, not replaced
    none_ok = verdict(_point("f", live_step_reduction=_k(None, n=0),
                             live_success_change=_k(0.0, n=2), live_share_made_worse=_k(0.0, n=2),
                             step_reduction_live_probes=_k(-0.3, n=2)))
    steps = {r.criterion: r for r in none_ok}["Tool-step reduction"]
    assert (steps.status, steps.kpi, steps.basis) == ("NOT MEASURED", "live_step_reduction", "live")
    assert "replay estimate on these probes -0.30" in steps.note
    assert "live_share_made_worse 0.00" in {r.criterion: r for r in none_ok}["No harm"].note
    harmed = verdict(_point("c", live_step_reduction=_k(0.3, 0.1, 0.5),
                            live_success_change=_k(-0.3, -0.5, -0.1)))
    assert _status(harmed)["Tool-step reduction"][0] == "PASS"
    assert _status(harmed)["No harm"][0] == "FAIL"
    bad_floor = _point("d")
    bad_floor["floors"]["llm-unavailable"] = False
    row = {r.criterion: r for r in verdict(bad_floor)}["No silent fallback"]
    assert row.status == "FAIL" and "llm-unavailable" in row.note
    empty = _point("e", validity_gaia691=_k(None, n=0), step_reduction=_k(None, n=0))
    assert _status(verdict(empty))["Tool-step reduction"][0] == "NOT MEASURED"
    assert _status(verdict(empty))["Format validity (gaia691)"][0] == "NOT MEASURED"


def test_the_recommended_point_saves_most_without_losing_success():
    gaia = _point("gaia", params=dict(GAIA_DEFAULTS), step_reduction=_k(-0.01))
    low = _point("low", step_reduction=_k(0.10), share_made_worse=_k(0.5))
    tie = _point("tie", step_reduction=_k(0.10), share_made_worse=_k(0.2))
    harmful = _point("harm", live_step_reduction=_k(0.9), live_success_change=_k(-0.4, -0.6, -0.2))
    peer = _point("peer", strategy="gaia-greedy", step_reduction=_k(0.95))
    points = [gaia, low, tie, harmful, peer]
    assert recommend(points)["id"] == "tie"  # harmful loses success; peers are not candidates
    assert gaia_default_point(points)["id"] == "gaia"
    assert recommend([peer]) is None and gaia_default_point([low]) is None


def test_only_settings_gaia_can_run_are_recommended_and_rolling_speaks_for_gaia():
    goals = _point("goals", step_reduction=_k(0.5))
    goals["protocol"] = {"protocol": "strict", "recall_key": "goals", "rate": "calls"}
    session = _point("session", step_reduction=_k(0.4))
    session["protocol"] = {"protocol": "strict", "recall_key": "when_to_use", "rate": "session"}
    plain = _point("plain", step_reduction=_k(0.1))
    assert recommend([goals, session, plain])["id"] == "plain"  # the others need a GAIA change
    strict = _point("strict", params=dict(GAIA_DEFAULTS))
    strict["protocol"] = {"protocol": "strict", "recall_key": "when_to_use", "rate": "calls"}
    rolling = dict(strict, id="rolling", protocol=dict(strict["protocol"], protocol="rolling"))
    assert gaia_default_point([strict, rolling])["id"] == "rolling"
    assert gaia_default_point([strict])["id"] == "strict"


def test_the_gate_can_hold_the_verdict(tmp_path):
    import json

    from skillsynth.evaluation.reporting.report import gate

    ok = _point("ok", step_reduction=_k(0.3, 0.1, 0.5))
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"points": [ok], "failed": {}}))
    assert all(c.ok for c in gate(run)) and all(c.ok for c in gate(run, verdict=True))
    held = gate(run, verdict=True)
    assert any(c.check == "verdict (recommended): Tool-step reduction" for c in held)
    worse = _point("worse", step_reduction=_k(-0.3, -0.5, -0.1))
    (run / "summary.json").write_text(json.dumps({"points": [worse], "failed": {}}))
    assert all(c.ok for c in gate(run))  # without --verdict the research answer does not gate
    bad = [c for c in gate(run, verdict=True) if not c.ok]
    assert [c.check for c in bad] == ["verdict (recommended): Tool-step reduction"]
    assert "status FAIL" in bad[0].required


def test_a_baseline_entry_without_protocol_settings_holds_strict_points_only(tmp_path):
    import json

    from skillsynth.evaluation.reporting.report import gate

    strict = _point("strict", share_made_worse=_k(0.02))
    rolling = _point("rolling", share_made_worse=_k(0.5))
    rolling["protocol"] = {"protocol": "rolling", "recall_key": "goals", "rate": "calls"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"points": [strict, rolling], "failed": {}}))
    base = tmp_path / "b.json"
    entry = {"match": {"strategy": "skillsynth"}, "kpis": {"share_made_worse": {
        "value": 0.02, "tolerance": 0.1, "better": "lower"}}}
    base.write_text(json.dumps({"entries": [entry]}))
    held = [c for c in gate(run, base) if c.check == "share_made_worse"]
    assert [(c.point, c.ok) for c in held] == [("strict", True)]
    entry["match"] |= {"protocol": "rolling", "recall_key": "goals"}  # named: it holds it
    base.write_text(json.dumps({"entries": [entry]}))
    held = [c for c in gate(run, base) if c.check == "share_made_worse"]
    assert [(c.point, c.ok) for c in held] == [("rolling", False)]
