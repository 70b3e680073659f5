"""Faults a hostile but fair user meets: a killed import, a second writer during a pass, a
misbehaving model server, hostile model answers.

Real processes, real SQLite files and real sockets on loopback; only the models are FAKES
(named so). The only timed assertions are bounds a hang or a held lock would blow, with wide
margins; the measured figures are printed (``pytest -s``) for the record.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fakes import BadServer
from gaia_legacy import dump_rows

from skillsynth.config import Thresholds
from skillsynth.corpora import import_corpus, labels_path_for
from skillsynth.models.chat import ChatClient
from skillsynth.models.llm import Endpoint
from skillsynth.pipeline.export import export_skill
from skillsynth.pipeline.skill import PROFILES, Skill, _split_frontmatter, validate_dir
from skillsynth.pipeline.synthesize import synthesize_skills
from skillsynth.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
TABLES = {"tool_history": ["session_id", "tool_name", "args", "result_summary", "success",
                           "error", "duration_ms", "timestamp"],
          "conversations": ["session_id", "role", "content", "timestamp"]}
TOOLS = ("search_file", "read_file", "write_file", "query_documents")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_jsonl(path: Path, sessions: int) -> Path:
    """A JSONL corpus written directly in the importer's format: 4 calls, a goal and a label
    per session, explicit timestamps (so a resumed import must equal a clean one row for row)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(sessions):
            for j, tool in enumerate(TOOLS):
                obj: dict = {"session_id": f"s{i:05d}", "tool_name": tool,
                             "args": {"q": i, "step": j}, "result_summary": f"ok {i}",
                             "success": True, "duration_ms": 10 + j,
                             "timestamp": f"2026-01-05T09:{i % 60:02d}:{j:02d}.000000+00:00"}
                if j == 0:
                    obj["goal"] = f"Find the invoice number {i}"
                    obj["label"] = {"task_id": f"t{i % 7}", "success": i % 5 != 0}
                fh.write(json.dumps(obj) + "\n")
    return path


def _counts(db: Path) -> dict[str, int]:
    """Row counts a duplicate would change, read with a plain read-only connection."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        q = {"tool_history": "SELECT COUNT(*) FROM tool_history",
             "sessions": "SELECT COUNT(DISTINCT session_id) FROM tool_history",
             "turns": "SELECT COUNT(*) FROM conversations",
             "goal_turns_twice": "SELECT COUNT(*) FROM (SELECT session_id FROM conversations "
                                 "WHERE role = 'user' GROUP BY session_id HAVING COUNT(*) > 1)"}
        out = {k: conn.execute(v).fetchone()[0] for k, v in q.items()}
    finally:
        conn.close()
    lab = sqlite3.connect(f"file:{labels_path_for(db)}?mode=ro", uri=True)
    try:
        out["labels"] = lab.execute("SELECT COUNT(*) FROM session_labels").fetchone()[0]
    finally:
        lab.close()
    return out


def _rows_now(db: Path) -> int:
    """tool_history rows a concurrent reader sees now (0 while the file is being created)."""
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT COUNT(*) FROM tool_history").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


# ------------------------------------------------------------------ 1. kill -9 during import
def test_an_import_killed_again_and_again_resumes_to_exactly_the_clean_corpus(tmp_path):
    # a kill lands anywhere, also between a session's commit to memory.db and its label's;
    # the re-run must neither lose nor write twice any session, call, turn or label
    src = _write_jsonl(tmp_path / "c.jsonl", 300)
    clean = tmp_path / "clean.db"
    import_corpus("jsonl", src, clean)
    want, want_rows = _counts(clean), dump_rows(clean, TABLES)
    assert want == {"tool_history": 1200, "sessions": 300, "turns": 300,
                    "goal_turns_twice": 0, "labels": 300}
    db = tmp_path / "killed.db"
    cmd = [sys.executable, "-m", "skillsynth", "corpus", "import", "--format", "jsonl",
           str(src), str(db)]
    figures = []
    for _ in range(3):
        before = _rows_now(db)
        proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            t0 = time.monotonic()
            while _rows_now(db) < before + 240 and proc.poll() is None:
                assert time.monotonic() - t0 < 60, "the import wrote nothing in 60 s"
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        figures.append((before, _rows_now(db)))
    assert all(b < a < want["tool_history"] for b, a in figures)  # each kill mid-way
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    print(f"\nkill -9 during import: tool_history rows before/after each kill {figures}; "
          f"after the re-run {_counts(db)} (clean: {want})")
    assert _counts(db) == want
    assert dump_rows(db, TABLES) == want_rows  # not only counts: the same rows


# ------------------------------------------------------------------ 2. two writers
_PASS = r"""
import json, sys, time
from fakes import FakeDistiller, FakeFamilyEmbedder
from skillsynth.config import Thresholds
from skillsynth.pipeline.synthesize import synthesize_skills
from skillsynth.store import MemoryStore

