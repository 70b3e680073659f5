"""What a Dask worker reports before a sweep sends it points.

Shipped to workers by value (cloudpickle), so it runs on a worker that cannot import
skillsynth at all and says so, instead of failing to unpickle. It imports nothing from
skillsynth at module level for the same reason.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any


def worker_facts(folders: list[str]) -> dict[str, Any]:
    """The worker's host, its skillsynth version (or why it has none), and the folders of
    ``folders`` in which it cannot create and remove a file (with the error)."""
    facts: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        import skillsynth

        facts["skillsynth"] = str(skillsynth.__version__)
        facts["skillsynth_path"] = str(getattr(skillsynth, "__file__", ""))
    except Exception as exc:  # noqa: BLE001 (any import failure means "no usable skillsynth")
        facts["skillsynth"] = None
        facts["import_error"] = f"{type(exc).__name__}: {exc}"
    facts["unwritable"] = {}
    for folder in folders:
        probe = os.path.join(folder, f".write-check-{uuid.uuid4().hex}")
        try:
            with open(probe, "w", encoding="utf-8") as fh:
                fh.write("ok")
            os.remove(probe)
        except OSError as exc:
            facts["unwritable"][folder] = f"{type(exc).__name__}: {exc}"
    return facts
