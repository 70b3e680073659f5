"""Sweeps on Dask: a LocalCluster of 2 worker processes gives the serial run's KPIs, a worker
killed mid-point is retried with the same aggregate, and a cluster that cannot run the sweep
is refused before any point runs.

The KPI tests execute the real sweep-point notebook with the embedded models on CI's sweep
(eval/sweeps/ci.yaml). The serial run fills a call cache (seeded from the models home's
cache where one exists, so a warm machine pays nothing); the Dask runs then ask the models
nothing new, which keeps them to kernel start-up and bookkeeping.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from skillsynth.corpora.labels import labels_path_for
from skillsynth.errors import EvaluationError
from skillsynth.evaluation.sweeps.run import run_sweep
from skillsynth.models.cache import file_sha256

pytestmark = pytest.mark.dask  # every test here starts or reaches a Dask cluster

ROOT = Path(__file__).resolve().parent.parent
CI_SPEC = ROOT / "eval" / "sweeps" / "ci.yaml"
#: KPIs that count what the run cost (model calls, cache hits), not what it measured
COST_KPIS = {"llm_calls", "cache_hit_rate", "startup_seconds"}  # startup_seconds: wall time
#: row fields that differ between identical runs: fresh procedure ids, timings, cache state
VOLATILE = {"recalled_ids", "wall_s", "llm_calls", "cache_hits"}


def _quiet(*_: object) -> None:
    pass


def _measured(run: Path) -> tuple[dict, list]:
    summary = json.loads((run / "summary.json").read_text())
    kpis = {p["id"]: {k: v for k, v in p["kpis"].items() if k not in COST_KPIS}
            for p in summary["points"]}
    rows = [{k: v for k, v in json.loads(line).items() if k not in VOLATILE}
            for line in (run / "results.jsonl").read_text().splitlines()]
    return kpis, rows


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """CI's sweep run serially; its call cache is warm afterwards."""
    from skillsynth.models.serve import default_cache_path

    tmp = tmp_path_factory.mktemp("dask-sweep")
    cache = tmp / "cache.db"
    if default_cache_path().exists():  # a consistent copy, even while others write it
        _copy_cache(default_cache_path(), cache)
    rep = run_sweep(CI_SPEC, results_root=tmp / "serial", cache=str(cache), progress=False,
                    log=_quiet)
    assert not rep.failed and len(rep.ran) == rep.points == 2
    return tmp, cache, rep


def test_local_cluster_of_two_workers_gives_the_serial_kpis(serial):
    tmp, cache, first = serial
    t0 = time.perf_counter()
    rep = run_sweep(CI_SPEC, results_root=tmp / "dask", cache=str(cache), progress=False,
                    log=_quiet, cluster="local", workers=2)
    wall = time.perf_counter() - t0
    assert not rep.failed and len(rep.ran) == 2 and rep.workers == 2 and rep.cluster
    assert _measured(tmp / "dask" / "ci") == _measured(first.run_dir)
    # every model answer came from the cache the serial run filled, and the sweep says so
    assert rep.llm_calls == 0 and rep.cache_hits > 0
    for p in (tmp / "dask" / "ci" / "points").iterdir():
        if not p.name.startswith("."):
            t = json.loads((p / "timings.json").read_text())
            assert t["kernel_start_s"] > 0 and "bootstrap" in t["stages_s"]
    assert not list((tmp / "dask" / "ci" / "points").glob(".staging-*"))
    # resume across clusters: a finished point is never re-run
    again = run_sweep(CI_SPEC, results_root=tmp / "dask", cache=str(cache), progress=False,
                      log=_quiet, cluster="local", workers=2)
    assert again.ran == () and len(again.skipped) == 2
    print(f"serial {first.wall_s:.1f} s, LocalCluster(2) {wall:.1f} s")


def _worker_pids_running_a_kernel() -> list[int]:
    """Dask worker processes of this test that have a notebook kernel child."""
    import psutil

    me = psutil.Process()
    out = []
    for child in me.children(recursive=True):
        try:
            if "ipykernel" in " ".join(child.cmdline()):
                parent = child.parent()
                if parent is not None and parent.pid != me.pid:
                    out.append(parent.pid)
        except psutil.Error:
            continue
    return out


