"""A sweep's run folder at an fsspec URL: uploaded point by point, resumed from the URL on a
machine that has none of it (here: a fresh local mirror), a half-uploaded point re-run."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import fsspec
import pytest

from skillsynth.errors import ConfigError
from skillsynth.evaluation.sweeps.results_url import is_url, open_results_url
from skillsynth.evaluation.sweeps.run import run_sweep

CI_SPEC = Path(__file__).resolve().parent.parent / "eval" / "sweeps" / "ci.yaml"


def _quiet(*_: object) -> None:
    pass


def _warm_copy(dst: Path) -> Path:
    from skillsynth.models.serve import default_cache_path

    if default_cache_path().exists():
        with sqlite3.connect(default_cache_path()) as a, sqlite3.connect(dst) as b:
            a.backup(b)
    return dst


def test_urls_and_paths_are_told_apart(tmp_path):
    assert is_url("s3://bucket/runs") and is_url("memory://x") and is_url("file:///tmp/x")
    assert not is_url("eval/results") and not is_url(tmp_path)
    with pytest.raises(ConfigError, match=r"results URL nosuchscheme://x"):
        open_results_url("nosuchscheme://x", "ci", tmp_path)


@pytest.mark.models
@pytest.mark.parametrize("scheme", ["memory", "file"])
def test_a_sweep_at_a_url_uploads_its_points_and_resumes_from_the_url(tmp_path, scheme):
    url = (f"memory://runs-{uuid.uuid4().hex[:8]}" if scheme == "memory"
           else f"file://{tmp_path}/remote")
    fs = fsspec.filesystem(scheme)
    cache = str(_warm_copy(tmp_path / "cache.db"))
    first = run_sweep(CI_SPEC, results_root=url, mirror=tmp_path / "m1", cache=cache,
                      progress=False, log=_quiet)
    assert not first.failed and len(first.ran) == 2 and first.results_url == f"{url}/ci"
    root = fs._strip_protocol(f"{url}/ci")
    for name in ("spec.yaml", "summary.json", "results.jsonl", "similarity.json",
                 "corpus/corpus.db"):
        assert fs.exists(f"{root}/{name}"), name
    for pid in first.ran:
        local = tmp_path / "m1" / "ci" / "points" / pid
        remote = f"{root}/points/{pid}"
        files = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
        assert files and all(fs.cat_file(f"{remote}/{f}") == (local / f).read_bytes()
                             for f in files)
    summary = fs.cat_file(f"{root}/summary.json")
    assert json.loads(summary)["finished"] == 2

    # another machine: an empty mirror; everything comes from the URL, nothing re-runs
    again = run_sweep(CI_SPEC, results_root=url, mirror=tmp_path / "m2", cache=cache,
                      progress=False, log=_quiet)
    assert again.ran == () and set(again.skipped) == set(first.ran) and not again.failed
    assert ((tmp_path / "m2" / "ci" / "results.jsonl").read_text()
            == (tmp_path / "m1" / "ci" / "results.jsonl").read_text())

    # a point whose upload stopped before its summary is not done: it runs again
    gone = first.ran[0]
    fs.rm(f"{root}/points/{gone}/summary.json")
    third = run_sweep(CI_SPEC, results_root=url, mirror=tmp_path / "m3", cache=cache,
                      progress=False, log=_quiet)
    assert third.ran == (gone,) and third.llm_calls == 0
    assert fs.exists(f"{root}/points/{gone}/summary.json")


def test_a_spec_other_than_the_urls_is_refused(tmp_path):
    import yaml

    url = f"memory://runs-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    other = yaml.safe_load(CI_SPEC.read_text()) | {"seed": 12345}
    fs.pipe(fs._strip_protocol(f"{url}/ci/spec.yaml"),
            yaml.safe_dump(other, sort_keys=True).encode())
    with pytest.raises(ConfigError, match="holds a run of a different spec"):
        run_sweep(CI_SPEC, results_root=url, mirror=tmp_path / "m", cache=str(tmp_path / "c.db"),
                  progress=False, log=_quiet)
