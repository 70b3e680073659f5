"""Importers: the shipped real corpora, the JSONL round trip, and broken inputs."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
import yaml
from gaia_legacy import dump_rows

from skillsynth.cli import main
from skillsynth.corpora import (
    LabelStore,
    corpus_stats,
    export_jsonl,
    generate_corpus,
    import_corpus,
    labels_path_for,
)
from skillsynth.errors import CorpusFormatError
from skillsynth.store import MemoryStore

DATASETS = Path(__file__).resolve().parent.parent / "datasets"
TB = DATASETS / "taubench-airline-gpt4o" / "gpt-4o-airline.json.gz"
T2A = DATASETS / "tau2-airline"
T2R = DATASETS / "tau2-retail"
TABLES = {"tool_history": ["session_id", "tool_name", "args", "result_summary", "success",
                           "error", "duration_ms", "timestamp"],
          "conversations": ["session_id", "role", "content", "timestamp"]}


def _raw(path: Path):
    return json.loads(gzip.decompress(path.read_bytes()))


def _tau2_results(folder: Path) -> list[dict]:
    return [_raw(f) for f in sorted(folder.glob("*.json.gz")) if not f.name.startswith("tasks")]


def _assert_manifest(stats, folder: Path) -> None:
    """The manifest's expected statistics hold (floats to the 4 decimals it gives)."""
    got = stats.as_dict()
    for key, want in yaml.safe_load((folder / "manifest.yaml").read_text())["expected"].items():
        assert got[key] == (pytest.approx(want, abs=1e-4) if isinstance(want, float) else want), key


# ------------------------------------------------------------------ shipped corpora
@pytest.mark.parametrize("folder", ["taubench-airline-gpt4o", "tau2-airline", "tau2-retail"])
def test_shipped_files_are_the_upstream_bytes_with_license_and_manifest(folder):
    d = DATASETS / folder
    man = yaml.safe_load((d / "manifest.yaml").read_text())
    assert (d / "LICENSE").read_text().startswith("MIT License")
    assert (d / "PROVENANCE.txt").exists()
    for f in man["files"]:
        data = gzip.decompress((d / f["name"]).read_bytes())
        assert hashlib.sha256(data).hexdigest() == f["upstream_sha256"], f["name"]


def test_taubench_import_matches_the_raw_file(tmp_path):
    raw = _raw(TB)
    rep = import_corpus("taubench", TB, tmp_path / "tb.db")
    st = corpus_stats(tmp_path / "tb.db")
    # independent counts from the raw list
    tasks = Counter(x["task_id"] for x in raw)
    tool_msgs = [m for x in raw for m in x["traj"] if m["role"] == "tool"]
    with_calls = sum(any(m["role"] == "tool" for m in x["traj"]) for x in raw)
    assert (rep.sessions_imported, st.sessions, st.tasks) == (len(raw), 200, 50)
    assert set(tasks.values()) == {4} and st.attempts_per_task == {"min": 4, "median": 4.0,
                                                                   "max": 4}
    assert st.tool_calls == rep.calls_imported == len(tool_msgs)
    assert st.sessions_with_calls == with_calls == 200 - rep.sessions_without_calls
    errors = sum(m["content"].startswith("Error") for m in tool_msgs)
    assert st.call_success_rate == pytest.approx(1 - errors / len(tool_msgs))
    assert st.session_success_rate == pytest.approx(sum(x["reward"] >= 1 for x in raw) / 200)
    assert rep.flags == {"synthetic-timestamps": 200}
    _assert_manifest(st, TB.parent)
    with LabelStore(labels_path_for(tmp_path / "tb.db")) as ls:
        labels = ls.all()
    # attempts follow the trials (true repeated trials), and ground truth is labels-only
    assert all(x.attempt == x.extra["trial"] + 1 for x in labels)
    first = next(x for x in raw if x["info"]["task"]["actions"])
    lab = next(x for x in labels if x.task_id == str(first["task_id"]) and x.attempt == 1)
    assert [a["name"] for a in lab.actions] == [a["name"] for a in first["info"]["task"]["actions"]]


