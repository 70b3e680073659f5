"""GAIA's open questions: where the recall cap cuts, the whole-step cut, fragmentation,
starts until drained, outcome counts and duplicates, on hand-made bodies, procedures and
stores whose answers are worked out in the comments (models are FAKES, named so)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from corpus_kinds import tiny_corpus
from fakes import FakeDistiller, FakeFamilyEmbedder, FakeGaiaDistiller

from skillsynth.config import Thresholds
from skillsynth.evaluation import EvalConfig, run_point
from skillsynth.evaluation.live.agent import system_prompt
from skillsynth.evaluation.point.metrics import ProbeResult
from skillsynth.evaluation.point.questions import (
    StartCost,
    duplicate_pairs,
    family_counts,
    outcome_kpis,
    question_kpis,
    starts_from_report,
    starts_until_drained,
    truncation_kpis,
)
from skillsynth.evaluation.point.split import Split
from skillsynth.evaluation.strategies import get_strategy
from skillsynth.pipeline.inject import (
    HEADER,
    TRUNCATION_MARKER,
    body_units,
    classify_cut,
    cut_body,
    inject,
    kept_chars,
    truncate_body,
    truncate_whole_steps,
)
from skillsynth.pipeline.skill import Skill
from skillsynth.store import MemoryStore, Procedure

BODY = ("1. Call search_file for the invoice\n"       # step 1: chars 0-34
        "2. Call read_file on the best hit\n"          # step 2: 36-68
        "3. Reply with the total and the due date\n"   # step 3: 70-110
        "\n"
        "## Edge cases\n"                              # heading: 112-124
        "- If nothing is found, ask for the number\n"  # edge case 1: 126-166
        "- If read_file fails, retry once")            # edge case 2: 168-199
S2_END = BODY.index("\n3.")          # 69: just past step 2's last character
S3 = BODY.index("3. Reply")          # 70
S3_END = BODY.index("\n\n## Edge")   # 111
EDGE1 = BODY.index("- If nothing")   # 126
EDGE1_END = BODY.index("\n- If read")


def test_body_units_find_steps_edge_cases_and_headings():
    units = body_units(BODY)
    assert [u.kind for u in units] == ["step", "step", "step", "heading", "edge_case",
                                       "edge_case"]
    assert [(u.start, u.end) for u in units][:3] == [(0, 35), (36, S2_END), (S3, S3_END)]
    # a wrapped line and a nested list continue their step; a bullet outside the edge
    # cases is other text; a numbered line under the edge cases is an edge case
    units = body_units("Intro.\n\n1. Open it\n   - twice\nand close\n\n## Edge cases\n1. If x, y")
    assert [u.kind for u in units] == ["other", "step", "heading", "edge_case"]
    assert units[1].end == len("Intro.\n\n1. Open it\n   - twice\nand close")


@pytest.mark.parametrize(("limit", "raw", "whole_steps"), [
    (S3 + 10, "mid_step", "boundary"),          # inside step 3's text
    (S2_END, "boundary", "boundary"),           # exactly at the end of step 2
    (S3, "boundary", "boundary"),               # exactly at step 3's start (keeps "\n")
    (S3_END + 1, "boundary", "boundary"),       # in the blank line after step 3
    (BODY.index("## Edge") + 4, "mid_other", "boundary"),  # inside the heading
    (EDGE1 + 8, "mid_edge_case", "boundary"),   # inside the first edge case
    (len(BODY), "whole", "whole"),              # the body fits exactly
    (len(BODY) + 500, "whole", "whole"),        # shorter than the cap
    (12, "mid_step", "mid_step"),               # not even step 1 fits: whole_steps cuts raw
])
def test_where_the_cut_lands(limit, raw, whole_steps):
    assert classify_cut(BODY, limit) == raw
    assert classify_cut(BODY, limit, "whole_steps") == whole_steps


def test_whole_steps_cut_after_the_last_whole_unit_that_fits():
    # inside step 3: steps 1 and 2 are kept, the marker on a line of its own
    assert truncate_whole_steps(BODY, S3 + 10) == BODY[:S2_END] + "\n" + TRUNCATION_MARKER
    # inside the first edge case: steps 1-3, the heading with nothing under it dropped
    assert truncate_whole_steps(BODY, EDGE1 + 8) == BODY[:S3_END] + "\n" + TRUNCATION_MARKER
    # inside the second: the first edge case is whole
    assert cut_body(BODY, len(BODY) - 3, "whole_steps") == \
        BODY[:EDGE1_END] + "\n" + TRUNCATION_MARKER
    # not even step 1 fits: GAIA's raw cut; a body that fits is untouched
    assert truncate_whole_steps(BODY, 12) == truncate_body(BODY, 12) == \
        BODY[:12] + TRUNCATION_MARKER
    assert truncate_whole_steps(BODY, 1500) == BODY
    for limit in range(1, len(BODY) + 2):  # never keeps more than the cap
        assert kept_chars(BODY, limit, "whole_steps") <= min(limit, len(BODY))


def test_the_raw_cut_is_gaias_byte_for_byte():
    skill = Skill(name="find-invoice", description="The user wants an invoice", body=BODY,
                  tools_required=("search_file", "read_file"))
    th = Thresholds(max_recall_body_chars=S3 + 10)
    gaia = (f"{HEADER}\n\n### find-invoice\nWhen to use: The user wants an invoice\n"
            f"Tools: search_file, read_file\n\n{BODY[:S3 + 10]}{TRUNCATION_MARKER}\n")
    assert inject([skill], th) == inject([skill], th, cut="raw") == gaia
    whole = inject([skill], th, cut="whole_steps")
    assert "3. Reply" not in whole and BODY[:S2_END] + "\n" + TRUNCATION_MARKER in whole
    # the live agent's prompt carries the point's cut
    assert whole.strip() in system_prompt("", [skill], th, solo=False, cut="whole_steps")
    assert gaia.strip() in system_prompt("", [skill], th, solo=False)


def _row(family, ids, success=True):
    return ProbeResult(strategy="skillsynth", arm="memory", probe_session=f"p-{family}",
                       family=family, goal="g", recalled_ids=tuple(ids),
                       recalled_scores=tuple(0.9 for _ in ids), recalled_right=len(ids),
                       family_has_procedure=True, steps_recorded=3, steps=2,
                       steps_method="replay-v1", success=success)


def _proc(pid, sessions, *, name=None, tools=("a", "b"), body=BODY, active=True,
          counts=(3, 3), vec=None):
    return Procedure(name or pid, f"when {pid}", body, tools_required=tuple(tools),
                     provenance={"from_sessions": list(sessions)}, id=pid,
                     superseded_by=None if active else "other",
                     success_count=counts[0], attempt_count=counts[1],
                     embedding=None if vec is None else np.asarray(vec, np.float32).tobytes())


SPLIT = Split(k=3, history=frozenset(), probes=(), left_out=frozenset(),
              families={"a1": "A", "a2": "A", "b1": "B", "c1": "C"})


def test_truncation_shares_over_recalled_bodies_and_active_procedures():
    short = "1. Call x\n\n## Edge cases\n- retry"
    procs = [_proc("p", ["a1"]), _proc("q", ["b1"], body=short)]
    rows = [_row("A", ["p", "q"]), _row("B", ["q"])]
    kpis, info = truncation_kpis(rows, procs, S3 + 10)
    k = {x.name: x for x in kpis}
    # 3 recalled bodies: p is cut mid-step, q (twice) fits
    assert (k["recall_body_cut_share"].value, k["recall_body_cut_share"].n) == (1 / 3, 3)
    assert k["recall_body_cut_mid_step_share"].value == pytest.approx(1 / 3)
    assert info["recalled"] == {"mid_step": 1, "whole": 2}
    assert k["active_body_cut_share"].value == 0.5 and k["active_body_cut_share"].n == 2
    whole, _ = truncation_kpis(rows, procs, S3 + 10, "whole_steps")
    assert {x.name: x for x in whole}["recall_body_cut_mid_step_share"].value == 0.0


def test_fragmentation_counts_active_procedures_per_family():
    # A: three active procedures (one with a tied A/B provenance counts for A, the first);
    # B: one active, one superseded; C: none; one procedure of no labelled session
    procs = [_proc("p1", ["a1"]), _proc("p2", ["a1", "a2"]), _proc("p3", ["a2", "b1"]),
             _proc("p4", ["b1"]), _proc("p5", ["b1"], active=False), _proc("p6", ["zz"])]
    assert family_counts(procs, SPLIT) == ({"A": 3, "B": 1}, 1)
    kpis, info = question_kpis([], procs, SPLIT, Thresholds(), cut="raw", starts=[],
                               first_counts={}, vectors={})
    assert kpis["procedures_per_family"].value == 2.0  # (3 + 1) / 2 families served
    assert kpis["procedures_per_family"].n == 2
    assert kpis["fragmented_family_share"].value == 0.5  # A of A, B
    assert (kpis["families_served"].value, kpis["families_served"].n) == (2, 3)
    assert kpis["procedures_without_family"].value == 1
    assert info["fragmentation"]["per_family"] == {"A": 3, "B": 1}


def _start(i, qualified, left, status="ran"):
    return StartCost(i, status, 2, 0, 1.0, 5, 3, qualified, qualified - left, left, i)


def test_starts_until_drained_counts_from_the_first_qualifying_start():
    # cap 2, 5 clusters qualify at once: 2 + 2 + 1 distillations, drained at the 3rd start
    assert starts_until_drained([_start(1, 5, 3), _start(2, 3, 1), _start(3, 1, 0)]) == 3
    # starts before anything qualified do not count; a backlog to the end is not drained
    assert starts_until_drained([_start(1, 0, 0), _start(2, 4, 2), _start(3, 2, 0)]) == 2
    assert starts_until_drained([_start(1, 5, 3), _start(2, 3, 1)]) is None
    assert starts_until_drained([_start(1, 0, 0)]) == 0
    # a backlog that builds again later counts until it clears too (a replay's new clusters)
    assert starts_until_drained([_start(1, 2, 0), _start(2, 5, 3), _start(3, 3, 1),
                                 _start(4, 1, 0), _start(5, 4, 2), _start(6, 2, 0)]) == 6
    assert starts_until_drained([_start(1, 2, 0), _start(2, 1, 0)]) == 1
    assert starts_until_drained([_start(1, 3, 0, status="llm-unavailable"),
                                 _start(2, 3, 0)]) == 2
    kpis, info = question_kpis([], [], SPLIT, Thresholds(), cut="raw", first_counts={},
                               vectors={}, starts=[_start(1, 5, 3), _start(2, 3, 1)])
    assert kpis["starts_until_drained"].value is None
    assert "not drained" in kpis["starts_until_drained"].note
    assert kpis["startup_model_calls"].value == 2 and kpis["startup_model_calls"].n == 2
    assert kpis["startup_backlog_max"].value == 3
    assert info["startup"]["starts"][0]["left_for_later"] == 3


FIVE = {"invoice": "find the invoice {i}", "mail": "answer the mail {i}",
        "jira": "check the jira ticket {i}", "tests": "run the tests {i}",
        "notes": "tidy the notes {i}"}


def _five_clusters(store):
    for attempt in (1, 2, 3):
        for n, (fam, goal) in enumerate(FIVE.items()):
            sid, ts = f"{fam}-{attempt}", f"2026-01-0{attempt}T10:00:0{n}.000000+00:00"
            with store.transaction():
                for step, tool in enumerate((f"{fam}_open", "read_file", f"{fam}_close")):
                    store.log_tool_call(sid, tool, {"n": step}, "ok", True, timestamp=ts)
                store.add_turn(sid, "user", goal.format(i=attempt), timestamp=ts)


def _drain(store, strategy, llm, th, starts=4):
    """Run ``starts`` passes on one store, as one process start each."""
    out = []
    for i in range(starts):
        rep = get_strategy(strategy).synthesize(store, llm, FakeFamilyEmbedder(), th)
        (start,) = starts_from_report(rep, 0.0, len(store.procedures(active_only=True)))
        out.append(dataclasses.replace(start, start=i + 1))
    return out


def test_a_cap_of_two_drains_five_clusters_in_three_starts(store):
    _five_clusters(store)
    th = Thresholds(similarity_tau=0.8, max_distill_calls_per_pass=2)
    assert get_strategy("skillsynth").distill_cap(th) == 2
    assert get_strategy("skillsynth").distill_cap(Thresholds()) == 10  # #887: unbounded
    starts = _drain(store, "skillsynth", FakeDistiller(), th)
    assert [(s.qualified, s.handed, s.left_for_later) for s in starts] == [
        (5, 2, 3), (3, 2, 1), (1, 1, 0), (0, 0, 0)]
    assert [s.sessions_consumed for s in starts] == [6, 6, 3, 0]
    assert starts_until_drained(starts) == 3


def test_gaia_shipped_drains_with_gaias_own_cap_of_two(tmp_path):
    pytest.importorskip("gaia.agents.base.skill_synthesis",
                        reason="amd-gaia is not installed (pip install 'skillsynth[gaia]')")
    th = Thresholds(similarity_tau=0.8)  # no cap set: GAIA 0.25.1 spends at most 2
    assert get_strategy("gaia-shipped").distill_cap(th) == 2
    with MemoryStore.init(tmp_path / "g.db") as store:
        _five_clusters(store)
        starts = _drain(store, "gaia-shipped", FakeGaiaDistiller(), th)
    assert [s.left_for_later for s in starts][:3] == [3, 1, 0]
    assert starts_until_drained(starts) == 3


def test_outcome_counts_recorded_against_possible():
    # p was written at 3/3 and later moved to 4/4 (one update recorded); q never moved
    procs = [_proc("p", ["a1"], counts=(4, 4)), _proc("q", ["b1"], counts=(3, 3))]
    first = {"p": (3, 3), "q": (3, 3)}
    rows = [_row("A", ["p", "q"], success=True), _row("B", ["q"], success=False),
            _row("C", ["q"], success=False), _row("A", ["q"], success=None)]
    kpis, info = outcome_kpis(rows, procs, first, min_success_rate=0.8)
    k = {x.name: x for x in kpis}
    assert k["outcome_updates_recorded"].value == 1
    assert k["outcome_updates_possible"].value == 4  # the unlabelled probe is not counted
    assert k["outcome_failures_possible"].value == 2
    assert k["recalled_outcome_success_share"].value == 0.5
    # q with feedback: (3 + 1) / (3 + 3) = 0.67 < 0.80; p: 5 / 5
    assert k["procedures_below_rate_with_feedback"].value == 1
    assert info["below_rate_with_feedback"] == ["q"]
    assert info["feedback"]["q"] == {"successes": 1, "attempts": 3}


def test_duplicate_pairs_by_meaning_or_by_tools_under_different_names():
    e1, near = [1.0, 0.0, 0.0], [0.9, np.sqrt(1 - 0.81), 0.0]  # cosine 0.90
    procs = [_proc("p1", ["a1"], tools=("x", "y"), vec=e1),
             _proc("p2", ["a2"], tools=("z",), vec=near),        # p1 by meaning (A, A)
             _proc("p3", ["b1"], tools=("x", "y"), vec=[0, 0, 1]),  # p1 by tools (A, B)
             _proc("p4", ["c1"], tools=("y", "x"), vec=[0, 1, 0]),  # order differs: none
             _proc("p5", ["a1"], tools=("x", "y"), vec=e1, active=False)]  # inactive
    vectors = {p.id: p.vector() for p in procs}
    pairs = duplicate_pairs(procs, vectors, 0.82, SPLIT)
    assert [(d.a, d.b, d.by_meaning, d.by_tools, d.same_family) for d in pairs] == [
        ("p1", "p2", True, False, True), ("p1", "p3", False, True, False)]
    assert pairs[0].cosine == pytest.approx(0.9)
    assert duplicate_pairs(procs, vectors, 0.95, SPLIT)[0].b == "p3"  # 0.90 < 0.95
    kpis, info = question_kpis([], procs, SPLIT, Thresholds(), cut="raw", starts=[],
                               first_counts={}, vectors=vectors)
    assert kpis["duplicate_procedure_pairs"].value == 2
    assert kpis["duplicate_procedure_pairs"].n == 6  # 4 active: 6 pairs examined
    assert kpis["duplicate_procedure_share"].value == 0.75  # p1, p2, p3 of 4
    assert kpis["duplicate_pairs_same_family"].value == 1
    assert (info["duplicates"]["by_meaning"], info["duplicates"]["by_tools"]) == (1, 1)


@pytest.mark.parametrize("protocol", ["strict", "rolling"])
def test_a_point_writes_the_questions_kpis_and_the_cut_option_takes_effect(tmp_path,
                                                                           protocol):
    # FakeDistiller's bodies start "1. Call search_file\n2. ..." (invoice: step 1 is 19
    # characters, so a cap of 20 lands on the line break, a boundary) and "1. Call
    # list_inbox\n2. ..." (mail: 18, so 20 is inside step 2: mid-step)
    db = tiny_corpus(tmp_path, attempts=6)
    out = {}
    for cut in ("raw", "whole_steps"):
        cfg = EvalConfig(str(db), thresholds=Thresholds(similarity_tau=0.8,
                                                        max_recall_body_chars=20),
                         n_boot=50, protocol=protocol, cadence=3, recall_cut=cut)
        out[cut] = run_point(cfg, FakeDistiller(), FakeFamilyEmbedder(),
                             tmp_path / f"{protocol}-{cut}")
    raw, whole = out["raw"], out["whole_steps"]
    q = raw.summary["gaia_questions"]
    assert set(q) == {"truncation", "fragmentation", "startup", "outcomes", "duplicates"}
    assert raw.summary["kpis"]["recall_body_cut_share"]["value"] == 1.0
    places = q["truncation"]["places"]["recalled"]
    assert set(places) == {"mid_step", "boundary"} and places["mid_step"] > 0
    assert whole.kpis["recall_body_cut_mid_step_share"].value == 0.0
    assert whole.summary["gaia_questions"]["truncation"]["cut"] == "whole_steps"
    mem = [r for r in whole.rows if r.arm == "memory" and r.recalled_ids]
    assert mem and all(r.prompt_chars > 0 for r in mem)
    assert raw.kpis["procedures_per_family"].value == 1.0  # invoice and mail, one each
    assert raw.kpis["outcome_updates_recorded"].value == 0  # nothing writes them (#2685)
    starts = q["startup"]["starts"]
    assert len(starts) == (5 if protocol == "rolling" else 1)
    assert q["startup"]["distill_cap"] == 10
