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
    from skillsynth.models.chat import ChatClient
    from skillsynth.models.llm import Endpoint

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


# ------------------------------------------------------------------ verification
class FakeVerifier:
    """FAKE verifier: rejects a cluster holding a session of a family in ``reject``, raises
    LLMUnavailable for one in ``down``; says it spent two model calls on each try."""

    rule = "fake"

    def __init__(self, reject=(), down=()) -> None:
        self.reject, self.down = tuple(reject), tuple(down)
        self.seen: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, skill, cluster):
        from skillsynth.errors import LLMUnavailable
        from skillsynth.pipeline.verify import Verdict

        self.seen.append((skill.name, cluster.session_ids))
        fams = {s.split("-")[0] for s in cluster.session_ids}
        if fams & set(self.down):
            raise LLMUnavailable("FAKE: the verifier's model is down")
        bad = bool(fams & set(self.reject))
        return Verdict(self.rule, not bad, "FAKE: " + ("rejected" if bad else "verified"),
                       model_calls=2, cache_hits=1)


def _key(sessions):
    from types import SimpleNamespace

    from skillsynth.pipeline.verify import candidate_key

    return candidate_key("fake", SimpleNamespace(session_ids=tuple(sessions)))


def _rejected(db):
    from skillsynth.pipeline.verify import RejectedRecord, verify_path_for

    with RejectedRecord(verify_path_for(db), create=False) as rec:
        return rec.rejected(), rec.keys()


def test_a_rejected_procedure_is_withdrawn_recorded_and_its_cluster_left_pending(gaia,
                                                                                 tmp_path):
    db = tiny_corpus(tmp_path, attempts=3)
    shipped, emb, fake = get_strategy("gaia-shipped"), FakeFamilyEmbedder(), \
        FakeVerifier(reject=("mail",))
    with MemoryStore.open(db) as s:
        r = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH, verifier=fake)
        assert r is not None
        # GAIA distilled and stored both; verification withdrew mail's row before its mark
        assert (r.distilled, r.candidates, r.verified, r.rejected, r.added, r.noop) == \
            (2, 2, 1, 1, 1, 0)
        assert (r.verify, r.verify_calls, r.verify_cache_hits, r.llm_calls) == ("fake", 4, 2, 2)
        assert r.verify_seconds >= 0 and r.handed == INVOICE
        assert ("mail-1,mail-2,mail-3", "verification (fake) rejected it: FAKE: rejected") \
            in r.skipped
        (proc,) = s.procedures()
        assert proc.name == "find-the-invoice-1" and r.procedure_ids == (proc.id,)
        assert set(s.synthesis_marks(INVOICE + MAIL)) == set(INVOICE)
        # GAIA's watermark stops below mail-1, the oldest session left unmarked
        assert r.watermark == "2026-01-01T10:00:00.000000+00:00"
    rows, keys = _rejected(db)
    assert keys == {_key(MAIL)} and rows[0]["name"] == "answer-the-mail-1"
    assert rows[0]["members"] == list(MAIL) and rows[0]["reason"] == "FAKE: rejected"
    with MemoryStore.open(db) as s:
        # a later pass sees mail's sessions again (unmarked, above the watermark), clusters
        # them the same: rejected before, so neither distilled nor tried, nothing written
        again = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH, verifier=fake)
        assert again is not None
        assert (again.sessions, again.qualified, again.rejected_before, again.candidates,
                again.llm_calls, again.handed, again.left_for_later) == \
            (3, 1, 1, 0, 0, (), 0)
        assert len(fake.seen) == 2 and [p.name for p in s.procedures()] == [proc.name]
        # force tries it again: invoice is a NOOP (not verified), mail rejected once more
        forced = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH, verifier=fake,
                                    force=True)
        assert forced is not None
        assert (forced.rejected_before, forced.distilled, forced.candidates, forced.rejected,
                forced.noop, forced.llm_calls) == (0, 2, 1, 1, 1, 2)
        assert fake.seen[-1] == ("answer-the-mail-1", MAIL)
        assert [p.name for p in s.procedures()] == [proc.name]
    assert _rejected(db)[1] == {_key(MAIL)}  # replaced, not duplicated


