"""The call cache: keys, hits and misses, persistence; no request on a repeated call."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from fakes import LEMONADE_RECORDED as REC
from fakes import FakeServer

from skillsynth.errors import StoreError
from skillsynth.models.cache import (
    CallCache,
    ImportCounts,
    cache_key,
    export_answers,
    import_answers,
)
from skillsynth.models.chat import ChatClient
from skillsynth.models.llm import Endpoint


def test_key_covers_what_changes_the_answer():
    base = {"kind": "chat", "backend": "local", "model": "m", "prompt_version": "v1", "request": {"a": 1}}
    assert cache_key(**base) == cache_key(**dict(reversed(list(base.items()))))
    for change in ({"model": "m2"}, {"prompt_version": "v2"}, {"request": {"a": 2}},
                   {"backend": "lemonade"}):
        assert cache_key(**(base | change)) != cache_key(**base)


def test_hits_misses_and_persistence(tmp_path):
    path = tmp_path / "cache.db"
    with CallCache(path) as c:
        assert c.get("k") is None
        c.put("k", b"v", kind="chat", model="m")
        assert c.get("k") == b"v"
        s = c.stats()
        assert (s.hits, s.misses, s.entries, s.hit_rate) == (1, 1, 1, 0.5)
    with CallCache(path) as c:
        assert c.get("k") == b"v" and c.stats().hits == 1


def test_second_identical_call_sends_no_request(tmp_path):
    routes = {("GET", "/api/v1/models"): (200, REC["models"]),
              ("POST", "/api/v1/chat/completions"): (200, REC["chat"])}
    msgs = [{"role": "user", "content": "hi"}]
    with FakeServer(routes) as srv, CallCache(tmp_path / "c.db") as cache:
        ep = Endpoint("lemonade", srv.base_url, "Gemma-4-E4B-it-GGUF")
        client = ChatClient(ep, cache=cache)
        first = client.chat(msgs, prompt_version="p1")
        n = len(srv.requests)
        second = ChatClient(ep.with_(base_url=srv.base_url + "/"), cache=cache).chat(
            msgs, prompt_version="p1")
        assert len(srv.requests) == n  # the port/base URL is not part of the key
        assert second.cached and not first.cached and second.content == first.content
        client.chat(msgs, prompt_version="p2")
        assert len([r for r in srv.requests if r[0] == "POST"]) == 2


def test_concurrent_askers_all_use_the_first_stored_answer(tmp_path):
    """Two sweep workers asked the same question and got different answers: both keep the
    first one stored, so every later run reads the same answer."""
    path = tmp_path / "cache.db"
    with CallCache(path) as a, CallCache(path) as b:
        assert a.put("k", b"first", kind="chat", model="m") == b"first"
        assert b.put("k", b"second", kind="chat", model="m") == b"first"
        assert b.get("k") == b"first"
    routes = {("GET", "/api/v1/models"): (200, REC["models"]),
              ("POST", "/api/v1/chat/completions"): (200, REC["chat"])}
    msgs = [{"role": "user", "content": "hi"}]
    with FakeServer(routes) as srv, CallCache(tmp_path / "c2.db") as cache:
        ep = Endpoint("lemonade", srv.base_url, "Gemma-4-E4B-it-GGUF")
        client = ChatClient(ep, cache=cache)
        key = client._payload(msgs, prompt_version="p")[1]
        other = dict(REC["chat"], choices=[{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant",
                                                        "content": "Stored first."}}])
        cache.put(key, json.dumps(other).encode(), kind="chat", model="m")  # the other worker
        cache.get = lambda k: None  # this worker looked before the other stored its answer
        assert client.chat(msgs, prompt_version="p").content == "Stored first."
        assert len(srv.requests) == 2  # it did ask (model list, then the completion)


def _writer(path: str, who: int, n: int, start) -> dict[str, bytes]:
    """One sweep worker's process: answers every key with its own value, at once with others."""
    start.wait()
    with CallCache(path) as c:
        return {f"k{i}": c.put(f"k{i}", f"{who}-{i}".encode(), kind="chat", model="m")
                for i in range(n)}


def test_concurrent_writer_processes_all_use_the_first_stored_answer(tmp_path):
    # distributed sweeps: several processes (Dask workers' kernels) write one cache file at
    # once; no answer is lost and every process gets the answer stored first for a key
    import multiprocessing

    path, n, procs = str(tmp_path / "cache.db"), 300, 4
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as mgr:
        start = mgr.Barrier(procs)
        with ctx.Pool(procs) as pool:
            got = pool.starmap(_writer, [(path, w, n, start) for w in range(procs)])
    with CallCache(path) as c:
        stored = {f"k{i}": c.get(f"k{i}") for i in range(n)}
        assert c.stats().entries == n
    assert all(g == stored for g in got)
    winners = {v.split(b"-")[0] for v in stored.values()}
    assert len(winners) >= 1 and all(v.endswith(f"-{i}".encode())
                                     for i, v in enumerate(stored[f"k{i}"] for i in range(n)))


