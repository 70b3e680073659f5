"""The client's failure behaviour against real sockets, and Lemonade's response shapes
(RECORDED responses served by a fake server: Lemonade itself cannot run here)."""

from __future__ import annotations

import json
import socket
import time

import pytest
from fakes import LEMONADE_RECORDED as REC
from fakes import FakeServer

from skillsynth.errors import LLMError, LLMUnavailable, MalformedResponse, ModelNotFound
from skillsynth.models.chat import ChatClient
from skillsynth.models.llm import LEMONADE_BASE_URL, Endpoint

MSG = [{"role": "user", "content": "hi"}]
P = "/api/v1"


def _ep(base_url: str, **kw) -> Endpoint:
    kw.setdefault("retry_backoff_s", 0.01)
    return Endpoint("lemonade", base_url, kw.pop("model", "Gemma-4-E4B-it-GGUF"), **kw)


def test_lemonade_defaults_and_env():
    ep = Endpoint.lemonade(env={})
    assert (ep.base_url, ep.model, ep.api_key) == (LEMONADE_BASE_URL, "Gemma-4-E4B-it-GGUF",
                                                   None)
    ep = Endpoint.lemonade(env={"LEMONADE_BASE_URL": "http://h:1/api/v1/",
                                "LEMONADE_API_KEY": "sekret"})
    assert ep.base_url == "http://h:1/api/v1" and ep.api_key == "sekret"
    assert "sekret" not in repr(ep)
    with pytest.raises(LLMError, match="backend"):
        Endpoint("openai", "http://x", "m")  # type: ignore[arg-type]


def test_closed_port_is_unavailable_within_the_timeout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the with-block ends
    ep = _ep(f"http://127.0.0.1:{port}/api/v1", max_retries=1, connect_timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(LLMUnavailable, match="after 2 attempt"):
        ChatClient(ep).chat(MSG)
    assert time.monotonic() - t0 < 2 * 1.0 + 1.0


def test_500_is_retried_a_bounded_number_of_times():
    routes = {("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): (500, {"error": "boom"})}
    with FakeServer(routes) as srv:
        with pytest.raises(LLMUnavailable, match="HTTP 500"):
            ChatClient(_ep(srv.base_url, max_retries=3)).chat(MSG)
        posts = [r for r in srv.requests if r[0] == "POST"]
    assert len(posts) == 4


def test_500_then_success_recovers():
    routes = {("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): [(503, {}), (200, REC["chat"])]}
    with FakeServer(routes) as srv:
        r = ChatClient(_ep(srv.base_url, max_retries=2)).chat(MSG)
    assert r.content == "Hello." and r.completion_tokens == 2


def test_404_model_not_found_names_the_pull_command():
    routes = {("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): (404, REC["model_not_found"])}
    with FakeServer(routes) as srv:
        with pytest.raises(ModelNotFound, match="`lemonade pull Gemma-4-E4B-it-GGUF`"):
            ChatClient(_ep(srv.base_url)).chat(MSG)
        assert len([r for r in srv.requests if r[0] == "POST"]) == 1  # not retried


def test_unlisted_model_is_not_found_before_any_completion():
    routes = {("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): (200, REC["chat"])}
    with FakeServer(routes) as srv:
        with pytest.raises(ModelNotFound, match="Gemma-9"):
            ChatClient(_ep(srv.base_url, model="Gemma-9")).chat(MSG)
        assert not [r for r in srv.requests if r[0] == "POST"]


def test_model_load_error_is_unavailable_without_retries():
    routes = {("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): (500, REC["model_load_error"])}
    with FakeServer(routes) as srv:
        with pytest.raises(LLMUnavailable, match="out of memory"):
            ChatClient(_ep(srv.base_url, max_retries=3)).chat(MSG)
        assert len([r for r in srv.requests if r[0] == "POST"]) == 1


@pytest.mark.parametrize("body", [b"<html>oops</html>", {"choices": []}, {"object": "x"}])
def test_unparseable_body_is_malformed(body):
    routes = {("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): (200, body)}
    with FakeServer(routes) as srv, pytest.raises(MalformedResponse):
        ChatClient(_ep(srv.base_url)).chat(MSG)


def test_recorded_lemonade_health_models_and_request_shape():
    routes = {("GET", f"{P}/health"): (200, REC["health"]),
              ("GET", f"{P}/models"): (200, REC["models"]),
              ("POST", f"{P}/chat/completions"): (200, REC["chat"])}
    with FakeServer(routes) as srv:
        client = ChatClient(_ep(srv.base_url, api_key="k1"))
        health = client.conn.health()
        assert [m["model_name"] for m in health["all_models_loaded"]] == \
            ["Gemma-4-E4B-it-GGUF", "user.embeddinggemma-300m-GGUF"]
        assert client.conn.model_ids() == ["Gemma-4-E4B-it-GGUF", "user.embeddinggemma-300m-GGUF"]
        client.chat(MSG, json_schema={"type": "object"}, temperature=0.1, max_tokens=64,
                    stop=["\n\n"])
        assert srv.headers_seen.get("Authorization") == "Bearer k1"
        sent = next(r[2] for r in srv.requests if r[0] == "POST")
    assert sent["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "answer",
                                                       "schema": {"type": "object"}}}
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["stop"]) == \
        ("Gemma-4-E4B-it-GGUF", 0.1, 64, ["\n\n"])


def test_a_trickling_server_is_cut_off_at_the_request_deadline():
    # one byte every 0.2 s never trips a per-read timeout of 1 s; the whole-request
    # deadline (timeout_s) must end each attempt (a local server: on Lemonade a timed-out
    # POST is not retried, tests/test_lemonade_client.py)
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self):  # /models answers at once
            body = json.dumps(REC["models"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "400")
            self.end_headers()
            try:
                for _ in range(400):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}{P}"
        t0 = time.monotonic()
        ep = Endpoint("local", url, "Gemma-4-E4B-it-GGUF", timeout_s=1.0, max_retries=1,
                      retry_backoff_s=0.01)
        with ChatClient(ep) as c, \
                pytest.raises(LLMUnavailable, match="no complete answer within 1 s"):
            c.chat(MSG)
        assert time.monotonic() - t0 < 5  # two attempts of about 1 s, not 80 s of trickle
    finally:
        server.shutdown()


def test_a_text_over_the_character_bound_is_cut_before_embedding():
    import httpx

    from skillsynth.models.embed import Embedder

    seen = []

    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "embed-m"}]})
        texts = json.loads(request.content)["input"]
        seen.extend(texts)
        return httpx.Response(200, json={"data": [
            {"index": i, "embedding": [1.0, float(len(t) % 7)]} for i, t in enumerate(texts)]})

    ep = Endpoint("lemonade", "http://lemonade.test/api/v1", "embed-m")
    with Embedder(ep, transport=httpx.MockTransport(handler), max_chars=100) as e:
        v = e.embed(["x" * 16_500, "short goal"])
    assert v.shape == (2, 2) and e.truncated == 1
    assert [len(t) for t in seen] == [100, 10]