def test_a_worker_killed_mid_point_is_retried_and_the_aggregate_is_identical(serial):
    tmp, cache, first = serial
    killed: list[int] = []
    stop = threading.Event()

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 240
        while not stop.is_set() and time.monotonic() < deadline:
            pids = _worker_pids_running_a_kernel()
            if pids:
                os.kill(pids[0], 9)  # the worker process; the nanny restarts it
                killed.append(pids[0])
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    try:
        rep = run_sweep(CI_SPEC, results_root=tmp / "killed", cache=str(cache),
                        progress=False, log=_quiet, cluster="local", workers=2)
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was running a point to kill"
    assert not rep.failed and len(rep.ran) == 2
    assert _measured(tmp / "killed" / "ci") == _measured(first.run_dir)
    assert not list((tmp / "killed" / "ci" / "points").glob(".staging-*"))


def _llama_servers(root) -> dict[int, int]:
    import psutil

    out = {}
    for c in root.children(recursive=True):
        try:
            if "llama-server" in " ".join(c.cmdline()):
                out[c.pid] = c.ppid()
        except psutil.Error:  # a kernel that ended meanwhile
            continue
    return out


def test_an_existing_scheduler_runs_the_points_with_models_started_per_worker(serial, scheduler):
    # a remote cluster: this process starts no model; the worker starts its own embedded
    # models (the plugin) for the goal similarities and its points
    import psutil

    tmp, cache, first = serial
    before = set(_llama_servers(psutil.Process()))  # another module's session-wide models
    proc = _worker(scheduler)
    try:
        rep = run_sweep(CI_SPEC, results_root=tmp / "remote", cache=str(cache), progress=False,
                        log=_quiet, cluster=scheduler, connect_timeout_s=60)
        servers = {pid: parent for pid, parent in _llama_servers(psutil.Process()).items()
                   if pid not in before}  # {pid: parent pid}, started during this sweep
    finally:
        proc.terminate()
        proc.wait(30)
    assert not rep.failed and len(rep.ran) == 2 and rep.cluster == scheduler
    assert _measured(tmp / "remote" / "ci") == _measured(first.run_dir)
    assert rep.llm_calls == 0 and rep.cache_hits > 0
    # the worker's chat and embedding servers, and none started by this process
    assert sorted(servers.values()) == [proc.pid, proc.pid]
    models = json.loads((tmp / "remote" / "ci" / "summary.json").read_text())["record"]
    assert models["models"]["chat"]["model"] == "SmolLM2-135M-Instruct-Q4_1"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_scheduler_fails_fast_naming_it_and_starts_nothing(tmp_path):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    t0 = time.perf_counter()
    with pytest.raises(EvaluationError, match=f"cannot reach the Dask scheduler at {address}"):
        run_sweep(CI_SPEC, results_root=tmp_path / "r", cache=str(tmp_path / "c.db"),
                  progress=False, log=_quiet, cluster=address, connect_timeout_s=2)
    assert time.perf_counter() - t0 < 15
    assert not (tmp_path / "r").exists() and not (tmp_path / "c.db").exists()


@pytest.fixture
def scheduler():
    """A bare scheduler (no workers); tests attach the workers they need."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, dashboard_address=None, processes=False,
                      protocol="tcp://", host="127.0.0.1") as lc:
        yield lc.scheduler_address


def _worker(address: str, *, pythonpath: str | None = None,
            read_only: Path | None = None) -> subprocess.Popen:
    """A ``dask worker`` process of its own (another environment than this test's)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    scratch = tempfile.mkdtemp(prefix="dask-worker-")  # its cwd: not this checkout
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
           "--no-nanny", "--no-dashboard", "--local-directory", scratch]
    if read_only is not None:  # the worker's own view of the folder is a read-only mount
        mount = f'mount -o bind,ro "{read_only}" "{read_only}" && exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", mount, "sh", *cmd]
    return subprocess.Popen(cmd, env=env, cwd=scratch, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _wait_for_workers(address: str, n: int) -> None:
    """Until ``n`` workers have joined the scheduler: a scatter reaches only the workers
    present when it is made."""
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(n, timeout=120)


def _stand_in_skillsynth(tmp: Path, body: str) -> str:
    """A folder whose ``skillsynth`` package is a stand-in (another version, or none)."""
    pkg = tmp / "stand-in" / "skillsynth"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body)
    return str(pkg.parent)


