"""Decoding settings of the embedded chat server: their server arguments, and a sampled call's
cache identity (FAKE transport, real client and cache)."""

from __future__ import annotations

import json

import httpx
import pytest

from skillsynth.bench.live import _order, parse_setting
from skillsynth.errors import ConfigError
from skillsynth.evaluation.point.record import model_of
from skillsynth.models.cache import CallCache
from skillsynth.models.chat import ChatClient
from skillsynth.models.decoding import Decoding
from skillsynth.models.llm import Endpoint


def test_each_setting_has_its_server_arguments_and_identity(tmp_path):
    assert Decoding().server_args() == [] and Decoding().identity == ""
    ngram = Decoding("ngram")
    assert ngram.server_args()[:2] == ["--spec-type", "ngram-simple"]
    assert ngram.identity.startswith("ngram-simple:")
    draft = Decoding("draft").server_args(tmp_path / "d.gguf")
    assert draft[:4] == ["--spec-type", "draft-simple", "--model-draft", str(tmp_path / "d.gguf")]
    with pytest.raises(ConfigError, match="needs a draft model"):
        Decoding("draft").server_args()
    with pytest.raises(ConfigError, match="decoding must be one of none, ngram, draft"):
        Decoding("eagle")  # type: ignore[arg-type]


def _client(cache, decoding, answers):
    def handler(request):
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        answers.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {
            "content": f"answer {len(answers)}"}}], "timings": {"draft_n": 4}})

    ep = Endpoint("local", "http://127.0.0.1:1/v1", "m", decoding=decoding)
    return ChatClient(ep, cache=cache, transport=httpx.MockTransport(handler))


def test_a_speculative_setting_keys_sampled_calls_apart_and_greedy_ones_together(tmp_path):
    sent: list = []
    msgs = [{"role": "user", "content": "hi"}]
    with CallCache(tmp_path / "c.db") as cache:
        plain, spec = _client(cache, "", sent), _client(cache, "ngram-simple:n4:m16", sent)
        assert plain.chat(msgs).content == "answer 1"
        assert spec.chat(msgs).content == "answer 1" and len(sent) == 1  # greedy: one answer
        assert plain.chat(msgs, temperature=0.3, seed=1).content == "answer 2"
        # sampled: drafting changes how the random stream is used, so it is asked again
        assert spec.chat(msgs, temperature=0.3, seed=1).content == "answer 3"
        assert spec.chat(msgs, temperature=0.3, seed=1).cached
        assert spec.last is not None and spec.last.timings == {"draft_n": 4}
    assert model_of(spec)["decoding"] == "ngram-simple:n4:m16"
    assert "decoding" not in model_of(plain)


def test_bench_settings_and_run_orders():
    assert parse_setting("ngram/grouped").label == "ngram/grouped"
    assert parse_setting("none").order == "interleaved"
    with pytest.raises(ValueError, match="interleaved or grouped"):
        parse_setting("none/sideways")
    release = parse_setting("none/grouped/release")
    assert (release.order, release.layout, release.label) == ("grouped", "release",
                                                               "none/grouped/release")
    assert parse_setting("none/grouped/main").label == "none/grouped"  # old records' labels
    with pytest.raises(ValueError, match="main or release"):
        parse_setting("none/grouped/system")
    assert _order(["a", "b"], "interleaved") == [("a", "no-memory"), ("a", "oracle-args"),
                                                 ("b", "no-memory"), ("b", "oracle-args")]
    assert _order(["a", "b"], "grouped") == [("a", "no-memory"), ("b", "no-memory"),
                                             ("a", "oracle-args"), ("b", "oracle-args")]


def test_a_backend_names_its_decoding_and_a_sweep_hands_it_to_its_points(tmp_path):
    from skillsynth.models.backend import BackendSpec, open_clients

    assert BackendSpec("local", decoding="ngram").decoding == "ngram"
    with pytest.raises(ConfigError, match="decoding must be one of"):
        BackendSpec("local", decoding="fast")
    with pytest.raises(ConfigError, match="embedded servers"):
        BackendSpec("lemonade", decoding="draft")
    spec = BackendSpec("endpoints", chat_model="m", embed_model="e",
                       chat_url="http://127.0.0.1:1/v1", embed_url="http://127.0.0.1:1/v1",
                       chat_decoding="ngram-simple:n4:m16")
    with open_clients(spec) as (chat, _):  # nothing is contacted until a call
        assert chat.endpoint.decoding == "ngram-simple:n4:m16"