def test_taubench_timestamps_are_monotone_per_session(tmp_path):
    import_corpus("taubench", TB, tmp_path / "tb.db")
    with MemoryStore.open(tmp_path / "tb.db", read_only=True) as s:
        for sid in s.session_ids()[:20]:
            ts = [c.timestamp for c in s.tool_calls(sid)] + [t.timestamp for t in s.turns(sid)]
            assert ts == sorted(ts) and len(set(ts)) == len(ts)


@pytest.mark.parametrize("folder,sessions,tasks", [(T2A, 90, 50), (T2R, 80, 40)])
def test_tau2_import_matches_the_raw_files(tmp_path, folder, sessions, tasks):
    results = _tau2_results(folder)
    sims = [s for r in results for s in r["simulations"]]
    rep = import_corpus("tau2", folder, tmp_path / "t.db")
    st = corpus_stats(tmp_path / "t.db")
    agent_replies = [m for s in sims for m in s["messages"]
                     if m["role"] == "tool" and m.get("requestor", "assistant") == "assistant"]
    assert (rep.sessions_imported, st.sessions, st.tasks) == (len(sims), sessions, tasks)
    assert st.tool_calls == len(agent_replies)
    assert st.call_success_rate == pytest.approx(
        1 - sum(bool(m.get("error")) for m in agent_replies) / len(agent_replies))
    assert st.session_success_rate == pytest.approx(
        sum(s["reward_info"]["reward"] >= 1 for s in sims) / len(sims))
    _assert_manifest(st, folder)
    with MemoryStore.open(tmp_path / "t.db", read_only=True) as s:
        goals = {t.content for t in s.turns(role="user")}
    own = {t["id"]: t for r in results for t in r["tasks"]}
    assert goals == {own[x["task_id"]]["user_scenario"]["instructions"]["reason_for_call"].strip()
                     for x in sims}


def test_tau2_falls_back_to_the_tasks_file(tmp_path):
    doc = _raw(T2A / "gpt-4.1_airline_default_gpt-4.1_1trials.json.gz")
    doc["tasks"] = []
    src = tmp_path / "no_tasks.json"
    src.write_text(json.dumps(doc))
    with pytest.raises(CorpusFormatError, match=r"record simulations\[0\].*task_id.*--tasks"):
        import_corpus("tau2", src, tmp_path / "a.db")
    rep = import_corpus("tau2", src, tmp_path / "b.db", tasks=T2A / "tasks_airline_HEAD.json.gz")
    assert rep.sessions_imported == len(doc["simulations"])


def test_reimport_leaves_existing_sessions_alone(tmp_path):
    import_corpus("tau2", T2R, tmp_path / "r.db")
    before = dump_rows(tmp_path / "r.db", TABLES)
    again = import_corpus("tau2", T2R, tmp_path / "r.db")
    assert (again.sessions_imported, again.already_present) == (0, 80)
    assert dump_rows(tmp_path / "r.db", TABLES) == before


def test_a_session_whose_label_was_lost_in_a_kill_is_not_written_twice(tmp_path):
    # a kill between a session's commit to memory.db and its label's commit leaves the
    # session in the database only; the re-run must add the label, not the session again
    db = tmp_path / "r.db"
    import_corpus("tau2", T2R, db)
    before = dump_rows(db, TABLES)
    with sqlite3.connect(labels_path_for(db)) as conn:
        lost = [r[0] for r in conn.execute("SELECT session_id FROM session_labels LIMIT 6")]
        conn.executemany("DELETE FROM session_labels WHERE session_id = ?", [(x,) for x in lost])
    again = import_corpus("tau2", T2R, db)
    assert (again.sessions_imported, again.already_present, again.labels_completed) == (0, 80, 6)
    assert dump_rows(db, TABLES) == before  # no row written twice
    with LabelStore(labels_path_for(db)) as ls:
        assert len(ls.all()) == 80 and set(lost) <= ls.session_ids()


# ------------------------------------------------------------------ pairing and shapes
def _traj_item(task_id=0, trial=0, calls=(), reward=1.0):
    traj = [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"}]
    for batch in calls:
        traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": a}}
            for cid, n, a, _ in batch]})
        traj += [{"role": "tool", "tool_call_id": cid, "name": n, "content": out}
                 for cid, n, _, out in batch]
    return {"task_id": task_id, "trial": trial, "reward": reward, "traj": traj,
            "info": {"task": {"instruction": f"You want task {task_id}", "actions": []}}}


