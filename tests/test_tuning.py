"""The computations behind the tuning notebook's views, on a labelled synthetic corpus.

The embedder and LLM are FAKES (tests/fakes.py): the family embedder puts each synthetic
family on its own axis, so the answers below are known exactly.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import FakeDistiller, FakeFamilyEmbedder

from skillsynth.config import Thresholds, load_thresholds
from skillsynth.corpora import NoiseConfig, generate_corpus
from skillsynth.errors import ConfigError
from skillsynth.evaluation.tuning.session import (
    PairSample,
    TuningSession,
    pair_stats,
    prompt_size,
    write_settings_block,
)
from skillsynth.pipeline.distill import distill
from skillsynth.pipeline.inject import TRUNCATION_MARKER

#: The synthetic families whose true procedure has >= 3 steps (GAIA's min_steps).
LONG = {"summarise-report", "reply-to-email", "run-tests", "index-folder", "compare-reports"}


@pytest.fixture
def session(tmp_path):
    gen = generate_corpus(tmp_path / "c.db", seed=0, attempts=5,
                          noise=NoiseConfig(0.0, 0.0, 0.0))
    return TuningSession.prepare(gen.db_path, FakeFamilyEmbedder())


def test_pair_stats_counts_exactly():
    s = PairSample(np.array([0.9, 0.8, 0.7, 0.2], np.float32),
                   np.array([True, False, True, False]), 4, False)
    st = pair_stats(s, 0.75)
    assert (st.predicted, st.same_family, st.precision, st.recall) == (2, 2, 0.5, 0.5)
    assert pair_stats(s, 0.95).precision is None and pair_stats(s, 0.95).recall == 0.0


def test_views_give_the_known_clusters_pairs_and_recalls(session):
    # 8 families x 3 history attempts; only the >= 3-step families are detected
    assert len(session.sequences) == 15 and len(session.probes) == 8
    p = session.pairs
    assert (len(p.cosines), int(p.same.sum())) == (105, 15)
    cfg = Thresholds(similarity_tau=0.8, min_occurrences=3)
    view = session.view(cfg, llm=FakeDistiller())
    assert (view.pairs.precision, view.pairs.recall) == (1.0, 1.0)
    assert sum(c.qualified for c in view.clusters) == 5 and view.not_distilled == 5
    assert view.procedures == [] and all(r.recalled == () for r in view.recalls)
    # the sliders that do not move tau re-judge the cached groups
    assert sum(c.qualified for c in session.clusters(cfg.merge(min_occurrences=4))) == 0
    assert len(session._groups) == 1
    # distil the qualified clusters once (what a pass pays for); the view then uses them
    llm = FakeDistiller()
    for c in view.clusters[:5]:
        distill(c, llm, cfg, "json")
    view = session.view(cfg, llm=llm)
    assert view.not_distilled == 0 and len(view.procedures) == 5 and llm.calls == 5
    decided = {r.family: r.right for r in view.recalls}
    assert decided == {f: (True if f in LONG else None) for f in decided}
    assert set(decided) == LONG | {"find-invoice", "jira-status", "save-notes"}
    assert view.summary()["right"] == 5
    frame = view.clusters_frame(session.families)
    assert sorted(frame["families"]) == sorted(LONG) and set(frame["size"]) == {3}


def test_prompt_size_shows_the_truncation(session):
    llm = FakeDistiller()
    cfg = Thresholds(similarity_tau=0.8, max_recall_body_chars=10)
    for c in session.clusters(cfg):
        if c.qualified:
            distill(c, llm, cfg, "json")
    view = session.view(cfg, llm=llm)
    assert view.prompt.truncated >= 1 and TRUNCATION_MARKER in view.prompt.block
    assert view.prompt.tokens_estimate == -(-view.prompt.chars // 4)
    wide = prompt_size([p.skill for p in view.procedures[:1]], cfg.merge(
        max_recall_body_chars=10_000))
    assert wide.truncated == 0 and TRUNCATION_MARKER not in wide.block


def test_settings_block_round_trips_and_refuses_to_overwrite(tmp_path):
    cfg = Thresholds(similarity_tau=0.41, min_occurrences=2, min_success_rate=0.6,
                     max_recall_body_chars=900)
    out = write_settings_block(cfg, tmp_path / "memory_settings.json")
    assert load_thresholds(out, env={}) == cfg
    with pytest.raises(ConfigError, match="file exists"):
        write_settings_block(Thresholds(), out)
    assert load_thresholds(out, env={}) == cfg  # untouched
    gaia = tmp_path / "gaia.json"
    gaia.write_text(json.dumps({"retention_days": 30, "skill_synthesis": {"enabled": False}}))
    write_settings_block(cfg, gaia, overwrite=True)
    data = json.loads(gaia.read_text())
    assert data["retention_days"] == 30 and Thresholds.from_memory_settings(gaia) == cfg


def test_a_users_own_gaia_db_is_tuned_read_only_without_labels(tmp_path):
    import hashlib

    from skillsynth.store import MemoryStore

    db = tmp_path / "memory.db"
    with MemoryStore.init(db) as s:
        for i in range(4):
            with s.transaction():
                for t in ("search_file", "read_file", "draft_reply"):
                    s.log_tool_call(f"u{i}", t, {"i": i}, "ok", True)
                s.add_turn(f"u{i}", "user", f"reply to the mail from person {i}")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    ts = TuningSession.prepare(db, FakeFamilyEmbedder())
    view = ts.view(Thresholds(similarity_tau=0.8, min_occurrences=3))
    assert [c.size for c in view.clusters if c.qualified] == [4]
    assert view.recalls == [] and view.pairs.precision is None and len(ts.pairs.cosines) == 0
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not (tmp_path / "memory.db-wal").exists()


class RecordingDisplay:
    """Stands in for IPython's display: keeps every shown object and every in-place update."""

    def __init__(self):
        self.shown, self.updates = [], []

    def __call__(self, obj, display_id=False, **kw):
        self.shown.append(obj)
        rec = self

        class Handle:
            def update(self, new):
                rec.updates.append(new)
        return Handle() if display_id else None


