"""The importers under generated input: any JSONL file of good and bad records imports exactly
the good ones with ``skip_bad`` and, without it, fails naming the file and the first bad
line. Also the wording of JSON syntax errors in every reader."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillsynth.corpora import import_corpus
from skillsynth.errors import CorpusFormatError

#: Bad lines that are no session's (the record is the line) ...
LONE_BAD = {
    "not-json": '{"session_id": "x", "tool_name": "t", ',
    "unterminated": '{"session_id": "x", "tool_name": "t',
    "not-object": "[1, 2]",
    "no-session": '{"tool_name": "t", "success": true}',
    "session-not-text": '{"session_id": 7, "tool_name": "t", "success": true}',
    "nul": '{"session_id": "z", "tool_name": "a\\u0000b", "success": true}',
}
#: ... and bad lines that spoil their whole session (``{sid}`` is the session's own id).
SESSION_BAD = {
    "no-success": '{{"session_id": "{sid}", "tool_name": "t"}}',
    "success-not-bool": '{{"session_id": "{sid}", "tool_name": "t", "success": "yes"}}',
    "bad-timestamp": '{{"session_id": "{sid}", "tool_name": "t", "success": true, '
                     '"timestamp": "yesterday"}}',
    "bad-duration": '{{"session_id": "{sid}", "tool_name": "t", "success": true, '
                    '"duration_ms": "slow"}}',
}


def _good_line(sid: str, k: int, with_goal: bool) -> str:
    obj = {"session_id": sid, "tool_name": f"tool_{k}", "args": {"k": k},
           "success": k % 2 == 0, "timestamp": f"2026-01-05T09:00:{k:02d}.000000+00:00"}
    if with_goal:
        obj["goal"] = f"goal of {sid}"
    return json.dumps(obj)


@st.composite
def corpora(draw):
    """(lines in file order with their kind, good session -> call count)."""
    good = draw(st.dictionaries(st.sampled_from([f"g{i}" for i in range(6)]),
                                st.integers(1, 3), max_size=5))
    tagged: list[tuple[str, str]] = []
    for sid, n in good.items():
        tagged += [(_good_line(sid, k, k == 0), "good") for k in range(n)]
    for j, kind in enumerate(draw(st.lists(st.sampled_from(sorted(LONE_BAD) +
                                                          sorted(SESSION_BAD)), max_size=4))):
        if kind in LONE_BAD:
            tagged.append((LONE_BAD[kind], "bad"))
        else:
            sid = f"b{j}"
            tagged.append((SESSION_BAD[kind].format(sid=sid), "bad"))
            tagged += [(_good_line(sid, k, False), "spoilt")
                       for k in range(draw(st.integers(0, 2)))]
    return draw(st.permutations(tagged)), good


hyp = settings(max_examples=25, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def _imported(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute(
            "SELECT session_id, COUNT(*) FROM tool_history GROUP BY session_id").fetchall())
    finally:
        conn.close()


@hyp
@given(corpus=corpora())
def test_skip_bad_imports_exactly_the_good_records_and_strict_names_the_first_bad_line(
        tmp_path_factory, corpus):
    tagged, good = corpus
    d = tmp_path_factory.mktemp("prop")
    src = d / "c.jsonl"
    src.write_text("".join(f"{line}\n" for line, _ in tagged), encoding="utf-8")
    bad_lines = [n for n, (_, kind) in enumerate(tagged, 1) if kind == "bad"]
    if good:
        rep = import_corpus("jsonl", src, d / "skip.db", skip_bad=True)
        assert _imported(d / "skip.db") == good
        assert rep.sessions_imported == len(good) and rep.calls_imported == sum(good.values())
        assert len(rep.skipped) == len(bad_lines)  # a spoilt session is one record
    elif tagged:  # nothing valid at all: an error, not an empty corpus
        with pytest.raises(CorpusFormatError, match="none of"):
            import_corpus("jsonl", src, d / "skip.db", skip_bad=True)
    if not bad_lines:
        return
    with pytest.raises(CorpusFormatError) as err:
        import_corpus("jsonl", src, d / "strict.db")
    assert err.value.file == str(src)
    assert err.value.record == f"line {bad_lines[0]}", str(err.value)
    assert str(err.value).startswith(f"{src}, record line {bad_lines[0]}")


# ------------------------------------------------------------------ JSON error wording
@pytest.mark.parametrize(("fmt", "name", "text", "said"), [
    ("jsonl", "a.jsonl", '{"session_id": "a", "tool_name": "t\n',
     "not valid JSON (Unterminated string starting at column 34)"),
    ("jsonl", "b.jsonl", '{"session_id": "a", "tool_name": "t\tx", "success": true}\n',
     "not valid JSON (Invalid control character at column 36)"),
    ("jsonl", "c.jsonl", '{"session_id" "a"}\n',
     "not valid JSON (Expecting ':' delimiter at column 15)"),
    ("taubench", "d.json", '[{"task_id": "unterminated}]',
     "not valid JSON (Unterminated string starting at line 1 column 14)"),
    ("tau2", "e.json", '{"simulations": [], "info": "x',
     "not valid JSON (Unterminated string starting at line 1 column 29)"),
])
def test_json_syntax_errors_read_naturally(tmp_path, fmt, name, text, said):
    src = tmp_path / name
    src.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusFormatError) as err:
        import_corpus(fmt, src, tmp_path / "x.db")
    msg = str(err.value)
    assert said in msg and " at at " not in msg and "at," not in msg
