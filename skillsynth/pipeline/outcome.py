"""Outcome feedback: count each use of a recalled procedure and whether the run succeeded.

The counts feed reconciliation, so a procedure whose record decays stops winning: a newer
candidate with more successes supersedes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..store import MemoryStore

__all__ = ["record_outcome"]


def record_outcome(store: MemoryStore, procedure_ids: Iterable[str], success: bool) -> int:
    """Add one attempt (and a success if ``success``) to each procedure, in one transaction.

    Returns how many procedures were updated. An unknown id raises StoreError and nothing
    is written.
    """
    ids = list(dict.fromkeys(procedure_ids))
    with store.transaction():
        for pid in ids:
            store.record_outcome(pid, success)
    return len(ids)
