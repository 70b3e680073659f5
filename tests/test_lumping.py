"""The lumping guard: a pass that puts many goals into one procedure says so, in the point's
KPIs, the pass report and the verdict (hand-made procedures whose answer is known)."""

from __future__ import annotations

from test_intervals import _point
from test_questions import _proc

from skillsynth.evaluation.point.lumping import lumping_kpis
from skillsynth.evaluation.point.split import Split
from skillsynth.evaluation.reporting.verdict import verdict

SPLIT = Split(k=3, history=frozenset(), probes=(), left_out=frozenset(),
              families={f"{f}{i}": f.upper() for f in "abcd" for i in range(4)})


def _kpis(procs):
    kpis, info = lumping_kpis(procs, SPLIT)
    return {k.name: k for k in kpis}, info


def test_a_procedure_over_many_families_without_a_majority_lumps():
    everything = _proc("all", ["a0", "b0", "c0", "d0", "a1"])      # 4 families, top 2/5
    own = _proc("own", ["a2", "a3", "b1"])                           # 2 families, top 2/3
    k, info = _kpis([everything, own])
    assert k["lumped_procedure_share"].value == 0.5            # 1 of 2 procedures
    assert k["largest_procedure_share"].value == 5 / 8         # 5 of the 8 members
    assert info["families_per_procedure"]["all"] == {"A": 2, "B": 1, "C": 1, "D": 1}
    # three families with one holding a majority is a procedure with stragglers, not a lump
    k, _ = _kpis([_proc("m", ["a0", "a1", "a2", "b0", "c0"]), own])
    assert k["lumped_procedure_share"].value == 0.0
    # inactive procedures are not counted
    k, _ = _kpis([_proc("x", ["a0", "b0", "c0"], active=False), own])
    assert k["lumped_procedure_share"].value == 0.0 and k["lumped_procedure_share"].n == 1


def test_the_verdict_says_one_procedure_for_everything():
    lumped, _ = _kpis([_proc("all", ["a0", "b0", "c0", "d0"]), _proc("own", ["a1"])])
    specific, _ = _kpis([_proc("p", ["a0", "a1"]), _proc("q", ["b0"]), _proc("r", ["c0"])])
    rows = {r.criterion: r for r in verdict(_point(**{n: k.as_dict()
                                                      for n, k in lumped.items()}))}
    row = rows["Procedures stay specific"]
    assert row.status == "FAIL" and "one procedure for everything" in row.note
    assert "the largest holds 80% of the members" in row.note
    rows = {r.criterion: r for r in verdict(_point(**{n: k.as_dict()
                                                      for n, k in specific.items()}))}
    assert rows["Procedures stay specific"].status == "PASS"
    rows = {r.criterion: r for r in verdict(_point())}
    assert rows["Procedures stay specific"].status == "NOT MEASURED"


def test_the_pass_report_gives_the_largest_clusters_share(tmp_path):
    from fakes import FakeDistiller, FakeFamilyEmbedder

    from skillsynth.config import Thresholds
    from skillsynth.corpora import generate_corpus
    from skillsynth.pipeline.synthesize import synthesize_skills
    from skillsynth.store import MemoryStore

    db = tmp_path / "c.db"
    generate_corpus(db, families=3, attempts=4, seed=1)
    with MemoryStore.open(db) as store:
        # a tau of 0 puts every goal in one cluster: the share is 1
        rep = synthesize_skills(store, FakeDistiller(), FakeFamilyEmbedder(),
                                Thresholds(similarity_tau=0.0, min_occurrences=2),
                                mode="json")
    assert rep.qualified == 1 and rep.largest_cluster_share == 1.0
