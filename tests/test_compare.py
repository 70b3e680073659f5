"""Two designs head to head (`skillsynth compare`): paired per probe on the probes both ran,
the memory arms only, refused across sweeps that ran their probes differently."""

from __future__ import annotations

import json

import pytest
from test_controls_report import _pt

from skillsynth.cli import main
from skillsynth.errors import EvaluationError
from skillsynth.evaluation.reporting.compare import compare_points, find_point
from skillsynth.evaluation.reporting.loaded import load_run

SPEC = {"world": "tau2:retail", "backend": {"chat_model": "qwen2.5-coder-1.5b"},
        "temperature": 0.3, "repeats": 2, "live": True, "corpus": {"db": "c.db"}}


def _run(path, points, rows, spec=SPEC):
    """A finished sweep folder: ``points`` as (id, strategy), ``rows`` its results."""
    path.mkdir()
    pts = [_pt(pid, s) | {"wall_s": 1.0, "split": {"probes": 8}} for pid, s in points]
    (path / "summary.json").write_text(json.dumps(
        {"name": path.name, "spec": spec, "finished": len(pts), "n_points": len(pts),
         "points": pts, "failed": {}}))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_run(path)


def _row(point, arm, i, gold, writes=0.0):
    """One live run of probe p<i> (family f<i // 2>) scored on its gold actions."""
    return {"point": point, "arm": arm, "probe_session": f"p{i}", "family": f"f{i // 2}",
            "goal": f"goal {i}", "steps_method": "live", "success": gold == 1.0,
            "gold_matched": gold, "gold_writes_matched": writes, "steps_recorded": 3,
            "steps": 3}


# memory-arm gold shares per probe; A's probe 0 has two runs (1.0, 0.5): 0.75 after averaging
A = [0.5, 0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.5, 1.0, 1.0, 0.0]
B = [0.0, 0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0]


def _rows():
    rows = [_row("design-1", "memory", 0, 1.0), _row("design-1", "memory", 0, 0.5)]
    rows += [_row("design-1", "memory", i, g) for i, g in enumerate(A) if i]
    rows += [_row("mismatched-1", "memory", i, g, writes=None if i == 3 else 0.0)
             for i, g in enumerate(B)]
    rows += [_row("design-1", "memory", 12, 1.0)]  # a probe B never ran: not paired
    # the no-memory arms, which a comparison of designs must not read
    rows += [_row(p, "no-memory", i, 1.0) for p in ("design-1", "mismatched-1")
             for i in range(12)]
    return rows


def test_two_points_are_compared_per_probe_on_the_probes_both_ran(tmp_path):
    run = _run(tmp_path / "r", [("design-1", "skillsynth"), ("mismatched-1", "mismatched")],
               _rows())
    progress, writes = compare_points(run, "design", "mismatched", bases=("progress", "writes"))
    # by hand: differences 0.75, 0, 0, -0.5, 0, 0.5, 0, 0, 0, 0.5, 1, 0 over 12 probes
    assert progress.a == "design-1" and progress.b == "mismatched-1"
    assert progress.difference.value == pytest.approx(2.25 / 12)
    assert progress.difference.n == 12 and progress.difference.n_families == 6
    assert progress.difference.lo < 2.25 / 12 < progress.difference.hi
    assert (progress.better, progress.worse, progress.same) == (4, 1, 7)
    assert progress.a_mean == pytest.approx(4.25 / 12)
    assert progress.b_mean == pytest.approx(2.0 / 12)
    # probe 3 has no gold write in B's rows: it drops out of that basis only
    assert writes.difference.n == 11 and writes.difference.value == 0.0


def test_a_point_is_found_by_id_prefix_or_strategy_and_ambiguity_is_named(tmp_path):
    run = _run(tmp_path / "r", [("oracle-plan-a", "oracle-plan"), ("oracle-plan-b", "oracle-plan"),
                                ("mismatched-1", "mismatched")], [])
    assert find_point(run, "mismatched") == "mismatched-1"
    assert find_point(run, "oracle-plan-b") == "oracle-plan-b"
    with pytest.raises(EvaluationError, match="several points match 'oracle-plan'") as e:
        find_point(run, "oracle-plan")
    assert "oracle-plan-a" in str(e.value) and "mismatched-1" not in str(e.value)
    with pytest.raises(EvaluationError, match="no finished point matches 'oracle-args'"):
        find_point(run, "oracle-args")


def test_points_of_two_sweeps_compare_only_when_the_probes_ran_alike(tmp_path):
    rows = _rows()
    a = _run(tmp_path / "a", [("design-1", "skillsynth")],
             [r for r in rows if r["point"] == "design-1"])
    b_rows = [r for r in rows if r["point"] == "mismatched-1"]
    b = _run(tmp_path / "b", [("mismatched-1", "mismatched")], b_rows)
    (progress,) = compare_points(a, "design-1", "mismatched-1", run_b=b, bases=("progress",))
    assert progress.difference.value == pytest.approx(2.25 / 12)
    hot = _run(tmp_path / "hot", [("mismatched-1", "mismatched")], b_rows,
               spec=SPEC | {"temperature": 0.7})
    with pytest.raises(EvaluationError, match="temperature: 0.3 vs 0.7"):
        compare_points(a, "design-1", "mismatched-1", run_b=hot)
    moved = _run(tmp_path / "moved", [("mismatched-1", "mismatched")],
                 [r | {"goal": "another task"} if r["probe_session"] == "p4" else r
                  for r in b_rows])
    with pytest.raises(EvaluationError, match="probe p4's goal"):
        compare_points(a, "design-1", "mismatched-1", run_b=moved)


def test_the_command_prints_each_basis_with_its_interval(tmp_path, capsys):
    _run(tmp_path / "r", [("design-1", "skillsynth"), ("mismatched-1", "mismatched")], _rows())
    assert main(["compare", str(tmp_path / "r"), "design", "mismatched"]) == 0
    out = capsys.readouterr().out
    assert "live arms: 2 runs per arm per probe sampled at temperature 0.3" in out
    assert "gold actions: A 0.35, B 0.17; A - B +0.19 [" in out
    assert "n = 12 probes (6 families" in out and "A better on 4, worse on 1, equal on 7" in out
    assert main(["compare", str(tmp_path / "r"), "design", "mismatched", "--json",
                 "--basis", "success"]) == 0
    (got,) = json.loads(capsys.readouterr().out)
    # successes (gold 1.0): A's probes 0 (one of two runs), 9 and 10; B's none
    assert got["basis"] == "success" and got["difference"]["value"] == pytest.approx(2.5 / 12)
