"""Sweeps through papermill with the real embedded models: kill, resume, cache; reports; gate.

The sweep tests execute the real sweep-point notebook against the embedded llama-server
models (``skillsynth models prepare`` first, as the README's test command does).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
import yaml

from skillsynth.errors import ConfigError, SkillsynthError
from skillsynth.evaluation.reporting.markdown import markdown_summary
from skillsynth.evaluation.reporting.report import gate, load_run, protocol_table
from skillsynth.evaluation.sweeps.run import SweepSpec, expand_points, run_sweep
from skillsynth.evaluation.sweeps.transport import ThreadPool, live_progress, phases, run_points
from skillsynth.models.backend import BackendSpec
from skillsynth.models.llm import LEMONADE_EMBED_MODEL

SPEC = {"name": "t", "corpus": {"synthetic": {"families": 3, "seed": 5, "attempts": 4}},
        "backend": "local", "mode": "json", "workers": 1, "n_boot": 200,
        "grid": {"strategy": ["skillsynth"], "similarity_tau": [0.3, 0.45, 0.6],
                 "min_occurrences": [2], "max_recall_body_chars": [1500]}}


def _spec(tmp: Path, **changes) -> Path:
    p = tmp / "spec.yaml"
    p.write_text(yaml.safe_dump(SPEC | changes))
    return p


def test_spec_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="unknown key"):
        SweepSpec.load(_spec(tmp_path, colour="red"))
    with pytest.raises(ConfigError, match="not sweepable"):
        SweepSpec.load(_spec(tmp_path, grid={"min_steps": [2]}))
    with pytest.raises(ConfigError, match="similarity_tau"):
        SweepSpec.load(_spec(tmp_path, grid={"similarity_tau": [1.5]}))
    with pytest.raises(ConfigError, match="point_timeout_s"):
        SweepSpec.load(_spec(tmp_path, point_timeout_s=0))
    with pytest.raises(ConfigError, match="point_timeout_s must be a number"):
        SweepSpec.load(_spec(tmp_path, point_timeout_s="an hour"))
    assert SweepSpec.load(_spec(tmp_path, point_timeout_s=None)).point_timeout_s is None
    with pytest.raises(Exception, match="unknown strategy"):
        SweepSpec.load(_spec(tmp_path, grid={"strategy": ["magic"]}))
    spec = SweepSpec.load(_spec(tmp_path, points=[{"strategy": "none"}]))
    ids = [p.id for p in expand_points(spec)]
    assert len(ids) == len(set(ids)) == 4 and ids[-1].startswith("none-")


def test_live_world_keys_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="unknown world 'tau2:bank'"):
        SweepSpec.load(_spec(tmp_path, world="tau2:bank"))
    with pytest.raises(ConfigError, match="history: live goes with corpus"):
        SweepSpec.load(_spec(tmp_path, history="live", world="tau2:retail"))
    live = {"live": {"tasks": [0, 1]}}
    with pytest.raises(ConfigError, match="history: live goes with corpus"):
        SweepSpec.load(_spec(tmp_path, corpus=live, world="tau2:retail"))
    with pytest.raises(ConfigError, match="needs a tau2 world"):
        SweepSpec.load(_spec(tmp_path, corpus=live, history="live"))
    with pytest.raises(ConfigError, match="repeats"):
        SweepSpec.load(_spec(tmp_path, repeats=0))
    spec = SweepSpec.load(_spec(tmp_path, corpus=live, history="live", world="tau2:retail",
                                tasks=[5, "9"], repeats=3, policy=False))
    o = spec.options
    assert (o.world, o.history, o.tasks, o.repeats, o.policy) == (
        "tau2:retail", "live", ("5", "9"), 3, False)
    # ideal history executes a recorded corpus's tasks in a world: both are required
    with pytest.raises(ConfigError, match="history: ideal needs a tau2 world"):
        SweepSpec.load(_spec(tmp_path, history="ideal"))
    with pytest.raises(ConfigError, match="history: ideal executes the tasks of a recorded"):
        SweepSpec.load(_spec(tmp_path, history="ideal", world="tau2:retail"))
    ideal = SweepSpec.load(_spec(tmp_path, corpus={"db": "x.db"}, history="ideal",
                                 world="tau2:retail"))
    assert ideal.options.history == "ideal"
    # every task of the world as the corpus: with ideal history only, and all of them
    whole = SweepSpec.load(_spec(tmp_path, corpus={"world": "all"}, history="ideal",
                                 world="tau2:retail"))
    assert whole.corpus == {"world": "all"}
    for bad in ({"corpus": {"world": "all"}, "world": "tau2:retail"},
                {"corpus": {"world": [1, 2]}, "history": "ideal", "world": "tau2:retail"}):
        with pytest.raises(ConfigError, match="goes with history: ideal"):
            SweepSpec.load(_spec(tmp_path, **bad))


def test_calibrated_tau_points_take_the_embedders_calibration(tmp_path):
    from skillsynth.config import calibrated_defaults
    from skillsynth.models.serve import EMBED_MODEL_ID

    cal = calibrated_defaults(EMBED_MODEL_ID)
    grid = SPEC["grid"] | {"similarity_tau": ["calibrated", 0.82]}
    calibrated, gaia = (p.thresholds() for p in
                        expand_points(SweepSpec.load(_spec(tmp_path, grid=grid))))
    assert (calibrated.similarity_tau, calibrated.recall_tau, calibrated.reconcile_tau) == \
        (cal["similarity_tau"], cal["recall_tau"], cal["reconcile_tau"])
    # a number is GAIA's one-tau rule: recall and reconcile follow it
    assert (gaia.similarity_tau, gaia.effective_recall_tau, gaia.effective_reconcile_tau) == \
        (0.82, 0.82, 0.82)
    # a local spec that sets no tau runs GAIA's thresholds (the calibration is opt-in); a
    # recall_tau it sets wins
    no_tau = {k: v for k, v in SPEC["grid"].items() if k != "similarity_tau"}
    (pt,) = expand_points(SweepSpec.load(_spec(tmp_path, grid=no_tau,
                                               base={"recall_tau": 0.5})))
    assert (pt.thresholds().similarity_tau, pt.thresholds().recall_tau) == (0.82, 0.5)
    # the calibration in the base applies to every point that sets no tau of its own
    grid_pt, gaia_pt = expand_points(SweepSpec.load(_spec(
        tmp_path, grid=no_tau, base={"similarity_tau": "calibrated"},
        points=[{"similarity_tau": 0.82}])))
    assert (grid_pt.thresholds().similarity_tau, gaia_pt.thresholds().similarity_tau) == \
        (cal["similarity_tau"], 0.82)
    assert gaia_pt.thresholds().effective_recall_tau == 0.82  # GAIA's one tau, not the mix
    # Lemonade's embedder ships no calibration: "calibrated" is an error naming the key
    with pytest.raises(ConfigError, match="similarity_tau: calibrated needs"):
        SweepSpec.load(_spec(tmp_path, grid=grid, backend={"backend": "lemonade"}))


def test_a_refitted_calibration_makes_calibrated_points_new_points(tmp_path, monkeypatch):
    from skillsynth.evaluation.sweeps import spec as spec_module

    grid = {**SPEC["grid"], "similarity_tau": ["calibrated", 0.82]}

    def ids(cal):
        monkeypatch.setattr(spec_module, "calibration_for", lambda keys, embedder: cal)
        return [p.id for p in expand_points(SweepSpec.load(_spec(tmp_path, grid=grid)))]

    old, new = ids({"similarity_tau": 0.31, "recall_tau": 0.24}), \
        ids({"similarity_tau": 0.5, "recall_tau": 0.62})
    assert old[0] != new[0]  # a run folder does not resume the old calibration's point
    assert old[1] == new[1]  # a point at a number is the same point


def test_a_lemonade_spec_reads_the_calibration_of_gaias_embedder(tmp_path, monkeypatch):
    from skillsynth.evaluation.sweeps import spec as spec_module

    asked: list[str | None] = []

    def fake_calibration_for(keys, embedder):  # as if calibrate.sh --backend lemonade ran
        asked.append(embedder)
        return {"similarity_tau": 0.61, "recall_tau": 0.5} if embedder == LEMONADE_EMBED_MODEL \
            else {}

    monkeypatch.setattr(spec_module, "calibration_for", fake_calibration_for)
    grid = {**SPEC["grid"], "similarity_tau": ["calibrated"]}
    (pt,) = expand_points(SweepSpec.load(_spec(tmp_path, grid=grid,
                                               backend={"backend": "lemonade"})))
    assert (pt.thresholds().similarity_tau, pt.thresholds().recall_tau) == (0.61, 0.5)
    SweepSpec.load(_spec(tmp_path, grid={**grid, "similarity_tau": [0.82]},
                         backend={"backend": "lemonade", "embed_model": "other-embedder"}))
    assert asked == [LEMONADE_EMBED_MODEL, "other-embedder"]


def _stand_in(tmp_path):
    """A stand-in point notebook for a real kernel under papermill: it sleeps 120 s for
    strategy skillsynth and finishes at once (a summary) for any other."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    params = nbformat.v4.new_code_cell('options = {}\nout_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import pathlib, time\n"
        "if options['strategy'] == 'skillsynth':\n    time.sleep(120)\n"
        "pathlib.Path(out_dir, 'summary.json').write_text('{}')")]
    notebook = tmp_path / "stand-in.ipynb"
    nbformat.write(nb, str(notebook))
    return notebook


