"""Shared fixtures: real SQLite files in pytest's tmp_path, never in-memory stand-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillsynth.store import MemoryStore


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