class FakeSlowDistiller(FakeDistiller):
    '''FAKE chat model: FakeDistiller's answers, each after a second of "thinking".'''

    def chat(self, messages, **kw):
        time.sleep(1.0)
        return super().chat(messages, **kw)

t0 = time.monotonic()
with MemoryStore.open(sys.argv[1]) as store:
    rep = synthesize_skills(store, FakeSlowDistiller(), FakeFamilyEmbedder(), Thresholds(),
                            mode="json")
print(json.dumps({"status": rep.status, "added": rep.added, "calls": rep.llm_calls,
                  "qualified": rep.qualified,
                  "seconds": time.monotonic() - t0}))
"""

_WRITER = r"""
import json, sys, time
from pathlib import Path
from skillsynth.store import MemoryStore

db, ready, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
longest, n = 0.0, 0
with MemoryStore.open(db) as store:
    while not stop.exists():
        t0 = time.monotonic()
        store.log_tool_call(f"gaia-{n}", "search_file", {"n": n}, "ok", True)
        longest = max(longest, time.monotonic() - t0)
        n += 1
        ready.touch()
        time.sleep(0.01)
print(json.dumps({"writes": n, "longest_wait": longest}))
"""


def test_a_pass_and_a_concurrent_writer_both_succeed_and_the_writer_never_waits_long(tmp_path):
    # GAIA keeps logging tool calls while a pass waits on its (slow) model: the pass must
    # hold no lock across model calls, so no write waits longer than one reconcile write
    from skillsynth.corpora import generate_corpus

    gen = generate_corpus(tmp_path / "m.db", families=3, attempts=5, seed=1)
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(gen.db_path), str(ready),
                               str(stop)], env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not ready.exists():
            assert writer.poll() is None, writer.communicate()[1]
            assert time.monotonic() - t0 < 30
            time.sleep(0.01)
        synth = subprocess.run([sys.executable, "-c", _PASS, str(gen.db_path)], env=ENV,
                               capture_output=True, text=True, timeout=120, check=False)
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=30)
    assert synth.returncode == 0, synth.stderr
    assert writer.returncode == 0, err
    rep, w = json.loads(synth.stdout), json.loads(out)
    print(f"\ntwo writers: pass {rep['seconds']:.2f} s ({rep['calls']} model calls, "
          f"{rep['added']} added); concurrent writer: {w['writes']} writes, longest wait "
          f"{w['longest_wait'] * 1000:.0f} ms")
    assert rep["status"] == "ran" and rep["added"] == rep["calls"] == rep["qualified"] >= 2
    # a lock held across even one 1 s model call would make some write wait about 1 s
    assert w["longest_wait"] < min(0.8, rep["seconds"] / 4)
    with MemoryStore.open(gen.db_path, read_only=True) as store:
        assert store.execute("PRAGMA integrity_check") == [("ok",)]
        assert store.execute("SELECT COUNT(*) FROM tool_history WHERE session_id LIKE "
                             "'gaia-%'") == [(w["writes"],)]
        assert len(store.procedures()) == rep["added"]


# ------------------------------------------------------------------ 3. misbehaving servers
def _invoice_sessions(store: MemoryStore, n: int = 3) -> None:
    for i in range(n):
        with store.transaction():
            for t in ("search_file", "read_file", "write_file"):
                store.log_tool_call(f"inv{i}", t, {"q": i}, "ok", True)
            store.add_turn(f"inv{i}", "user", f"Find the invoice number {i}")


@pytest.mark.parametrize(("fault", "status", "said"), [
    ("http-500", "llm-unavailable", "HTTP 500"),
    ("hang", "llm-unavailable", "did not answer in time"),
    ("trickle", "llm-unavailable", "did not answer in time"),
    ("closed", "llm-unavailable", "closed the connection"),
    ("not-json", "llm-unavailable", "non-JSON"),
    ("empty-body", "llm-unavailable", "non-JSON"),
    ("no-choices", "llm-unavailable", "without choices"),
    ("empty-answer", "ran", "malformed"),
    ("null-answer", "ran", "malformed"),
])
def test_a_misbehaving_model_server_ends_the_pass_in_time_and_writes_nothing(
        tmp_path, fault, status, said):
    from fakes import FakeFamilyEmbedder

    db = tmp_path / "memory.db"
    with MemoryStore.init(db) as store:
        _invoice_sessions(store)
    before = _sha(db)
    # 1 s per request, one retry: the pass must give up after about 2 s whatever the server
    # does; 15 s is a bound only a request without an overall deadline would blow
    ep = Endpoint("local", "http://127.0.0.1:1/v1", "m", timeout_s=1.0, max_retries=1,
                  retry_backoff_s=0.05, connect_timeout_s=1.0)
    with BadServer(fault) as srv, MemoryStore.open(db) as store, \
            ChatClient(ep.with_(base_url=srv.base_url)) as llm:
        t0 = time.monotonic()
        rep = synthesize_skills(store, llm, FakeFamilyEmbedder(), Thresholds())
        took = time.monotonic() - t0
    print(f"\n{fault}: {rep.status} after {took:.2f} s; store sha256 "
          f"{'unchanged' if _sha(db) == before else 'CHANGED'}")
    assert took < 15
    assert rep.status == status and rep.added == 0
    assert said in (rep.message if status != "ran" else rep.skipped[0][1])
    if status == "ran":
        # the answer came back, unusable: as GAIA does, the cluster is marked so that no
        # later pass asks again, and that (with the watermark) is all that was written
        assert rep.qualified == 1 and len(rep.skipped) == 1
        with MemoryStore.open(db, read_only=True) as store:
            marks = store.synthesis_marks()
            assert {m.outcome for m in marks.values()} == {"unusable"}
            assert sorted(marks) == sorted(rep.handed) and len(marks) == rep.marked_unusable
            assert store.procedures() == [] and store.synthesis_watermark() == rep.watermark
    else:
        assert _sha(db) == before  # nothing was written: not a meta row, not a page


# ------------------------------------------------------------------ 4. hostile text
RTL, LONG = "\u202e", "x" * 100_000
_FAMILY_GOALS = ("Find the invoice {i}", "Answer the email {i}", "Check ticket {i}",
                 "Run the tests {i}", "Save a note {i}", "Ingest folder {i}",
                 "Summarise the report {i}", "Compare the report {i} with last year's")
_HOSTILE_GOALS = ("---\nname: evil\n---", "!!python/object/apply:os.system ['id']",
                  f"{RTL}gnp.exe", "🧾✈️🚀", "a\x00b", LONG)


def _front(name: str, when: str, body: str = "1. Call search_file.\n\n## Edge cases\n- ask"
           ) -> str:
    return (f"---\nname: {name}\nwhen_to_use: {when}\ntools_required:\n  - search_file\n"
            f"---\n\n{body}\n")


#: FAKE model answers in the intermediate shape: the first four are skills with hostile text
#: in safe places, the rest hostile documents that must be rejected.
YAML_ANSWERS = (
    _front("find-invoice", '"Find an invoice 🧾 ✈️ !!python/object/apply:os.system [id]"',
           "1. Call search_file.\n---\n!!python/object/apply:os.system ['id']\n---\n\n"
           "## Edge cases\n- none"),
    _front("read-mail", f'"Read the e-mail --- {RTL}gnp.exe"'),
    _front("jira-ticket", '"Look up a jira ticket"', f"1. Call search_file {LONG}\n\n"
           "## Edge cases\n- none"),
    _front("run-tests", '"Run the tests: a ---\\nname: evil"'),
    _front("save-note", "!!python/object/apply:os.system ['touch pwned']"),
    _front("index-folder", '"Index a folder\n---\nname: evil"'),
    _front("summary", '"Summarise a report \\u0000"'),
    _front("../../etc/passwd", '"Compare a report"'),
)
#: The same hostile text as json-mode answers (json.dumps escapes it, as a server does).
JSON_ANSWERS = tuple(json.dumps({
    "name": name, "when_to_use": when, "tools_required": ["search_file"],
    "steps": steps, "edge_cases": ["ask"], "skip": False}) for name, when, steps in (
    ("find-invoice", "Find an invoice 🧾 !!python/object/apply:os.system [id]",
     ["Call search_file", "---", "!!python/object/apply:os.system ['id']"]),
    ("read-mail", f"Read the e-mail --- {RTL}gnp.exe", ["Call search_file"]),
    ("jira-ticket", "Look up a jira ticket", [f"Call search_file {LONG}"]),
    ("run-tests", "Run the tests ---\nname: evil", ["Call search_file"]),
    ("save-note", "Save a note \x00", ["Call search_file"]),
    ("index-folder", LONG, ["Call search_file"]),
    ("summary", "Summarise a report", ["Call search_file\x00"]),
    ("../../etc/passwd", "Compare a report", ["Call search_file"]),
))


class FakeHostileModel:
    """FAKE chat model: hands out the given answers one per call, in call order."""

    def __init__(self, answers: tuple[str, ...]):
        self.answers, self.calls, self.cache_hits = list(answers), 0, 0
        self.model_id = "fake-hostile"

    def ensure_ready(self) -> None:
        pass

    def chat(self, messages, **kw):
        from fakes import FakeAnswer

        self.calls += 1
        return FakeAnswer(self.answers.pop(0))


@pytest.mark.parametrize("mode", ["yaml", "json"])
def test_hostile_goals_and_answers_are_rejected_or_export_clean_skill_files(tmp_path, mode):
    from fakes import FakeFamilyEmbedder

    answers = YAML_ANSWERS if mode == "yaml" else JSON_ANSWERS
    db = tmp_path / "memory.db"
    with MemoryStore.init(db) as store:
        for f, goal in enumerate(_FAMILY_GOALS):
            for i in range(3):
                sid = f"f{f}s{i}"
                with store.transaction():
                    for t in ("search_file", "read_file", "write_file"):
                        store.log_tool_call(sid, t, {"q": i}, "ok", True)
                    hostile = _HOSTILE_GOALS[(f + i) % len(_HOSTILE_GOALS)] if i else ""
                    store.add_turn(sid, "user", f"{goal.format(i=i)} {hostile}")
        llm = FakeHostileModel(answers)
        rep = synthesize_skills(store, llm, FakeFamilyEmbedder(), Thresholds(), mode=mode)
        assert rep.status == "ran" and rep.qualified == llm.calls == len(answers)
        malformed = [why for _, why in rep.skipped if why.startswith("malformed")]
        assert rep.distilled + len(malformed) == rep.qualified  # each one counted somewhere
        assert (rep.distilled, rep.added) == (4, 4)  # hostile text in safe places is kept
        exported = 0
        for proc in store.procedures():
            for profile in PROFILES:
                out = export_skill(store, proc.id, tmp_path / profile, profile)  # re-reads
                assert validate_dir(out, profile) == []
                text = (out / "SKILL.md").read_text(encoding="utf-8")
                front, _ = _split_frontmatter(text)
                assert not any(isinstance(t, yaml.TagToken) for t in yaml.scan(front))
                assert "\x00" not in text and Skill.read(out, profile).name == proc.name
                exported += 1
    assert exported == 8
    print(f"\nhostile answers ({mode}): {rep.distilled} kept and exported under both "
          f"profiles, {len(malformed)} rejected as malformed")