def test_points_side_by_side_run_one_of_each_synthesis_first_and_one_at_a_time_keep_spec_order(
        tmp_path):
    spec = SweepSpec.load(_spec(tmp_path, grid=SPEC["grid"] | {
        "similarity_tau": [0.3], "max_recall_body_chars": [1500, 800]},
        points=[{"strategy": "none"}]))
    todo = expand_points(spec)
    shared, sibling, none = todo  # the spec's order: the grid, then its points
    assert (shared.strategy, sibling.strategy, none.strategy) == (
        "skillsynth", "skillsynth", "none")
    assert shared.synthesis_key == sibling.synthesis_key != none.synthesis_key
    assert phases(todo) == [[shared, none], [sibling]]
    assert phases(todo, concurrent=False) == [[shared, sibling, none]]


@pytest.mark.notebooks
def test_a_point_past_its_timeout_fails_loudly_and_the_others_still_run(tmp_path):
    notebook = _stand_in(tmp_path)
    spec = SweepSpec.load(_spec(tmp_path, point_timeout_s=3, points=[{"strategy": "none"}]))
    todo = [p for p in expand_points(spec) if p.values["similarity_tau"] == 0.3]
    pool = ThreadPool(spec, tmp_path / "corpus.db", BackendSpec("local"), tmp_path / "run",
                      notebook, 2)
    ran, failed = run_points(todo, pool, label="t", progress=False, log=lambda *_: None)
    assert [p.id for p in todo if p.strategy == "none"] == ran
    (stuck,) = failed
    assert stuck.startswith("skillsynth-") and "timed out" in failed[stuck]
    assert "3 seconds" in failed[stuck]


