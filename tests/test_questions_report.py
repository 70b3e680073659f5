"""The report's "GAIA's open questions" section and ``report RUN --for-issue N``, on a
hand-written sweep summary whose figures are known (no kernel, no model)."""

from __future__ import annotations

import json

import pytest

from skillsynth.cli import main
from skillsynth.errors import EvaluationError
from skillsynth.evaluation.reporting.questions import (
    ISSUES,
    fmt_kpi,
    for_issue,
    gaia_shipped_point,
    question_rows,
)

GAIA = {"similarity_tau": 0.82, "min_occurrences": 3, "max_recall_body_chars": 1500}


def _kpi(value, n=30, lo=None, hi=None, unit="recalled", fams=None, note=""):
    return {"value": value, "lo": lo, "hi": hi, "n": n, "unit": unit, "n_families": fams,
            "note": note}


def _point(pid, strategy, params, protocol, **kpis):
    base = {"step_reduction": _kpi(0.1, unit="probes", fams=8)}
    return {"id": pid, "strategy": strategy, "params": params, "protocol": protocol,
            "kpis": base | kpis, "versions": {"skillsynth": "0.9", "chat_model": "qwen",
                                               "embedder": "minilm"},
            "corpus": {"path": "main.db", "sha256": "ab" * 32}}


ROLLING = {"protocol": "rolling", "recall_key": "when_to_use", "rate": "calls",
           "recall_cut": "raw"}
POINTS = [
    _point("gaia", "skillsynth", GAIA, ROLLING,
           recall_body_cut_mid_step_share=_kpi(0.4, 30, 0.25, 0.57, fams=8),
           recall_body_cut_share=_kpi(0.5, 30, 0.3, 0.7, fams=8),
           procedures_per_family=_kpi(1.0, 5, 1.0, 1.0, "families", 5),
           starts_until_drained=_kpi(2.0, 6, unit="starts"),
           startup_model_calls=_kpi(1.5, 6, unit="starts"),
           startup_seconds=_kpi(2.0, 6, unit="starts"), distill_cap=_kpi(10.0, 6, unit="starts"),
           recall_hit_rate=_kpi(0.04, 50, 0.01, 0.12, "probes", 50)),
    _point("gaia-whole", "skillsynth", GAIA, ROLLING | {"recall_cut": "whole_steps"},
           recall_body_cut_mid_step_share=_kpi(0.0, 30, 0.0, 0.1, fams=8)),
    _point("best", "skillsynth", {**GAIA, "similarity_tau": 0.31, "recall_tau": 0.24},
           ROLLING | {"protocol": "strict"}, step_reduction=_kpi(0.3, unit="probes", fams=8),
           recall_hit_rate=_kpi(0.42, 50, 0.3, 0.55, "probes", 50)),
    _point("shipped", "gaia-shipped", GAIA, ROLLING,
           procedures_per_family=_kpi(2.5, 4, 1.5, 3.5, "families", 4),
           fragmented_family_share=_kpi(0.75, 4, 0.3, 0.95, "families"),
           starts_until_drained=_kpi(None, 6, unit="starts", note="not drained"),
           startup_model_calls=_kpi(2.0, 6, unit="starts"),
           startup_seconds=_kpi(30.0, 6, unit="starts"), distill_cap=_kpi(2.0, 6, unit="starts"),
           startup_backlog_max=_kpi(3.0, 6, unit="starts"),
           outcome_updates_recorded=_kpi(0.0, 4, unit="procedures"),
           outcome_updates_possible=_kpi(12.0, 12),
           procedures_below_rate_with_feedback=_kpi(1.0, 3, unit="procedures"),
           duplicate_procedure_pairs=_kpi(2.0, 6, unit="pairs"),
           duplicate_procedure_share=_kpi(0.5, 4, 0.2, 0.8, "procedures"),
           duplicate_pairs_same_family=_kpi(1.0, 2, unit="pairs")),
    _point("shipped-cap5", "gaia-shipped", {**GAIA, "max_distill_calls_per_pass": 5}, ROLLING,
           starts_until_drained=_kpi(1.0, 6, unit="starts")),
]