def test_the_tuning_app_renders_and_its_widgets_rerender_in_place(tmp_path):
    # The notebook's application without a kernel: widgets built, a slider moved, the view
    # under them updated in place; the settings button refuses to overwrite, then writes.
    import ipywidgets  # noqa: F401  (the notebooks extra; the README's test command installs it)

    from skillsynth.evaluation.tuning.app import TuningApp

    gen = generate_corpus(tmp_path / "c.db", seed=0, attempts=5,
                          noise=NoiseConfig(0.0, 0.0, 0.0))
    shown = RecordingDisplay()
    llm = FakeDistiller()
    app = TuningApp([str(gen.db_path)], llm, FakeFamilyEmbedder(), display=shown)
    start = Thresholds(similarity_tau=0.8, min_occurrences=3)
    assert app.session(str(gen.db_path)).distill_missing(start, llm) == 5
    app.show(start, "agglomerative", tmp_path / "memory_settings.json")
    box, summary, *_ = shown.shown
    assert type(box).__name__ == "VBox" and summary["tau"] == 0.8
    assert summary["distilled"] == 5 and summary["right"] == 5
    app.controls["min_occurrences"].value = 4  # as if moved by hand
    moved = shown.updates[0]
    assert (moved["min_occurrences"], moved["qualified_clusters"]) == (4, 0)
    assert len(shown.updates) == 5  # every part updated in place, none shown again
    path = tmp_path / "memory_settings.json"
    path.write_text("{}")
    assert app.write_settings().startswith("not written")
    app.controls["overwrite"].value = True
    assert app.write_settings().startswith("written")
    assert load_thresholds(path, env={}).min_occurrences == 4
