"""gaia-shipped: the installed amd-gaia's own synthesis pass, run unchanged through the protocol.

Every figure is worked out by hand on the tiny corpus (tests/corpus_kinds.py): three families
(invoice, mail: 3-step runs; jira: 2-step runs), one attempt a day. GAIA's greedy clustering
seeds clusters in goal-text order ("answer the mail" < "check the jira ticket" < "find the
invoice"), and its pass spends at most two distillations (MAX_DISTILL_CALLS_PER_PASS).
"""

from __future__ import annotations

import json

import pytest
from corpus_kinds import tiny_corpus
from fakes import FakeBrokenChat, FakeDistiller, FakeFamilyEmbedder, FakeGaiaDistiller

from skillsynth.config import Thresholds
from skillsynth.errors import ConfigError, EvaluationError
from skillsynth.evaluation.point.run import EvalConfig, run_point
from skillsynth.evaluation.strategies import gaia_shipped as gs
from skillsynth.evaluation.strategies import get_strategy
from skillsynth.store import MemoryStore

TH = Thresholds(similarity_tau=0.8)
#: jira's 2-step runs qualify too: three clusters, one more than a pass may distil.
TH2 = Thresholds(similarity_tau=0.8, min_steps=2)
MAIL = ("mail-1", "mail-2", "mail-3")
JIRA = ("jira-1", "jira-2", "jira-3")
INVOICE = ("invoice-1", "invoice-2", "invoice-3")


@pytest.fixture
def gaia():
    return pytest.importorskip("gaia.agents.base.skill_synthesis",
                               reason="amd-gaia is not installed (pip install "
                                      "'skillsynth[gaia]')")


def _gaia_store(path):
    from gaia.agents.base.memory_store import MemoryStore as GaiaStore

    return GaiaStore(db_path=path)


def _point(tmp_path, name, th=TH, llm=None, **kw):
    llm = llm or FakeGaiaDistiller()
    cfg = EvalConfig(str(tiny_corpus(tmp_path, attempts=kw.pop("attempts", 4))),
                     strategy="gaia-shipped", thresholds=th, n_boot=200, **kw)
    return run_point(cfg, llm, FakeFamilyEmbedder(), tmp_path / name), llm


def _mem_rows(out):
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {r["probe_session"]: r for r in rows if r["arm"] == "memory"}


# ------------------------------------------------------------------ strict
def test_strict_point_runs_gaias_pass_and_skillsynth_recalls_its_procedures(gaia, tmp_path):
    res, llm = _point(tmp_path, "pt")
    p = res.summary["pass"]
    # window: the six 3-step sessions (jira's 2-step runs are below min_steps); two clusters
    assert (p["status"], p["sessions"], p["qualified"], p["distilled"], p["added"],
            p["updated"], p["noop"], p["left_for_later"]) == ("ran", 6, 2, 2, 2, 0, 0, 0)
    assert (p["llm_calls"], llm.calls) == (2, 2)
    assert tuple(p["handed"]) == INVOICE + MAIL
    # GAIA's own request: its system prompt, temperature and token budget
    msgs, kw = llm.requests[0]
    assert msgs[0] == {"role": "system", "content": gaia.DISTILL_SYSTEM_PROMPT}
    assert (kw["temperature"], kw["max_tokens"]) == (gaia.DISTILL_TEMPERATURE,
                                                     gaia.DISTILL_MAX_TOKENS)
    assert "Recurring user goal:\nanswer the mail 1" in msgs[1]["content"]
    # GAIA's rows and marks, read by GAIA
    g = _gaia_store(res.out_dir / "history.db")
    try:
        rows = {r["name"]: r for r in g.search_skills(enabled_only=True, with_embedding=True)}
        marks = g.get_synthesis_marks()
    finally:
        g.close()
    assert set(rows) == {"answer-the-mail-1", "find-the-invoice-1"}
    assert set(p["procedure_ids"]) == {r["id"] for r in rows.values()}
    assert rows["find-the-invoice-1"]["provenance"] == {"source": "synthesized",
                                                        "from_sessions": list(INVOICE)}
    assert {s: m["outcome"] for s, m in marks.items()} == dict.fromkeys(INVOICE + MAIL,
                                                                        "distilled")
    # the when_to_use vector GAIA stored is skillsynth's embedder's, unit length
    with MemoryStore.open(res.out_dir / "history.db", read_only=True) as s:
        proc = next(x for x in s.procedures() if x.name == "find-the-invoice-1")
    want = FakeFamilyEmbedder().embed([proc.when_to_use])[0]
    assert proc.vector().tolist() == pytest.approx(want.tolist())
    # skillsynth recalls GAIA's procedures: invoice and mail probes hit, jira has none
    rows_by = _mem_rows(res.out_dir)
    by_name = {r["id"]: n for n, r in rows.items()}
    assert [by_name[i] for i in rows_by["invoice-4"]["recalled_ids"]] == ["find-the-invoice-1"]
    assert [by_name[i] for i in rows_by["mail-4"]["recalled_ids"]] == ["answer-the-mail-1"]
    assert rows_by["jira-4"]["recalled_ids"] == []
    assert res.kpis["recall_hit_rate"].value == pytest.approx(2 / 3)
    assert res.summary["versions"]["distill_prompt"] == gs.gaia_distill_prompt_version()
    assert res.summary["floors"]["memory-disabled"] and \
        res.summary["floors"]["synthesis-disabled"]


