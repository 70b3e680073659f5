"""An outage is never a null: a point whose model work stopped on a server failure is invalid
(no summary, nothing aggregated), says so, and a re-run on a healthy server completes it.

Stalled and failing servers are FAKE raw-socket servers (``fakes.BadServer``) behind the real
HTTP client with a 1 s timeout; the healthy re-run uses the FAKE distiller and agent.
"""

from __future__ import annotations

import json
import logging
import sys

import pytest
from corpus_kinds import tiny_corpus
from fakes import (
    BadServer,
    FakeBrokenChat,
    FakeDistiller,
    FakeFamilyEmbedder,
    FakeModelServer,
    FakeToolAgent,
)

from skillsynth.config import Thresholds
from skillsynth.errors import ContextExceeded, PointInvalid
from skillsynth.evaluation import EvalConfig, run_point
from skillsynth.evaluation.point.summary import SUMMARY
from skillsynth.evaluation.reporting import report
from skillsynth.evaluation.reporting.verdict import verdict
from skillsynth.models import install, llm
from skillsynth.models.chat import ChatClient
from skillsynth.models.llm import Endpoint
from skillsynth.models.status import manifest_missing

TH = Thresholds(similarity_tau=0.8)
#: 1 s per request and one retry: a stalled server costs a point about 2 s here
FAST = Endpoint("local", "http://127.0.0.1:1/v1", "m", timeout_s=1.0, max_retries=1,
                retry_backoff_s=0.05, connect_timeout_s=1.0)


@pytest.mark.parametrize("fault, said", [("hang", "did not answer in time"),
                                         ("http-500", "HTTP 500")])
@pytest.mark.parametrize("protocol", ["strict", "rolling"])
def test_a_synthesis_pass_cut_off_by_the_server_leaves_the_point_unfinished_then_resumes(
        tmp_path, fault, said, protocol):
    db = tiny_corpus(tmp_path)
    cfg = EvalConfig(str(db), thresholds=TH, n_boot=100, protocol=protocol,
                     **({"cadence": 3} if protocol == "rolling" else {}))
    out = tmp_path / "pt"
    with BadServer(fault) as srv, ChatClient(FAST.with_(base_url=srv.base_url)) as chat, \
            pytest.raises(PointInvalid, match=said) as err:
        run_point(cfg, chat, FakeFamilyEmbedder(), out)
    assert err.value.stage == "synthesis" and said in err.value.cause
    assert "re-run the sweep" in str(err.value)
    assert not (out / SUMMARY).exists()  # nothing of it can enter an aggregate or a gate
    # the same folder, a healthy server: the point is done, and measured
    res = run_point(cfg, FakeDistiller(), FakeFamilyEmbedder(), out)
    assert (out / SUMMARY).exists() and res.summary["pass"]["status"] == "ran"
    assert res.kpis["synthesis_fired_rate"].value > 0


def test_gaias_own_pass_with_its_model_down_makes_the_point_invalid(tmp_path):
    pytest.importorskip("gaia", reason="amd-gaia (GAIA's reference) is a dev dependency")
    cfg = EvalConfig(str(tiny_corpus(tmp_path)), strategy="gaia-shipped", thresholds=TH,
                     n_boot=100)
    with pytest.raises(PointInvalid, match="llm-unavailable") as err:
        run_point(cfg, FakeBrokenChat(), FakeFamilyEmbedder(), tmp_path / "pt")
    assert err.value.stage == "synthesis"
    assert not (tmp_path / "pt" / SUMMARY).exists()