@pytest.mark.notebooks
def test_ctrl_c_stops_the_running_points_kernels_instead_of_waiting_for_them(tmp_path):
    import psutil

    spec = SweepSpec.load(_spec(tmp_path, points=[{"strategy": "none"}]))
    todo = [p for p in expand_points(spec) if p.values["similarity_tau"] == 0.3]
    pool = ThreadPool(spec, tmp_path / "corpus.db", BackendSpec("local"), tmp_path / "run",
                      _stand_in(tmp_path), 2)
    before = set(psutil.Process().children(recursive=True))
    phase = pool.run_phase(todo)
    quick, error = next(phase)  # the point that does not sleep is done; the other runs
    assert quick.strategy == "none" and error is None
    sleeping = set(psutil.Process().children(recursive=True)) - before
    assert sleeping  # its kernel
    with pytest.raises(KeyboardInterrupt):
        phase.throw(KeyboardInterrupt)  # Ctrl-C while the sweep waits on the pool
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in sleeping)
    slept = next(p for p in todo if p.strategy == "skillsynth")
    assert not (tmp_path / "run" / "points" / slept.id / "summary.json").exists()  # resumable


def _live_point(points, pid, expected, lines, mtime=None):
    folder = points / pid
    folder.mkdir(parents=True)
    (folder / "runs.expected").write_text(str(expected))
    (folder / "runs.jsonl").write_text("{}\n" * lines)
    if mtime is not None:
        os.utime(folder / "runs.expected", (mtime, mtime))


