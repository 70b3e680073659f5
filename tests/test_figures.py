"""Measurement records: written by the benchmarks, rendered into the docs' figures page."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from skillsynth.bench.measured import (
    distill_measurement,
    models_measurement,
    pipeline_measurement,
    sweep_measurement,
    tuning_measurement,
    worlds_measurement,
)
from skillsynth.cli import main
from skillsynth.errors import FigureError
from skillsynth.figures import Measurement, load, measure, record, render

ROOT = Path(__file__).resolve().parent.parent


def _sweep(seconds: float) -> Measurement:
    return measure("sweep-ci", "Sweep overhead: ci", "skillsynth bench sweep eval/sweeps/ci.yaml",
                   {"warm sweep": {"median": seconds, "n": 3, "unit": "s"},
                    "ratio": {"value": 1.46, "n": 3}}, note="every answer cached")


def test_a_record_round_trips_and_a_new_one_of_the_same_name_replaces_it(tmp_path):
    first = _sweep(4.88)
    path = record(first, tmp_path / "figures")
    assert path == tmp_path / "figures" / "sweep-ci.json"
    (back,) = load(tmp_path / "figures")
    assert back == first and back.cores and back.platform and back.version
    record(_sweep(5.16), tmp_path / "figures")
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["sweep-ci.json"]  # no temp
    (newer,) = load(tmp_path / "figures")
    assert newer.figures["warm sweep"] == {"median": 5.16, "n": 3, "unit": "s"}

    page = render(tmp_path / "figures", intro="How these are made.")
    assert page.startswith("# Measured figures\n\nHow these are made.")
    assert "## Sweep overhead: ci" in page and "`skillsynth bench sweep eval/sweeps/ci.yaml`" in page
    assert f"Measured {newer.date} by skillsynth {newer.version}" in page
    assert "| warm sweep | 5.16 (median) | 3 | s |" in page and "| ratio | 1.46 | 3 |" in page
    assert "every answer cached" in page
    assert "No measurement is recorded yet" in render(tmp_path / "none")


@pytest.mark.parametrize("fig, says", [
    ({"median": 3.05}, "has no n"),
    ({"median": 3.05, "n": True}, "has no n"),
    ({"median": 3.05, "n": -1}, "has no n"),
    ({"n": 2}, "exactly one of 'median' or 'value'"),
    ({"median": 1.0, "value": 1.0, "n": 2}, "exactly one of"),
    ({"median": [1.0], "n": 2}, "must be a number"),
    ({"median": float("nan"), "n": 2}, "not JSON-ready"),
    (3.05, "not a mapping")])
def test_a_figure_without_its_n_or_centre_is_refused_by_name(fig, says):
    with pytest.raises(FigureError, match=f"'single warm point'.*{says}"):
        measure("sweep", "t", "c", {"single warm point": fig, "fine": {"value": 1, "n": 1}})


def test_a_bad_name_date_or_record_file_is_refused(tmp_path):
    figs = {"x": {"value": 1, "n": 1}}
    with pytest.raises(FigureError, match="name 'Sweep/ci'"):
        measure("Sweep/ci", "t", "c", figs)
    with pytest.raises(FigureError, match="not an ISO date"):
        Measurement(name="x", title="t", command="c", figures=figs, date="yesterday",
                    version="0")
    with pytest.raises(FigureError, match="no figures"):
        measure("x", "t", "c", {})
    data = _sweep(1.0).to_json()
    data["figures"]["warm sweep"].pop("n")
    (tmp_path / "broken.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FigureError, match="broken.json: figure 'warm sweep' has no n"):
        load(tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps({"name": "broken"}), encoding="utf-8")
    with pytest.raises(FigureError, match="broken.json: .*no 'title'"):
        load(tmp_path)


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_docs_hook_renders_every_committed_record_into_the_figures_page():
    page = _hooks().figures_page()
    records = sorted((ROOT / "eval" / "figures").glob("*.json"))
    assert records, "eval/figures/ holds the measured figures the docs show"
    for path in records:
        m = Measurement.from_json(json.loads(path.read_text(encoding="utf-8")))
        assert m.name == path.stem, f"{path.name} names itself {m.name}"
        assert f"## {m.title}" in page and f"`{m.command}`" in page
    assert "--record eval/figures" in page
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "Measured figures: figures.md" in nav


def test_bench_pipeline_record_writes_a_measurement_with_the_command_that_reproduces_it(
        tmp_path, capsys):
    argv = ["bench", "pipeline", "--sizes", "60", "--procedures", "20", "--repeats", "1",
            "--queries", "5", "--check-up-to", "0"]
    assert main([*argv, "--json", "--record", str(tmp_path), "--record-name", "tiny"]) == 0
    out = capsys.readouterr()
    raw = json.loads(out.out)
    assert f"recorded {tmp_path / 'tiny.json'}" in out.err
    (m,) = load(tmp_path)  # the output options are not part of the command
    assert m.name == "tiny" and m.command == "skillsynth " + " ".join(argv)
    assert pipeline_measurement(raw, m.command).name == "pipeline"  # without --record-name
    got = m.figures["agglomerative, 60 sessions"]
    assert got["n"] == 1 and got["median"] == round(
        raw["detect_cluster"][0]["agglomerative"]["median_s"], 3)
    assert m.figures["recall, 20 procedures"]["n"] == 5
    assert "hdbscan, 60 sessions" in m.figures


def test_every_bench_records_its_figures_with_their_n():
    models = {"repeats": 5,
              "chat_tokens_per_s": {"median": 24.43, "n": 5, "model": "q", "max_tokens": 128},
              "prompt_tokens_per_s": {"median": 87.7, "n": 5, "model": "q"},
              "embeddings_per_s": {"median": 180.0, "n": 5, "batch": 80, "model": "m"},
              "cached_call_ms": {"median": 0.4, "n": 20}}
    m = models_measurement(models, "skillsynth bench models", name="models-q")
    assert m.figures["generated tokens/s"] == {"median": 24.4, "n": 5, "unit": "tokens/s",
                                               "max tokens": 128}
    rows = [{"outcome": "skill", "name": "a", "uncached": True, "seconds": 2.0,
             "completion_tokens": 50, "own_cosine": 0.6, "best_other_cosine": 0.3,
             "points_home": True},
            {"outcome": "skill", "name": "a", "uncached": True, "seconds": 4.0,
             "completion_tokens": 70, "own_cosine": 0.2, "best_other_cosine": 0.5,
             "points_home": False},
            {"outcome": "malformed", "name": None, "uncached": False, "seconds": 0.0,
             "completion_tokens": None}]
    distill = [{"model": "q", "similarity_tau": 0.5, "mode": "json", "max_clusters": 8,
                "corpora": {"one": {"clusters": 2, "rows": rows[:2]},
                            "two": {"clusters": 1, "rows": rows[2:]}}}]
    d = distill_measurement(distill, "skillsynth bench distill").figures
    assert d["parsed, q"] == {"value": 2, "n": 3, "unit": "of n"}  # counted over both corpora
    assert d["unique names, q"]["value"] == 1 and d["points home, q"]["value"] == 1
    assert d["own cosine, q"] == {"value": 0.4, "n": 2, "unit": "mean"}
    assert d["s per distillation, q"] == {"median": 3.0, "n": 2, "unit": "s"}
    worlds = {"tau2:retail": {"call_ms": {"median": 0.21, "p99": 0.78, "n": 553},
                              "fresh_episode_ms": {"median": 156.0, "n": 3},
                              "score_ms": {"median": 600.0, "n": 3},
                              "live_run_s": {"memory": {"median": 9.0, "n": 2, "runs": []}}}}
    w = worlds_measurement(worlds, "skillsynth bench worlds").figures
    assert w["tool call, tau2:retail"]["p99"] == 0.78 and w["live run, memory, tau2:retail"]["n"] == 2
    tuning = {"corpus_sessions": 10_000, "sessions": 6496, "probes": 8, "distilled_now": 0,
              "procedures_in_view": 10, "prepare_s": 2.5,
              "update_keep_tau_s": {"median": 0.03, "n": 5},
              "update_move_tau_s": {"median": 0.43, "n": 5}}
    assert tuning_measurement(tuning, "c").figures["preparation"]["n"] == 1
    sweep = {"spec": "ci", "points": 2, "workers": 2, "cluster": "tcp://somewhere:8786",
             "transport": "shipped", "stages": {"imports": {"median": 0.9, "n": 4}},
             "single_point_s": {"median": 3.0, "n": 2}, "single_sweep_s": {"median": 4.0, "n": 2},
             "sweep_s": {"median": 5.16, "n": 2}, "bound_s": 6.0, "ratio": 1.72}
    s = sweep_measurement(sweep, "c")
    assert s.name == "sweep-ci-dask-shipped" and s.figures["stage imports"]["n"] == 4
    assert sweep_measurement({**sweep, "cluster": "local"}, "c").name == "sweep-ci-dask-local"
    assert sweep_measurement({**sweep, "cluster": None}, "c").name == "sweep-ci"