def test_one_row_per_question_with_gaias_defaults_the_recommended_point_and_gaias_pass():
    rows = {(r.issue, r.question[:8]): r for r in question_rows(POINTS)}
    assert [r.issue for r in question_rows(POINTS)] == [
        "amd/gaia#2676", "amd/gaia#2676", "amd/gaia#4033", "amd/gaia#4033",
        "amd/gaia PR #2685", "amd/gaia#1818, #1828", "GAIA memory: 0.82 and its embedder"]
    cut = rows["amd/gaia#2676", "How ofte"]
    assert cut.gaia_defaults == "0.40 [0.25, 0.57] n=30 recalled, 8 families; cut 0.50"
    assert cut.gaia_shipped == "n/a (not in this run)"  # the point has no such KPI
    assert cut.take.startswith("40% of recalled procedures reach the planner cut inside a "
                               "step at 1500 characters")
    whole = rows["amd/gaia#2676", "And cut "]
    assert whole.gaia_defaults.startswith("0.00 [0.00, 0.10] n=30")  # the whole_steps twin
    assert whole.recommended == "not run"  # the recommended point has no whole_steps twin
    assert "run it live" in whole.take
    frag = rows["amd/gaia#4033", "How many"]
    assert frag.take == ("GAIA's own pass: 2.5 active procedures per served goal, 75% of "
                         "goals served by more than one: procedures fragment; reconcile "
                         "across passes")
    start = rows["amd/gaia#4033", "What doe"]
    assert start.take == ("GAIA's own pass: with a cap of 2 the backlog (at most 3 clusters) "
                          "was not drained in 6 starts; 2.0 distillations and 30.0 s per "
                          "start here")
    assert "n/a (n=6; not drained)" in start.gaia_shipped
    assert start.gaia_defaults.startswith("2.00 n=6 starts")
    assert "0 count update(s) recorded against 12" in rows["amd/gaia PR #2685", "Do succe"].take
    assert "2 duplicate pair(s), 50% of active procedures; 1 within one labelled goal" in \
        rows["amd/gaia#1818, #1828", "Do activ"].take
    tau = rows["GAIA memory: 0.82 and its embedder", "Does rec"]
    assert tau.take.startswith("at 0.82 recall finds a procedure of the probe's own goal for "
                               "4% of probes; at the recommended point (recall tau 0.24) 42%")
    assert tau.take.endswith(": calibrate tau per embedder (skillsynth calibrate) and judge "
                             "it downstream")  # no point at GAIA's settings but other taus


def test_the_tau_question_reads_gaias_defaults_against_the_same_point_at_other_taus():
    calibrated = _point("cal", "skillsynth", {**GAIA, "similarity_tau": 0.31,
                                              "recall_tau": 0.24}, ROLLING,
                        recall_hit_rate=_kpi(0.68, 50, 0.54, 0.79, "probes", 50),
                        recall_precision=_kpi(0.38, 98, 0.29, 0.48, "recalled", 50),
                        share_made_worse=_kpi(1.0, 45, 0.92, 1.0, "probes", 45))
    gaia = _point("gaia", "skillsynth", GAIA, ROLLING,
                  recall_hit_rate=_kpi(0.04, 50, 0.01, 0.12, "probes", 50),
                  recall_precision=_kpi(1.0, 2, 0.34, 1.0, "recalled", 2),
                  share_made_worse=_kpi(0.02, 45, 0.0, 0.12, "probes", 45))
    other_cut = _point("cut", "skillsynth", {**GAIA, "similarity_tau": 0.5},
                       ROLLING | {"recall_cut": "whole_steps"},
                       recall_hit_rate=_kpi(0.5, 50, 0.3, 0.6, "probes", 50))
    (tau,) = [r for r in question_rows([gaia, other_cut, calibrated])
              if r.issue.startswith("GAIA memory")]
    assert tau.take == ("at 0.82 recall finds a procedure of the probe's own goal for 4% of "
                        "probes; at recall tau 0.24 68%, but precision 38% against 100% and "
                        "100% of probes made worse against 2%: a lower tau finds more and the "
                        "wrong thing")