def test_live_progress_counts_the_live_runs_of_the_points_still_running(tmp_path):
    points = tmp_path / "points"
    _live_point(points, "a", 120, 12, mtime=3000.0)  # 12 runs in 10 minutes
    _live_point(points, "b", 60, 60, mtime=3000.0)  # all written: no pace of its own
    _live_point(points, "old", 60, 30, mtime=1000.0)  # left by an interrupted sweep
    (points / "replay").mkdir()  # a point without live arms
    (points / "torn").mkdir()
    (points / "torn" / "runs.expected").write_text("")  # being written: skipped, no error
    ids = ["a", "b", "old", "replay", "torn", "absent"]
    # 108 runs left at a's 1.2 a minute
    assert live_progress(points, ids, since=2000.0, now=3600.0) == \
        "live runs 72/180, about 1 h 30 min left"
    # two points side by side: their paces add (30 in 2,600 s and 12 in 600 s)
    assert live_progress(points, ["old", "a"], since=0.0, now=3600.0) == \
        "live runs 42/180, about 1 h 13 min left"
    _live_point(points, "new", 10, 4, mtime=3590.0)  # too few runs to estimate
    assert live_progress(points, ["new"], now=3600.0) == "live runs 4/10"
    assert live_progress(points, ["replay", "absent"]) == ""


class _FakeTransport:
    """FAKE transport: every point begins its live arms (4 of 10 runs written) as the sweep
    starts, before the first one ends."""

    def __init__(self, points, todo):
        self.points, self.todo, self.begun = points, todo, False

    def run_phase(self, phase):
        if not self.begun:
            for p in self.todo:
                _live_point(self.points, p.id, 10, 4)
            self.begun = True
        for p in phase:
            yield p, None


def test_the_sweep_bar_shows_live_runs_of_running_points(tmp_path, monkeypatch):
    import tqdm.auto

    shown = []

    class Bar:
        def __init__(self, **kw):
            pass

        def set_postfix_str(self, text, refresh=True):
            shown.append(text)

        def update(self, n):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    todo = expand_points(SweepSpec.load(_spec(tmp_path)))[:2]
    ran, failed = run_points(todo, _FakeTransport(tmp_path / "points", todo), label="t",
                             progress=True, log=lambda *_: None,
                             points_dir=tmp_path / "points")
    assert (len(ran), failed) == (2, {})
    # after the first point ends only the second's runs count; then nothing is running
    assert shown == ["live runs 4/10", ""]
    # the watcher thread looks again while a point runs: it sees runs written meanwhile
    from skillsynth.evaluation.sweeps import transport

    monkeypatch.setattr(transport, "_POLL_S", 0.02)

    class Slow(_FakeTransport):
        def run_phase(self, phase):
            for p in phase:
                if not self.begun:
                    for q in self.todo:
                        _live_point(self.points, q.id, 10, 4)
                    self.begun = True
                (self.points / p.id / "runs.jsonl").write_text("{}\n" * 7)
                time.sleep(0.3)  # the watcher polls several times meanwhile
                yield p, None

    shown.clear()
    import shutil

    shutil.rmtree(tmp_path / "points")
    run_points(todo, Slow(tmp_path / "points", todo), label="t", progress=True,
               log=lambda *_: None, points_dir=tmp_path / "points")
    # the first point at 7 of 10, the second at 4 of 10; enough runs for an estimate
    assert any(x.startswith("live runs 11/20, about ") for x in shown)
    # folders from before the sweep began (an hour ago) are not its progress
    shown.clear()
    for f in (tmp_path / "points").glob("*/runs.expected"):
        os.utime(f, (f.stat().st_mtime - 3600,) * 2)
    run_points(todo, _FakeTransport(tmp_path / "points", []), label="t", progress=True,
               log=lambda *_: None, points_dir=tmp_path / "points")
    assert shown and set(shown) == {""}


def test_a_run_folder_resumes_only_the_same_sweep(tmp_path):
    results = tmp_path / "results"
    first = SweepSpec.load(_spec(tmp_path, corpus={"db": "missing.db"}))
    (results / "t").mkdir(parents=True)
    (results / "t" / "spec.yaml").write_text(yaml.safe_dump(first.as_dict(), sort_keys=True))
    # how points execute may change on resume; the run stops later, at the missing corpus
    same = SweepSpec.load(_spec(tmp_path, corpus={"db": "missing.db"}, workers=2,
                                point_timeout_s=60))
    with pytest.raises(SkillsynthError, match="corpus database .*missing.db not found"):
        run_sweep(same, results_root=results, progress=False, log=lambda *_: None)
    other = SweepSpec.load(_spec(tmp_path, corpus={"db": "missing.db"}, k=2))
    with pytest.raises(ConfigError, match="different spec"):
        run_sweep(other, results_root=results, progress=False, log=lambda *_: None)


