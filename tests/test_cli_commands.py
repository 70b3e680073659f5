"""Commands not exercised elsewhere, each through ``main()`` (no model server needed)."""

from __future__ import annotations

import json

import pytest

from skillsynth.cli import main
from skillsynth.corpora import LabelStore, labels_path_for
from skillsynth.store import MemoryStore


def test_corpus_generate_writes_a_labelled_gaia_store(tmp_path, capsys):
    db = tmp_path / "syn.db"
    assert main(["corpus", "generate", str(db), "--families", "3", "--attempts", "2",
                 "--seed", "1"]) == 0
    with MemoryStore.open(db, read_only=True) as store, LabelStore(labels_path_for(db)) as ls:
        assert len(store.session_ids()) == len(ls.all()) == 6
    assert main(["corpus", "generate", str(db)]) == 1  # an existing corpus is not overwritten
    assert "exists" in capsys.readouterr().err


def test_cache_export_and_import_carry_answers_to_another_cache(tmp_path, capsys):
    from skillsynth.models.cache import CallCache

    with CallCache(tmp_path / "a.db") as c:
        c.put("a" * 64, b'{"ok": 1}', kind="chat", model="m")
        c.put("b" * 64, b"\x00\xff", kind="embed", model="e")
    out = tmp_path / "answers.jsonl.gz"
    assert main(["cache", "export", str(out), "--cache", str(tmp_path / "a.db")]) == 0
    assert "wrote 1 answer(s)" in capsys.readouterr().out  # chat only by default
    assert main(["cache", "import", str(out), "--cache", str(tmp_path / "b.db")]) == 0
    assert "1 answer(s) added, 0 already here" in capsys.readouterr().out
    with CallCache(tmp_path / "b.db") as c:
        assert c.get("a" * 64) == b'{"ok": 1}' and c.get("b" * 64) is None
    from skillsynth.models.chat_models import chat_model

    with CallCache(tmp_path / "a.db") as c:  # an embedded model's name finds its answers
        c.put("c" * 64, b"{}", kind="chat", model=chat_model("qwen2.5-coder-1.5b").model_id)
    assert main(["cache", "export", str(out), "--cache", str(tmp_path / "a.db"),
                 "--model", "qwen2.5-coder-1.5b"]) == 0
    assert "wrote 1 answer(s)" in capsys.readouterr().out
    for argv in (["export", str(out), "--cache", str(tmp_path / "none.db")],
                 ["import", str(tmp_path / "gone.gz")]):
        with pytest.raises(SystemExit) as info:
            main(["cache", *argv])
        assert info.value.code == 2
    assert "no call cache here" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_pipeline_prints_medians_with_n(capsys):
    assert main(["bench", "pipeline", "--sizes", "300", "--procedures", "50", "--repeats", "2",
                 "--queries", "20", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    (row,) = figures["detect_cluster"]
    assert row["sessions"] == 300 and figures["repeats"] == 2
    for step in ("detect", "agglomerative", "gaia-greedy", "hdbscan"):
        assert row[step]["n"] == 2 and row[step]["median_s"] > 0 and row[step]["peak_bytes"] > 0
    for method in ("agglomerative", "gaia-greedy"):  # checked against the all-pairs method
        assert row[method]["check"]["identical"] and row[method]["check"]["ari"] == 1.0
    (rec,) = figures["recall"]
    assert rec["n"] == 40 and rec["p99_ms"] >= rec["median_ms"] > 0
    assert rec["recall_at_k_vs_flat"] == 1.0 and rec["index"] == "flat"
    assert main(["bench", "pipeline", "--sizes", "6000", "--procedures", "5000", "--repeats",
                 "1", "--queries", "10", "--check-up-to", "0"]) == 0
    out = capsys.readouterr().out
    assert "medians of n=1 runs" in out and "hdbscan       skipped above 5,000" in out
    assert "p99" in out and "cells (" in out and "recall@2 vs flat 1.0000" in out


@pytest.mark.live
def test_world_prepare_is_idempotent_and_bench_worlds_times_real_calls(capsys):
    assert main(["world", "prepare"]) == 0  # installed already: checks, loads both domains
    out = capsys.readouterr().out
    assert "tau2:airline: 50 tasks, 14 tools" in out and "tau2:retail: 114 tasks" in out
    assert main(["bench", "worlds", "--world", "tau2:retail", "--max-tasks", "3", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["tau2:retail"]
    assert f["call_ms"]["n"] > 0 and f["call_ms"]["p99"] >= f["call_ms"]["median"] > 0
    assert f["fresh_episode_ms"]["n"] == 3 and "live_run_s" not in f


@pytest.mark.live  # its long output is a tau2 world's task list
def test_output_cut_short_by_the_reader_is_not_an_error():
    import subprocess
    import sys

    # `true` exits without reading: the command's first write meets a closed pipe
    cmd = f"{sys.executable} -m skillsynth world list tau2:retail | true; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_sigterm_stops_a_sweep_as_ctrl_c_does(tmp_path):
    # A sweep started in the background by a script ignores SIGINT, so it is stopped with
    # kill (SIGTERM): the command must end through its finally blocks (which stop the points'
    # kernels and the servers) and say so, not die where it stands. The sweep here is a
    # stand-in that waits; the signal lands while it does.
    import signal
    import subprocess
    import sys

    code = ("import sys, time\n"
            "import skillsynth.evaluation.sweeps.run as run\n"
            "def waits(*a, **k):\n"
            "    try:\n"
            "        print('waiting', flush=True); time.sleep(120)\n"
            "    finally:\n"
            "        print('finally ran', flush=True)\n"
            "run.run_sweep = waits\n"
            "from skillsynth.cli import main\n"
            "sys.exit(main(['sweep', 'spec.yaml']))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()  # a no-op once it has ended
    assert proc.returncode == 130, err
    assert out == "finally ran\n" and "interrupted" in err
