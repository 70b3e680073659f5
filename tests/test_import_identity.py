"""Imports never store a trajectory twice and never drop a valid one.

A session's id is its content's, so the same trajectories imported again from the same
file, a renamed or reformatted copy, a truncated copy or a merged folder leave the store's
rows as they were, while two runs of one task stay two sessions. With ``skip_bad`` a
malformed element of a JSON array costs only itself: reading resumes at the next element,
and where it cannot, the report says how much was unread and the import is partial.
Every check reads the real SQLite files.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillsynth.cli import main
from skillsynth.corpora import LabelStore, import_corpus, labels_path_for, tau2
from skillsynth.corpora.records import session_uuid
from skillsynth.errors import CorpusFormatError

#: Text that trips a reader which does not respect strings: brackets, braces, commas and
#: escaped quotes, including what looks like the start of the next record.
TRICKY = 'say \\"}], {\\"task_id\\": 99, [x]\\" and \\\\ done'


# ------------------------------------------------------------------ hand-made sources
def _tb_item(task_id: int, trial: int = 0, agent: str = "agent-a", n_calls: int = 2) -> dict:
    traj = [{"role": "system", "content": "policy {a: [1, 2]}"},
            {"role": "user", "content": json.loads(f'"{TRICKY}"')}]
    for k in range(n_calls):
        traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": f"tool_{k}", "arguments": json.dumps({"q": "a]\"b{"})}}]})
        traj.append({"role": "tool", "tool_call_id": "c1", "content": f"result {k} [ok]"})
    traj.append({"role": "assistant", "content": f"{agent}: done"})
    return {"task_id": task_id, "reward": 1.0, "traj": traj, "trial": trial,
            "info": {"task": {"instruction": f"Task {task_id}: \"fix\" [it]",
                              "actions": [{"name": "tool_0", "kwargs": {}}]}}}


def _sim(n: int, task: str = "t1", agent: str = "agent-a") -> dict:
    ts = f"2025-01-01T10:{n:02d}:00"
    return {"id": f"sim-{agent}-{n}", "task_id": task, "trial": 0, "start_time": ts,
            "reward_info": {"reward": 1.0},
            "messages": [
                {"role": "user", "content": json.loads(f'"{TRICKY}"'), "timestamp": ts},
                {"role": "assistant", "content": None, "timestamp": ts, "tool_calls": [
                    {"id": "c1", "name": "get_x", "arguments": {"q": "a]\"b{"},
                     "requestor": "assistant"}]},
                {"role": "tool", "id": "c1", "content": f"{agent} result {n} {{x}}",
                 "requestor": "assistant", "error": False, "timestamp": ts}]}


def _tau2_doc(sims: list, agent: str = "agent-a") -> dict:
    tasks = [{"id": f"t{k}", "user_scenario": {"instructions": {
        "reason_for_call": f"Do t{k} \"now\" [please]", "domain": "airline"}},
        "evaluation_criteria": {"actions": [{"name": "get_x", "arguments": {}}]}}
        for k in range(1, 6)]
    return {"info": {"agent_info": {"llm": agent}, "environment_info": {"domain_name": "airline"}},
            "tasks": tasks, "simulations": sims}


def _rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of GAIA's two session tables, and of the labels file."""
    out = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for t in ("tool_history", "conversations"):
            out[t] = conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
    with sqlite3.connect(f"file:{labels_path_for(db)}?mode=ro", uri=True) as conn:
        out["labels"] = conn.execute("SELECT * FROM session_labels ORDER BY session_id").fetchall()
    return out


