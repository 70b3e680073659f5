"""The call cache: keys, hits and misses, persistence; no request on a repeated call."""

from __future__ import annotations

import json

from fakes import LEMONADE_RECORDED as REC
from fakes import FakeServer

from skillsynth.models.cache import CallCache, cache_key
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
