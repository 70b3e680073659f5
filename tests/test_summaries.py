"""Typed run summaries: a point's and a sweep's ``summary.json`` read once into dataclasses,
written back with the same keys, and read by the reports and the gate (FAKE models, real
stores; the committed files are summaries a run wrote before the types existed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from corpus_kinds import tiny_corpus
from fakes import FakeDistiller, FakeFamilyEmbedder

from skillsynth.config import Thresholds
from skillsynth.errors import EvaluationError
from skillsynth.evaluation import EvalConfig, run_point
from skillsynth.evaluation.point.metrics import KPI
from skillsynth.evaluation.point.summary import SCHEMA_VERSION, SUMMARY, PointSummary, upgrade
from skillsynth.evaluation.reporting.gate import gate
from skillsynth.evaluation.reporting.questions import for_issue
from skillsynth.evaluation.reporting.report import (
    describe_run,
    load_run,
    protocol_table,
    verdict_table,
)
from skillsynth.evaluation.sweeps.run import aggregate
from skillsynth.evaluation.sweeps.spec import SweepSpec, expand_points
from skillsynth.evaluation.sweeps.summary import PointEntry, SweepSummary

DATA = Path(__file__).resolve().parent / "data"
OLD = sorted(DATA.glob("point-summary-*.json"))


def test_the_committed_old_summaries_are_there():
    assert {p.name for p in OLD} == {"point-summary-strict.json", "point-summary-rolling.json"}


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.stem)
def test_an_old_point_summary_loads_and_writes_back_byte_for_byte(path, tmp_path):
    text = path.read_text(encoding="utf-8")
    s = PointSummary.load(path)
    assert s.to_json() == json.loads(text)
    assert PointSummary.from_json(s.to_json()) == s
    s.write(tmp_path / SUMMARY)
    assert (tmp_path / SUMMARY).read_text(encoding="utf-8") == text
    # the fixed records are attributes, the KPIs a map of KPI
    raw = json.loads(text)
    assert s.corpus.sha256 == raw["corpus"]["sha256"]
    assert s.model_calls.llm_calls == raw["model_calls"]["synthesis"] + raw["model_calls"]["agent"]
    assert s.pass_status == raw["pass"]["status"] == "ran"
    assert s.versions.embedder == raw["versions"]["embedder"]
    assert all(isinstance(k, KPI) and k.name == n for n, k in s.kpis.items())
    assert s.kpis["recall_hit_rate"].as_dict() == raw["kpis"]["recall_hit_rate"]
    assert [c.id for c in s.procedures] == [c["id"] for c in raw["procedures"]]


def test_a_summary_written_before_a_key_loads_and_keeps_keys_it_does_not_know():
    raw = json.loads(OLD[0].read_text(encoding="utf-8"))
    for key in ("gaia_questions", "lumping", "controls", "timings"):
        raw.pop(key)
    raw["kpis"]["recall_hit_rate"] = {"value": 0.5, "lo": 0.2, "hi": 0.8, "n": 10,
                                      "unit": "probes", "estimate": False}
    raw["from_a_newer_version"] = {"x": 1}
    s = PointSummary.from_json(raw)
    assert (s.gaia_questions, s.lumping, s.controls, s.timings) == ({}, {}, None, {})
    k = s.kpis["recall_hit_rate"]  # fields added later take their defaults
    assert (k.name, k.value, k.n_families, k.note) == ("recall_hit_rate", 0.5, None, "")
    assert s.extra == {"from_a_newer_version": {"x": 1}}
    assert s.to_json()["from_a_newer_version"] == {"x": 1}


def test_run_point_returns_the_summary_it_wrote(tmp_path):
    db = tiny_corpus(tmp_path)
    res = run_point(EvalConfig(str(db), thresholds=Thresholds(similarity_tau=0.8), n_boot=200),
                    FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "pt")
    on_disk = (tmp_path / "pt" / SUMMARY).read_text(encoding="utf-8")
    assert json.dumps(res.point_summary.to_json(), indent=2, ensure_ascii=False) == on_disk
    assert PointSummary.load(tmp_path / "pt") == PointSummary.from_json(json.loads(on_disk))
    assert res.point_summary.kpis == res.kpis
    assert json.loads(json.dumps(res.summary)) == json.loads(on_disk)  # tuples become lists
    # every summary written now says its format first; a version 1 file has no such key
    assert next(iter(json.loads(on_disk).items())) == ("schema_version", SCHEMA_VERSION)
    assert all("schema_version" not in json.loads(p.read_text()) for p in OLD)


def test_one_place_upgrades_old_formats_and_a_newer_one_is_refused_by_name():
    raw = json.loads(OLD[0].read_text(encoding="utf-8"))
    assert upgrade(raw) == raw  # a complete version 1 file is already today's shape
    current = PointSummary.from_json(raw | {"schema_version": SCHEMA_VERSION})
    assert current.to_json() == {"schema_version": SCHEMA_VERSION} | raw
    for key in ("controls", "lumping", "record", "procedures", "live"):
        raw.pop(key)
    up = upgrade(raw)
    assert (up["controls"], up["lumping"], up["record"], up["procedures"], up["live"]) == (
        None, {}, {}, [], None)
    assert "schema_version" not in up and upgrade(up) == up
    assert PointSummary.from_json(raw).schema_version is None
    with pytest.raises(EvaluationError, match="lacks live, procedures, controls, lumping, record"):
        PointSummary.from_json(raw | {"schema_version": SCHEMA_VERSION})  # not run_point's
    for bad in (SCHEMA_VERSION + 1, 0, "2", True):
        with pytest.raises(EvaluationError, match="schema_version"):
            PointSummary.from_json(raw | {"schema_version": bad})


@pytest.fixture
def run(tmp_path):
    """A sweep folder of two finished fake points (run in-process, no kernel), aggregated."""
    db = tiny_corpus(tmp_path)
    spec_file = tmp_path / "t.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "t", "corpus": {"db": str(db)}, "backend": "local", "n_boot": 200,
        "grid": {"strategy": ["skillsynth"], "similarity_tau": [0.82, 0.6],
                 "min_occurrences": [3], "max_recall_body_chars": [1500]}}))
    spec = SweepSpec.load(spec_file)
    run_dir = tmp_path / "run"
    points = expand_points(spec)
    for p in points:
        cfg = EvalConfig(str(db), thresholds=p.thresholds(), **p.point_options(spec).to_json())
        run_point(cfg, FakeDistiller(), FakeFamilyEmbedder(), run_dir / "points" / p.id)
    return run_dir, points, spec


def _count_loads(monkeypatch) -> list[Path]:
    seen: list[Path] = []
    real = PointSummary.load.__func__

    def load(cls, path):
        seen.append(Path(path))
        return real(cls, path)

    monkeypatch.setattr(PointSummary, "load", classmethod(load))
    return seen


def test_the_sweep_reads_each_point_once_and_the_reports_read_the_typed_summary(
        run, monkeypatch):
    run_dir, points, spec = run
    seen = _count_loads(monkeypatch)
    summary = aggregate(run_dir, points, spec, started_utc="2026-01-01T00:00:00Z")
    assert sorted(seen) == sorted(run_dir / "points" / p.id / SUMMARY for p in points)
    assert [e.id for e in summary.points] == [p.id for p in points]
    e = summary.points[0]
    s = PointSummary.load(run_dir / "points" / e.id)
    assert (e.kpis, e.floors, e.corpus, e.pass_status) == (s.kpis, s.floors, s.corpus,
                                                           s.pass_status)
    assert e.llm_calls == s.model_calls.synthesis + s.model_calls.agent
    assert summary.record["inputs"]["corpus"] == s.corpus.to_json()
    summary.write(run_dir)
    on_disk = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert list(on_disk) == ["name", "spec", "points", "n_points", "finished", "record",
                             "failed", "this_run"]
    assert SweepSummary.from_json(on_disk) == summary == SweepSummary.load(run_dir)
    assert SweepSummary.from_json(summary.to_json()) == summary

    seen.clear()
    r = load_run(run_dir)
    assert r.summary == summary and len(r.points) == 2
    for _ in range(2):
        table = protocol_table(r)
    assert len(seen) == 2  # each point's own summary once, however often it is asked for
    assert list(table["probes"]) == [3, 3]
    assert "2 of 2 point(s) finished" in describe_run(r)
    verdicts = verdict_table(r)
    assert {c.split(": ")[1] for c in verdicts["configuration"]} <= {p.id for p in points}
    assert "Format validity (gaia691)" in set(verdicts["criterion"])
    assert all(c.ok for c in gate(run_dir) if c.check.startswith("validity_"))
    assert "tiny.db" in for_issue(run_dir, "tau")


def test_a_sweep_keeps_its_summary_as_points_finish_and_the_gate_fails_until_all_have(run):
    """Each finished point rewrites summary.json over the points done so far: a sweep still
    running (or stopped) can be reported on, and says how far it got."""
    from skillsynth.evaluation.sweeps.run import _keeping_summary

    run_dir, points, spec = run
    later = run_dir / "points" / points[1].id / SUMMARY
    later.rename(later.with_suffix(".later"))  # the second point has not finished yet
    told: list[str] = []
    _keeping_summary(run_dir, points, spec, "2026-01-01T00:00:00Z", told.append)(points[0].id)
    assert told == [points[0].id]
    summary = SweepSummary.load(run_dir)
    assert (summary.finished, summary.n_points) == (1, 2)
    assert [e.id for e in summary.points] == [points[0].id]
    assert "1 of 2 point(s) finished" in describe_run(load_run(run_dir))
    (unfinished,) = [c for c in gate(run_dir) if c.check == "points finished"]
    assert not unfinished.ok and "1 not finished" in unfinished.required
    with pytest.raises(EvaluationError, match="1 of 2 point.*finished; resume the sweep"):
        for_issue(run_dir, "tau")  # no upstream block from part of a sweep
    later.with_suffix(".later").rename(later)
    _keeping_summary(run_dir, points, spec, "2026-01-01T00:00:00Z", None)(points[1].id)
    assert SweepSummary.load(run_dir).finished == 2
    assert not [c for c in gate(run_dir) if c.check == "points finished"]


def test_a_hand_written_sweep_summary_loads_with_defaults():
    s = SweepSummary.from_json({"name": "x", "points": [{"id": "p", "kpis": {
        "recall_hit_rate": {"value": 0.5, "lo": 0.1, "hi": 0.9, "n": 4}}}]})
    (p,) = s.points
    assert (s.n_points, s.finished, s.failed, s.this_run) == (1, 1, {}, None)
    assert p == PointEntry("p", kpis={"recall_hit_rate": KPI("recall_hit_rate", 0.5, 0.1, 0.9,
                                                             4, "")})
    assert p.kpi("recall_hit_rate").value == 0.5 and p.kpi("absent") is None


def test_every_pass_counter_reaches_a_rolling_points_summary_a_new_one_too():
    import dataclasses

    from skillsynth.evaluation.point.summary import combined_report
    from skillsynth.pipeline.synthesize import PassReport

    Extended = dataclasses.make_dataclass("Extended", [("a_new_counter", int, 0)],
                                          bases=(PassReport,), frozen=True)
    first = Extended(status="ran", sessions=4, marked_distilled=2, verify_seconds=0.5,
                     left_for_later=3, skipped=(("c1", "malformed"),), a_new_counter=1)
    second = Extended(status="llm-unavailable", sessions=6, marked_distilled=1,
                      verify_seconds=0.25, left_for_later=1, a_new_counter=2)
    out = combined_report([first, second])
    assert out is not None
    assert (out["status"], out["passes"], out["sessions"], out["marked_distilled"],
            out["verify_seconds"], out["a_new_counter"]) == ("llm-unavailable", 2, 10, 3, 0.75, 3)
    assert out["left_for_later"] == 1 and out["skipped"] == [["c1", "malformed"]]
    counters = {f.name for f in dataclasses.fields(PassReport) if f.type in ("int", "float")}
    assert counters <= set(out)
    assert combined_report([first]) == first.as_dict() and combined_report([]) is None