def _write_list(path: Path, items) -> Path:
    path.write_text(json.dumps(items))
    return path


def test_repeated_call_ids_pair_by_order_and_errors_and_non_json_args(tmp_path):
    item = _traj_item(calls=[
        [("c1", "get_user", '{"id": 1}', "user ok"), ("c1", "get_booking", "{not json", "bk")],
        [("c1", "cancel", "{}", "Error: not allowed")]])
    rep = import_corpus("taubench", _write_list(tmp_path / "t.json", [item]), tmp_path / "t.db")
    with MemoryStore.open(tmp_path / "t.db", read_only=True) as s:
        calls = s.tool_calls()
    assert [(c.tool_name, c.result_summary, c.success) for c in calls] == [
        ("get_user", "user ok", True), ("get_booking", "bk", True), ("cancel", None, False)]
    assert calls[1].args == "{not json" and calls[2].error == "Error: not allowed"
    assert rep.flags == {"non-json-args": 1, "synthetic-timestamps": 1}


def test_session_without_tool_calls_keeps_its_goal_and_label(tmp_path):
    rep = import_corpus("taubench", _write_list(tmp_path / "t.json", [_traj_item()]),
                        tmp_path / "t.db")
    assert (rep.sessions_imported, rep.sessions_without_calls, rep.calls_imported) == (1, 1, 0)
    st = corpus_stats(tmp_path / "t.db")
    assert (st.sessions, st.sessions_with_calls, st.sessions_with_goal) == (1, 0, 1)


# ------------------------------------------------------------------ broken inputs
def _good(n):
    return [_traj_item(task_id=i, calls=[[("a", "search", "{}", "ok")]]) for i in range(n)]


def _session_count(db: Path) -> int:
    with MemoryStore.open(db, read_only=True) as s:
        return len(s.session_ids())


def test_truncated_json_keeps_earlier_sessions_and_names_the_record(tmp_path):
    text = json.dumps(_good(3))
    src = tmp_path / "cut.json"
    src.write_text(text[: len(text) - 40])
    with pytest.raises(CorpusFormatError, match=r"cut\.json.*record 2.*truncated"):
        import_corpus("taubench", src, tmp_path / "c.db")
    assert _session_count(tmp_path / "c.db") == 2
    with LabelStore(labels_path_for(tmp_path / "c.db")) as ls:
        assert len(ls.all()) == 2 and ls.builds()[-1]["status"] == "failed"


@pytest.mark.parametrize("breakage,field", [
    (lambda x: x.pop("traj"), "'traj'"),
    (lambda x: x["info"]["task"].pop("instruction"), "'info.task.instruction'"),
    (lambda x: x["traj"].insert(2, {"role": "tool", "tool_call_id": "z", "content": "?"}),
     r"'traj\[2\]'"),
    (lambda x: x["traj"][2]["tool_calls"][0]["function"].update(arguments="x" * 10_000_000),
     r"'traj\[2\]\.tool_calls\[0\]\.function\.arguments'"),
])
def test_broken_record_is_named_or_skipped_and_others_are_intact(tmp_path, breakage, field):
    items = _good(3)
    breakage(items[1])
    src = _write_list(tmp_path / "b.json", items)
    with pytest.raises(CorpusFormatError, match=rf"b\.json.*record 1.*field {field}"):
        import_corpus("taubench", src, tmp_path / "stop.db")
    assert _session_count(tmp_path / "stop.db") == 1
    rep = import_corpus("taubench", src, tmp_path / "skip.db", skip_bad=True)
    assert rep.sessions_imported == 2 and [s["record"] for s in rep.skipped] == [1]
    assert _session_count(tmp_path / "skip.db") == 2