def test_clusters_rejected_before_spend_none_of_gaias_two_distillations(gaia, tmp_path):
    db = tiny_corpus(tmp_path, attempts=3)
    shipped, emb = get_strategy("gaia-shipped"), FakeFamilyEmbedder()
    fake = FakeVerifier(reject=("mail", "jira"))
    with MemoryStore.open(db) as s:
        first = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH2, verifier=fake)
        assert first is not None
        # GAIA's two distillations go to mail and jira (seed order), both rejected
        assert (first.qualified, first.rejected, first.left_for_later, first.handed) == \
            (3, 2, 1, ())
        # the next pass holds both back before clustering: invoice gets a distillation
        llm = FakeGaiaDistiller()
        second = shipped.synthesize(s, llm, emb, TH2, verifier=fake)
        assert second is not None
        assert (second.qualified, second.rejected_before, second.distilled, second.verified,
                second.left_for_later, llm.calls, second.handed) == (3, 2, 1, 1, 0, 1, INVOICE)
        assert [p.name for p in s.procedures()] == ["find-the-invoice-1"]
    assert _rejected(db)[1] == {_key(MAIL), _key(JIRA)}


def test_a_cluster_verified_later_is_marked_and_its_rejection_forgotten(gaia, tmp_path):
    db = tiny_corpus(tmp_path, attempts=3)
    shipped, emb = get_strategy("gaia-shipped"), FakeFamilyEmbedder()
    with MemoryStore.open(db) as s:
        shipped.synthesize(s, FakeGaiaDistiller(), emb, TH, verifier=FakeVerifier(("mail",)))
        assert _rejected(db)[1] == {_key(MAIL)}
        ok = shipped.synthesize(s, FakeGaiaDistiller(), emb, TH, verifier=FakeVerifier(),
                                force=True)
        assert ok is not None and (ok.verified, ok.rejected, ok.added) == (1, 0, 1)
        assert set(s.synthesis_marks(INVOICE + MAIL)) == set(INVOICE + MAIL)
    assert _rejected(db)[1] == set()


def test_a_rejected_update_leaves_the_row_it_superseded_active(gaia, tmp_path):
    class FakeOneAnswer(FakeGaiaDistiller):
        """FAKE distiller answering the same procedure for every cluster."""

        def chat(self, messages, **kw):
            from fakes import FakeAnswer

            self.calls += 1
            return FakeAnswer("---\nname: find-invoice\nwhen_to_use: The user asks to find "
                              "an invoice\ntools_required: [search_file, read_file]\n---\n\n"
                              "# Find\n\n1. Call search_file\n\n## Edge cases\n- none\n")

    class FakeWatchingVerifier(FakeVerifier):
        """FAKE verifier that notes which rows are active when it is asked."""

        def __call__(self, skill, cluster):
            active.append([p.provenance["from_sessions"]
                           for p in s.procedures(active_only=True)])
            return super().__call__(skill, cluster)

    db = tiny_corpus(tmp_path, attempts=3)
    fake, active = FakeWatchingVerifier(reject=("invoice",)), []
    with MemoryStore.open(db) as s:
        r = get_strategy("gaia-shipped").synthesize(s, FakeOneAnswer(), FakeFamilyEmbedder(),
                                                    TH, verifier=fake)
        assert r is not None
        # mail's candidate (first seed) is ADDed; invoice's matches it by meaning and GAIA
        # UPDATEs (new row, mail's superseded); verification rejects it and undoes both
        assert [sessions for _, sessions in fake.seen] == [MAIL, INVOICE]
        assert active == [[list(MAIL)], [list(MAIL + INVOICE)]]
        assert (r.added, r.updated, r.verified, r.rejected) == (1, 0, 1, 1)
        (only,) = s.procedures()
        assert only.superseded_by is None and only.provenance["from_sessions"] == list(MAIL)
        assert s.procedures(active_only=True) == [only] and r.procedure_ids == (only.id,)
        assert set(s.synthesis_marks(INVOICE + MAIL)) == set(MAIL)


def test_a_verifier_model_failure_withdraws_the_row_and_ends_gaias_pass(gaia, tmp_path):
    db = tiny_corpus(tmp_path, attempts=3)
    llm = FakeGaiaDistiller()
    with MemoryStore.open(db) as s:
        r = get_strategy("gaia-shipped").synthesize(s, llm, FakeFamilyEmbedder(), TH,
                                                    verifier=FakeVerifier(down=("mail",)))
        assert r is not None and r.status == "llm-unavailable"
        assert "FAKE: the verifier's model is down" in r.message
        # mail (first) was distilled and withdrawn unverified; GAIA's next distillation
        # raised, so invoice is left for a later pass; nothing is stored, nothing marked
        assert (llm.calls, r.llm_calls, r.candidates, r.left_for_later, r.handed) == \
            (1, 1, 0, 1, ())
        assert s.procedures() == [] and s.synthesis_marks(INVOICE + MAIL) == {}
    assert _rejected(db)[1] == set()


