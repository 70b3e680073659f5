"""Against the real embedded llama-server with real models (no fakes).

These need ``skillsynth models prepare`` (the README's test command runs it). A missing
model is a test failure with that instruction, not a skip: the embedded default is a
product feature and CI is where it is proven.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter

import numpy as np
import pytest

from skillsynth.errors import EmbedderError, LLMUnavailable, ModelNotFound
from skillsynth.models.cache import CallCache
from skillsynth.models.chat import ChatClient
from skillsynth.models.embed import Embedder, check_store_embedder
from skillsynth.models.serve import locate_models, serve_local
from skillsynth.models.status import models_status
from skillsynth.store import MemoryStore

pytestmark = pytest.mark.models  # every test here runs the embedded models


@pytest.fixture(scope="session")
def servers():
    try:
        models = locate_models()
    except ModelNotFound as exc:
        pytest.fail(f"{exc} (the README's test command does this first)")
    with serve_local(models) as running:
        yield running


def test_chat_answers(servers):
    with ChatClient(servers.chat) as c:
        r = c.chat([{"role": "user", "content": "Name one colour."}], max_tokens=16)
    assert isinstance(r.content, str) and r.content.strip()
    assert r.completion_tokens > 0 and r.model == servers.chat.model


def test_json_schema_answer_validates(servers):
    schema = {"type": "object", "additionalProperties": False,
              "required": ["name", "steps"],
              "properties": {"name": {"type": "string", "maxLength": 40,
                                      "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
                             "steps": {"type": "array", "minItems": 1, "maxItems": 3,
                                       "items": {"type": "string", "maxLength": 60}}}}
    with ChatClient(servers.chat) as c:
        r = c.chat([{"role": "user", "content": "Name a procedure for finding an invoice "
                     "and list its steps."}], json_schema=schema, max_tokens=600)
    assert r.finish_reason == "stop", r.content
    data = json.loads(r.content)
    assert set(data) == {"name", "steps"}
    import re

    assert re.match(schema["properties"]["name"]["pattern"], data["name"])
    assert 1 <= len(data["steps"]) <= 3 and all(isinstance(s, str) for s in data["steps"])


def test_embeddings_have_the_models_dimension_and_unit_norm(servers):
    with Embedder(servers.embed, batch_size=2) as e:
        v = e.embed(["find my invoice", "draft a reply", "summarise a report"])
        assert v.shape == (3, 384) and v.dtype == np.float32
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        assert e.embedder_id == "all-MiniLM-L6-v2-f16:384"
        assert e.embed([]).shape == (0, 384)


def test_a_repeated_text_is_embedded_once_per_call(servers):
    with Embedder(servers.embed, batch_size=2) as e:
        e.embed(["warm up"])  # the first request also checks the model list
        n = e.conn.requests_sent
        v = e.embed(["find my invoice", "draft a reply", "find my invoice", "draft a reply",
                     "find my invoice"])
        assert e.conn.requests_sent == n + 1  # two distinct texts: one batch of 2
        assert np.array_equal(v[0], v[2]) and np.array_equal(v[1], v[3])
        assert v.shape == (5, 384)


def test_a_goal_longer_than_the_embedders_context_is_cut_and_counted(servers):
    # 16.5k characters of goal (a pasted log) used to fail the whole batch with HTTP 500;
    # the densest text at the bound (ids and digits) must still fit MiniLM's 512 tokens
    dense = " ".join(f"#W{i:07d}/{i * 7919 % 10**9}" for i in range(2000))
    paste = "Please fix this. " + "ERROR 0x1f3a at frame 12: null deref. " * 440
    with Embedder(servers.embed) as e:
        v = e.embed([paste, dense, "find my invoice"])
        assert v.shape == (3, 384) and e.truncated == 2
        assert e.embed(["find my invoice"]).shape == (1, 384) and e.truncated == 2


def test_similar_goals_score_higher_than_unrelated(servers):
    with Embedder(servers.embed) as e:
        a, b, c = e.embed(["Cancel my flight reservation ABC123",
                           "I want to cancel the booking for my trip",
                           "What is the capital of Australia?"])
    assert float(a @ b) > float(a @ c) + 0.3


def test_wrong_model_id_is_model_not_found(servers):
    with ChatClient(servers.chat.with_(model="Gemma-4-E4B-it-GGUF")) as c, \
            pytest.raises(ModelNotFound, match="skillsynth models prepare"):
        c.chat([{"role": "user", "content": "hi"}])


def test_cache_reuses_real_answers(servers, tmp_path):
    msgs = [{"role": "user", "content": "Say yes."}]
    with CallCache(tmp_path / "c.db") as cache, ChatClient(servers.chat, cache=cache) as c:
        first = c.chat(msgs, max_tokens=8)
        sent = c.conn.requests_sent
        again = c.chat(msgs, max_tokens=8)
        assert again.cached and again.content == first.content
        assert c.conn.requests_sent == sent and c.calls == 1
        with Embedder(servers.embed, cache=cache) as e:
            v1 = e.embed(["find my invoice"])
            n = e.conn.requests_sent
            assert np.array_equal(e.embed(["find my invoice"]), v1)
            assert e.conn.requests_sent == n
        assert cache.stats().hits == 2


def test_store_records_embedder_and_refuses_another(servers, tmp_path):
    with MemoryStore.init(tmp_path / "memory.db") as store, Embedder(servers.embed) as e:
        check_store_embedder(store, e)
        assert store.get_meta("embedder_id") == "all-MiniLM-L6-v2-f16:384"
        check_store_embedder(store, e)  # same embedder: fine
        store.set_meta("embedder_id", "user.embeddinggemma-300m-GGUF:768")
        with pytest.raises(EmbedderError, match="embeddinggemma"):
            check_store_embedder(store, e)


def test_status_reports_both_local_servers(servers):
    status = models_status(lemonade=servers.chat.with_(base_url="http://127.0.0.1:9/api/v1",
                                                       max_retries=0),
                           running=servers)
    assert status["lemonade"]["reachable"] is False
    local = status["local"]["servers"]
    assert local["chat"]["model_served"] and local["embed"]["model_served"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_servers_stop_on_exit_and_on_error():
    models = locate_models()
    with serve_local(models, chat=False) as s:
        pid = s.servers[0].process.pid
        assert _alive(pid)
    s.servers[0].process.wait(timeout=1)
    assert not _alive(pid)
    with pytest.raises(RuntimeError), serve_local(models, chat=False) as s:
        pid = s.servers[0].process.pid
        raise RuntimeError("boom")
    s.servers[0].process.wait(timeout=1)
    assert not _alive(pid)


def test_a_server_that_cannot_load_its_model_is_reported(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF not really")
    real = locate_models()
    broken = dataclasses.replace(real, embed_model=bad)
    with pytest.raises(LLMUnavailable, match="exited"), \
            serve_local(broken, chat=False, log_dir=tmp_path):
        pass


def test_recall_with_real_embeddings_and_disable(servers, tmp_path):
    from skillsynth.config import Thresholds
    from skillsynth.pipeline.recall import recall
    from skillsynth.store import Procedure

    cfg = Thresholds(similarity_tau=0.6)  # MiniLM scale; GAIA's 0.82 is for a 768-d Gemma
    with MemoryStore.init(tmp_path / "memory.db") as store, Embedder(servers.embed) as e:
        texts = ["The user wants to cancel a flight reservation",
                 "The user wants a summary of a quarterly sales report"]
        ids = []
        for name, text, vec in zip(("cancel-flight", "summarise-report"), texts,
                                   e.embed(texts), strict=True):
            p = store.put_procedure(Procedure(name=name, when_to_use=text,
                                              markdown_body="1. step", tools_required=("t",)))
            store.set_procedure_embedding(p.id, vec)
            ids.append(p.id)
        hits = recall(store, e, "cancel my flight booking", cfg)
        assert [h.procedure.name for h in hits] == ["cancel-flight"]
        store.set_procedure_enabled(ids[0], False)
        assert recall(store, e, "cancel my flight booking", cfg) == []


def test_synthesize_recall_a_new_paraphrase_then_not_after_disable(servers, tmp_path):
    # The whole chain on the embedded models: three phrasings of one goal -> one real
    # distillation -> a stored, valid procedure -> recalled for a fourth phrasing the pass
    # never saw -> not recalled once disabled. SmolLM2-135M answers deterministically here
    # (seed 0, temperature 0.1); a different llama.cpp build may word the skill differently,
    # so each stage asserts with a message that says where the chain broke.
    import json

    from skillsynth.cli import main
    from skillsynth.config import Thresholds
    from skillsynth.corpora import import_corpus
    from skillsynth.pipeline.recall import recall, skill_from_procedure
    from skillsynth.pipeline.skill import validate_skill
    from skillsynth.pipeline.synthesize import synthesize_skills

    goals = ["Find the invoice from Acme for March", "Locate the March invoice sent by Acme",
             "Get me Acme's invoice for March"]
    probe = "Where is the invoice Acme sent us in March?"
    cfg = Thresholds(similarity_tau=0.6)  # MiniLM scale; GAIA's 0.82 is for a 768-d Gemma
    src, db = tmp_path / "sessions.jsonl", tmp_path / "memory.db"
    src.write_text("".join(
        json.dumps({"session_id": f"s{i}", "tool_name": t, "args": {"q": g}, "success": True,
                    "result_summary": "ok", **({"goal": g} if t == "search_file" else {})}) + "\n"
        for i, g in enumerate(goals) for t in ("search_file", "read_file", "query_documents")))
    assert import_corpus("jsonl", src, db).sessions_imported == 3
    with MemoryStore.open(db) as store, \
            ChatClient(servers.chat) as chat, Embedder(servers.embed) as emb:
        rep = synthesize_skills(store, chat, emb, cfg, mode="json")
        assert rep.status == "ran" and rep.qualified == 1 and rep.llm_calls == 1
        assert rep.added == 1, f"the model did not produce a skill: {rep.as_dict()}"
        (p,) = store.procedures()
        assert p.provenance["from_sessions"] == ["s0", "s1", "s2"]
        skill = skill_from_procedure(p)
        assert validate_skill(skill, "agentskills") == []
        assert validate_skill(skill, "gaia691") == []
        hits = recall(store, emb, probe, cfg)
        assert [h.procedure.id for h in hits] == [p.id], \
            f"not recalled: when_to_use={p.when_to_use!r}"
        assert main(["procedures", "disable", str(db), p.id]) == 0
        assert recall(store, emb, probe, cfg) == []


# The acceptance check of the models issue, as a user runs it: a fresh memory.db with three
# task families of three paraphrased successful sessions, `skillsynth synthesize DB
# --calibrated` with the embedded default models (the calibration is opt-in),
# then a fourth paraphrase per family recalls its own family's procedure first, and a
# disabled procedure is never recalled.
_FAMILIES = {
    "cancel": (("Cancel my flight reservation ABC123",
                "I want to cancel the booking for my trip to Denver",
                "Please cancel flight booking XK42 for me"),
               ("get_reservation", "cancel_reservation", "send_confirmation"),
               "Could you cancel my plane ticket reservation?"),
    "invoice": (("Find the invoice from Acme for March",
                 "Locate the March invoice sent by Acme",
                 "Get me Acme's invoice for March"),
                ("search_file", "read_file", "summarize_document"),
                "Where is the invoice Acme sent us in March?"),
    "email": (("Reply to Bob's last email about the budget",
               "Draft an answer to the mail from Bob on the budget",
               "Write back to Bob about his budget message"),
              ("list_inbox", "read_email", "draft_reply"),
              "Answer the email Bob sent me about the budget"),
}


def _paraphrase_db(tmp_path):
    import json as _json

    from skillsynth.cli import main

    src, db = tmp_path / "sessions.jsonl", tmp_path / "memory.db"
    lines = []
    for fam, (goals, tools, _) in _FAMILIES.items():
        for i, g in enumerate(goals):
            for j, t in enumerate(tools):
                lines.append(_json.dumps({"session_id": f"{fam}-{i}", "tool_name": t,
                                          "args": {"step": j}, "success": True,
                                          "result_summary": "ok",
                                          **({"goal": g} if j == 0 else {})}))
    src.write_text("\n".join(lines) + "\n")
    assert main(["corpus", "import", "--format", "jsonl", str(src), str(db)]) == 0
    return db


def test_three_families_of_paraphrases_at_the_calibration(servers, tmp_path, capsys):
    from skillsynth.cli import main

    db = _paraphrase_db(tmp_path)
    capsys.readouterr()
    assert main(["synthesize", str(db), "--json", "--no-cache", "--calibrated"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["status"], rep["clusters"], rep["qualified"]) == ("ran", 3, 3), rep
    assert rep["added"] == 3, f"one procedure per family expected: {rep}"
    with MemoryStore.open(db, read_only=True) as store:
        procs = store.procedures(active_only=True)
    family_of = {p.id: {s.split("-")[0] for s in p.provenance["from_sessions"]} for p in procs}
    assert sorted(f for fs in family_of.values() for f in fs) == sorted(_FAMILIES)
    for fam, (_, _, probe) in _FAMILIES.items():
        assert main(["recall", str(db), probe, "--json", "--no-cache", "--calibrated"]) == 0
        hits = json.loads(capsys.readouterr().out)
        assert hits and family_of[hits[0]["id"]] == {fam}, \
            f"{probe!r} recalled {hits} ({ {p.id: p.when_to_use for p in procs} })"
        assert main(["procedures", "disable", str(db), hits[0]["id"]]) == 0
        capsys.readouterr()
        assert main(["recall", str(db), probe, "--json", "--no-cache", "--calibrated"]) == 0
        after = json.loads(capsys.readouterr().out)
        assert hits[0]["id"] not in [h["id"] for h in after]
        assert main(["procedures", "enable", str(db), hits[0]["id"]]) == 0
        capsys.readouterr()


def test_the_default_chat_model_is_the_checked_assembly_of_its_parts():
    # `models prepare` (the README's test command) assembled it; re-hash it here, whatever
    # the stamp beside it says
    from skillsynth.models.cache import file_sha256
    from skillsynth.models.chat_models import DEFAULT_CHAT_MODEL, chat_model, locate_chat_model
    from skillsynth.models.serve import models_home

    spec = chat_model(DEFAULT_CHAT_MODEL)
    path = locate_chat_model(spec.name, models_home())
    assert path.parent == models_home() / "models" and path.stat().st_size == spec.size
    assert file_sha256(path) == spec.sha256
    assert locate_models().chat_id == spec.model_id


def test_the_default_model_calls_a_tool_and_the_call_is_read(servers):
    # Qwen2.5-Coder answers function calling with the call as JSON text in `content` under
    # llama-server; either way the agent must see one call of the offered tool.
    from skillsynth.models.text_calls import tool_calls_in_content

    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    with ChatClient(servers.chat) as c:
        r = c.chat([{"role": "user", "content": "What is the weather in Paris right now?"}],
                   tools=tools, max_tokens=96, seed=0)
    calls = r.tool_calls or tool_calls_in_content(r.content, ["get_weather"])
    assert [x["function"]["name"] for x in calls] == ["get_weather"], r
    assert "paris" in calls[0]["function"]["arguments"].lower()


@pytest.mark.live
def test_live_smoke_two_tau2_retail_tasks_both_arms(servers, tmp_path):
    # CI's live smoke: history from the shipped tau2 retail recordings, two probes run live
    # in tau2:retail in both arms (step limit 4) by the default model; the world must have
    # executed real calls and tau2's evaluators must have scored every run.
    from pathlib import Path

    from skillsynth.config import Thresholds
    from skillsynth.corpora.importing import import_corpus
    from skillsynth.evaluation import EvalConfig, run_point

    data = Path(__file__).resolve().parents[1] / "datasets" / "tau2-retail"
    db = tmp_path / "retail.db"
    import_corpus("tau2", [data], db, tasks=data / "tasks_retail_HEAD.json.gz")
    # taus low enough that both probes recall something (the first MiniLM calibration's), so
    # the memory arm really carries a procedure
    low = Thresholds(similarity_tau=0.31, recall_tau=0.24, reconcile_tau=0.74)
    cfg = EvalConfig(str(db), thresholds=low, k=1,
                     live=True, world="tau2:retail", tasks=("5", "9"), step_limit=4,
                     policy=False, n_boot=200)
    with ChatClient(servers.chat) as chat, Embedder(servers.embed) as emb:
        res = run_point(cfg, chat, emb, tmp_path / "point")
    runs = [json.loads(line) for line in (tmp_path / "point" / "runs.jsonl").open()]
    assert sorted((r["task_id"], r["arm"]) for r in runs) == [
        ("5", "memory"), ("5", "no-memory"), ("9", "memory"), ("9", "no-memory")]
    assert any(r["recalled_ids"] for r in runs), "both probes recall at these taus"
    calls = [t for r in runs for t in r["transcript"] if t["kind"] == "call"]
    assert calls, "the model made no tool call in four runs"
    assert all(r["steps"] <= 4 and r["world"] == "tau2:retail" for r in runs)
    # tau2's tools answered (their results or their own error text), not a replay table
    assert all("replay environment" not in t["result"] and t["result"] for t in calls)
    for r in runs:  # tau2's evaluators scored every run, whatever ended it
        assert r["reward"] is not None and "breakdown" in r["score_detail"], r["score_detail"]
        assert r["prompt_tokens"] > 0 and r["termination"] in ("agent-stop", "step-limit")
    live = dict(res.summary["live"])
    ends = live.pop("terminations")  # how each arm's runs ended, counted as the runs say
    assert live == {"world": "tau2:retail", "probes": 2, "not_in_world": [], "user_model": None}
    assert ends == {arm: dict(Counter(r["termination"] for r in runs if r["arm"] == arm))
                    for arm in ("memory", "no-memory")}
    for name in ("live_success_change", "live_share_made_worse", "live_prompt_token_change"):
        k = res.kpis[name]
        assert k.n == 2 and k.value is not None and k.lo is not None and k.hi is not None


@pytest.mark.live
@pytest.mark.parametrize("arm", ["oracle", "oracle-args", "mismatched", "inert"])
def test_live_smoke_of_each_control_arm_on_one_tau2_retail_task(servers, tmp_path, arm):
    # CI's control smoke: tau2 retail task 5 run live by the default model in both arms
    # (step limit 4) with each control arm as the point's strategy. The oracle arms recall
    # the task's own gold procedure, mismatched another family's, inert nothing (and its
    # memory arm must reproduce the no-memory run: greedy decoding, the same seed).
    from pathlib import Path

    from skillsynth.config import load_thresholds
    from skillsynth.corpora.importing import import_corpus
    from skillsynth.evaluation import EvalConfig, run_point
    from skillsynth.models.serve import EMBED_MODEL_ID

    data = Path(__file__).resolve().parents[1] / "datasets" / "tau2-retail"
    db = tmp_path / "retail.db"
    import_corpus("tau2", [data], db, tasks=data / "tasks_retail_HEAD.json.gz")
    cfg = EvalConfig(str(db), strategy=arm,
                     thresholds=load_thresholds(None, embedder=EMBED_MODEL_ID), k=1,
                     live=True, world="tau2:retail", tasks=("5",), step_limit=4,
                     policy=False, n_boot=200)
    with ChatClient(servers.chat) as chat, Embedder(servers.embed) as emb:
        res = run_point(cfg, chat, emb, tmp_path / "point")
    runs = {r["arm"]: r for r in map(json.loads, (tmp_path / "point" / "runs.jsonl").open())}
    assert set(runs) == {"no-memory", "memory"} and runs["memory"]["task_id"] == "5"
    assert all(r["steps"] <= 4 and r["reward"] is not None for r in runs.values())
    rows = [json.loads(x) for x in (tmp_path / "point" / "results.jsonl").open()]
    (mem,) = [r for r in rows if r["arm"] == "memory" and r["steps_method"] == "live"]
    k = res.kpis
    assert k["live_gold_actions_matched_memory"].n == 1  # task 5 has gold actions
    if arm == "inert":
        assert runs["memory"]["recalled_ids"] == [] and mem["prompt_chars"] == 0
        check = res.summary["controls"]["inert"]
        assert check["live"]["n"] == 1 and check["replay"]["identical"] == check["replay"]["n"]
        assert k["inert_identical"].value == 1.0, check["first_divergences"]
        return
    assert runs["memory"]["recalled_ids"] == [f"oracle:{arm}:{mem['probe_session']}"]
    assert mem["prompt_chars"] > 0  # the procedure went into the system prompt
    assert mem["recalled_right"] == (0 if arm == "mismatched" else 1)
    assert res.summary["controls"]["gold_from"] == "labels"
    assert res.summary["controls"]["descriptions"] == "world"
    if arm != "mismatched":
        for name in ("replay_sensitivity_steps", "live_sensitivity_success"):
            assert k[name].n >= 1 and k[name].value is not None, name


def test_model_commands_through_main(tmp_path, capsys):
    # every model-facing command once through the command line, at its smallest size
    import signal
    import subprocess
    import sys

    from skillsynth.cli import main
    from skillsynth.corpora import generate_corpus

    assert main(["models", "status", "--json", "--no-start",
                 "--lemonade-url", "http://127.0.0.1:9/api/v1"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["local"]["prepared"] and not status["lemonade"]["reachable"]
    assert main(["bench", "models", "--repeats", "1", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["chat_tokens_per_s"]["n"] == 1 and figures["chat_tokens_per_s"]["median"] > 0
    db = tmp_path / "syn.db"
    generate_corpus(db, families=2, attempts=4, seed=3)
    # at the synthetic paraphrases' own tau (the refitted calibration, 0.50, splits them)
    assert main(["bench", "distill", "--corpus", f"syn={db}", "--max-clusters", "1",
                 "--no-cache", "--json", "--set", "similarity_tau=0.3"]) == 0
    (model,) = json.loads(capsys.readouterr().out)
    syn = model["corpora"]["syn"]
    assert syn["clusters"] == 1 and syn["answers"] == 1
    assert syn["seconds_per_distillation"]["n"] == 1  # no cache: a real answer, timed
    assert main(["bench", "tuning", "--sessions", "120", "--repeats", "1", "--no-cache",
                 "--json"]) == 0
    tuning = json.loads(capsys.readouterr().out)
    assert tuning["update_keep_tau_s"]["n"] == 1
    serve = subprocess.Popen(
        [sys.executable, "-c", ("import sys; from skillsynth.cli import main; "
                                "sys.exit(main(['models', 'serve', '--no-chat']))")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in serve.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if "serving" in line:
            break
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=60) == 0, "".join(lines)
    assert any(line.startswith("embed ") for line in lines)


@pytest.mark.live
def test_live_smoke_of_verify_world_one_candidate_one_try(servers):
    # CI's verification smoke: one candidate tried once (verify_tasks 1, step limit 4) in
    # tau2:retail on its member's task 5 by the default model, with the candidate alone
    # recalled; the world scores the try and the verdict records it.
    from skillsynth.config import Thresholds
    from skillsynth.evaluation.live.worlds import get_world
    from skillsynth.evaluation.point.verify_world import WorldVerifier
    from skillsynth.pipeline.cluster import Cluster
    from skillsynth.pipeline.detect import SessionSequence
    from skillsynth.pipeline.skill import Skill

    world = get_world("tau2:retail")
    skill = Skill(name="exchange-delivered-items", description="The customer wants to "
                  "exchange items of a delivered order",
                  body="1. Call find_user_id_by_name_zip with the customer's name and zip\n"
                       "2. Call get_order_details for the order\n"
                       "3. Call exchange_delivered_order_items\n\n## Edge cases\n"
                       "- If the user is not found, call find_user_id_by_email",
                  tools_required=("find_user_id_by_name_zip", "get_order_details",
                                  "exchange_delivered_order_items"))
    member = SessionSequence("s5", world.task("5").goal, (), (), True)
    cluster = Cluster((member, SessionSequence("s9", "other", (), (), True)), "test", "calls",
                      1.0, True)
    with ChatClient(servers.chat) as chat:
        v = WorldVerifier(chat, world, {"s5": "5", "s9": "9"}, Thresholds(), tasks=1,
                          min_success=1.0, step_limit=4, policy=False)(skill, cluster)
    (attempt,) = v.tries  # one try: verify_tasks 1, on the first member's task
    assert (attempt.session, attempt.task_id, v.rule) == ("s5", "5", "world")
    assert attempt.detail["steps"] <= 4 and attempt.detail["termination"] in (
        "agent-stop", "step-limit")
    assert attempt.detail["reward"] is not None  # tau2's evaluators scored the try
    assert v.verified == attempt.ok and v.model_calls + v.cache_hits >= 1
    assert v.reason