def test_invalid_utf8_is_named_or_skipped(tmp_path):
    items = _good(3)
    items[1]["info"]["task"]["instruction"] = "MARK"
    raw = json.dumps(items).encode().replace(b"MARK", b"caf\xe9 \xff")
    src = tmp_path / "u.json"
    src.write_bytes(raw)
    with pytest.raises(CorpusFormatError, match=r"record 1.*info\.task\.instruction.*UTF-8"):
        import_corpus("taubench", src, tmp_path / "u.db")
    rep = import_corpus("taubench", src, tmp_path / "v.db", skip_bad=True)
    assert rep.sessions_imported == 2 and len(rep.skipped) == 1


def test_jsonl_bad_line_skips_only_its_session(tmp_path):
    lines = [{"session_id": "a", "tool_name": "t", "success": True, "goal": "do a"},
             {"session_id": "b", "tool_name": "t"},  # no success
             {"session_id": "b", "tool_name": "u", "success": True},
             {"session_id": "c", "tool_name": "t", "success": False, "error": "boom"},
             {"session_id": "d", "tool_name": "t", "success": True, "args": {"q": "a\u0000b"}}]
    src = tmp_path / "x.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n{broken\n")
    rep = import_corpus("jsonl", src, tmp_path / "x.db", skip_bad=True)
    assert rep.sessions_imported == 2 and len(rep.skipped) == 3
    assert {s["record"] for s in rep.skipped} == {"line 2", "line 5", "line 6"}
    assert any("NUL" in s["error"] for s in rep.skipped)
    with MemoryStore.open(tmp_path / "x.db", read_only=True) as s:
        assert s.session_ids() == ["a", "c"] and s.turns("a")[0].content == "do a"


# ------------------------------------------------------------------ round trip, gaia-db
def test_generated_corpus_round_trips_through_jsonl(tmp_path):
    gen = generate_corpus(tmp_path / "g.db", families=4, attempts=3, seed=3)
    n = export_jsonl(gen.db_path, tmp_path / "g.jsonl")
    rep = import_corpus("jsonl", tmp_path / "g.jsonl", tmp_path / "back.db")
    assert rep.calls_imported == n and rep.sessions_imported == gen.sessions
    assert dump_rows(gen.db_path, TABLES) == dump_rows(tmp_path / "back.db", TABLES)
    with LabelStore(gen.labels_path) as a, LabelStore(labels_path_for(tmp_path / "back.db")) as b:
        assert a.all() == b.all()


def test_gaia_db_import_is_read_only_and_reports_goalless_sessions(tmp_path):
    src = tmp_path / "memory.db"
    with MemoryStore.init(src) as s:
        s.log_tool_call("s1", "read_file", {"p": "a"}, "ok", True)
        s.add_turn("s1", "user", "read a")
        s.log_tool_call("s2", "search_file", None, None, False, error="nope")
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    rep = import_corpus("gaia-db", src, tmp_path / "corpus.db")
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before
    assert (rep.sessions_imported, rep.sessions_without_goal) == (2, 1)
    assert rep.sessions_without_goal_ids == ["s2"]
    assert dump_rows(src, TABLES) == dump_rows(tmp_path / "corpus.db", TABLES)
    with LabelStore(labels_path_for(tmp_path / "corpus.db")) as ls:
        assert {x.task_id for x in ls.all()} == {None}  # a user's DB has no ground truth
    with pytest.raises(CorpusFormatError, match="must not be the source"):
        import_corpus("gaia-db", src, src)