def test_points_are_found_by_settings_and_a_whole_steps_point_is_not_adoptable():
    from skillsynth.evaluation.reporting.verdict import adoptable, recommend

    assert gaia_shipped_point(POINTS)["id"] == "shipped"
    assert not adoptable(POINTS[1])  # whole_steps needs a change to GAIA
    assert recommend(POINTS)["id"] == "best"
    assert fmt_kpi({}) == "n/a (not in this run)"
    assert question_rows([])[0].gaia_defaults == "not run"


def _run(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(
        {"name": "gaia-questions", "points": POINTS, "record": {"git": "0123456789abcdef"}}))
    return tmp_path


def test_for_issue_prints_figures_settings_reading_and_the_command(tmp_path, capsys):
    run = _run(tmp_path)
    assert main(["report", str(run), "--for-issue", "2676"]) == 0
    out = capsys.readouterr().out
    assert out == for_issue(run, "2676")
    assert out.startswith("#### skillsynth measurement for amd/gaia#2676")
    assert "corpus `main.db` (sha256 `abababababab`)" in out and "git 0123456789ab" in out
    assert ("- **GAIA defaults**: skillsynth, similarity_tau 0.82, min_occurrences 3, "
            "max_recall_body_chars 1500, protocol rolling, recall_cut raw\n") in out
    assert "- **GAIA defaults, variant 1**: skillsynth, similarity_tau 0.82" in out
    assert "recall_cut whole_steps" in out and "max_distill_calls_per_pass" not in out
    assert ("| KPI | GAIA defaults | GAIA defaults, variant 1 | recommended | gaia-shipped |\n"
            in out)
    assert ("| `recall_body_cut_mid_step_share` | 0.40 [0.25, 0.57] n=30 recalled, 8 families "
            "| 0.00 [0.00, 0.10] n=30 recalled, 8 families | - | - |") in out
    assert "**Reading:** 40% of recalled procedures" in out
    assert out.rstrip().endswith("`skillsynth sweep eval/sweeps/gaia-questions.yaml && "
                                 "skillsynth report eval/results/gaia-questions "
                                 "--for-issue 2676`")
    # 4033: GAIA's own pass beside its variant at another distillation cap
    out = for_issue(run, "#4033")
    assert "- **gaia-shipped, variant 1**: gaia-shipped, similarity_tau 0.82, " \
           "min_occurrences 3, max_recall_body_chars 1500, max_distill_calls_per_pass 5" in out
    assert ("| `starts_until_drained` | 2.00 n=6 starts | - | n/a (n=6; not drained) | "
            "1.00 n=6 starts |") in out
    assert "| `procedures_per_family` | 1.00 [1.00, 1.00] n=5 families |" in out
    assert for_issue(run, "1828") == for_issue(run, "1818").replace("1818`", "1828`")


def test_for_issue_names_what_is_wrong(tmp_path, capsys):
    with pytest.raises(EvaluationError, match="no question for issue '999'; known: 1818"):
        for_issue(_run(tmp_path), "999")
    assert main(["report", str(tmp_path / "nowhere"), "--for-issue", "2685"]) == 1
    assert "has no summary.json" in capsys.readouterr().err
    assert set(ISSUES) >= {"2676", "4033", "2685", "1818", "1828"}


def test_readings_fall_back_to_gaias_defaults_when_gaias_own_pass_stored_nothing():
    gaia = _point("gaia", "skillsynth", GAIA, ROLLING,
                  procedures_per_family=_kpi(1.0, 24, 1.0, 1.0, "families", 24),
                  duplicate_procedure_pairs=_kpi(4.0, 276, unit="pairs"),
                  duplicate_procedure_share=_kpi(0.21, 24, 0.09, 0.4, "procedures"),
                  duplicate_pairs_same_family=_kpi(0.0, 4, unit="pairs"))
    shipped = _point("shipped", "gaia-shipped", GAIA, ROLLING,
                     procedures_per_family=_kpi(None, 0, unit="families"),
                     duplicate_procedure_pairs=_kpi(0.0, 0, unit="pairs"))
    rows = {r.issue: r for r in question_rows([gaia, shipped])}
    dups = rows["amd/gaia#1818, #1828"].take
    assert dups.startswith("GAIA's defaults (GAIA's own pass stored no procedure): 4 "
                           "duplicate pair(s), 21% of active procedures; 0 within one "
                           "labelled goal: they look alike but serve different goals")