@pytest.mark.parametrize("fault", ["hang", "http-500"])
def test_a_live_run_cut_off_by_the_server_is_no_live_result(tmp_path, fault):
    db = tiny_corpus(tmp_path)
    cfg = EvalConfig(str(db), strategy="none", thresholds=TH, n_boot=100, live=True,
                     step_limit=4)
    out = tmp_path / "pt"
    with BadServer(fault) as srv, ChatClient(FAST.with_(base_url=srv.base_url)) as chat, \
            pytest.raises(PointInvalid, match="no-memory arm") as err:
        run_point(cfg, chat, FakeFamilyEmbedder(), out)
    assert err.value.stage == "live" and not (out / SUMMARY).exists()
    agent = FakeToolAgent(["search_file", "read_file", "reply"], {})
    res = run_point(cfg, agent, FakeFamilyEmbedder(), out)
    live = [r for r in res.rows if r.steps_method == "live"]
    assert live and all(r.termination != "model-error" for r in live)


def test_a_conversation_over_the_models_context_is_a_typed_refusal_not_an_outage():
    with BadServer("over-context") as srv, ChatClient(FAST.with_(base_url=srv.base_url)) as chat, \
            pytest.raises(ContextExceeded) as err:
        chat.chat([{"role": "user", "content": "hi"}])
    assert (err.value.tokens, err.value.limit) == (9055, 8192)
    assert "9055 tokens" in str(err.value) and "its context holds 8192" in str(err.value)


class _OverflowingAgent(FakeToolAgent):
    """FAKE agent whose conversation outgrows the model's context at its third turn."""

    def chat(self, messages, *, tools=None, **kw):
        if sum(1 for m in messages if m["role"] == "tool") >= 2:
            raise ContextExceeded("request (9055 tokens) exceeds the context", tokens=9055,
                                  limit=8192)
        return super().chat(messages, tools=tools, **kw)


def test_a_live_run_cut_off_by_its_context_is_a_scored_run_and_counted(tmp_path):
    cfg = EvalConfig(str(tiny_corpus(tmp_path)), strategy="none", thresholds=TH, n_boot=100,
                     live=True, step_limit=4)
    agent = _OverflowingAgent(["search_file", "read_file", "reply"], {})
    res = run_point(cfg, agent, FakeFamilyEmbedder(), tmp_path / "pt")  # not PointInvalid
    live = [r for r in res.rows if r.steps_method == "live"]
    assert live and {r.termination for r in live} == {"context-limit"}
    assert all(r.steps == 2 and not r.success for r in live)  # its calls kept, no success
    ends = res.summary["live"]["terminations"]
    assert ends == {arm: {"context-limit": sum(r.arm == arm for r in live)}
                    for arm in {r.arm for r in live}}


def test_a_retried_request_warns_once_per_server_and_kind_then_counts(caplog, monkeypatch):
    monkeypatch.setattr(llm, "_warned", {})
    caplog.set_level(logging.WARNING, logger="skillsynth.models.llm")
    with BadServer("http-500") as srv, \
            ChatClient(FAST.with_(base_url=srv.base_url, max_retries=2)) as chat:
        for _ in range(2):
            with pytest.raises(Exception, match="HTTP 500"):
                chat.chat([{"role": "user", "content": "hi"}])
    lines = [r.getMessage() for r in caplog.records]
    # four retries in all; one line said it, the rest are counted for the next line
    assert len(lines) == 1 and "attempt 1 of 3 failed (HTTP 500" in lines[0]
    assert llm._warned[(srv.base_url, "failing")][1] == 3


def _rows(pt):
    return {r.criterion: r for r in verdict(pt)}


def test_recall_precision_with_nothing_recalled_is_not_measured():
    def kpi(value, n):
        return {"value": value, "lo": value, "hi": value, "n": n}

    pt = {"id": "p", "strategy": "skillsynth", "params": {"similarity_tau": 0.82},
          "kpis": {"recall_precision": kpi(None, 0), "synthesis_fired_rate": kpi(0.0, 63)},
          "floors": {"disabled-not-recalled": True, "recall-threshold-and-state": None}}
    row = _rows(pt)["Recall precision"]
    assert row.status == "NOT MEASURED" and "n=0" in row.why
    pt["kpis"]["recall_precision"] = kpi(0.9, 7)  # recalled, and the floors behaved
    assert _rows(pt)["Recall precision"].status == "PASS"


