"""The rolling protocol, recall keys, the success signal and seen tasks (FAKE models, real
stores; every expected figure is worked out by hand in the comments)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest
import yaml
from corpus_kinds import build_corpus, tiny_corpus
from fakes import FakeDistiller, FakeFamilyEmbedder

from skillsynth.config import Thresholds
from skillsynth.corpora import LabelStore, labels_path_for
from skillsynth.errors import ConfigError, EvaluationError
from skillsynth.evaluation import EvalConfig, load_split, run_point
from skillsynth.evaluation.point.metrics import ProbeResult, point_kpis
from skillsynth.evaluation.sweeps.spec import SweepSpec, expand_points
from skillsynth.pipeline.recall import ExemplarIndex, recall, recall_index
from skillsynth.pipeline.synthesize import synthesize_skills
from skillsynth.store import MemoryStore, Procedure, encode_embedding

TH = Thresholds(similarity_tau=0.8)


def _rows(point_dir):
    return [json.loads(x) for x in (point_dir / "results.jsonl").read_text().splitlines()]


def test_rolling_makes_every_later_attempt_a_probe_and_passes_reach_capped_clusters(tmp_path):
    # 3 tasks x 6 attempts, one attempt of each a day. A pass every 3 sessions runs before
    # sessions 3, 6, 9, 12 and 15. Before session 9 (the start of day 4) the store holds
    # 3 attempts of each task: invoice and mail qualify (jira's 2-step runs never do).
    db = tiny_corpus(tmp_path, attempts=6)
    cfg = EvalConfig(str(db), thresholds=TH.merge(max_clusters_per_pass=1), n_boot=200,
                     protocol="rolling", cadence=3)
    llm = FakeDistiller()
    res = run_point(cfg, llm, FakeFamilyEmbedder(), tmp_path / "rolling")
    split = res.summary["split"]
    passes = split["passes"]
    assert split["protocol"] == "rolling" and split["ordered_by"] == "time"
    assert [p["at_session"] for p in passes] == [3, 6, 9, 12, 15]
    # attempts 4-6 of each task are probes: 9, against strict's 3
    assert split["probes"] == 9 == split["probes_checked_absent_from_store"]
    assert split["families_without_probe"] == 0
    # the pass at 9 distils one of the two qualified clusters and leaves one for later; the
    # pass at 12 reaches it (its sessions were not handed to the distiller), with the
    # sessions the first pass handed (attempts 1-3 of the first task) left out
    assert [p["distilled"] for p in passes] == [0, 0, 1, 1, 0]
    assert passes[2]["left_for_later"] == 1 and passes[3]["left_for_later"] == 0
    assert passes[3]["read"] == 12 - 3
    assert llm.calls == 2 == res.kpis["llm_calls"].value
    # the first family's 3 probes meet its procedure; the second's probe on day 4 comes
    # before the pass that distils it, its 5th and 6th attempts after: fired for 5 of 9
    assert res.kpis["synthesis_fired_rate"].value == pytest.approx(5 / 9)
    assert res.kpis["synthesis_fired_rate"].n == 9
    strict = run_point(EvalConfig(str(db), thresholds=TH.merge(max_clusters_per_pass=1),
                                  n_boot=200), FakeDistiller(), FakeFamilyEmbedder(),
                       tmp_path / "strict")
    assert strict.summary["split"]["probes"] == 3
    assert strict.kpis["synthesis_fired_rate"].value == pytest.approx(1 / 3)  # the cap holds


@pytest.mark.parametrize("kind", ["synthetic", "taubench", "tau2-airline", "tau2-retail", "jsonl"])
def test_no_rolling_probe_is_in_the_store_it_is_recalled_against(tmp_path, kind):
    db = build_corpus(kind, tmp_path)
    k = 1 if kind.startswith("tau2") else 3
    cfg = EvalConfig(str(db), thresholds=TH, k=k, n_boot=100, protocol="rolling", cadence=4)
    res = run_point(cfg, FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "pt")
    with LabelStore(labels_path_for(db)) as ls:
        labels = ls.all()
    per_task = Counter(x.task_id for x in labels if x.task_id is not None)
    # every attempt after the k-th is a probe (strict: only the (k+1)-th)
    assert res.summary["split"]["probes"] == sum(max(0, n - k) for n in per_task.values())
    # a task with k attempts or fewer has no probe: counted, not hidden
    assert res.summary["split"]["families_without_probe"] == sum(
        1 for n in per_task.values() if n <= k)
    # the history store's row ids record when each session was written: every procedure a
    # probe recalled was distilled from sessions written before the probe was
    conn = sqlite3.connect(tmp_path / "pt" / "history.db")
    first = dict(conn.execute("SELECT session_id, MIN(id) FROM tool_history GROUP BY 1"))
    prov = {pid: json.loads(p)["from_sessions"]
            for pid, p in conn.execute("SELECT id, provenance FROM procedures")}
    conn.close()
    start = {x.session_id: x.started_at for x in labels}
    recalled = 0
    for r in _rows(tmp_path / "pt"):
        probe = r["probe_session"]
        for pid in r["recalled_ids"]:
            recalled += 1
            assert probe not in prov[pid]
            assert all(start[s] <= start[probe] for s in prov[pid])
            if probe in first:  # a probe without calls is never written
                assert all(first[s] < first[probe] for s in prov[pid])
    made_up = any("synthetic-timestamps" in x.flags for x in labels)  # recorded order, said
    assert res.summary["split"]["ordered_by"] == ("recorded" if made_up else "time")
    if kind in ("synthetic", "jsonl"):
        assert recalled  # the fake models recall synthetic families


def test_rolling_bad_input_is_named(tmp_path):
    db = tiny_corpus(tmp_path, attempts=5)
    with pytest.raises(ConfigError, match="cadence must be >= 1") as e:
        EvalConfig(str(db), protocol="rolling", cadence=0)
    assert e.value.key == "cadence"
    with pytest.raises(ConfigError, match="live probes run under protocol strict"):
        EvalConfig(str(db), protocol="rolling", live=True)
    with pytest.raises(ConfigError, match="protocol must be one of strict, rolling"):
        EvalConfig(str(db), protocol="daily")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="pheron .* cannot recall by 'goals'"):
        EvalConfig(str(db), strategy="pheron", recall_key="goals")
    # a cadence in days on a corpus whose importer made its timestamps up
    syn = build_corpus("taubench", tmp_path)
    with pytest.raises(EvaluationError, match="cadence_unit days needs"):
        run_point(EvalConfig(str(syn), protocol="rolling", cadence_unit="days", n_boot=50),
                  FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "days")
    # one pass a day on real timestamps: the same passes as every 3 sessions here
    res = run_point(EvalConfig(str(db), thresholds=TH, protocol="rolling", cadence=1,
                               cadence_unit="days", n_boot=50),
                    FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "daily")
    assert [p["at_session"] for p in res.summary["split"]["passes"]] == [3, 6, 9, 12]


def _store_with_one_procedure(tmp_path):
    """An invoice procedure whose when_to_use talks about mail (a poor key), distilled from
    three invoice sessions."""
    db = tmp_path / "m.db"
    emb = FakeFamilyEmbedder()
    with MemoryStore.init(db) as s:
        for i in range(3):
            s.log_tool_call(f"s{i}", "search_file", {"i": i}, "ok", True)
            s.add_turn(f"s{i}", "user", f"find the invoice {i}")
        vec = emb.embed(["reply to the email"], kind="document")[0]
        s.put_procedure(Procedure(
            "find-invoice", "reply to the email", "1. search_file", ("search_file",),
            success_count=3, attempt_count=3, provenance={"from_sessions": ["s0", "s1", "s2"]},
            embedding=encode_embedding(vec)))
    return db, emb


def test_recall_by_member_goals_finds_what_when_to_use_misses(tmp_path):
    db, emb = _store_with_one_procedure(tmp_path)
    with MemoryStore.open(db) as s:
        goal = "find the invoice from march"
        by = {key: recall(s, emb, goal, TH, index=recall_index(s, emb, key), touch=False)
              for key in ("when_to_use", "goals", "both")}
        assert by["when_to_use"] == []  # cosine of invoice vs mail: about 0
        assert [h.procedure.name for h in by["goals"]] == ["find-invoice"]
        assert by["both"][0].score == pytest.approx(by["goals"][0].score)
        ix = ExemplarIndex(s, emb)
        assert (len(ix), ix.exemplars, ix.without_exemplars) == (1, 3, 0)
        # GAIA's schema is untouched: the procedure's embedding is still its when_to_use's
        assert s.procedures()[0].embedding == encode_embedding(emb.embed(["reply to the email"])[0])
        pid = s.procedures()[0].id
        s.set_procedure_enabled(pid, False)  # a disabled procedure is never recalled
        assert recall(s, emb, goal, TH, index=recall_index(s, emb, "goals"), touch=False) == []
    with pytest.raises(ConfigError, match="recall key must be one of"):
        recall_index(MemoryStore.open(db, read_only=True), emb, "names")  # type: ignore[arg-type]


def test_recall_keys_report_separation_per_point(tmp_path):
    db = tiny_corpus(tmp_path)
    seps = {}
    for key in ("when_to_use", "goals", "both"):
        res = run_point(EvalConfig(str(db), thresholds=TH, recall_key=key, n_boot=100),
                        FakeDistiller(), FakeFamilyEmbedder(), tmp_path / key)
        seps[key] = res.kpis["recall_separation"]
        assert res.kpis["recall_hit_rate"].value == pytest.approx(2 / 3)
        assert res.summary["config"]["recall_key"] == key
    # invoice and mail probes have their own procedure and the other family's: n = 2, and
    # the right one scores about 1, the wrong one about 0 under every key
    assert all(k.n == 2 and k.value > 0.9 for k in seps.values())


def test_session_rate_qualifies_by_outcome_and_clusters_report_failed_members(tmp_path):
    db = tmp_path / "m.db"
    with MemoryStore.init(db) as s:
        for i in range(4):  # every call succeeds, but 2 of the 4 sessions failed the task
            for t in ("search_file", "read_file", "reply"):
                s.log_tool_call(f"s{i}", t, {"i": i}, "ok", True)
            s.add_turn(f"s{i}", "user", f"find the invoice {i}")
    outcomes = {"s0": True, "s1": False, "s2": True, "s3": False}
    with MemoryStore.open(db) as s:
        by_calls = synthesize_skills(s, FakeDistiller(), FakeFamilyEmbedder(), TH, mode="json",
                                     rate="calls", outcomes=outcomes, dry_run=True)
        by_session = synthesize_skills(s, FakeDistiller(), FakeFamilyEmbedder(), TH,
                                       mode="json", rate="session", outcomes=outcomes,
                                       dry_run=True)
    assert (by_calls.qualified, by_session.qualified) == (1, 0)  # 0.5 < min_success_rate
    assert by_calls.failed_shares == (0.5,)


def _probe(fam, seen, right, hit=True):
    return ProbeResult("skillsynth", "memory", f"p-{fam}-{seen}", fam, "g",
                       ("x",) if hit else (), (0.9,) if hit else (), int(hit and right),
                       True, 4, 3 if hit else 4, "replay-v1", True, seen_task=seen)


def test_tools_families_report_unseen_task_probes_apart():
    rows = [_probe("a", True, True), _probe("b", True, True), _probe("c", False, False),
            _probe("d", False, True, hit=False)]
    k = point_kpis(rows, [], {}, n_boot=100)
    assert k["recall_hit_rate"].value == pytest.approx(2 / 4)
    assert k["recall_hit_rate_unseen_task"].value == 0.0  # c recalled wrong, d nothing
    assert k["recall_hit_rate_unseen_task"].n == 2
    assert k["recall_precision_unseen_task"].value == 0.0
    assert k["step_reduction_unseen_task"].value == pytest.approx(0.25 / 2)
    only_seen = point_kpis(rows[:2], [], {}, n_boot=100)
    assert "recall_hit_rate_unseen_task" not in only_seen


def test_strict_tools_probes_are_flagged_when_their_task_was_seen(tmp_path):
    db = build_corpus("taubench", tmp_path)
    run_point(EvalConfig(str(db), thresholds=TH, family="tools", n_boot=100),
              FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "pt")
    mem = [r for r in _rows(tmp_path / "pt") if r["arm"] == "memory"]
    with LabelStore(labels_path_for(db)) as ls:
        labels = {x.session_id: x for x in ls.all()}
    history = {labels[s].task_id for s in load_split(db, 3, family="tools").history}
    assert {r["seen_task"] for r in mem} == {True, False}  # 4 trials a task, families span tasks
    for r in mem:  # the flag says whether the history holds another attempt at its task
        task = labels[r["probe_session"]].task_id
        assert r["seen_task"] == (task in history)


def test_sweep_specs_grid_protocol_settings(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "keys", "corpus": {"db": "c.db"}, "protocol": "rolling", "cadence": 5,
        "grid": {"similarity_tau": [0.8], "recall_key": ["when_to_use", "goals", "both"]}}))
    s = SweepSpec.load(spec)
    pts = expand_points(s)
    assert [p.settings(s) for p in pts] == [
        {"protocol": "rolling", "probes": "first", "recall_key": key, "recall_cut": "raw",
         "recall_layout": "main", "rate": "calls",
         "distill_args": "none", "distiller": "llm", "procedure_form": "prose",
         "plan_choices": False,
         "verify": "none", "verify_tasks": 3, "verify_min_success": 0.5, "verify_calls": "none"}
        for key in ("when_to_use", "goals", "both")]
    assert len({p.id for p in pts}) == 3 and "key-goals" in pts[1].id
    assert len({p.synthesis_key for p in pts}) == 1  # the recall key does not change synthesis
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({
        "name": "b", "corpus": {"db": "c.db"},
        "grid": {"strategy": ["pheron"], "recall_key": ["goals"]}}))
    with pytest.raises(ConfigError, match="pheron .* cannot recall by 'goals'"):
        SweepSpec.load(bad)
    zero = tmp_path / "zero.yaml"
    zero.write_text(yaml.safe_dump({"name": "z", "corpus": {"db": "c.db"}, "cadence": 0,
                                    "protocol": "rolling", "grid": {"similarity_tau": [0.8]}}))
    with pytest.raises(ConfigError, match="cadence must be >= 1"):
        SweepSpec.load(zero)


def test_eval_command_names_bad_protocol_settings_before_any_model(tmp_path, capsys):
    from skillsynth.cli import main

    db = tiny_corpus(tmp_path)
    out = str(tmp_path / "pt")
    assert main(["eval", str(db), out, "--protocol", "rolling", "--cadence", "0"]) == 1
    assert "cadence must be >= 1 sessions, got 0" in capsys.readouterr().err
    assert main(["eval", str(db), out, "--strategy", "pheron", "--recall-key", "both"]) == 1
    assert "cannot recall by 'both'" in capsys.readouterr().err
    assert main(["eval", str(db), out, "--protocol", "rolling", "--live"]) == 1
    assert "live probes run under protocol strict" in capsys.readouterr().err
    assert not (tmp_path / "pt").exists()  # refused before anything was written


def test_a_distill_call_cap_leaves_the_rest_for_a_later_pass(tmp_path):
    db = tiny_corpus(tmp_path)  # invoice, mail (3-step) and jira (2-step) runs
    th = TH.merge(min_steps=2, max_distill_calls_per_pass=1)  # amd-gaia 0.25.1 ships 2
    with MemoryStore.open(db) as s:
        rep = synthesize_skills(s, FakeDistiller(), FakeFamilyEmbedder(), th, mode="json")
    assert (rep.qualified, rep.distilled, rep.left_for_later) == (3, 1, 2)
    assert ("cluster", "2 qualified cluster(s) over max_distill_calls_per_pass 1") \
        in rep.skipped
    assert Thresholds().max_distill_calls_per_pass is None  # #887's pass: no such cap
    with pytest.raises(ConfigError, match="max_distill_calls_per_pass"):
        Thresholds(max_distill_calls_per_pass=0)
