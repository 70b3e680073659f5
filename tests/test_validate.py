"""Leave-one-corpus-out validation of a calibration: the fold logic and the hold rule on
hand-made figures, and a small end-to-end run on three synthetic labelled corpora (real SQLite
stores) with the FAKE family embedder and distiller."""

from __future__ import annotations

import json

import pytest
from fakes import FakeDistiller, FakeFamilyEmbedder

from skillsynth.cli import main
from skillsynth.config import Thresholds
from skillsynth.corpora.synthetic import generate_corpus
from skillsynth.errors import ConfigError, EvaluationError
from skillsynth.evaluation.point.metrics import KPI
from skillsynth.evaluation.tuning.calibrate import (
    CalibrationCorpus,
    calibrate,
)
from skillsynth.evaluation.tuning.validate import (
    FIGURES,
    HeldOut,
    Hold,
    Validation,
    folds,
    hold,
    leave_one_out,
    record_validation,
)


# ------------------------------------------------------------------ folds
def test_each_corpus_is_held_out_once_and_never_fitted_on_while_held_out():
    cs = [CalibrationCorpus("a.db"), CalibrationCorpus("b.db", "tools"), CalibrationCorpus("c.db")]
    got = folds(cs)
    assert [f.held_out for f in got] == cs
    for f in got:
        assert f.held_out not in f.fitted_on and len(f.fitted_on) == 2
        assert set(f.fitted_on) | {f.held_out} == set(cs)
    with pytest.raises(ConfigError, match="at least two labelled corpora"):
        folds(cs[:1])
    with pytest.raises(ConfigError, match="given twice"):
        folds([cs[0], cs[1], CalibrationCorpus("a.db")])
    # the same file under another family rule is another corpus
    assert len(folds([CalibrationCorpus("a.db"), CalibrationCorpus("a.db", "tools")])) == 2


# ------------------------------------------------------------------ the hold rule
def _k(name, value, lo=None, hi=None, n=20):
    return KPI(name, value, lo, hi, n, "probes", kind="proportion")


def _pair(prec, worse):
    return {"recall_precision": _k("recall_precision", *prec),
            "share_made_worse": _k("share_made_worse", *worse)}


GAIA = _pair((0.90, 0.80, 0.96), (0.05, 0.01, 0.20))


def test_the_proposal_holds_inside_or_on_the_good_side_of_gaias_interval():
    assert hold(_pair((0.85, 0.7, 0.9), (0.15, 0.1, 0.3)), GAIA).holds is True
    assert hold(_pair((0.99, 0.9, 1.0), (0.0, 0.0, 0.1)), GAIA).holds is True
    # exactly on GAIA's bounds is not a loss
    assert hold(_pair((0.80, 0.7, 0.9), (0.20, 0.1, 0.3)), GAIA).holds is True


def test_a_point_value_beyond_gaias_interval_on_the_bad_side_is_a_loss():
    lower = hold(_pair((0.50, 0.40, 0.60), (0.05, 0.0, 0.1)), GAIA)
    assert lower.holds is False
    assert "recall precision below GAIA's interval: 0.50 vs GAIA's [0.80, 0.96]" in lower.reasons
    worse = hold(_pair((0.90, 0.8, 0.95), (0.82, 0.7, 0.9)), GAIA)
    assert worse.holds is False and "share made worse above" in worse.reasons[1]
    # a loss on one figure is a loss even when the other is undecided
    assert hold(_pair((None,), (0.82, 0.7, 0.9)), GAIA).holds is False


def test_a_figure_missing_on_either_side_leaves_the_corpus_undecided():
    nothing_recalled = hold(_pair((None,), (0.0, 0.0, 0.1)), GAIA)
    assert nothing_recalled.holds is None
    assert "recall precision not measured on both sides" in nothing_recalled.reasons
    assert hold(_pair((0.9, 0.8, 0.95), (0.0, 0.0, 0.1)),
                _pair((None,), (0.0, 0.0, 0.1))).holds is None
    assert hold({}, GAIA).holds is None


