"""One sweep point executed: its notebook under papermill with the point's parameters, then
its timings; and the one-line text of a point that failed.

A leaf shared by every transport (the thread pool in :mod:`.run`, Dask workers in
:mod:`.dask_cluster` and :mod:`.shipping`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from ...models.backend import BackendSpec
from ..point.summary import SUMMARY, PointSummary
from .notebooks import execute_notebook
from .spec import Point, SweepSpec

__all__ = ["execute_point", "failure_text", "write_timings"]


def execute_point(point: Point, spec: SweepSpec, corpus: Path, backend: BackendSpec,
                  point_dir: Path, notebook: Path) -> PointSummary:
    """Run ``notebook`` for ``point`` in ``point_dir``; return the point's summary."""
    point_dir.mkdir(parents=True, exist_ok=True)
    params = {"corpus": str(corpus), "thresholds": point.thresholds().to_settings_block(),
              "options": point.point_options(spec).to_json(),
              "user": dict(spec.user) if isinstance(spec.user, Mapping) else spec.user,
              "backend": asdict(backend), "out_dir": str(point_dir)}
    import papermill  # noqa: F401 (a fresh Dask worker's first import is not kernel start)

    t0 = time.perf_counter()
    execute_notebook(notebook, point_dir / "point.ipynb", params, cwd=point_dir,
                     timeout_s=spec.point_timeout_s)
    notebook_s = time.perf_counter() - t0
    summary = PointSummary.load(point_dir / SUMMARY)
    write_timings(point_dir, notebook_s, summary)
    return summary


def write_timings(point_dir: Path, notebook_s: float, summary: PointSummary) -> None:
    """``timings.json``: where a point's wall time went (the sweep-overhead benchmark).

    Kernel start is the notebook's wall time less its cells' (papermill records each cell's
    duration); ``imports`` is the imports cell; the point's own stages come from its
    summary (``timings``).
    """
    import nbformat

    nb = nbformat.read(str(point_dir / "point.ipynb"), as_version=4)
    cells: dict[str, float] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        name = next((t for t in ("parameters", "injected-parameters", "imports", "run")
                     if t in tags), f"cell{len(cells)}")
        cells[name] = float(cell.metadata.get("papermill", {}).get("duration") or 0.0)
    stages = dict(summary.timings)
    out = {"notebook_s": round(notebook_s, 3),
           "kernel_start_s": round(notebook_s - sum(cells.values()), 3),
           "imports_s": round(cells.get("imports", 0.0), 3),
           "run_cell_s": round(cells.get("run", 0.0), 3),
           "point_s": summary.wall_s, "stages_s": stages, "cells_s": cells}
    (point_dir / "timings.json").write_text(json.dumps(out, indent=2), encoding="utf-8")


def failure_text(exc: BaseException) -> str:
    """A failed point's error: papermill's carries the kernel's exception name and value."""
    name = getattr(exc, "ename", None)
    return f"{name}: {getattr(exc, 'evalue', '')}" if name else f"{type(exc).__name__}: {exc}"
