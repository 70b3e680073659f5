"""The client against Lemonade 11's behaviours (issue 39), one test per break, each on a
scripted transport or the FAKE server of tests/fakes.py; the same behaviours against a real
``lemond`` are tests/test_lemonade.py (marker ``lemonade``)."""

from __future__ import annotations

import json
import re

import httpx
import numpy as np
import pytest
from fakes import LEMONADE_RECORDED as REC
from fakes import FakeServer

from skillsynth.config import calibrated_defaults
from skillsynth.errors import (
    EmbedderError,
    KeyRejected,
    LLMUnavailable,
    ModelNotFound,
)
from skillsynth.models.cache import CallCache
from skillsynth.models.chat import ChatClient
from skillsynth.models.embed import LEMONADE_EMBED_MAX_TOKENS, Embedder, check_store_embedder
from skillsynth.models.llm import Endpoint, canonical_model_id
from skillsynth.store import MemoryStore

MSG = [{"role": "user", "content": "hi"}]
URL = "http://lemonade.test/api/v1"
P = "/api/v1"


def _lemonade(model: str, **kw) -> Endpoint:
    kw.setdefault("retry_backoff_s", 0.01)
    return Endpoint("lemonade", URL, model, **kw)


class Lemonade11:
    """A scripted transport answering as Lemonade 11.7 does: ``/models`` lists user models
    by their bare name, requests accept the bare and the ``user.`` form alike."""

    def __init__(self, listed=("Qwen2.5-Coder-0.5B-Instruct-GGUF", "all-MiniLM-L6-v2-GGUF"),
                 *, chat=None, embed_limit=None):
        self.listed = list(listed)
        self.requests: list[tuple[str, str, object]] = []
        self.chat = chat
        self.embed_limit = embed_limit  # tokens per input (2 characters a token here)

    def known(self, name: str) -> bool:
        return name in self.listed or name.removeprefix("user.") in self.listed

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        path = request.url.path.removeprefix(P)
        if path == "/models":
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": m, "object": "model", "recipe": "llamacpp"} for m in self.listed]})
        if not self.known(body["model"]):
            return httpx.Response(404, json=REC["model_not_found"])
        if path == "/chat/completions":
            return self.chat(request) if self.chat else httpx.Response(200, json=REC["chat"])
        texts = body["input"]
        for t in texts:
            tokens = len(t) // 2 + 2
            if self.embed_limit and tokens > self.embed_limit:
                return httpx.Response(500, json={"error": {
                    "code": 500, "type": "server_error",
                    "message": f"input ({tokens} tokens) is too large to process. increase "
                               f"the physical batch size (current batch size: "
                               f"{self.embed_limit})"}})
        return httpx.Response(200, json={"data": [
            {"index": i, "embedding": [1.0, float(len(t) % 5), 0.5]}
            for i, t in enumerate(texts)]})

    def posts(self, suffix: str) -> list:
        return [r for r in self.requests if r[0] == "POST" and r[1].endswith(suffix)]


# ---------------------------------------------------------------- 1. model ids
@pytest.mark.parametrize("configured", ["user.all-MiniLM-L6-v2-GGUF", "all-MiniLM-L6-v2-GGUF"])
def test_bare_and_user_forms_are_one_model(configured):
    server = Lemonade11()
    with Embedder(_lemonade(configured), transport=httpx.MockTransport(server)) as e:
        assert e.embed(["find my invoice"]).shape == (1, 3)
        # what a run records and GAIA's meta keeps: one id whichever form was configured
        assert e.embedder_id == "all-MiniLM-L6-v2-GGUF:3"
    assert server.posts("/embeddings")[0][2]["model"] in (configured, "all-MiniLM-L6-v2-GGUF")


def test_an_older_lemonade_listing_the_user_form_matches_the_bare_name():
    server = Lemonade11(listed=["user.embeddinggemma-300m-GGUF"])
    with Embedder(_lemonade("embeddinggemma-300m-GGUF"),
                  transport=httpx.MockTransport(server)) as e:
        e.embed(["a goal"])
    # sent as the server lists it
    assert server.posts("/embeddings")[0][2]["model"] == "user.embeddinggemma-300m-GGUF"


def test_a_model_that_is_not_served_is_still_not_found():
    server = Lemonade11()
    with ChatClient(_lemonade("user.Gemma-9"), transport=httpx.MockTransport(server)) as c, \
            pytest.raises(ModelNotFound, match="Gemma-9"):
        c.chat(MSG)


