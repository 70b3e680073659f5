"""The shipped transport's parts: answers merged first-wins, folders packed, corpora with
their labels, and a live corpus built on a worker (a Dask worker in this process)."""

from __future__ import annotations

import io
import sqlite3
import tarfile
from pathlib import Path

import pytest

from skillsynth.corpora.labels import labels_path_for
from skillsynth.errors import StoreError
from skillsynth.evaluation.sweeps.shipping import (
    CacheSnapshot,
    MergeCounts,
    cache_snapshot,
    corpus_blob,
    merge_answers,
    pack_folder,
    shipped_live_corpus,
    unpack_folder,
)
from skillsynth.models.backend import BackendSpec
from skillsynth.models.cache import CallCache


def _rows(path: Path) -> dict[str, bytes]:
    with sqlite3.connect(path) as db:
        return {k: bytes(v) for k, v in db.execute("SELECT key, value FROM calls")}


def test_returned_answers_are_merged_first_stored_wins_and_counted(tmp_path):
    cache = tmp_path / "cache.db"
    with CallCache(cache) as c:
        c.put("a", b"1", kind="chat", model="m")
        c.put("b", b"2", kind="embed", model="e")
    counts = merge_answers(cache, [("a", "chat", "m", b"1"), ("b", "embed", "e", b"other"),
                                   ("c", "chat", "m", b"3"), ("d", "embed", "e", b"4")])
    assert counts == MergeCounts(added=2, same=1, conflicts=1)
    assert _rows(cache) == {"a": b"1", "b": b"2", "c": b"3", "d": b"4"}
    # merging the same answers again adds nothing
    again = merge_answers(cache, [("c", "chat", "m", b"3")])
    assert again == MergeCounts(same=1)
    assert counts + again == MergeCounts(2, 2, 1)


def test_a_snapshot_carries_every_row_and_a_missing_cache_is_empty(tmp_path):
    assert cache_snapshot(tmp_path / "none.db").rows == ()
    cache = tmp_path / "cache.db"
    with CallCache(cache) as c:
        c.put("k", b"v", kind="chat", model="m")
    snap = cache_snapshot(cache)
    assert snap.rows == (("k", "chat", "m", b"v"),)
    assert snap.version != cache_snapshot(cache).version  # each snapshot is new to workers


@pytest.mark.dask
def test_the_cache_goes_whole_once_then_only_what_is_new(tmp_path):
    from distributed import Client, LocalCluster

    from skillsynth.evaluation.sweeps.shipping import Shipper

    cache = tmp_path / "cache.db"
    with CallCache(cache) as c:
        c.put("a", b"1", kind="chat", model="m")
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as lc, \
            Client(lc) as client:
        shipper = Shipper(client, cache)
        first = [f.result() for f in shipper.snapshots()]
        assert [s.rows for s in first] == [(("a", "chat", "m", b"1"),)]
        assert len(shipper.snapshots()) == 1  # nothing new: nothing sent
        with CallCache(cache) as c:
            c.put("b", b"2", kind="embed", model="e")
        later = [f.result() for f in shipper.snapshots()]
        assert [s.rows for s in later] == [(("a", "chat", "m", b"1"),),
                                           (("b", "embed", "e", b"2"),)]
        assert later[0].version == first[0].version  # the first is not sent again


def test_an_unreadable_cache_is_named(tmp_path):
    bad = tmp_path / "cache.db"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="cannot read the call cache") as err:
        cache_snapshot(bad)
    assert str(bad) in str(err.value)


def test_a_folder_round_trips_and_a_hostile_archive_is_refused(tmp_path):
    src = tmp_path / "point"
    (src / "skills" / "a").mkdir(parents=True)
    (src / "summary.json").write_text('{"ok": true}')
    (src / "skills" / "a" / "SKILL.md").write_text("---\nname: a\n---\nbody\n")
    out = tmp_path / "back"
    unpack_folder(pack_folder(src), out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "skills", "skills/a", "skills/a/SKILL.md", "summary.json"]
    assert (out / "skills" / "a" / "SKILL.md").read_text() == "---\nname: a\n---\nbody\n"

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(tarfile.TarError):
        unpack_folder(buf.getvalue(), tmp_path / "hostile")
    assert not (tmp_path / "escaped.txt").exists()