def test_cli_import_stats_export(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert main(["corpus", "import", "--format", "tau2", str(T2R), str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions_imported"] == 80
    assert main(["corpus", "stats", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == 40
    assert main(["corpus", "export", str(db), str(tmp_path / "r.jsonl")]) == 0
    assert sum(1 for _ in (tmp_path / "r.jsonl").open()) == 591
    assert main(["corpus", "import", "--format", "taubench", str(tmp_path / "none.json"),
                 str(db)]) == 1
    assert "none.json" in capsys.readouterr().err
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM tool_history").fetchone()[0] == 591
    conn.close()


def test_synthetic_manifest_rebuilds_what_it_promises(tmp_path):
    man = yaml.safe_load((DATASETS / "synthetic-8" / "manifest.yaml").read_text())
    assert man["rebuild"].startswith("skillsynth corpus generate --families 8 --seed 0")
    generate_corpus(tmp_path / "s.db", families=8, seed=0, attempts=5)
    _assert_manifest(corpus_stats(tmp_path / "s.db"), DATASETS / "synthetic-8")


def test_tau2_accepts_a_bare_list_of_simulations_with_a_tasks_file(tmp_path):
    doc = _raw(T2A / "gpt-4.1_airline_default_gpt-4.1_1trials.json.gz")
    bare = tmp_path / "submission.json"
    bare.write_text(json.dumps(doc["simulations"]))
    rep = import_corpus("tau2", bare, tmp_path / "b.db", tasks=T2A / "tasks_airline_HEAD.json.gz")
    full = import_corpus("tau2", T2A / "gpt-4.1_airline_default_gpt-4.1_1trials.json.gz",
                         tmp_path / "f.db")
    assert rep.sessions_imported == full.sessions_imported == len(doc["simulations"])
    with LabelStore(labels_path_for(tmp_path / "b.db")) as a, \
            LabelStore(labels_path_for(tmp_path / "f.db")) as b:
        assert sorted(x.task_id for x in a.all()) == sorted(x.task_id for x in b.all())
        assert all(x.task_id.startswith("airline/") for x in a.all())


def test_a_broken_trajectory_mid_file_costs_only_itself_with_skip_bad(tmp_path):
    items = _raw(TB)[:4]
    good = [json.dumps(x) for x in items]
    broken = good[1].replace('"reward":', '"reward"::', 1)  # a syntax error inside item 1
    src = tmp_path / "tb.json"
    src.write_text("[" + ",\n".join([good[0], broken, good[2], good[3]]) + "]")
    rep = import_corpus("taubench", src, tmp_path / "a.db", skip_bad=True)
    assert rep.sessions_imported == 3 and [s["record"] for s in rep.skipped] == [1]
    with pytest.raises(CorpusFormatError, match="record 1"):
        import_corpus("taubench", src, tmp_path / "b.db")  # without --skip-bad: stops


def test_the_wrong_format_with_skip_bad_is_an_error_not_an_empty_corpus(tmp_path):
    with pytest.raises(CorpusFormatError, match="is --format right"):
        import_corpus("jsonl", TB, tmp_path / "w.db", skip_bad=True)


def test_the_same_corpus_built_twice_has_the_same_digest(tmp_path):
    import time

    from skillsynth.corpora import corpus_digest

    import_corpus("tau2", T2R, tmp_path / "a.db")
    time.sleep(1.1)  # schema_version.migrated_at differs between the two files
    import_corpus("tau2", T2R, tmp_path / "b.db")
    assert corpus_digest(tmp_path / "a.db") == corpus_digest(tmp_path / "b.db")
    with MemoryStore.open(tmp_path / "b.db") as store:
        store.add_turn("extra", "user", "one more goal")
    assert corpus_digest(tmp_path / "a.db") != corpus_digest(tmp_path / "b.db")


def test_a_failed_or_empty_import_leaves_no_empty_corpus_and_a_partial_one_says_so(
        tmp_path, caplog):
    import logging

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    db = tmp_path / "e.db"
    with pytest.raises(CorpusFormatError, match="no record in the file"):
        import_corpus("jsonl", empty, db)
    assert not db.exists() and not labels_path_for(db).exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session_id": "a", "tool_name": "t"}\n')  # no success: a bad record
    with pytest.raises(CorpusFormatError, match="success"):
        import_corpus("jsonl", bad, db)
    assert not db.exists() and not labels_path_for(db).exists()
    good = tmp_path / "a-good.jsonl"
    good.write_text('{"session_id": "g", "tool_name": "t", "success": true}\n')
    with caplog.at_level(logging.WARNING, "skillsynth.corpora.importing"), \
            pytest.raises(CorpusFormatError):
        import_corpus("jsonl", [good, bad], db)
    assert "1 session(s) from" in caplog.text and "a-good.jsonl" in caplog.text
    with MemoryStore.open(db, read_only=True) as store:
        assert store.session_ids() == ["g"]  # kept: a re-run resumes
    rep = import_corpus("jsonl", [good, empty], db)
    assert rep.already_present == 1 and rep.empty_files == [str(empty)]