def _point_files(run: Path) -> dict[str, float]:
    return {p.parent.name: p.stat().st_mtime_ns for p in run.glob("points/*/summary.json")}


@pytest.mark.models
def test_killed_sweep_resumes_and_a_rerun_point_is_a_cache_hit(tmp_path, request):
    spec = _spec(tmp_path)
    results, cache = tmp_path / "results", tmp_path / "cache.db"
    cmd = [sys.executable, "-m", "skillsynth", "sweep", str(spec), "--results", str(results),
           "--cache", str(cache)]
    # the killed kernels cannot remove their IPC sockets: they go to a folder of the test's
    sockets = Path(tempfile.mkdtemp(prefix="ss-"))  # short: socket paths are <= 107 bytes
    request.addfinalizer(lambda: shutil.rmtree(sockets, ignore_errors=True))
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=os.environ | {"TMPDIR": str(sockets)})
    run = results / "t"
    deadline = time.monotonic() + 300
    while not _point_files(run) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep, its kernels and its servers
    proc.wait()
    done = _point_files(run)
    assert 1 <= len(done) < 3, "the kill should land after the first point"
    rep = run_sweep(spec, results_root=results, cache=str(cache), progress=False,
                    log=lambda *_: None)
    assert set(rep.skipped) == set(done) and len(rep.ran) == 3 - len(done)
    assert not rep.failed
    after = _point_files(run)
    assert all(after[p] == t for p, t in done.items())  # finished points were not redone
    summary = json.loads((run / "summary.json").read_text())
    assert summary["finished"] == 3
    rows = (run / "results.jsonl").read_text().splitlines()
    assert len(rows) == 3 * 2 * 3  # points x arms x probes
    # a finished point run again asks the model nothing new: every distillation is cached
    first = min(done)
    before = json.loads((run / "points" / first / "summary.json").read_text())["pass"]
    (run / "points" / first / "summary.json").unlink()
    rep = run_sweep(spec, results_root=results, cache=str(cache), progress=False,
                    log=lambda *_: None)
    again = json.loads((run / "points" / first / "summary.json").read_text())["pass"]
    assert rep.ran == (first,) and before["distilled"] + len(before["skipped"]) > 0
    assert again["llm_calls"] == 0 and again["cache_hits"] == before["llm_calls"] + \
        before["cache_hits"]
    assert again["procedure_ids"] and again["added"] == before["added"]

    record = summary["record"]  # how the sweep was produced
    assert record["kind"] == "sweep" and record["started_utc"].endswith("Z")
    assert record["models"]["chat"]["model"] and record["inputs"]["corpus"]["sha256"]

    # the report: HTML with the plots, and the gate against a baseline of this very run,
    # all through the command line
    from skillsynth.cli import main

    assert main(["report", str(run)]) == 0
    html = run / "report.html"
    assert html.exists() and "KPI report" in html.read_text()
    assert "Verdict" in html.read_text() and "Format validity (gaia691)" in html.read_text()
    rec = json.loads((run / "recommended_settings.json").read_text())["skill_synthesis"]
    assert rec["min_occurrences"] == 2 and rec["similarity_tau"] in (0.3, 0.45, 0.6)
    assert {p.name for p in (run / "plots").glob("*.png")} >= {"heatmap-skillsynth.png",
                                                               "similarity.png"}
    loaded = load_run(run)
    assert len(loaded.points) == 3 and set(loaded.rows["arm"]) == {"no-memory", "memory"}
    assert "How each point drew its probes" in html.read_text()
    drawn = protocol_table(loaded)  # strict points: one pass, the split's probes
    assert list(drawn["probes"]) == [3, 3, 3] and set(drawn["passes"]) == {1}
    assert "protocol" not in drawn  # a setting no point varies is not a column
    base = tmp_path / "b.json"
    assert main(["baseline", str(run), str(base), "--kpi", "synthesis_fired_rate=0.0"]) == 0
    assert all(c.ok for c in gate(run, base))
    assert main(["gate", str(run), "--baseline", str(base)]) == 0
    bad = json.loads(base.read_text())  # a baseline this run cannot meet fails the gate
    for entry in bad["entries"]:
        entry["kpis"]["synthesis_fired_rate"] = {"value": 2.0, "tolerance": 0.0,
                                                 "better": "higher", "n": 1}
    base.write_text(json.dumps(bad))
    assert main(["gate", str(run), "--baseline", str(base)]) == 1
    # the summary for a pull request says the same: the verdict's rows and the failed check
    md = markdown_summary(run, baseline=base)
    assert "| recommended: " in md and "Format validity (gaia691)" in md
    assert "**Gate: FAIL**" in md and "synthesis_fired_rate" in md.split("**Gate")[1]