def test_a_row_skillsynth_cannot_read_as_a_skill_is_withdrawn_and_marked_unusable(gaia,
                                                                                  tmp_path):
    import re

    class FakeNoTools(FakeGaiaDistiller):
        """FAKE distiller naming no tools (GAIA's parser takes it; a SKILL.md must name one)."""

        def chat(self, messages, **kw):
            answer = super().chat(messages, **kw)
            return type(answer)(re.sub(r"tools_required: \[.*\]", "tools_required: []",
                                       answer.content))

    db = tiny_corpus(tmp_path, attempts=3)
    fake = FakeVerifier()
    with MemoryStore.open(db) as s:
        r = get_strategy("gaia-shipped").synthesize(s, FakeNoTools(), FakeFamilyEmbedder(), TH,
                                                    verifier=fake)
        assert r is not None and fake.seen == []
        # as skillsynth's pass treats a malformed answer: not a candidate, consumed unusable
        assert (r.distilled, r.candidates, r.added, r.marked_unusable) == (0, 0, 0, 6)
        assert [why[:26] for _, why in r.skipped] == ["malformed: procedure proc_"] * 2
        assert "tools_required: is empty" in r.skipped[0][1]
        assert s.procedures() == []
        marks = s.synthesis_marks(INVOICE + MAIL).values()
        assert {m.outcome for m in marks} == {"unusable"} and len(marks) == 6
        assert all(m.detail.startswith("malformed: procedure ") for m in marks)


def test_a_strict_point_verifies_gaias_procedures_by_the_trace_rule(gaia, tmp_path):
    class FakeBackwardsMail(FakeGaiaDistiller):
        """FAKE distiller writing mail's steps in reverse (no mail run calls them so)."""

        def chat(self, messages, **kw):
            answer = super().chat(messages, **kw)
            if "answer-the-mail" not in answer.content:
                return answer
            steps = [x for x in answer.content.splitlines() if x[:1].isdigit()]
            tools = [x.split("Call ", 1)[1] for x in steps][::-1]
            swapped = "\n".join(f"{i}. Call {t}" for i, t in enumerate(tools, 1))
            return type(answer)(answer.content.replace("\n".join(steps), swapped))

    res, llm = _point(tmp_path, "pt", llm=FakeBackwardsMail(), verify="trace")
    p = res.summary["pass"]
    assert (p["verify"], p["distilled"], p["candidates"], p["verified"], p["rejected"],
            p["added"], p["verify_calls"]) == ("trace", 2, 2, 1, 1, 1, 0)
    assert tuple(p["handed"]) == INVOICE and llm.calls == 2
    k = res.kpis
    assert (k["verified_share"].value, k["verified_share"].n) == (0.5, 2)
    assert k["verify_calls_per_verified"].value == 0.0
    assert k["recall_hit_rate"].value == pytest.approx(1 / 3)  # invoice-4 only
    rows, _ = _rejected(res.out_dir / "history.db")
    assert [r["members"] for r in rows] == [list(MAIL)]
    assert "draft_reply > read_file > list_inbox not realised" in rows[0]["reason"]
    # the trace rule held out GAIA's exemplar (mail-1, first of equals): two tries
    assert [t["session"] for t in rows[0]["tries"]] == ["mail-2", "mail-3"]


def test_gaias_cluster_holds_out_all_but_gaias_exemplar():
    from skillsynth.evaluation.strategies.gaia_verify import GaiaCluster
    from skillsynth.pipeline.cluster import Cluster
    from skillsynth.pipeline.detect import SessionSequence
    from skillsynth.pipeline.verify import held_out
    from skillsynth.store import ToolCall

    def seq(sid, n):
        calls = tuple(ToolCall(sid, f"t{i}", "{}", None, True, f"2026-01-01T00:00:0{i}")
                      for i in range(n))
        return SessionSequence(sid, "goal", calls, calls, True)

    members = (seq("short", 2), seq("long", 3), seq("also-long", 3))
    # GAIA's prompt shows the run with the most successful calls (first of equals);
    # skillsynth's shows the shortest: each holds out the others
    assert GaiaCluster(members, "gaia-shipped", "calls", 1.0, True).representative() \
        is members[1]
    assert [m.session_id for m in held_out(GaiaCluster(members, "g", "calls", 1.0, True))[0]] \
        == ["short", "also-long"]
    assert Cluster(members, "g", "calls", 1.0, True).representative() is members[0]