def test_a_pass_spends_two_distillations_and_leaves_the_rest_for_later(gaia, tmp_path):
    res, _ = _point(tmp_path, "pt", th=TH2)
    p = res.summary["pass"]
    # three clusters qualify; GAIA distils the first two seeds (mail, jira) and stops
    assert (p["sessions"], p["qualified"], p["distilled"], p["left_for_later"],
            p["llm_calls"]) == (9, 3, 2, 1, 2)
    assert tuple(p["handed"]) == JIRA + MAIL
    left = ("1 qualified cluster(s) left for a later pass (GAIA's max_distill_calls_per_pass "
            "2, max_clusters_per_pass 10)")
    assert p["skipped"] == (("cluster", left),)
    assert res.kpis["recall_hit_rate"].value == pytest.approx(2 / 3)  # invoice-4 misses
    # the floor pass with a dead model reached the left-over invoice cluster, wrote nothing
    assert res.summary["floors"]["llm-unavailable"] is True
    # skillsynth's re-implementation distils all three in one pass
    greedy = run_point(EvalConfig(str(tmp_path / "tiny.db"), strategy="gaia-greedy",
                                  thresholds=TH2, n_boot=200), FakeDistiller(),
                       FakeFamilyEmbedder(), tmp_path / "greedy")
    assert greedy.summary["pass"]["distilled"] == 3
    # GAIA's marks: the next pass reads only the invoice sessions and distils them
    shipped, emb = get_strategy("gaia-shipped"), FakeFamilyEmbedder()
    with MemoryStore.open(res.out_dir / "history.db") as s:
        again = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH2)
        assert again is not None
        assert (again.sessions, again.qualified, again.distilled, again.added,
                again.left_for_later, again.llm_calls, again.handed) == \
            (3, 1, 1, 1, 0, 1, INVOICE)
        last = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH2)
        assert last is not None and (last.sessions, last.qualified, last.llm_calls) == (0, 0, 0)
        assert len(s.procedures(active_only=True)) == 3


# ------------------------------------------------------------------ rolling
def test_rolling_passes_reach_every_cluster_because_gaias_marks_exclude_consumed(gaia,
                                                                                  tmp_path):
    res, llm = _point(tmp_path, "roll", th=TH2, attempts=5, protocol="rolling", cadence=3)
    passes = [(x["at_session"], x["read"], x["qualified"], x["distilled"], x["left_for_later"],
               x["llm_calls"]) for x in res.summary["split"]["passes"]]
    # by day 4 every family has 3 runs; the pass distils mail and jira, leaves invoice; the
    # next one reads only the unmarked sessions (invoice-1..4, mail-4, jira-4) and distils it
    assert passes == [(3, 3, 0, 0, 0, 0), (6, 6, 0, 0, 0, 0), (9, 9, 3, 2, 1, 2),
                      (12, 6, 1, 1, 0, 1)]
    assert llm.calls == 3
    # probes of day 4 find mail and jira only; day 5's find all three
    rows = _mem_rows(res.out_dir)
    hits = {s: bool(r["recalled_ids"]) for s, r in rows.items()}
    assert hits == {"mail-4": True, "jira-4": True, "invoice-4": False,
                    "invoice-5": True, "mail-5": True, "jira-5": True}
    assert res.kpis["recall_hit_rate"].value == pytest.approx(5 / 6)
    g = _gaia_store(res.out_dir / "history.db")
    try:
        # the watermark stops below the oldest unconsumed session (mail-4, day 4)
        assert g.get_synthesis_watermark() == "2026-01-03T10:00:08.000000+00:00"
        assert set(g.get_synthesis_marks()) == set(INVOICE + MAIL + JIRA) | {"invoice-4"}
    finally:
        g.close()


# ------------------------------------------------------------------ off-states
def _history(tmp_path, th=TH2):
    """The strict history store after one gaia-shipped pass (mail and jira distilled)."""
    res, _ = _point(tmp_path, "pt", th=th)
    return res.out_dir / "history.db"