def _sessions(db: Path) -> set[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {r[0] for r in conn.execute(
            "SELECT session_id FROM tool_history UNION SELECT session_id FROM conversations")}


def _consistent(db: Path) -> set[str]:
    """The sessions, checked to be exactly the labelled ones."""
    with LabelStore(labels_path_for(db)) as ls:
        assert ls.session_ids() == _sessions(db)
    return _sessions(db)


def _dump(path: Path, doc, *, indent: int | None = None) -> Path:
    text = json.dumps(doc, indent=indent)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


SOURCES = {
    "taubench": lambda: [_tb_item(t, trial) for trial in range(2) for t in range(3)],
    "tau2": lambda: _tau2_doc([_sim(n, f"t{n % 3 + 1}") for n in range(6)]),
}


# ------------------------------------------------------------------ identity by content
@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_the_same_file_again_or_a_renamed_reformatted_copy_leaves_the_rows_identical(
        tmp_path, fmt):
    doc = SOURCES[fmt]()
    src = _dump(tmp_path / "run.json", doc)
    db = tmp_path / "c.db"
    first = import_corpus(fmt, src, db)
    assert first.sessions_imported == 6
    before = _rows(db)
    (tmp_path / "elsewhere").mkdir()
    copies = [src, _dump(tmp_path / "elsewhere" / "renamed.json.gz", doc),
              _dump(tmp_path / "pretty-copy.json", doc, indent=2)]
    for copy in copies:
        rep = import_corpus(fmt, copy, db)
        assert (rep.sessions_imported, rep.already_present) == (0, 6), copy
        assert _rows(db) == before, copy
    assert len(_consistent(db)) == 6


@pytest.mark.parametrize("fmt", sorted(SOURCES))
def test_a_truncated_copy_leaves_the_rows_identical_with_or_without_skip_bad(tmp_path, fmt):
    doc = SOURCES[fmt]()
    src = _dump(tmp_path / "run.json", doc)
    db = tmp_path / "c.db"
    import_corpus(fmt, src, db)
    before = _rows(db)
    text = src.read_text()
    cut = tmp_path / "cut-copy.json"
    cut.write_text(text[: text.index("result", len(text) // 2)])  # inside a record
    with pytest.raises(CorpusFormatError, match=r"cut-copy\.json, record .*truncated"):
        import_corpus(fmt, cut, db)
    assert _rows(db) == before
    rep = import_corpus(fmt, cut, db, skip_bad=True)
    assert rep.sessions_imported == 0 and rep.already_present >= 2
    assert rep.status == "partial" and rep.partial_files == [str(cut)] and rep.unread_bytes > 0
    assert _rows(db) == before


def test_a_merged_folder_adds_only_the_new_session(tmp_path):
    items = [_tb_item(t) for t in range(4)]
    db = tmp_path / "c.db"
    import_corpus("taubench", _dump(tmp_path / "a.json", items[:3]), db)
    before = _sessions(db)
    merged = tmp_path / "merged"
    merged.mkdir()
    _dump(merged / "copy-of-a.json", items[:3])
    _dump(merged / "b.json", items[1:])  # overlaps a, adds task 3
    rep = import_corpus("taubench", merged, db)
    assert (rep.sessions_imported, rep.already_present) == (1, 5)
    assert before < _consistent(db) and len(_sessions(db)) == 4


def test_two_agents_runs_of_one_task_and_trial_stay_two_sessions(tmp_path):
    # same task, same trial, same calls and results: only the agents' words differ
    a, b = _tb_item(7, agent="agent-a"), _tb_item(7, agent="agent-b")
    db = tmp_path / "c.db"
    rep = import_corpus("taubench", [_dump(tmp_path / "agent-a.json", [a]),
                                     _dump(tmp_path / "agent-b.json", [b])], db)
    assert rep.sessions_imported == 2 and len(_consistent(db)) == 2
    with LabelStore(labels_path_for(db)) as ls:
        assert sorted(x.attempt for x in ls.all()) == [1, 2]  # two attempts at task 7
    # and a second trial of the same agent is a third
    c = _tb_item(7, trial=1, agent="agent-a")
    assert import_corpus("taubench", _dump(tmp_path / "c.json", [c]), db).sessions_imported == 1


def test_two_agents_tau2_files_of_one_task_stay_apart_and_a_bare_list_copy_is_recognised(
        tmp_path):
    db = tmp_path / "c.db"
    fa = _dump(tmp_path / "agent-a.json", _tau2_doc([_sim(1, "t1", "agent-a")], "agent-a"))
    fb = _dump(tmp_path / "agent-b.json", _tau2_doc([_sim(1, "t1", "agent-b")], "agent-b"))
    assert import_corpus("tau2", [fa, fb], db).sessions_imported == 2
    before = _rows(db)
    tasks = _dump(tmp_path / "tasks.json", _tau2_doc([])["tasks"])
    bare = _dump(tmp_path / "submission.json", [_sim(1, "t1", "agent-a")])
    rep = import_corpus("tau2", bare, db, tasks=tasks)
    assert (rep.sessions_imported, rep.already_present) == (0, 1)
    assert _rows(db) == before


def test_a_corpus_built_with_file_and_position_ids_is_not_given_second_copies(tmp_path):
    # corpora built before content ids named a tau-bench session by file name and
    # position, a tau2 one by its simulation id; both are read as they are, never renamed
    items = [_tb_item(t) for t in range(3)]
    src = _dump(tmp_path / "old.json", items)
    db = tmp_path / "c.db"
    import_corpus("taubench", src, db)
    legacy = {}
    with LabelStore(labels_path_for(db)) as ls:
        for x in ls.all():
            legacy[x.session_id] = session_uuid("taubench", "old.json", x.source_record,
                                                x.task_id, x.extra["trial"])
    _rename(db, [(old, new) for new, old in legacy.items()])
    lost = next(iter(legacy.values()))
    with sqlite3.connect(labels_path_for(db)) as conn:  # a kill lost one label
        conn.execute("DELETE FROM session_labels WHERE session_id = ?", (lost,))
    before = _sessions(db)
    rep = import_corpus("taubench", src, db)
    assert (rep.sessions_imported, rep.already_present, rep.labels_completed) == (0, 3, 1)
    assert _consistent(db) == before == set(legacy.values())
    rows = _rows(db)
    # a renamed, truncated copy: its old ids differ, what the store holds of them does not
    text = src.read_text()
    cut = tmp_path / "renamed-cut.json"
    cut.write_text(text[: text.index("result", len(text) * 3 // 4)])
    rep = import_corpus("taubench", cut, db, skip_bad=True)
    assert (rep.sessions_imported, rep.already_present) == (0, 2) and _rows(db) == rows
    # while another run of the same task and trial is a new session
    other = _tb_item(0, agent="agent-b", n_calls=1)
    assert import_corpus("taubench", _dump(tmp_path / "b.json", [other]), db
                         ).sessions_imported == 1

    sims = [_sim(n) for n in range(2)]
    db2 = tmp_path / "t2.db"
    import_corpus("tau2", _dump(tmp_path / "t2.json", _tau2_doc(sims)), db2)
    pairs = [(session_uuid("tau2", x["id"]), tau2.session_id(x["id"], x["task_id"], 0,
                                                             x["messages"])) for x in sims]
    assert _sessions(db2) == {new for _, new in pairs}
    _rename(db2, pairs)
    rep = import_corpus("tau2", _dump(tmp_path / "renamed.json", _tau2_doc(sims)), db2)
    assert (rep.sessions_imported, rep.already_present) == (0, 2)
    assert _consistent(db2) == {old for old, _ in pairs}


def _rename(db: Path, pairs: list[tuple[str, str]]) -> None:
    """Give sessions the ids an earlier release gave them: (old, new) pairs."""
    for path, tables in ((db, ("tool_history", "conversations")),
                         (labels_path_for(db), ("session_labels",))):
        with sqlite3.connect(path) as conn:
            for t in tables:
                conn.executemany(f"UPDATE {t} SET session_id = ? WHERE session_id = ?", pairs)
        conn.close()


# ------------------------------------------------------------------ recovery inside arrays
#: Malformed elements, opening as the file's others do (they come from the same writer),
#: each with a string holding brackets and escaped quotes.
BROKEN = {
    "unclosed-object": '{"task_id": 2, "reward": 0.0, "note": "%s", "info": {broken',
    "unterminated-string": '{"task_id": 2, "reward": 0.0, "note": "%s, "traj": []}',
    "double-colon": '{"task_id": 2, "reward": 0.0, "note": "%s", "reward":: 1, "traj": [{"a": [1]}]}',
    "stray-bracket": '{"task_id": 2, "reward": 0.0, "note": "%s", "traj": [[}]}',
}


def _with_broken(good: list[str], at: int, kind: str) -> str:
    parts = list(good)
    parts.insert(at, BROKEN[kind] % TRICKY)
    return "[\n" + ",\n".join(parts) + "\n]"


@pytest.mark.parametrize("kind", sorted(BROKEN))
@pytest.mark.parametrize("at", [0, 2, 4], ids=["start", "middle", "end"])
def test_skip_bad_keeps_every_valid_trajectory_around_a_malformed_one(tmp_path, at, kind):
    good = [json.dumps(_tb_item(t)) for t in (10, 11, 12, 13)]
    src = tmp_path / "tb.json"
    src.write_text(_with_broken(good, at, kind))
    db = tmp_path / "c.db"
    rep = import_corpus("taubench", src, db, skip_bad=True)
    assert rep.sessions_imported == 4 and len(_consistent(db)) == 4
    assert rep.records_skipped == 1 and [s["record"] for s in rep.skipped] == [at]
    with LabelStore(labels_path_for(db)) as ls:
        assert sorted(int(x.source_record) for x in ls.all()) == [i for i in range(5) if i != at]
    if at < 4 or kind in ("double-colon", "stray-bracket"):
        # a next record to resume at, or a last one whose brackets close before the ']'
        assert (rep.status, rep.unread_bytes) == ("ok", 0)
    else:  # nothing after the last element says where it ends: partial, and how much
        assert rep.status == "partial" and rep.unread_bytes == rep.skipped[0]["bytes"] > 0
    # without skip_bad: stop, naming file and record; what was written stays; re-run resumes
    strict = tmp_path / "strict.db"
    with pytest.raises(CorpusFormatError, match=rf"tb\.json, record {at}: not valid JSON"):
        import_corpus("taubench", src, strict)
    assert len(_sessions(strict)) == at if at else not strict.exists()


@pytest.mark.parametrize("bare", [False, True], ids=["simulations", "bare-list"])
@pytest.mark.parametrize("at", [0, 2, 4], ids=["start", "middle", "end"])
def test_skip_bad_keeps_every_valid_simulation_around_a_malformed_one(tmp_path, at, bare):
    sims = [json.dumps(_sim(n, f"t{n + 1}")) for n in range(4)]
    sims.insert(at, f'{{"id": "sim-x", "task_id": "t1", "note": "{TRICKY}", "messages": [{{bro')
    listing = "[" + ",\n".join(sims) + "]"
    doc = _tau2_doc([])
    if bare:
        text, tasks = listing, _dump(tmp_path / "tasks.json", doc["tasks"])
    else:
        head = json.dumps({k: v for k, v in doc.items() if k != "simulations"})
        text, tasks = head[:-1] + ', "simulations": ' + listing + "}", None
    src = tmp_path / "run.json"
    src.write_text(text)
    rep = import_corpus("tau2", src, tmp_path / "c.db", skip_bad=True, tasks=tasks)
    assert rep.sessions_imported == 4 and len(_consistent(tmp_path / "c.db")) == 4
    assert rep.records_skipped == 1 and [s["record"] for s in rep.skipped] == [
        f"simulations[{at}]"]
    assert rep.status == ("partial" if at == 4 else "ok")


def test_two_malformed_records_in_a_row_are_counted_as_two(tmp_path):
    good = [json.dumps(_tb_item(t)) for t in range(4)]
    parts = good[:2] + [BROKEN["unclosed-object"] % "a", BROKEN["unterminated-string"] % "b"] \
        + good[2:]
    src = tmp_path / "tb.json"
    src.write_text("[" + ", ".join(parts) + "]")
    rep = import_corpus("taubench", src, tmp_path / "c.db", skip_bad=True)
    assert rep.sessions_imported == 4 and rep.records_skipped == 2 and rep.status == "ok"
    with LabelStore(labels_path_for(tmp_path / "c.db")) as ls:  # positions stay true
        assert sorted(int(x.source_record) for x in ls.all()) == [0, 1, 4, 5]


def test_cli_reports_the_skipped_record_and_a_partial_import_in_its_exit_status(
        tmp_path, capsys):
    good = [json.dumps(_tb_item(t)) for t in range(4)]
    mid = tmp_path / "mid.json"
    mid.write_text(_with_broken(good, 2, "unclosed-object"))
    assert main(["corpus", "import", "--format", "taubench", "--skip-bad", str(mid),
                 str(tmp_path / "a.db")]) == 0
    out = capsys.readouterr().out
    assert "imported 4 sessions" in out and "1 bad records skipped" in out
    assert "partial" not in out
    cut = tmp_path / "cut.json"
    text = "[" + ", ".join(good) + "]"
    cut.write_text(text[: len(text) - 30])
    assert main(["corpus", "import", "--format", "taubench", "--skip-bad", str(cut),
                 str(tmp_path / "b.db")]) == 3
    out = capsys.readouterr().out
    assert "imported 3 sessions" in out and "partial import:" in out and "cut.json" in out
    assert main(["corpus", "import", "--format", "taubench", "--skip-bad", "--json", str(cut),
                 str(tmp_path / "b.db")]) == 3
    rep = json.loads(capsys.readouterr().out)
    assert rep["already_present"] == 3 and rep["status"] == "partial"


# ------------------------------------------------------------------ any cut of a valid file
def _layout(fmt: str) -> tuple[str, list[int]]:
    """A valid file's text and where each of its records ends (offset after its '}')."""
    if fmt == "taubench":
        parts = [json.dumps(_tb_item(t, trial)) for trial in range(2) for t in range(2)]
        head, tail = "[", "]"
    else:
        parts = [json.dumps(_sim(n, f"t{n + 1}")) for n in range(4)]
        doc = json.dumps({k: v for k, v in _tau2_doc([]).items() if k != "simulations"})
        head, tail = doc[:-1] + ', "simulations": [', "]}"
    ends, pos = [], len(head)
    for k, p in enumerate(parts):
        pos += len(p)
        ends.append(pos)
        pos += len(", ") if k < len(parts) - 1 else 0
    return head + ", ".join(parts) + tail, ends


@pytest.fixture(scope="module")
def full_corpora(tmp_path_factory):
    """Per format: the full file imported once (its db, and its sessions in file order)."""
    d = tmp_path_factory.mktemp("full")
    out = {}
    for fmt in SOURCES:
        text, _ = _layout(fmt)
        src = d / f"{fmt}.json"
        src.write_text(text)
        db = d / f"{fmt}.db"
        import_corpus(fmt, src, db)
        with LabelStore(labels_path_for(db)) as ls:
            order = sorted(ls.all(), key=lambda x: x.source_record)
        out[fmt] = (db, [x.session_id for x in order])
    return out


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(SOURCES)), frac=st.floats(0, 1))
def test_any_cut_of_a_valid_file_never_duplicates_and_never_loses_a_record_before_it(
        tmp_path_factory, full_corpora, fmt, frac):
    text, ends = _layout(fmt)
    k = round(frac * len(text))
    d = tmp_path_factory.mktemp("cut")
    cut = d / "copy.json"
    cut.write_bytes(text.encode()[:k])
    full_db, order = full_corpora[fmt]
    whole = [sid for sid, end in zip(order, ends, strict=True) if end <= k]
    # after the full file, the cut copy changes nothing
    db = d / "after.db"
    shutil.copy(full_db, db)
    shutil.copy(labels_path_for(full_db), labels_path_for(db))
    before = _rows(db)
    try:
        rep = import_corpus(fmt, cut, db, skip_bad=True)
        assert rep.sessions_imported == 0 and rep.already_present == len(whole)
    except CorpusFormatError:
        assert not whole  # only when the cut left no whole record
    assert _rows(db) == before
    # on its own, the cut copy keeps every record that ends before the cut
    alone = d / "alone.db"
    try:
        import_corpus(fmt, cut, alone, skip_bad=True)
    except CorpusFormatError:
        assert not whole
        return
    assert _consistent(alone) == set(whole)


# ------------------------------------------------------------------ JSONL ids: conflicts
def _jsonl(path: Path, sessions: dict[str, list[str]], *, stamped: bool = True) -> Path:
    """One line per call: session id -> its tools in order (each result names its tool)."""
    lines = []
    for sid, tools in sessions.items():
        for k, tool in enumerate(tools):
            obj = {"session_id": sid, "tool_name": tool, "args": {"q": sid},
                   "result_summary": f"{tool} ok", "success": True}
            if stamped:
                obj["timestamp"] = f"2026-01-05T09:00:0{k}.000000+00:00"
            if k == 0:
                obj["goal"] = f"do {sid}"
            lines.append(json.dumps(obj))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("stamped", [True, False])
def test_a_jsonl_id_arriving_again_with_other_content_is_a_counted_conflict(tmp_path, stamped):
    db = tmp_path / "c.db"
    first = _jsonl(tmp_path / "a.jsonl", {"s1": ["search", "read"], "s2": ["list"]},
                   stamped=stamped)
    assert import_corpus("jsonl", first, db).sessions_imported == 2
    before = _rows(db)
    # the same sessions from another file (made-up times differ there) are present, not
    # conflicts; s2 with another call is a conflict; s3 is new
    (tmp_path / "elsewhere").mkdir()
    again = _jsonl(tmp_path / "elsewhere" / "b.jsonl",
                   {"s0": ["x"], "s1": ["search", "read"], "s2": ["list", "delete"],
                    "s3": ["write"]}, stamped=stamped)
    plan = import_corpus("jsonl", again, db, dry_run=True)
    rep = import_corpus("jsonl", again, db)
    for r in (plan, rep):
        assert (r.sessions_imported, r.already_present, r.sessions_conflicting) == (2, 1, 1)
        assert r.conflicts == [{"file": str(again), "record": "line 4", "session_id": "s2"}]
    assert rep.status == "partial" and plan.status == "dry-run"
    after = _rows(db)
    assert [r for r in after["tool_history"] if r[1] == "s2"] == \
        [r for r in before["tool_history"] if r[1] == "s2"]  # left as it was
    assert _sessions(db) == {"s0", "s1", "s2", "s3"}


def test_two_jsonl_files_of_one_import_that_disagree_on_an_id_and_the_cli(tmp_path, capsys):
    a = _jsonl(tmp_path / "a.jsonl", {"s1": ["search"]})
    b = _jsonl(tmp_path / "b.jsonl", {"s1": ["search", "read"]})
    db = tmp_path / "c.db"
    plan = import_corpus("jsonl", [a, b], db, dry_run=True)
    assert not db.exists() and plan.conflicts == [
        {"file": str(b), "record": "line 1", "session_id": "s1"}]
    assert main(["corpus", "import", "--format", "jsonl", str(a), str(b), str(db)]) == 3
    out = capsys.readouterr().out
    assert "1 session(s) already in the corpus with other content" in out
    assert f"{b}, line 1: session 's1'" in out
    rep = import_corpus("jsonl", [a, b], db)  # again: a's is present, b's still conflicts
    assert (rep.already_present, rep.sessions_conflicting, rep.status) == (1, 1, "partial")