def _summary(tmp: Path, *, validity=1.0, floor=True, fired=0.5, status="ran") -> Path:
    def kpi(v):
        return {"value": v, "lo": v, "hi": v, "n": 4, "unit": "probes", "estimate": False}

    pt = {"id": "p1", "strategy": "skillsynth",
          "params": {"similarity_tau": 0.5, "min_occurrences": 2, "max_recall_body_chars": 9},
          "kpis": {"validity_gaia691": kpi(validity), "validity_agentskills": kpi(1.0),
                   "synthesis_fired_rate": kpi(fired)},
          "floors": {"llm-unavailable": floor, "disabled-not-recalled": None},
          "pass_status": status}
    (tmp / "summary.json").write_text(json.dumps({"name": "x", "points": [pt]}))
    base = tmp / "base.json"
    base.write_text(json.dumps({"entries": [{"match": {"strategy": "skillsynth"}, "kpis": {
        "synthesis_fired_rate": {"value": 0.6, "tolerance": 0.15, "better": "higher"}}}]}))
    return base


@pytest.mark.parametrize("change, failing", [
    ({}, set()),
    ({"validity": 0.75}, {"validity_gaia691"}),
    ({"floor": False}, {"floor llm-unavailable"}),
    ({"fired": 0.4}, {"synthesis_fired_rate"}),
    ({"status": "llm-unavailable"}, {"synthesis pass ran"}),
])
def test_gate_fails_on_validity_floors_a_pass_that_did_not_run_and_regressions(tmp_path, change, failing):
    base = _summary(tmp_path, **change)
    assert {c.check for c in gate(tmp_path, base) if not c.ok} == failing


def test_gate_rejects_a_malformed_baseline(tmp_path):
    _summary(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"entries": [{"match": {}, "kpis": {"x": {"value": 1}}}]}))
    with pytest.raises(ConfigError, match="needs value, tolerance"):
        gate(tmp_path, bad)


@pytest.mark.parametrize("spec", sorted((Path(__file__).resolve().parent.parent / "eval"
                                          / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_spec_is_valid(spec, monkeypatch):
    if spec.name == "lemonade-gaia-questions.yaml":  # its calibration is made by its user
        from skillsynth.evaluation.sweeps import spec as spec_module

        monkeypatch.setattr(spec_module, "calibration_for",
                            lambda keys, embedder: {"similarity_tau": 0.6})
    s = SweepSpec.load(spec)
    assert expand_points(s) and s.name == spec.stem
    if "import" in s.corpus:  # shipped files or folders of them, relative to the spec
        for f in s.corpus["import"]["files"]:
            assert (spec.parent / f).resolve().exists(), f


def test_the_agent_can_play_the_simulated_user_and_nothing_else_is_taken_for_one(tmp_path):
    from skillsynth.models.backend import point_user

    agent = object()
    with point_user("agent", agent) as user:
        assert user is agent  # one model server: the agent's own client plays the user
    with point_user(None, agent) as user:
        assert user is None  # solo
    with pytest.raises(ConfigError, match="'agents'"), point_user("agents", agent):
        pass
    base = {"name": "u", "corpus": {"live": {"tasks": [5]}}, "history": "live",
            "world": "tau2:retail", "live": True, "k": 1,
            "grid": {"strategy": ["oracle"], "similarity_tau": [0.8], "min_occurrences": [3],
                     "max_recall_body_chars": [1500]}}
    for user, ok in [("agent", True), ({"base_url": "http://x/v1", "model": "m"}, True),
                     ("agents", False), ({"model": "m"}, False)]:
        p = tmp_path / f"s{len(str(user))}.yaml"
        p.write_text(yaml.safe_dump({**base, "user": user}))
        if ok:
            SweepSpec.load(p).check()
        else:
            with pytest.raises(ConfigError, match="user needs"):
                SweepSpec.load(p).check()
    p.write_text(yaml.safe_dump({**base, "user": "agent", "world": "replay",
                                 "history": "recorded", "corpus": {"db": "x.db"}}))
    with pytest.raises(ConfigError):
        SweepSpec.load(p).check()