@pytest.mark.parametrize("body, message", [
    ('__version__ = "0.0.1"\n', r"has skillsynth 0\.0\.1, this sweep runs skillsynth 0\.1\.0"),
    ('raise ModuleNotFoundError("No module named \'skillsynth\'")\n',
     r"cannot import skillsynth \(ModuleNotFoundError.*needs skillsynth 0\.1\.0"),
], ids=["another-version", "missing"])
def test_workers_without_this_skillsynth_are_refused(tmp_path, scheduler, body, message):
    from skillsynth import __version__

    assert __version__ == "0.1.0"  # the messages below name it
    proc = _worker(scheduler, pythonpath=_stand_in_skillsynth(tmp_path, body))
    try:
        with pytest.raises(EvaluationError, match=message):
            run_sweep(CI_SPEC, results_root=tmp_path / "r", cache=str(tmp_path / "c.db"),
                      progress=False, log=_quiet, cluster=scheduler, connect_timeout_s=60)
    finally:
        proc.terminate()
        proc.wait(30)
    assert not (tmp_path / "r" / "ci" / "corpus").exists()  # refused before any work


def _can_mount_read_only(folder: Path) -> bool:
    return subprocess.run(["unshare", "-m", "sh", "-c",
                           f'mount -o bind,ro "{folder}" "{folder}"'],
                          check=False, capture_output=True).returncode == 0


def test_a_results_path_the_workers_cannot_write_fails_before_any_point(tmp_path, scheduler):
    results = tmp_path / "r"
    points = results / "ci" / "points"
    points.mkdir(parents=True)
    if os.geteuid() != 0:
        os.chmod(points, 0o555)
        proc = _worker(scheduler)
    elif _can_mount_read_only(results):  # root writes anywhere: a read-only mount instead
        proc = _worker(scheduler, read_only=results)
    else:
        pytest.skip("root without mount namespaces: no way to make a folder unwritable")
    try:
        with pytest.raises(EvaluationError, match=r"cannot write .*/r/ci/points .*shared"):
            run_sweep(CI_SPEC, results_root=results, cache=str(tmp_path / "c.db"),
                      progress=False, log=_quiet, cluster=scheduler, connect_timeout_s=60)
    finally:
        proc.terminate()
        proc.wait(30)
        os.chmod(points, 0o755)
    assert not (results / "ci" / "corpus").exists()