def test_the_report_names_missing_points_and_a_rolling_runs_history(tmp_path):
    db = tiny_corpus(tmp_path)
    run = tmp_path / "run"
    cfg = EvalConfig(str(db), thresholds=TH, n_boot=100, protocol="rolling", cadence=3)
    res = run_point(cfg, FakeDistiller(), FakeFamilyEmbedder(), run / "points" / "a")
    pt = {"id": "a", "strategy": "skillsynth",
          "params": {"similarity_tau": 0.8, "min_occurrences": 3, "max_recall_body_chars": 1500},
          **{k: res.summary[k] for k in ("kpis", "floors", "split", "corpus", "versions")}}
    (run / "summary.json").write_text(json.dumps({
        "name": "r", "points": [pt], "n_points": 2, "finished": 1,
        "failed": {"b": "PointInvalid: skillsynth on tiny.db: the synthesis pass did not "
                        "run to its end (llm-unavailable: no complete answer within 300 s)"}}))
    loaded = report.load_run(run)
    text = report.describe_run(loaded)
    assert "1 of 2 point(s) finished, 1 failed" in text
    assert "**Missing** `b`" in text and "no complete answer within 300 s" in text
    assert "None history" not in text and "sessions replayed in time order" in text
    table = report.verdict_table(loaded)
    missing = table[table["configuration"] == "missing: b"]
    assert list(missing["status"]) == ["NOT MEASURED"]
    assert "llm-unavailable" in missing["why"].iloc[0]
    # the docs quote the run from a record: every finished point's KPIs, the missing named
    from skillsynth.evaluation.reporting.measured import sweep_measurement
    from skillsynth.figures import record, render

    m = sweep_measurement(run, command="skillsynth sweep spec.yaml")
    fired = m.figures["a: synthesis_fired_rate"]
    k = res.kpis["synthesis_fired_rate"]
    assert fired["value"] == pytest.approx(k.value, abs=1e-4) and fired["n"] == k.n
    assert fired["interval"] == f"[{k.lo:.2f}, {k.hi:.2f}]"
    assert m.figures["a: step_reduction"]["estimate"] == "replay"
    assert not any(name.startswith("b:") for name in m.figures)
    assert "1 of 2 point(s) finished; missing: b (PointInvalid" in m.note
    assert f"Distill prompt: {res.summary['versions']['distill_prompt']}." in m.note
    record(m, tmp_path / "figures")
    assert "a: recall_hit_rate" in render(tmp_path / "figures")


def test_a_long_install_step_is_not_silent_and_a_failed_one_shows_its_tail():
    lines: list[str] = []
    install.run_step("wait", [sys.executable, "-c", "import time; time.sleep(1.3)"],
                     log=lines.append, heartbeat_s=0.4)
    beats = [x for x in lines if "still running" in x]
    assert 2 <= len(beats) <= 3 and beats[0].startswith("  ... wait: still running")
    with pytest.raises(install.PrepareError, match=r"boom failed \(exit 3\):\nlast words"):
        install.run_step("boom", [sys.executable, "-c",
                                  "print('last words'); raise SystemExit(3)"], log=lines.append)


def test_models_status_names_a_manifest_file_that_is_gone(tmp_path):
    assert manifest_missing(tmp_path) == []  # no manifest: unprepared, said elsewhere
    server, chat = tmp_path / "llama-server", tmp_path / "chat.gguf"
    server.write_text("x")
    chat.write_text("x")
    gone = tmp_path / "old-venv" / "llama-server"
    (tmp_path / "models.json").write_text(json.dumps({
        "llama_server": str(gone), "chat_model": str(chat), "embed_model": str(server),
        "chat_models": {"qwen": str(chat), "smollm": str(tmp_path / "nope.gguf")}}))
    assert manifest_missing(tmp_path) == [f"llama_server: {gone}",
                                          f"chat_models.smollm: {tmp_path / 'nope.gguf'}"]
    (tmp_path / "models.json").write_text("{not json")
    assert "unreadable" in manifest_missing(tmp_path)[0]