def test_canonical_ids_and_what_is_recorded(tmp_path):
    from skillsynth.evaluation.point.record import model_of

    assert canonical_model_id("user.embeddinggemma-300m-GGUF") == "embeddinggemma-300m-GGUF"
    assert canonical_model_id("Gemma-4-E4B-it-GGUF") == "Gemma-4-E4B-it-GGUF"
    a = ChatClient(_lemonade("user.Qwen2.5-Coder-0.5B-Instruct-GGUF"))
    b = ChatClient(_lemonade("Qwen2.5-Coder-0.5B-Instruct-GGUF"))
    assert a.model_id == b.model_id == "Qwen2.5-Coder-0.5B-Instruct-GGUF"
    assert model_of(a)["model"] == model_of(b)["model"] == "Qwen2.5-Coder-0.5B-Instruct-GGUF"
    # the local backend's ids are never rewritten
    assert Endpoint("local", URL, "user.x").model_id == "user.x"


def test_one_cache_entry_serves_both_forms(tmp_path):
    server = Lemonade11()
    with CallCache(tmp_path / "cache.db") as cache:
        for name in ("user.all-MiniLM-L6-v2-GGUF", "all-MiniLM-L6-v2-GGUF"):
            with Embedder(_lemonade(name), cache=cache,
                          transport=httpx.MockTransport(server)) as e:
                e.embed(["find my invoice"])
        for name in ("user.Qwen2.5-Coder-0.5B-Instruct-GGUF", "Qwen2.5-Coder-0.5B-Instruct-GGUF"):
            with ChatClient(_lemonade(name), cache=cache,
                            transport=httpx.MockTransport(server)) as c:
                c.chat(MSG)
    assert len(server.posts("/embeddings")) == 1 and len(server.posts("/chat/completions")) == 1


def test_the_calibration_key_is_the_same_for_both_forms():
    shipped = calibrated_defaults("all-MiniLM-L6-v2-f16")
    assert shipped is not None
    assert calibrated_defaults("user.all-MiniLM-L6-v2-f16") == shipped
    assert calibrated_defaults("user.all-MiniLM-L6-v2-f16:384") == shipped


class _Named:
    """A FAKE embedder: only its id matters to check_store_embedder."""

    def __init__(self, embedder_id: str):
        self.embedder_id = embedder_id


@pytest.mark.parametrize("stored", ["user.embeddinggemma-300m-GGUF:768",
                                    "embeddinggemma-300m-GGUF:768",
                                    "user.embeddinggemma-300m-GGUF"])  # GAIA's own stamp
def test_a_stored_embedder_id_in_either_form_is_the_same_embedder(tmp_path, stored):
    with MemoryStore.init(tmp_path / "memory.db") as store:
        store.set_meta("embedder_id", stored)
        check_store_embedder(store, _Named("embeddinggemma-300m-GGUF:768"))
        assert store.get_meta("embedder_id") == stored  # never rewritten
        with pytest.raises(EmbedderError, match="not comparable"):
            check_store_embedder(store, _Named("all-MiniLM-L6-v2-GGUF:384"))
        if ":" in stored:
            with pytest.raises(EmbedderError):
                check_store_embedder(store, _Named("embeddinggemma-300m-GGUF:256"))


# ---------------------------------------------------------------- 2. install advice
@pytest.mark.parametrize("model, advice", [
    ("Gemma-4-E4B-it-GGUF", "`lemonade pull Gemma-4-E4B-it-GGUF`"),
    ("user.embeddinggemma-300m-GGUF",
     ("`lemonade pull user.embeddinggemma-300m-GGUF --checkpoint main "
     "ggml-org/embeddinggemma-300M-GGUF:Q8_0 --recipe llamacpp --label embeddings`")),
    ("embeddinggemma-300m-GGUF", "`lemonade pull user.embeddinggemma-300m-GGUF --checkpoint"),
    ("user.my-model-GGUF",
     ("`lemonade pull user.my-model-GGUF --checkpoint main OWNER/REPO-GGUF:VARIANT "
     "--recipe llamacpp`")),
])
def test_install_advice_is_lemonade_11s_cli(model, advice):
    with ChatClient(_lemonade(model), transport=httpx.MockTransport(Lemonade11())) as c, \
            pytest.raises(ModelNotFound) as info:
        c.chat(MSG)
    assert advice in str(info.value)
    assert "lemonade-server" not in str(info.value)  # Lemonade 10's name
    # (a 404 from the completion itself names the same command: tests/test_llm_errors.py)