def _copy_cache(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return dst


def _shipped_sweep(scheduler: str, results: Path, cache: Path, *,
                   read_only: Path | None = None):
    """CI's sweep on one worker of its own, shipped transport."""
    proc = _worker(scheduler, read_only=read_only)
    try:
        return run_sweep(CI_SPEC, results_root=results, cache=str(cache), progress=False,
                         log=_quiet, cluster=scheduler, connect_timeout_s=60,
                         transport="shipped")
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_worker_that_shares_no_folder_gets_the_serial_kpis(serial, scheduler):
    # shipped transport: the worker cannot write the results folder nor the cache's folder
    # (a read-only view where the system allows one); the corpus and the cache travel to
    # it and the points come back
    tmp, cache, first = serial
    root = tmp / "shipped-ro"
    own_cache = _copy_cache(cache, root / "cache" / "cache.db")
    rep = _shipped_sweep(scheduler, root / "r", own_cache,
                         read_only=root if _can_mount_read_only(tmp) else None)
    assert not rep.failed and len(rep.ran) == 2 and rep.transport == "shipped"
    assert _measured(root / "r" / "ci") == _measured(first.run_dir)
    assert rep.llm_calls == 0 and rep.answers_returned is not None
    assert (rep.answers_returned.added, rep.answers_returned.conflicts) == (0, 0)
    this_run = json.loads((root / "r" / "ci" / "summary.json").read_text())["this_run"]
    assert this_run["transport"] == "shipped"
    assert not list((root / "r" / "ci" / "points").glob(".staging-*"))
    serial_point = json.loads(next((first.run_dir / "points").glob("*/summary.json"))
                              .read_text())["corpus"]
    shipped_point = json.loads(next((root / "r" / "ci" / "points").glob("*/summary.json"))
                               .read_text())["corpus"]
    assert shipped_point["sha256"] == serial_point["sha256"]  # the same sessions and labels
    corpus = root / "r" / "ci" / "corpus" / "corpus.db"  # and the worker's copy, byte for byte
    assert shipped_point["file_sha256"] == file_sha256(corpus)
    assert shipped_point["labels_sha256"] == file_sha256(labels_path_for(corpus))


def test_a_shipped_worker_killed_mid_point_is_retried_and_the_aggregate_is_identical(
        serial, scheduler):
    tmp, cache, first = serial
    root = tmp / "shipped-killed"
    own_cache = _copy_cache(cache, root / "cache.db")
    workers = [_worker(scheduler), _worker(scheduler)]
    _wait_for_workers(scheduler, 2)  # the broadcast corpus and cache then outlive either one
    killed: list[int] = []
    stop = threading.Event()

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 240
        while not stop.is_set() and time.monotonic() < deadline:
            pids = [p for p in _worker_pids_running_a_kernel()
                    if p in {w.pid for w in workers}]
            if pids:
                os.kill(pids[0], 9)  # no nanny: the other worker takes the point over
                killed.append(pids[0])
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    try:
        rep = run_sweep(CI_SPEC, results_root=root / "r", cache=str(own_cache), progress=False,
                        log=_quiet, cluster=scheduler, connect_timeout_s=60,
                        transport="shipped")
    finally:
        stop.set()
        killer.join()
        for w in workers:
            w.terminate()
            w.wait(30)
    assert killed, "no worker was running a point to kill"
    assert not rep.failed and len(rep.ran) == 2
    assert _measured(root / "r" / "ci") == _measured(first.run_dir)
    assert not list((root / "r" / "ci" / "points").glob(".staging-*"))


def test_answers_a_shipped_worker_computed_come_back_to_the_submitters_cache(serial, scheduler):
    tmp, cache, _ = serial
    root = tmp / "shipped-cold"
    own_cache = _copy_cache(cache, root / "cache.db")
    with sqlite3.connect(own_cache) as db:  # every embedding is asked again on the worker
        removed = db.execute("DELETE FROM calls WHERE kind = 'embed'").rowcount
    assert removed > 0
    rep = _shipped_sweep(scheduler, root / "r", own_cache)
    assert not rep.failed and len(rep.ran) == 2
    back = rep.answers_returned
    assert back is not None and back.added > 0 and back.conflicts == 0
    with sqlite3.connect(own_cache) as db:
        (embeds,) = db.execute("SELECT COUNT(*) FROM calls WHERE kind = 'embed'").fetchone()
    assert embeds == back.added  # each answer stored once, none lost


def test_a_named_endpoint_backend_is_checked_when_the_spec_loads(tmp_path):
    # `endpoints`: servers every worker uses; its URLs are required and keys are checked
    import yaml

    from skillsynth.errors import ConfigError
    from skillsynth.evaluation.sweeps.run import SweepSpec

    base = yaml.safe_load(CI_SPEC.read_text())
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(base | {"backend": {"backend": "endpoints"}}))
    with pytest.raises(ConfigError, match="needs chat_url, chat_model, embed_url"):
        SweepSpec.load(spec)
    spec.write_text(yaml.safe_dump(base | {"backend": {"backend": "local", "chat_modl": "x"}}))
    with pytest.raises(ConfigError, match=r"unknown backend key\(s\) \['chat_modl'\]"):
        SweepSpec.load(spec)
    named = {"backend": "endpoints", "chat_url": "http://m:8080/v1", "chat_model": "c",
             "embed_url": "http://m:8081/v1", "embed_model": "e"}
    spec.write_text(yaml.safe_dump(base | {"backend": named}))
    b = SweepSpec.load(spec).backend_spec("cache.db")
    assert (b.backend, b.chat_url, b.cache) == ("endpoints", "http://m:8080/v1", "cache.db")