# -- answers exported with a sweep and imported on another machine -------------------------

def _filled(path, rows):
    with CallCache(path) as c:
        for key, kind, model, value in rows:
            c.put(key, value, kind=kind, model=model)


K1, K2, K3 = ("1" * 64), ("2" * 64), ("3" * 64)


def test_exported_answers_import_into_a_fresh_cache_byte_for_byte(tmp_path):
    vec = bytes(range(256))  # not UTF-8: an embedding's float32 bytes
    _filled(tmp_path / "a.db", [(K1, "chat", "qwen", '{"x": "é"}'.encode()),
                                (K2, "embed", "minilm", vec), (K3, "chat", "other", b"{}")])
    out = tmp_path / "answers" / "a.jsonl.gz"
    assert export_answers(tmp_path / "a.db", out, kinds=("chat", "embed")) == 3
    first = out.read_bytes()
    assert export_answers(tmp_path / "a.db", out, kinds=("chat", "embed")) == 3
    assert out.read_bytes() == first  # the same answers give the same bytes (no churn in git)
    counts = import_answers(tmp_path / "b.db", [out])
    assert counts == ImportCounts(added=3, present=0, differing=0)
    with CallCache(tmp_path / "b.db") as c:
        assert c.get(K1) == '{"x": "é"}'.encode() and c.get(K2) == vec and c.get(K3) == b"{}"
    assert import_answers(tmp_path / "b.db", [out]) == ImportCounts(0, 3, 0)


def test_export_narrows_by_kind_model_and_time(tmp_path):
    _filled(tmp_path / "a.db", [(K1, "chat", "qwen", b"1"), (K2, "embed", "qwen", b"2"),
                                (K3, "chat", "other", b"3")])
    out = tmp_path / "a.jsonl.gz"
    assert export_answers(tmp_path / "a.db", out) == 2  # default: chat answers only
    assert export_answers(tmp_path / "a.db", out, model="qwen") == 1
    assert export_answers(tmp_path / "a.db", out, since="2999-01-01") == 0
    assert export_answers(tmp_path / "a.db", out, until="2000-01-01") == 0
    assert export_answers(tmp_path / "a.db", out, since="2000-01-01", until="2999-01-01") == 2
    with pytest.raises(StoreError, match="kinds"):
        export_answers(tmp_path / "a.db", out, kinds=("prompt",))


def test_an_answer_already_here_wins_and_is_counted(tmp_path):
    _filled(tmp_path / "a.db", [(K1, "chat", "m", b"shipped"), (K2, "chat", "m", b"same")])
    _filled(tmp_path / "b.db", [(K1, "chat", "m", b"local"), (K2, "chat", "m", b"same")])
    export_answers(tmp_path / "a.db", tmp_path / "a.jsonl.gz")
    assert import_answers(tmp_path / "b.db", [tmp_path / "a.jsonl.gz"]) == ImportCounts(0, 1, 1)
    with CallCache(tmp_path / "b.db") as c:
        assert c.get(K1) == b"local"


@pytest.mark.parametrize("line, where", [
    ("not json", "line 2, field '(line)'"),
    (json.dumps({"key": "abc", "kind": "chat", "model": "m", "text": "x"}), "field 'key'"),
    (json.dumps({"key": K3, "kind": "prompt", "model": "m", "text": "x"}), "field 'kind'"),
    (json.dumps({"key": K3, "kind": "chat", "model": "m"}), "line 2, field 'text'"),
    (json.dumps({"key": K3, "kind": "chat", "model": "m", "b64": "%%"}), "field 'b64'"),
])
def test_a_bad_line_names_file_line_and_field_and_nothing_is_stored(tmp_path, line, where):
    good = json.dumps({"key": K1, "kind": "chat", "model": "m", "text": "ok"})
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(gzip.compress(f"{good}\n{line}\n".encode()))
    with pytest.raises(StoreError, match=re.escape(where)) as exc:
        import_answers(tmp_path / "c.db", [path])
    assert str(path) in str(exc.value)
    with CallCache(tmp_path / "c.db") as c:
        assert c.stats().entries == 0  # the good first line was not stored either


def test_a_file_that_is_not_gzip_is_refused(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text("{}\n")
    with pytest.raises(StoreError, match="not a gzipped answers file"):
        import_answers(tmp_path / "c.db", [path])