@pytest.mark.notebooks
def test_a_sweep_on_a_stalled_server_fails_its_points_and_a_healthy_rerun_completes_them(
        tmp_path):
    import yaml

    from skillsynth.cli import main
    from skillsynth.evaluation.sweeps.summary import SweepSummary

    with FakeModelServer(stalled=True) as srv:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "outage", "corpus": {"synthetic": {"families": 3, "seed": 5,
                                                       "attempts": 4}},
            "backend": {"backend": "endpoints", "chat_url": srv.base_url, "chat_model": "chat",
                        "embed_url": srv.base_url, "embed_model": "embed", "timeout_s": 1},
            "mode": "json", "workers": 1, "n_boot": 100,
            "grid": {"strategy": ["skillsynth"], "similarity_tau": [0.8],
                     "min_occurrences": [3], "max_recall_body_chars": [1500]}}))
        argv = ["sweep", str(spec), "--results", str(tmp_path / "res"), "--cache",
                str(tmp_path / "cache.db")]
        assert main(argv) == 1  # non-zero: a point failed
        run = tmp_path / "res" / "outage"
        summary = SweepSummary.load(run)
        (pid,) = summary.failed
        assert "PointInvalid" in summary.failed[pid] and summary.points == ()
        assert not (run / "points" / pid / SUMMARY).exists() and srv.chat_requests >= 1
        srv.stalled.clear()  # the server recovers; the same command resumes the point
        assert main(argv) == 0
        summary = SweepSummary.load(run)
        assert not summary.failed and [p.id for p in summary.points] == [pid]
        assert summary.points[0].pass_status == "ran"


def _tree(root):
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in root.rglob("*"))