# ---------------------------------------------------------------- 3. a wrong key
_NO_KEY = {"error": {"message": "Invalid or missing API key", "type": "authentication_error"}}


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_is_said_so(status):
    routes = {("GET", f"{P}/models"): (status, _NO_KEY)}
    with FakeServer(routes) as srv:
        ep = Endpoint("lemonade", srv.base_url, "Gemma-4-E4B-it-GGUF", api_key="wrong",
                      max_retries=2)
        with pytest.raises(KeyRejected, match=r"rejected the key \(check LEMONADE_API_KEY\)"):
            ChatClient(ep).chat(MSG)
        assert len(srv.requests) == 1  # not retried


def test_models_status_says_the_key_was_rejected_not_unreachable(tmp_path, capsys,
                                                                 monkeypatch):
    from skillsynth.cli import main

    routes = {("GET", f"{P}/models"): (401, _NO_KEY)}
    monkeypatch.setenv("LEMONADE_API_KEY", "wrong")
    with FakeServer(routes) as srv:
        args = ["models", "status", "--no-start", "--home", str(tmp_path),
                "--lemonade-url", srv.base_url]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert main([*args, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)["lemonade"]
    line = next(x for x in out.splitlines() if x.startswith("lemonade"))
    assert "rejected the key (check LEMONADE_API_KEY)" in line and "unreachable" not in line
    assert status["reachable"] is True and status["key_rejected"] is True


def test_models_status_plain_output_says_why_it_is_unreachable(tmp_path, capsys):
    from skillsynth.cli import main

    assert main(["models", "status", "--no-start", "--home", str(tmp_path),
                 "--lemonade-url", "http://127.0.0.1:9/api/v1"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("lemonade"))
    assert "unreachable" in line and "ConnectError" in line


# ---------------------------------------------------------------- 4. long embedding inputs
def test_an_input_over_the_servers_batch_is_cut_to_what_it_says_it_takes():
    server = Lemonade11(embed_limit=LEMONADE_EMBED_MAX_TOKENS)
    long = " ".join(f"word{i}" for i in range(300))  # 1,789 characters, ~896 tokens here
    with Embedder(_lemonade("all-MiniLM-L6-v2-GGUF"),
                  transport=httpx.MockTransport(server)) as e:
        v = e.embed(["short goal", long, "another goal"])
        assert v.shape == (3, 3) and np.allclose(np.linalg.norm(v, axis=1), 1.0)
        assert e.truncated == 1
        sent = [t for _, _, body in server.posts("/embeddings") for t in body["input"]]
        fitted = [t for t in sent if t.startswith("word0 ")][-1]
        assert len(fitted) // 2 + 2 <= LEMONADE_EMBED_MAX_TOKENS and long.startswith(fitted)
        # a refused batch is halved, never sent again whole (a 500 that would recur)
        batches = [tuple(body["input"]) for _, _, body in server.posts("/embeddings")]
        assert len(batches) == len(set(batches))
        # measured once: the same text again is cut without asking the server
        before = len(server.requests)
        e.embed([long])
        assert len(server.requests) - before == 1 and e.truncated == 2


def test_a_text_already_cut_to_max_chars_is_counted_once():
    server = Lemonade11(embed_limit=300)
    with Embedder(_lemonade("all-MiniLM-L6-v2-GGUF"), max_chars=1000,
                  transport=httpx.MockTransport(server)) as e:
        e.embed(["y " * 2000])
        assert e.truncated == 1


# ---------------------------------------------------------------- 5. timeouts
def _timing_out(server_requests: list):
    def handler(request: httpx.Request) -> httpx.Response:
        server_requests.append((request.method, request.url.path))
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=REC["models"])
        raise httpx.ReadTimeout("timed out", request=request)
    return handler


def test_a_timed_out_generation_on_lemonade_is_not_retried():
    seen: list = []
    ep = _lemonade("Gemma-4-E4B-it-GGUF", timeout_s=7, max_retries=3)
    with ChatClient(ep, transport=httpx.MockTransport(_timing_out(seen))) as c, \
            pytest.raises(LLMUnavailable) as info:
        c.chat(MSG)
    assert [m for m, _ in seen].count("POST") == 1
    message = str(info.value)
    assert re.search(r"within 7 s", message) and "not retried" in message
    assert "timeout" in message.lower()


def test_a_timed_out_request_to_a_local_server_is_still_retried():
    seen: list = []
    ep = Endpoint("local", "http://127.0.0.1:1/v1", "Gemma-4-E4B-it-GGUF", timeout_s=7,
                  max_retries=2, retry_backoff_s=0.01)
    with ChatClient(ep, transport=httpx.MockTransport(_timing_out(seen))) as c, \
            pytest.raises(LLMUnavailable, match="after 3 attempt"):
        c.chat(MSG)
    assert [m for m, _ in seen].count("POST") == 3
