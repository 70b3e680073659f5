"""The command line: every command documented, exit codes as promised, thin over the API."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from gaia_legacy import build_legacy_db
from test_skill import GOOD

from skillsynth.cli import build_parser, main


def _walk(parser: argparse.ArgumentParser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"{' '.join(path + (name,))} has no help"
                yield from _walk(sub, path + (name,))


def test_every_command_and_option_has_help():
    commands = list(_walk(build_parser()))
    assert len(commands) >= 9
    for path, parser in commands:
        assert parser.description or not path, path
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue  # each choice's help is checked by _walk
            assert action.help, f"{path} {action.dest} has no help"


def test_console_script_help_runs():
    out = subprocess.run([sys.executable, "-m", "skillsynth", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for cmd in ("db", "skill", "config", "demo"):
        assert cmd in out


def test_db_init_then_info_reports_version_7(tmp_path, capsys):
    db = tmp_path / "memory.db"
    assert main(["db", "init", str(db)]) == 0
    capsys.readouterr()
    assert main(["db", "info", str(db), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["schema_version"] == 7
    assert info["rows"]["procedures"] == 0 and info["rows"]["schema_version"] == 1
    assert main(["db", "info", str(db)]) == 0
    assert "schema version:  7" in capsys.readouterr().out
    assert main(["db", "init", str(db)]) == 1


def test_db_migrate_dry_run_then_real(tmp_path, capsys):
    db = tmp_path / "memory.db"
    build_legacy_db(db, 2)
    assert main(["db", "migrate", str(db), "--dry-run"]) == 0
    assert "would migrate v2 -> v7" in capsys.readouterr().out
    main(["db", "info", str(db), "--json"])
    assert json.loads(capsys.readouterr().out)["schema_version"] == 2
    assert main(["db", "migrate", str(db)]) == 0
    assert "migrated v2 -> v7" in capsys.readouterr().out
    assert main(["db", "migrate", str(db)]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_skill_render_and_validate_exit_codes(tmp_path, capsys):
    src = tmp_path / "answer.md"
    src.write_text(GOOD)
    out = tmp_path / "skills"
    assert main(["skill", "render", str(src), "--profile", "gaia691", "--out", str(out)]) == 0
    skill_dir = out / "summarise-report"
    assert main(["skill", "validate", str(skill_dir), "--profile", "gaia691"]) == 0
    capsys.readouterr()
    assert main(["skill", "validate", str(skill_dir), "--profile", "agentskills"]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "version" in lines[0]
    with pytest.raises(SystemExit) as info:
        main(["skill", "validate", str(tmp_path / "missing"), "--profile", "gaia691"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["skill", "validate", str(skill_dir), "--profile", "nope"])
    assert info.value.code == 2


def test_skill_render_reports_malformed_input(tmp_path, capsys):
    src = tmp_path / "answer.md"
    src.write_text(GOOD.replace("## Edge cases", "## Notes"))
    assert main(["skill", "render", str(src), "--profile", "agentskills",
                 "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert str(src) in err and "Edge cases" in err


def test_config_show_rejects_bad_override(capsys):
    assert main(["config", "show", "--set", "similarity_tau=0.9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["similarity_tau"] == 0.9
    assert main(["config", "show", "--set", "similarity_tau=9"]) == 1
    assert "similarity_tau" in capsys.readouterr().err


def test_demo_builds_db_and_both_profiles(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "gaia691 file under agentskills validator: INVALID" in out
    assert "agentskills file under agentskills validator: valid" in out
    assert (tmp_path / "d" / "agentskills" / "summarise-indexed-report" / "SKILL.md").is_file()
    assert main(["demo", str(tmp_path / "d")]) == 1  # no silent overwrite


def test_procedures_list_show_disable_enable_export(tmp_path, capsys):
    assert main(["demo", str(tmp_path / "d")]) == 0
    db = str(tmp_path / "d" / "memory.db")
    capsys.readouterr()
    assert main(["procedures", "list", db, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    pid = row["id"]
    assert main(["procedures", "show", db, pid]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["provenance"]["from_sessions"] == ["demo-session-1", "demo-session-2",
                                                    "demo-session-3"]
    assert main(["procedures", "disable", db, pid]) == 0
    main(["procedures", "list", db, "--json"])
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])[0]["enabled"] is False
    assert main(["procedures", "enable", db, pid]) == 0
    out = tmp_path / "skills"
    assert main(["procedures", "export", db, pid, "--out", str(out)]) == 0
    assert main(["skill", "validate", str(out / row["name"]), "--profile", "agentskills"]) == 0
    assert main(["procedures", "show", db, "proc_nope"]) == 1


def test_an_unknown_chat_model_is_refused_before_any_work(tmp_path, capsys):
    home = tmp_path / "home"
    assert main(["models", "prepare", "--home", str(home), "--chat", "gpt-5"]) == 1
    err = capsys.readouterr().err
    assert "unknown embedded chat model 'gpt-5'" in err and "qwen2.5-coder-0.5b" in err
    assert not home.exists()  # refused before the models home was even created


def test_calibrate_refuses_a_corpus_without_labels(tmp_path, capsys):
    db = tmp_path / "bare.db"
    assert main(["db", "init", str(db)]) == 0
    # the check runs before any model server starts (--no-recall: no chat model is needed)
    assert main(["calibrate", str(db), "--no-recall", "--no-cache"]) == 1
    assert "calibration needs labels" in capsys.readouterr().err


def test_every_command_is_in_the_reference_docs():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text(
        encoding="utf-8")
    for path, _ in _walk(build_parser()):
        if path:
            assert f"skillsynth {' '.join(path)}" in text or (
                len(path) == 2 and f"skillsynth {path[0]} " in text
                and path[1] in text), f"`skillsynth {' '.join(path)}` is not in docs/reference.md"
