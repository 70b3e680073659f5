"""Shared fixtures: real SQLite files in pytest's tmp_path, never in-memory stand-ins.

Test tiers (markers registered in pyproject.toml): ``models``, ``live``, ``dask``,
``notebooks``, ``slow``, ``lemonade``; the fast tier is every test with none of them. The
``lemonade`` tier runs against a real Lemonade Server (:func:`lemonade_server`; it skips,
saying why, where no ``lemond`` build or source is named: tests/lemonade_server.py). With
``SKILLSYNTH_TEST_TIER=fast`` (``scripts/test.sh --fast``) the session runs as on a machine
where nothing is prepared: the models home is an empty folder and importing tau2 fails, so
an unmarked test that needs the models or a world fails loudly instead of quietly slowing
the fast tier down. CI runs the fast tier that way before the full suite, on a fresh
environment where tau2 is not installed at all, which also catches a test that reaches tau2
through a subprocess (the in-process guard cannot see those).
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import tempfile
from pathlib import Path

import pytest

from skillsynth.store import MemoryStore

FAST = os.environ.get("SKILLSYNTH_TEST_TIER") == "fast"
#: Packages a fast-tier test may not import: what ``skillsynth world prepare`` installs.
_BLOCKED = ("tau2",)


class _Unprepared(importlib.abc.MetaPathFinder):
    """Refuses the packages of the heavier tiers, naming the marker a test needs."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _BLOCKED:
            raise ImportError(f"{name} is not available in the fast test tier: mark the test "
                              "with @pytest.mark.live")


def pytest_configure(config: pytest.Config) -> None:
    if FAST:
        os.environ["SKILLSYNTH_HOME"] = tempfile.mkdtemp(prefix="skillsynth-fast-tier-")


def pytest_collection_finish(session: pytest.Session) -> None:
    """After collection (a marked module may import tau2 at its top, and it is
    deselected), the fast tier forgets the package and refuses it from here on."""
    if FAST:
        for name in [m for m in sys.modules if m.split(".")[0] in _BLOCKED]:
            del sys.modules[name]
        sys.meta_path.insert(0, _Unprepared())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FAST:  # the fast tier is the unmarked tests, whatever -m says
        tiers = ("models", "live", "dask", "notebooks", "slow", "lemonade")
        keep = [i for i in items if not any(i.get_closest_marker(t) for t in tiers)]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


@pytest.fixture(scope="session")
def lemonade_server(tmp_path_factory: pytest.TempPathFactory):
    """A real ``lemond`` serving the prepared models (found, or built from the source), on
    a free port for the session; skips with the reason where there is none to run."""
    import lemonade_server as lemonade

    where = lemonade.locate()
    if where.error:
        pytest.fail(where.error)
    if where.skip:
        pytest.skip(where.skip)
    lemonade.build(where, tmp_path_factory.mktemp("lemonade-build") / "build.log")
    server = lemonade.serve(where)
    try:
        yield server
    finally:
        lemonade.stop(server)


@pytest.fixture
def lemonade_env(lemonade_server, monkeypatch: pytest.MonkeyPatch):
    """The session's Lemonade as a user configures it: ``LEMONADE_BASE_URL``, no key."""
    monkeypatch.setenv("LEMONADE_BASE_URL", lemonade_server.base_url)
    monkeypatch.delenv("LEMONADE_API_KEY", raising=False)
    return lemonade_server


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a new memory.db (not yet created)."""
    return tmp_path / "memory.db"


@pytest.fixture
def store(db_path: Path):
    """A fresh v3 store on disk, closed after the test."""
    s = MemoryStore.init(db_path)
    yield s
    s.close()
