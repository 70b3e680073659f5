"""Drift guard: what skillsynth assumes about GAIA, against the installed amd-gaia.

skillsynth's `Thresholds` defaults, its `gaia691` name rule, its distillation sampling, the
GAIA distillation prompt it was checked against and the keys of GAIA's synthesis bookkeeping
are GAIA's facts copied into skillsynth;
a new amd-gaia release can change any of them. This test reads them from the installed
release and fails naming the first difference. Differences skillsynth keeps on purpose are
listed in KNOWN with the reason, and the test fails if one of them goes away too (then the
list, and the documentation, are out of date). The schema is compared in test_gaia_oracle.
"""

from __future__ import annotations

import hashlib
from types import ModuleType

import pytest

from skillsynth.config import Thresholds
from skillsynth.pipeline import distill, skill
from skillsynth.store import schema
from skillsynth.store.gaia_release import GAIA_DISTILL_PROMPT_SHA256

WHY = ("amd-gaia is not installed (pip install 'skillsynth[gaia]'); the drift guard reads "
       "the installed release's constants")

#: skillsynth's value differs from the release's on purpose: name -> why.
KNOWN = {
    "max_distill_calls_per_pass": "unset by default: #887's pass, the one skillsynth and "
                                  "gaia-greedy model; set it to 2 for amd-gaia 0.25.1's",
}


def _pairs(g: ModuleType) -> list[tuple[str, object, object]]:
    from gaia.agents.base.memory_store import MemoryStore as GaiaStore

    th = Thresholds()
    return [
        ("synthesis watermark meta key", GaiaStore._SYNTHESIS_WATERMARK_META_KEY,
         schema.SYNTHESIS_WATERMARK_KEY),
        ("synthesis mark outcomes", tuple(GaiaStore.SYNTHESIS_OUTCOMES),
         schema.SYNTHESIS_OUTCOMES),
        ("min_steps", g.MIN_STEPS, th.min_steps),
        ("min_occurrences", g.MIN_OCCURRENCES, th.min_occurrences),
        ("min_success_rate", g.MIN_SUCCESS_RATE, th.min_success_rate),
        ("similarity_tau", g.SIMILARITY_TAU, th.similarity_tau),
        ("max_clusters_per_pass", g.MAX_CLUSTERS_PER_PASS, th.max_clusters_per_pass),
        ("max_distill_calls_per_pass", g.MAX_DISTILL_CALLS_PER_PASS,
         th.max_distill_calls_per_pass),
        ("max_recall_body_chars", g.MAX_RECALL_BODY_CHARS, th.max_recall_body_chars),
        ("distill temperature", g.DISTILL_TEMPERATURE, distill.TEMPERATURE),
        ("distill max_tokens", g.DISTILL_MAX_TOKENS, distill.MAX_TOKENS),
        ("skill name rule", g._NAME_RE.pattern, skill.NAME_RE.pattern),
        ("skill name length", g._MAX_NAME_LEN, skill.MAX_NAME_CHARS),
        ("distill prompt sha256", hashlib.sha256(g.DISTILL_SYSTEM_PROMPT.encode()).hexdigest(),
         GAIA_DISTILL_PROMPT_SHA256),
    ]


def _drift(pairs: list[tuple[str, object, object]]) -> list[str]:
    out = []
    for name, gaia, ours in pairs:
        if (gaia != ours) != (name in KNOWN):
            what = "now differs" if gaia != ours else "no longer differs (update KNOWN)"
            out.append(f"{name}: amd-gaia {gaia!r}, skillsynth {ours!r}: {what}")
    return out


def test_skillsynth_assumes_what_the_installed_gaia_ships():
    g = pytest.importorskip("gaia.agents.base.skill_synthesis", reason=WHY)
    drift = _drift(_pairs(g))
    assert not drift, drift[0]


def test_the_guard_names_a_difference():
    pairs = [("min_steps", 3, 3), ("similarity_tau", 0.85, 0.82),
             ("max_distill_calls_per_pass", 2, None), ("skill name length", 64, 64)]
    assert _drift(pairs) == ["similarity_tau: amd-gaia 0.85, skillsynth 0.82: now differs"]
    assert _drift([("max_distill_calls_per_pass", 2, 2)]) == [
        "max_distill_calls_per_pass: amd-gaia 2, skillsynth 2: no longer differs (update KNOWN)"]