def test_a_model_that_raises_is_llm_unavailable_and_changes_no_procedure(gaia, tmp_path):
    db = _history(tmp_path)
    shipped, emb = get_strategy("gaia-shipped"), FakeFamilyEmbedder()
    with MemoryStore.open(db) as s:
        before = s.execute("SELECT * FROM procedures ORDER BY id")
        marks = s.execute("SELECT session_id FROM synthesis_marks ORDER BY session_id")
        down = shipped.synthesize(s, FakeBrokenChat(), emb, TH2)
        assert down is not None and down.status == "llm-unavailable"
        assert "FAKE: the chat server is down" in down.message
        assert (down.qualified, down.distilled, down.handed, down.left_for_later) == \
            (1, 0, (), 1)
        assert s.execute("SELECT * FROM procedures ORDER BY id") == before
        assert s.execute("SELECT session_id FROM synthesis_marks ORDER BY session_id") == marks
        # GAIA left the cluster unmarked, so the next pass with a working model distils it
        up = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH2)
        assert up is not None and (up.status, up.added, up.handed) == ("ran", 1, INVOICE)


def test_a_fault_that_is_no_model_failure_is_raised_not_hidden(gaia, tmp_path):
    class FakeBuggyChat(FakeGaiaDistiller):
        """FAKE chat client with a bug (GAIA's driver would swallow it as 'Lemonade down')."""

        def chat(self, messages, **kw):
            raise KeyError("FAKE bug")

    db = _history(tmp_path)
    with MemoryStore.open(db) as s, pytest.raises(KeyError, match="FAKE bug"):
        get_strategy("gaia-shipped").synthesize(s, FakeBuggyChat(), FakeFamilyEmbedder(), TH2)


def test_skip_and_malformed_answers_are_marked_unusable_and_reported(gaia, tmp_path):
    llm = FakeGaiaDistiller(skip=("mail",), garble=("invoice",))
    res, _ = _point(tmp_path, "pt", llm=llm)
    p = res.summary["pass"]
    assert (p["status"], p["distilled"], p["added"], p["llm_calls"]) == ("ran", 0, 0, 2)
    assert p["skipped"] == (("mail-1,mail-2,mail-3", "model answered SKIP"),
                            ("invoice-1,invoice-2,invoice-3",
                             "malformed: GAIA's parser rejected the document"))
    assert res.summary["floors"]["malformed-skipped"] is True
    g = _gaia_store(res.out_dir / "history.db")
    try:
        assert {m["outcome"] for m in g.get_synthesis_marks().values()} == {"unusable"}
    finally:
        g.close()


def test_disabled_states_run_gaias_driver_and_write_nothing(gaia, tmp_path):
    db = tiny_corpus(tmp_path)  # a corpus is a history store too; work on it directly
    shipped, llm = get_strategy("gaia-shipped"), FakeGaiaDistiller()
    loader = gs.importlib.import_module(gs._SETTINGS_MODULE)._load_memory_settings
    with MemoryStore.open(db) as s:
        off = shipped.synthesize(s, llm, FakeFamilyEmbedder(), TH, memory_disabled=True)
        no = shipped.synthesize(s, llm, FakeFamilyEmbedder(), TH.merge(enabled=False))
        assert (off.status, no.status, llm.calls) == ("memory-disabled", "synthesis-disabled", 0)
        assert s.procedures() == [] and s.execute("SELECT * FROM synthesis_marks") == []
    # the settings loader is GAIA's own again once a pass is over
    assert gs.importlib.import_module(gs._SETTINGS_MODULE)._load_memory_settings is loader


# ------------------------------------------------------------------ configuration
def test_thresholds_reach_gaia_as_its_settings_block(gaia):
    block = gs.gaia_settings_block(Thresholds(similarity_tau=0.7, recall_tau=0.5,
                                              reconcile_tau=0.9, min_steps=2))
    assert block == {"enabled": True, "min_steps": 2, "min_occurrences": 3,
                     "min_success_rate": 0.8, "similarity_tau": 0.7,
                     "max_clusters_per_pass": 10, "max_recall_body_chars": 1500}
    assert set(block) <= {f for f in gaia.SynthesisConfig.__dataclass_fields__}


def test_rate_session_is_refused_for_gaias_pass(gaia, tmp_path):
    with pytest.raises(ConfigError, match="per-call success rate"):
        EvalConfig(str(tmp_path / "c.db"), strategy="gaia-shipped", rate="session")