def test_the_validation_passes_only_when_every_corpus_holds():
    def v(*holds):
        rows = tuple(HeldOut(CalibrationCorpus(f"{i}.db"), (), {}, {}, Hold(h, ()), {})
                     for i, h in enumerate(holds))
        return Validation("e", "c", "m", rows)

    assert v(True, True).passed is True and v(True, True).status().startswith("passed")
    assert v(True, None).passed is None
    assert v(True, None).status() == "undecided: held on 1 of 2 held-out corpora"
    assert v(None, False).passed is False and v(True, False).passed is False
    assert v().passed is None  # no run, no pass


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("loo")
    out = []
    for i, fams in enumerate((3, 4, 5)):
        db = root / f"c{i}.db"
        generate_corpus(db, families=fams, seed=i, attempts=4)
        out.append(CalibrationCorpus(str(db)))
    return out


# ------------------------------------------------------------------ end to end
def test_leave_one_out_end_to_end_with_fakes(corpora, tmp_path):
    llm, emb = FakeDistiller(), FakeFamilyEmbedder()
    out = tmp_path / "loo"
    res = leave_one_out(corpora, emb, llm, out, n_boot=100)
    assert [h.corpus for h in res.held_out] == corpora
    for h, fold in zip(res.held_out, folds(corpora), strict=True):
        assert h.fitted_on == tuple(c.path for c in fold.fitted_on)
        # the proposed arm runs at exactly the calibration fitted on the others
        cal = calibrate(fold.fitted_on, emb, llm=FakeDistiller())
        assert {k: v for k, v in h.thresholds["proposed"].items() if v is not None} \
            == cal.settings_block()
        assert h.thresholds["gaia"]["similarity_tau"] == Thresholds().similarity_tau
        for arm in ("proposed", "gaia"):
            assert set(h.kpis[arm]) == set(FIGURES)
            summary = json.loads((out / "points" / h.points[arm].split("points/")[1]
                                  / "summary.json").read_text())
            assert summary["config"]["protocol"] == "strict"
            assert summary["config"]["thresholds"]["similarity_tau"] == \
                h.thresholds[arm]["similarity_tau"]
            prec = h.kpis[arm]["recall_precision"]
            assert prec.n > 0 and prec.lo <= prec.value <= prec.hi
        # the fake families are orthogonal: both arms are perfect, so the proposal holds
        assert h.hold == hold(h.kpis["proposed"], h.kpis["gaia"]) and h.hold.holds is True
    assert res.passed is True and res.record["kind"] == "leave-one-out"
    table = (out / "leave-one-out.md").read_text()
    assert table == res.table()
    assert sum(line.startswith("| c") for line in table.splitlines()) == 6  # 3 x 2 arms
    assert "passed: held on 3 of 3 held-out corpora" in table
    saved = json.loads((out / "leave-one-out.json").read_text())
    assert saved["passed"] is True and len(saved["held_out"]) == 3

    # a rerun reads the finished points back; at other settings it refuses
    again = leave_one_out(corpora, emb, FakeDistiller(), out, n_boot=100)
    assert [h.kpis for h in again.held_out] == [h.kpis for h in res.held_out]
    with pytest.raises(EvaluationError, match="holds a point at other settings"):
        leave_one_out(corpora, emb, FakeDistiller(), out, n_boot=100,
                      base=Thresholds(min_occurrences=2))

    # the calibration file records what it passed
    cal_file = tmp_path / "cal.json"
    cal_file.write_text(calibrate(corpora, emb, llm=FakeDistiller()).to_json())
    rec = record_validation(cal_file, res)
    on_disk = json.loads(cal_file.read_text())["validation"]
    assert on_disk == rec.validation
    assert on_disk["downstream"].startswith("passed: held on 3 of 3")
    assert on_disk["leave_one_out"]["passed"] is True
    assert on_disk["leave_one_out"]["same_method_and_embedder"] is True
    assert on_disk["default"] is False  # a pass is evidence; making it the default is a decision


def test_the_command_refuses_before_any_model_starts(tmp_path, corpora, capsys):
    assert main(["validate-calibration", corpora[0].path, "--out", str(tmp_path / "o"),
                 "--no-cache"]) == 1
    assert "at least two labelled corpora" in capsys.readouterr().err
    bare = tmp_path / "bare.db"
    assert main(["db", "init", str(bare)]) == 0
    assert main(["validate-calibration", corpora[0].path, str(bare), "--out",
                 str(tmp_path / "o"), "--no-cache"]) == 1
    assert "calibration needs labels" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