def _stand_in_notebook(tmp: Path, code: str) -> Path:
    """A point notebook stand-in for a real kernel under papermill (no models)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    params = nbformat.v4.new_code_cell('out_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(code)]
    path = tmp / "stand-in.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_point_attempt_is_staged_and_a_copy_finished_first_wins(tmp_path):
    # what a lost worker's rescheduled point relies on: an attempt writes a staging folder
    # and renames it into place, unless another attempt's copy finished first
    from skillsynth.evaluation.sweeps.dask_cluster import _point_task
    from skillsynth.evaluation.sweeps.run import SweepSpec, expand_points
    from skillsynth.models.backend import BackendSpec

    spec = SweepSpec.load(CI_SPEC)
    point = expand_points(spec)[0]
    backend = BackendSpec("endpoints", chat_model="c", embed_model="e",
                          chat_url="http://127.0.0.1:9/v1", embed_url="http://127.0.0.1:9/v1")
    run = tmp_path / "run"
    target = run / "points" / point.id
    own = ("import json, pathlib\n"
           "pathlib.Path(out_dir, 'summary.json').write_text(json.dumps({'by': out_dir}))\n")
    nb = _stand_in_notebook(tmp_path, own)
    assert _point_task(point, spec, tmp_path / "corpus.db", backend, run, nb) == {"error": None}
    by = json.loads((target / "summary.json").read_text())["by"]
    assert ".staging-" in by and not list((run / "points").glob(".staging-*"))
    assert (target / "timings.json").exists()
    # a finished point is not run again
    assert _point_task(point, spec, tmp_path / "corpus.db", backend, run, nb) == {"error": None}
    assert json.loads((target / "summary.json").read_text())["by"] == by
    # another attempt finishes while this one runs: its copy stays, this one is dropped
    (target / "summary.json").unlink()
    race = own + ("other = pathlib.Path(out_dir).parent / pathlib.Path(out_dir).name[9:-9]\n"
                  "(other / 'summary.json').write_text(json.dumps({'by': 'the other'}))\n")
    nb = _stand_in_notebook(tmp_path, race)
    assert _point_task(point, spec, tmp_path / "corpus.db", backend, run, nb) == {"error": None}
    assert json.loads((target / "summary.json").read_text())["by"] == "the other"
    assert not list((run / "points").glob(".staging-*"))


def test_a_shipped_point_whose_data_left_with_its_last_holder_is_sent_again(
        tmp_path, scheduler, monkeypatch):
    # the corpus and cache are scattered to the workers present; a worker that joins later
    # holds no copy. Here the only holder dies running the point, so Dask cancels the point
    # (its reason is "lost dependencies" or "already forgotten"); the sweep re-scatters and
    # sends it to the late worker.
    from types import SimpleNamespace

    from distributed import Client

    from skillsynth.evaluation.sweeps import shipping
    from skillsynth.evaluation.sweeps.dask_cluster import ClusterFacts, DaskPoints

    corpus = tmp_path / "corpus.db"
    with sqlite3.connect(corpus) as db:
        db.execute("CREATE TABLE t (x)")
    cache = tmp_path / "cache.db"
    shipping.merge_answers(cache, [("k", "chat", "m", b"answer")])
    marker = tmp_path / "first-attempt"

    def stand_in_point(point, spec, blob, snapshots, backend):  # pickled by value
        if not marker.exists():  # the first attempt: its worker, the only holder, dies
            marker.touch()
            os._exit(1)
        rows = [r for s in snapshots for r in s.rows]
        return {"error": None, "folder": None,
                "answers": [(f"seen-{point.id}", "chat", "m",
                             f"{blob.sha256} {len(rows)}".encode())]}

    monkeypatch.setattr(shipping, "shipped_point", stand_in_point)
    first = _worker(scheduler)
    late: list[subprocess.Popen] = []

    def join_when_the_first_is_gone() -> None:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        first.wait(60)
        late.append(_worker(scheduler))

    joiner = threading.Thread(target=join_when_the_first_is_gone, daemon=True)
    try:
        with Client(scheduler, timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
            facts = ClusterFacts(address=scheduler, workers=1, hosts=("h",), local=False,
                                 transport="shipped")
            points = DaskPoints(client=client, facts=facts, spec=None, corpus=corpus,
                                backend=None, run_dir=tmp_path / "run", notebook=None,
                                shipper=shipping.Shipper(client, cache))
            joiner.start()
            done = sorted(points.run_phase([SimpleNamespace(id="p1"),
                                            SimpleNamespace(id="p2")]), key=lambda d: d[0].id)
    finally:
        joiner.join()
        for w in [first, *late]:  # killed: a worker's own shutdown is not what this tests
            w.kill()              # (a graceful one took over 30 s in 1 of 9 runs)
            w.wait(30)
    # both points needed the lost data; the second is sent again too, though the first's
    # resend already re-scattered it
    assert [(p.id, error) for p, error in done] == [("p1", None), ("p2", None)]
    assert first.returncode == 1 and late  # the point ran on the worker that joined late
    with sqlite3.connect(cache) as db:  # with the corpus and the whole cache sent again
        seen = dict(db.execute("SELECT key, value FROM calls WHERE key LIKE 'seen-%'"))
    sha = shipping.corpus_blob(corpus).sha256
    assert seen["seen-p1"].decode() == f"{sha} 1"
    assert seen["seen-p2"].decode().startswith(f"{sha} ")  # p1's answer may have been sent