def test_without_amd_gaia_the_strategy_names_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(gs, "installed_gaia_version", lambda: None)
    with pytest.raises(EvaluationError, match=r"pip install 'skillsynth\[gaia\]'"):
        get_strategy("gaia-shipped")
    with pytest.raises(EvaluationError, match="amd-gaia is not installed"):
        EvalConfig(str(tmp_path / "c.db"), strategy="gaia-shipped")
    assert get_strategy("gaia-greedy").name == "gaia-greedy"  # the others need no GAIA


def test_sweeps_take_gaia_shipped_beside_gaia_greedy(gaia, tmp_path):
    import yaml

    from skillsynth.evaluation.sweeps.run import SweepSpec, expand_points

    spec = {"name": "t", "corpus": {"db": "c.db"}, "backend": "local",
            "grid": {"strategy": ["gaia-greedy", "gaia-shipped"], "similarity_tau": [0.8]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    points = expand_points(SweepSpec.load(tmp_path / "s.yaml"))
    assert [p.strategy for p in points] == ["gaia-greedy", "gaia-shipped"]
    assert points[0].synthesis_key != points[1].synthesis_key  # never share a synthesis
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec | {"rate": "session"}))
    with pytest.raises(ConfigError, match="per-call success rate"):
        SweepSpec.load(tmp_path / "s.yaml")


def test_an_untested_amd_gaia_runs_with_a_warning_naming_both_versions(monkeypatch):
    pytest.importorskip("packaging")
    monkeypatch.setattr(gs, "installed_gaia_version", lambda: "0.27.0")
    with pytest.warns(UserWarning, match=r"amd-gaia 0\.27\.0 is installed; .*>=0\.25\.1,<0\.26"):
        assert gs.require_gaia() == "0.27.0"


def test_a_failure_mid_pass_keeps_what_gaia_wrote_before_it(gaia, tmp_path):
    from skillsynth.errors import LLMUnavailable

    class FakeFlakyChat(FakeGaiaDistiller):
        """FAKE chat client whose server goes down after its first answer."""

        def chat(self, messages, **kw):
            if self.calls:
                raise LLMUnavailable("FAKE: down after one answer")
            return super().chat(messages, **kw)

    with MemoryStore.open(tiny_corpus(tmp_path, attempts=3)) as s:
        r = get_strategy("gaia-shipped").synthesize(s, FakeFlakyChat(), FakeFamilyEmbedder(), TH)
        assert r is not None
        # GAIA wrote mail's procedure before the second call failed (skillsynth's pass
        # would have written nothing); invoice stays unmarked for the next pass
        assert (r.status, r.added, r.handed, r.left_for_later) == \
            ("llm-unavailable", 1, MAIL, 1)
        assert [p.name for p in s.procedures()] == ["answer-the-mail-1"]


def test_distillations_go_through_skillsynths_client_and_call_cache(gaia, tmp_path):
    from fakes import LEMONADE_RECORDED, FakeServer

    from skillsynth.models.cache import CallCache
    from skillsynth.models.llm import ChatClient, Endpoint

    doc = ("---\nname: find-invoice\nwhen_to_use: The user asks to find an invoice\n"
           "tools_required: [search_file, read_file]\n---\n\n# Find\n\n1. Call search_file\n"
           "\n## Edge cases\n- none\n")
    answer = {"choices": [{"message": {"role": "assistant", "content": doc},
                           "finish_reason": "stop"}]}
    routes = {("GET", "/api/v1/models"): (200, LEMONADE_RECORDED["models"]),
              ("POST", "/api/v1/chat/completions"): (200, answer)}
    shipped = get_strategy("gaia-shipped")
    with FakeServer(routes) as srv, CallCache(tmp_path / "cache.db") as cache:
        ep = Endpoint("lemonade", srv.base_url, "Gemma-4-E4B-it-GGUF")
        reports = []
        for run in ("cold", "warm"):  # two copies of the same history
            with MemoryStore.open(tiny_corpus(tmp_path / run, attempts=3)) as s:
                reports.append(shipped.synthesize(s, ChatClient(ep, cache=cache),
                                                  FakeFamilyEmbedder(), TH))
                active = s.procedures(active_only=True)
        posts = [r for r in srv.requests if r[0] == "POST"]
    cold, warm = reports
    assert (cold.llm_calls, cold.cache_hits, warm.llm_calls, warm.cache_hits) == (2, 0, 0, 2)
    assert len(posts) == 2 and posts[0][2]["temperature"] == 0.1
    assert posts[0][2]["messages"][0]["content"] == gaia.DISTILL_SYSTEM_PROMPT
    # one answer for both clusters: GAIA matches the second by meaning and supersedes the
    # first with the lineage's sessions (mail's, then invoice's)
    assert (warm.added, warm.updated, warm.noop) == (1, 1, 0)
    assert len(active) == 1 and active[0].provenance["from_sessions"] == list(MAIL + INVOICE)