def _tiny_db(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (v TEXT)")
        db.execute("INSERT INTO t VALUES (?)", (value,))


def test_a_corpus_travels_with_its_labels_byte_for_byte(tmp_path):
    db = tmp_path / "corpus.db"
    _tiny_db(db, "sessions")
    alone = corpus_blob(db)
    assert alone.files == (("corpus.db", db.read_bytes()),)
    _tiny_db(labels_path_for(db), "labels")
    both = corpus_blob(db)
    assert [name for name, _ in both.files] == ["corpus.db", "corpus.db.labels.sqlite"]
    assert both.files[1][1] == labels_path_for(db).read_bytes()
    assert both.sha256 != alone.sha256  # the labels are part of what a point measured


@pytest.mark.dask
def test_a_live_corpus_built_on_a_worker_comes_back_with_its_answers(tmp_path):
    from distributed import Client, LocalCluster

    def fake_live(spec, run_dir: Path, backend: BackendSpec) -> Path:
        """A stand-in for the live history: a corpus, its labels and one model answer."""
        db = run_dir / "corpus" / "corpus.db"
        _tiny_db(db, spec)
        _tiny_db(labels_path_for(db), "labels")
        assert backend.cache is not None
        with CallCache(backend.cache) as c:
            c.put("new-answer", b"42", kind="chat", model="m")
        return db

    backend = BackendSpec("endpoints", chat_model="m", embed_model="e",
                          chat_url="http://127.0.0.1:9/v1", embed_url="http://127.0.0.1:9/v1")
    snap = CacheSnapshot("v1", (("old", "chat", "m", b"1"),))
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                      local_directory=str(tmp_path / "worker")) as lc, Client(lc) as client:
        out = client.submit(shipped_live_corpus, fake_live, [snap], backend, "live-spec",
                            pure=False).result()
    names = [name for name, _ in out["corpus"].files]
    assert names == ["corpus.db", "corpus.db.labels.sqlite"]
    back = tmp_path / "back.db"
    back.write_bytes(out["corpus"].files[0][1])
    with sqlite3.connect(back) as db:
        assert db.execute("SELECT v FROM t").fetchall() == [("live-spec",)]
    # only what the worker added comes back, not the snapshot it was given
    assert out["answers"] == [("new-answer", "chat", "m", b"42")]
    assert not list((tmp_path / "worker").rglob("live/*"))  # the worker's copy is removed


class FakeClient:
    """Stands in for a Dask client: its workers' pre-flight facts, as given."""

    def __init__(self, facts: dict[str, dict]):
        self.facts = facts

    def run(self, fn, folders, on_error):
        return self.facts


def _facts(host: str, unwritable: dict[str, str] | None = None) -> dict:
    from skillsynth import __version__

    return {"host": host, "pid": 1, "skillsynth": __version__, "unwritable": unwritable or {}}


@pytest.mark.dask
def test_the_transport_is_shared_on_this_host_and_shipped_across_hosts(tmp_path):
    import socket

    from skillsynth.errors import EvaluationError
    from skillsynth.evaluation.sweeps.dask_cluster import check_workers

    here, there = socket.gethostname(), "another-host.example"
    cache = str(tmp_path / "cache.db")

    def settle(facts, transport="auto", local=False):
        return check_workers(FakeClient(facts), "tcp://s:8786", local, writable=[tmp_path],
                             cache=cache, transport=transport).transport

    assert settle({"w1": _facts(here), "w2": _facts(here)}) == "shared"
    assert settle({"w1": _facts(here), "w2": _facts(there)}) == "shipped"
    assert settle({"w1": _facts(here)}, "shipped") == "shipped"
    # a worker on another host that cannot write our folders is no obstacle when shipped
    assert settle({"w1": _facts(there, {str(tmp_path): "OSError: no"})}) == "shipped"
    with pytest.raises(EvaluationError, match=r"another-host\.example.*shipped transport"):
        settle({"w1": _facts(there)}, "shared")
    with pytest.raises(EvaluationError, match=r"cannot write .*shipped transport"):
        settle({"w1": _facts(here, {str(tmp_path): "PermissionError: ro"})})
    with pytest.raises(EvaluationError, match="LocalCluster shares"):
        settle({"w1": _facts(here)}, "shipped", local=True)
    with pytest.raises(EvaluationError, match="transport 'ftp' is not one of"):
        settle({"w1": _facts(here)}, "ftp")
