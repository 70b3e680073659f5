"""The report's verified-against-unverified table: each verifying point beside its twin."""

from __future__ import annotations

from skillsynth.evaluation.reporting.verification import verification_table, verify_twin

GAIA = {"similarity_tau": 0.82, "min_occurrences": 3, "max_recall_body_chars": 1500}


def _kpi(value, n, lo=None, hi=None):
    return {"value": value, "lo": lo, "hi": hi, "n": n, "unit": "probes"}


def _point(pid, verify, protocol="strict", tau=0.82, **kpis):
    return {"id": pid, "strategy": "skillsynth", "params": {**GAIA, "similarity_tau": tau},
            "protocol": {"protocol": protocol, "verify": verify}, "kpis": kpis}


POINTS = [
    _point("strict-none", "none", recall_precision=_kpi(0.5, 10, 0.2, 0.8),
           share_made_worse=_kpi(0.3, 40, 0.2, 0.45)),
    _point("strict-trace", "trace", recall_precision=_kpi(0.9, 4, 0.5, 1.0),
           share_made_worse=_kpi(0.05, 40, 0.01, 0.16), verified_share=_kpi(0.4, 10, 0.17, 0.69),
           verify_calls_per_verified=_kpi(0.0, 4)),
    _point("rolling-trace", "trace", protocol="rolling", verified_share=_kpi(1.0, 3)),
    _point("strict-other-tau", "none", tau=0.5, recall_precision=_kpi(0.1, 10)),
]


def test_a_verifying_point_reads_against_its_unverified_twin_only():
    assert verify_twin(POINTS[1], POINTS).id == "strict-none"  # not the point at tau 0.5
    assert verify_twin(POINTS[2], POINTS) is None  # no rolling point without verification
    table = verification_table(POINTS).set_index("point")
    assert list(table.index) == ["strict-trace", "rolling-trace"]
    strict = table.loc["strict-trace"]
    assert strict["unverified twin"] == "strict-none"
    assert strict["recall_precision"] == "0.50 [0.20, 0.80] n=10 -> 0.90 [0.50, 1.00] n=4"
    assert strict["share_made_worse"] == "0.30 [0.20, 0.45] n=40 -> 0.05 [0.01, 0.16] n=40"
    assert strict["verified_share"] == "0.40 [0.17, 0.69] n=10"
    assert table.loc["rolling-trace", "unverified twin"] == "not run"
    assert verification_table(POINTS[:1]).empty  # nothing verifies: no rows
