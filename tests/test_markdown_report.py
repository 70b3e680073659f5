"""The KPI summary a maintainer pastes on a pull request (`skillsynth report --markdown`):
the report's own figures in pipe tables, columns that say nothing left out, the gate's
failures named, and why there is no verdict when there is none."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_compare import SPEC, _row, _rows
from test_controls_report import _pt

from skillsynth.cli import main
from skillsynth.evaluation.reporting.markdown import markdown_summary, md_table
from skillsynth.evaluation.reporting.verdict import no_verdict_reason, verdict_points


def _run(path, *, n_points=3):
    """A sweep folder with a design recalled by member goals, mismatched and oracle-args;
    ``n_points`` above 3: the spec asked for points that never finished."""
    path.mkdir()
    design = _pt("design-1", "skillsynth") | {"protocol": {"recall_key": "goals"}}
    pts = [p | {"wall_s": 1.0, "split": {"probes": 12}}
           for p in (design, _pt("mismatched-1", "mismatched"),
                     _pt("upper-1", "oracle-args"))]
    (path / "summary.json").write_text(json.dumps(
        {"name": path.name, "spec": SPEC, "finished": 3, "n_points": n_points, "points": pts,
         "failed": {}}))
    rows = _rows() + [_row("upper-1", "memory", i, 1.0, writes=1.0) for i in range(12)]
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _line(text, start):
    (line,) = [x for x in text.splitlines() if x.startswith(start)]
    return line


def test_the_summary_reads_each_design_against_its_controls_in_a_pipe_table(tmp_path):
    text = markdown_summary(_run(tmp_path / "r"), command="skillsynth sweep r.yaml")
    assert text.startswith("## skillsynth KPI summary: `r`\n")
    controls = text.split("### Against the controls")[1].split("###")[0]
    header = _line(controls, "| strategy | point |")
    # by hand (test_compare): the design beats mismatched by 2.25 / 12 gold actions a probe
    design = _line(controls, "| skillsynth | design-1 |").split(" | ")
    assert design[header.split(" | ").index("progress_over_mismatched")].startswith("0.19 [")
    # no plan point, so no form control: a column where every cell is "-" is left out
    assert "progress_over_form_control" not in header
    assert "2 runs per arm per probe" in controls
    assert "Reproduce: `skillsynth sweep r.yaml`" in text


def test_the_summary_says_why_there_is_no_verdict_and_names_the_gates_failure(tmp_path):
    text = markdown_summary(_run(tmp_path / "r", n_points=5))
    # recall by member goals is no setting GAIA has: no verdict, and the summary says why
    assert "none of the 1 skillsynth point(s) is one GAIA can run" in text
    assert "**Gate: FAIL**" in text
    assert _line(text, "| FAIL | (sweep) | points finished |").count("|") == 6
    assert "Reproduce" not in text


def test_a_pipe_table_keeps_each_cell_on_one_line_and_its_pipes_escaped():
    table = md_table(pd.DataFrame({"a": ["x|y", None], "b": ["one\ntwo", 0.5]}))
    assert table.splitlines() == ["| a | b |", "| --- | --- |", "| x\\|y | one two |",
                                  "|  | 0.5 |"]


def test_the_command_prints_or_writes_the_summary_and_refuses_an_html_file(tmp_path, capsys):
    run = _run(tmp_path / "r")
    assert main(["report", str(run), "--markdown", "-"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("## skillsynth KPI summary: `r`")
    assert main(["report", str(run), "--markdown", str(tmp_path / "pr.md")]) == 0
    assert (tmp_path / "pr.md").read_text() == printed
    assert not (run / "report.html").exists()
    with pytest.raises(SystemExit) as e:
        main(["report", str(run), "--markdown", "-", "--out", "x.html"])
    assert e.value.code == 2
    assert "--out names the HTML report's file" in capsys.readouterr().err


def test_without_a_verdict_the_summary_says_which_reason_holds():
    when_to_use = _pt("s", "skillsynth", live_success_change={
        "value": -0.3, "lo": -0.5, "hi": -0.1, "n": 20, "n_families": 10})
    goals = _pt("g", "skillsynth") | {"protocol": {"recall_key": "goals"}}
    assert no_verdict_reason([_pt("m", "mismatched")]).startswith("No skillsynth point")
    assert "none of the 1 skillsynth point(s)" in no_verdict_reason([goals])
    # GAIA could run it, but it lost success and sits off GAIA's defaults
    off_defaults = when_to_use | {"params": {**when_to_use["params"], "similarity_tau": 0.5}}
    assert verdict_points([goals, off_defaults]) == []
    assert "lowered success" in no_verdict_reason([goals, off_defaults])