def test_sweep_dry_run_plans_points_and_writes_nothing(tmp_path, capsys):
    import yaml

    from skillsynth.cli import main
    from skillsynth.evaluation.sweeps.plan import plan_sweep

    spec = tmp_path / "spec.yaml"
    doc = {"name": "plan", "corpus": {"synthetic": {"families": 3, "seed": 5, "attempts": 4}},
           "backend": "local", "workers": 1, "live": True, "world": "replay", "step_limit": 5,
           "tasks": ["a", "b"], "repeats": 3, "temperature": 0.3,
           "grid": {"strategy": ["none", "skillsynth"], "similarity_tau": [0.5],
                    "min_occurrences": [3], "max_recall_body_chars": [1500]}}
    spec.write_text(yaml.safe_dump(doc))
    results = tmp_path / "results"
    first = plan_sweep(spec, results_root=results)
    assert [p.state for p in first.points] == ["new", "new"]
    assert {p.live_runs for p in first.points} == {2 * 2 * 3}  # tasks x arms x repeats
    assert {p.max_agent_calls for p in first.points} == {12 * 5}
    done, killed = first.points
    (results / "plan" / "points" / done.id).mkdir(parents=True)
    (results / "plan" / "points" / done.id / "summary.json").write_text("{}")
    (results / "plan" / "points" / killed.id).mkdir(parents=True)
    before = _tree(tmp_path)
    assert main(["sweep", str(spec), "--results", str(results), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"done   {done.id}" in out and f"resume {killed.id}" in out
    assert "would run 1 of 2 point(s); live agent calls <= 60 before the cache" in out
    assert _tree(tmp_path) == before  # no spec.yaml, no corpus, no summary
    # live with its probes left to the corpus (no tasks): said, not counted
    spec.write_text(yaml.safe_dump({k: v for k, v in doc.items() if k != "tasks"}))
    assert main(["sweep", str(spec), "--results", str(tmp_path / "r2"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("; live, its runs counted once the corpus gives its probes") == 2
    assert "live agent calls" not in out


def test_a_point_another_version_ran_is_stale_and_the_sweep_refuses_to_mix_it_in(tmp_path,
                                                                                capsys):
    # a finished point whose recorded distill prompt is not the one this code sends (its
    # procedures would be written differently now) is named, not silently skipped beside
    # points this version runs under the same ids
    import yaml

    from skillsynth.cli import main

    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "mixed", "corpus": {"synthetic": {"families": 3, "seed": 5, "attempts": 4}},
        "backend": "local", "workers": 1,
        "grid": {"strategy": ["none", "skillsynth"], "similarity_tau": [0.5],
                 "min_occurrences": [3], "max_recall_body_chars": [1500]}}))
    results = tmp_path / "results"
    assert main(["sweep", str(spec), "--results", str(results), "--dry-run"]) == 0
    ids = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:3]]
    for pid, prompt in zip(ids, ["distill-v3", "distill-v0"], strict=True):
        (results / "mixed" / "points" / pid).mkdir(parents=True)
        (results / "mixed" / "points" / pid / "summary.json").write_text(
            json.dumps({"versions": {"distill_prompt": prompt, "replay_rule": "replay-v1"}}))
    assert main(["sweep", str(spec), "--results", str(results), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"done   {ids[0]}" in out and f"stale  {ids[1]}" in out
    assert "would run 0 of 2" in out and "1 stale point(s)" in out
    before = _tree(tmp_path)
    assert main(["sweep", str(spec), "--results", str(results)]) == 1
    err = capsys.readouterr().err
    assert ids[1] in err and "distill prompt distill-v0, now distill-v3" in err
    assert ids[0] not in err
    assert _tree(tmp_path) == before  # refused before anything was written or started


def test_corpus_import_dry_run_counts_what_it_would_do_and_writes_nothing(tmp_path, capsys):
    from skillsynth.cli import main
    from skillsynth.corpora import import_corpus

    src = tmp_path / "runs.jsonl"
    rows = [{"session_id": f"s{i}", "goal": f"find the invoice {i}",
             "tool_name": "search_file", "args": {"q": i}, "success": True}
            for i in range(3)]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = tmp_path / "c.db"
    plan = import_corpus("jsonl", src, db, dry_run=True)
    assert (plan.status, plan.sessions_imported, plan.calls_imported) == ("dry-run", 3, 3)
    assert not db.exists() and not list(tmp_path.glob("c.db*"))
    import_corpus("jsonl", src, db)
    with src.open("a") as fh:  # one more session, and a broken line
        fh.write(json.dumps({**rows[0], "session_id": "s9"}) + "\n{broken\n")
    before = _tree(tmp_path)
    assert main(["corpus", "import", "--format", "jsonl", str(src), str(db), "--dry-run",
                 "--skip-bad"]) == 0
    out = capsys.readouterr().out
    assert "dry run, nothing written: would import 1 sessions" in out
    assert "3 sessions already in the corpus" in out and "1 bad records skipped" in out
    assert _tree(tmp_path) == before


def test_a_verification_try_cut_off_by_the_server_makes_the_point_invalid(tmp_path,
                                                                          monkeypatch):
    from skillsynth.errors import LLMUnavailable
    from skillsynth.evaluation.point import run as run_module

    class DownVerifier:  # FAKE: its tries need a model that does not answer
        rule = "world"

        def __call__(self, skill, cluster):
            raise LLMUnavailable("FAKE: verifying find-the-invoice: no complete answer "
                                 "within 1 s")

    monkeypatch.setattr(run_module, "point_verifier", lambda *a, **k: DownVerifier())
    cfg = EvalConfig(str(tiny_corpus(tmp_path)), thresholds=TH, n_boot=100)
    with pytest.raises(PointInvalid, match="verifying find-the-invoice") as err:
        run_point(cfg, FakeDistiller(), FakeFamilyEmbedder(), tmp_path / "pt")
    assert err.value.stage == "synthesis" and not (tmp_path / "pt" / SUMMARY).exists()
