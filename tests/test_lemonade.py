"""Against a real Lemonade Server (``lemond``, no fakes), through the public API and CLI as a
user configures it (``LEMONADE_BASE_URL``): status, the five breaks of issue 39, a json-mode
distillation, embeddings, recall and the SKILL.md round trip.

The tier needs a ``lemond`` build or Lemonade's source (tests/lemonade_server.py says which
environment names them) and the prepared models (``skillsynth models prepare``); without a
build or source it skips, saying so. The chat model is the 0.5B embedded one (about 5-15
tokens/s on 2 cores): every request here asks for few tokens.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from lemonade_server import CHAT_MODEL, EMBED_MODEL

from skillsynth.cli import main
from skillsynth.errors import InputTooLarge, LLMUnavailable, ModelNotFound
from skillsynth.models.chat import ChatClient
from skillsynth.models.embed import LEMONADE_EMBED_MAX_TOKENS, Embedder
from skillsynth.models.llm import Endpoint, ModelConnection
from skillsynth.store import MemoryStore

pytestmark = pytest.mark.lemonade

USER_EMBED = f"user.{EMBED_MODEL}"  # the form GAIA configures its embedder in


def _lemonade_line(out: str) -> str:
    return next(x for x in out.splitlines() if x.startswith("lemonade"))


def test_status_finds_the_server_and_its_models(lemonade_env, tmp_path, capsys):
    args = ["models", "status", "--no-start", "--home", str(tmp_path)]
    assert main([*args, "--json"]) == 0
    lem = json.loads(capsys.readouterr().out)["lemonade"]
    assert lem["reachable"] and lem["base_url"] == lemonade_env.base_url
    assert {CHAT_MODEL, EMBED_MODEL} <= set(lem["models"])  # bare names: Lemonade >= 10.5
    assert main(args) == 0
    line = _lemonade_line(capsys.readouterr().out)
    assert line.startswith(f"lemonade  reachable at {lemonade_env.base_url}") and \
        EMBED_MODEL in line


@pytest.fixture
def keyed_lemonade(lemonade_server):
    """A second lemond that wants ``LEMONADE_API_KEY`` (as Bearer, on every route)."""
    import lemonade_server as lemonade

    server = lemonade.serve(lemonade.locate(), api_key="key-the-tests-set")
    try:
        yield server
    finally:
        lemonade.stop(server)


def test_a_wrong_or_missing_key_reads_as_rejected_not_unreachable(keyed_lemonade, tmp_path,
                                                                 capsys, monkeypatch):
    monkeypatch.setenv("LEMONADE_BASE_URL", keyed_lemonade.base_url)
    args = ["models", "status", "--no-start", "--home", str(tmp_path)]
    for key in ("wrong-key", None):
        if key:
            monkeypatch.setenv("LEMONADE_API_KEY", key)
        else:
            monkeypatch.delenv("LEMONADE_API_KEY", raising=False)
        assert main(args) == 0
        line = _lemonade_line(capsys.readouterr().out)
        assert "rejected the key (check LEMONADE_API_KEY)" in line, line
        assert "unreachable" not in line and "HTTP 401" in line
    monkeypatch.setenv("LEMONADE_API_KEY", keyed_lemonade.api_key)
    assert main([*args, "--json"]) == 0
    lem = json.loads(capsys.readouterr().out)["lemonade"]
    assert lem["reachable"] and not lem.get("key_rejected") and EMBED_MODEL in lem["models"]


def test_the_user_form_and_the_bare_name_are_one_model(lemonade_env):
    with Embedder(Endpoint.lemonade(USER_EMBED)) as a, \
            Embedder(Endpoint.lemonade(EMBED_MODEL)) as b:
        va, vb = a.embed(["find my invoice"]), b.embed(["find my invoice"])
        assert va.shape == (1, 384) and np.allclose(va, vb, atol=1e-5)
        assert a.embedder_id == b.embedder_id == f"{EMBED_MODEL}:384"
    with ChatClient(Endpoint.lemonade(f"user.{CHAT_MODEL}")) as c:
        c.ensure_ready()
        assert c.model_id == CHAT_MODEL
    with ChatClient(Endpoint.lemonade("user.not-there-GGUF")) as c, \
            pytest.raises(ModelNotFound, match="`lemonade pull user.not-there-GGUF "
                                               "--checkpoint main .* --recipe llamacpp`"):
        c.ensure_ready()


def test_an_input_over_the_servers_batch_is_cut_to_fit_and_counted(lemonade_env):
    # about 1,200 MiniLM tokens in 1,799 characters: under the character bound, over the
    # 512-token batch; Lemonade answered HTTP 500 three times for this before issue 39
    dense = " ".join(f"q{i % 10}" for i in range(600))
    conn = ModelConnection(Endpoint.lemonade(EMBED_MODEL, max_retries=2))
    try:
        with pytest.raises(InputTooLarge) as refused:
            conn.request("POST", "/embeddings", {"model": EMBED_MODEL, "input": [dense]})
        assert conn.requests_sent == 1  # not retried
        assert refused.value.tokens and refused.value.tokens > LEMONADE_EMBED_MAX_TOKENS
        assert refused.value.limit in (None, LEMONADE_EMBED_MAX_TOKENS)
    finally:
        conn.close()
    with Embedder(Endpoint.lemonade(USER_EMBED)) as e:
        v = e.embed(["find my invoice", dense, "draft a reply"])
        assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        assert e.truncated == 1


def test_a_timed_out_generation_is_not_retried_and_the_server_recovers(lemonade_env):
    ep = Endpoint.lemonade(CHAT_MODEL, timeout_s=1.0, max_retries=2)
    msgs = [{"role": "user", "content": "Count from one to fifty in words."}]
    with ChatClient(ep) as c:
        c.ensure_ready()
        sent = c.conn.requests_sent
        t0 = time.monotonic()
        with pytest.raises(LLMUnavailable, match=r"within 1 s .*not retried"):
            c.chat(msgs, max_tokens=48)
        assert c.conn.requests_sent == sent + 1 and time.monotonic() - t0 < 5
    # the abandoned generation finishes on its own; the next request waits for it
    with ChatClient(ep.with_(timeout_s=300.0)) as c:
        r = c.chat([{"role": "user", "content": "Say yes."}], max_tokens=4)
        assert r.completion_tokens > 0


_GOALS = ("Find the invoice from Acme for March", "Locate the March invoice sent by Acme",
          "Get me Acme's invoice for March")
_TOOLS = ("search_file", "read_file", "summarize_document")
_PROBE = "Where is the invoice Acme sent us in March?"


def test_synthesize_in_json_mode_recall_and_the_skill_md_round_trip(lemonade_env, tmp_path,
                                                                    capsys):
    src, db = tmp_path / "sessions.jsonl", tmp_path / "memory.db"
    src.write_text("".join(
        json.dumps({"session_id": f"s{i}", "tool_name": t, "args": {"step": j},
                    "success": True, "result_summary": "ok", **({"goal": g} if j == 0 else {})})
        + "\n" for i, g in enumerate(_GOALS) for j, t in enumerate(_TOOLS)))
    assert main(["corpus", "import", "--format", "jsonl", str(src), str(db)]) == 0
    # MiniLM's scale (GAIA's 0.82 is for EmbeddingGemma); the embedder in GAIA's user. form
    models = ["--backend", "lemonade", "--model", CHAT_MODEL, "--embed-model", USER_EMBED,
              "--no-cache", "--timeout", "600", "--set", "similarity_tau=0.6", "--json"]
    capsys.readouterr()
    assert main(["synthesize", str(db), "--mode", "json", *models]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["status"], rep["qualified"], rep["llm_calls"]) == ("ran", 1, 1), rep
    assert rep["added"] == 1, f"the model did not produce a skill: {rep}"
    with MemoryStore.open(db, read_only=True) as store:
        (proc,) = store.procedures()
        assert store.get_meta("embedder_id") == f"{EMBED_MODEL}:384"
    assert main(["recall", str(db), _PROBE, *models]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["id"] for h in hits] == [proc.id], f"not recalled: {proc.when_to_use!r}"
    # the round trip: exported, read back by both validators, 100% valid
    for profile, validators in (("agentskills", ("agentskills", "gaia691")),
                                ("gaia691", ("gaia691",))):
        out = tmp_path / profile
        assert main(["procedures", "export", str(db), proc.id, "--out", str(out),
                     "--profile", profile]) == 0
        for validator in validators:
            assert main(["skill", "validate", str(out / proc.name), "--profile",
                         validator]) == 0, capsys.readouterr()


def test_a_sweep_point_through_lemonade_runs_live_renders_its_report_and_is_691_valid(
        lemonade_env, tmp_path):
    # CI's Lemonade point (eval/sweeps/lemonade-ci.yaml): the sweep-point notebook under
    # papermill, json-mode distillation and recall by the served models, one probe live
    from pathlib import Path

    spec = Path(__file__).resolve().parent.parent / "eval" / "sweeps" / "lemonade-ci.yaml"
    results = tmp_path / "results"
    assert main(["sweep", str(spec), "--results", str(results), "--cache",
                 str(tmp_path / "cache.db")]) == 0  # an empty call cache: every answer new
    run = results / "lemonade-ci"
    record = json.loads((run / "summary.json").read_text())["record"]
    assert record["models"]["chat"]["model"] == CHAT_MODEL
    (point,) = run.glob("points/*/summary.json")
    summary = json.loads(point.read_text())
    assert summary["pass"]["distilled"] == 1, summary["pass"]  # one distillation a pass
    k = summary["kpis"]
    assert (k["validity_gaia691"]["value"], k["validity_gaia691"]["n"]) == (1.0, 1)
    runs = [json.loads(x) for x in (point.parent / "runs.jsonl").read_text().splitlines()]
    assert sorted(r["arm"] for r in runs) == ["memory", "no-memory"]  # one probe, both arms
    assert all(r["error"] is None and r["termination"] != "model-error" and r["turns"] > 0
               for r in runs)  # the served model answered every turn
    assert main(["report", str(run)]) == 0 and (run / "report.html").stat().st_size > 0
