"""Small summaries the benchmarks share (private to :mod:`skillsynth.bench`)."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

__all__ = ["mean_of", "median_of", "pct", "share"]


def share(num: int, den: int) -> dict[str, Any]:
    return {"value": round(num / den, 4) if den else None, "n": den}


def mean_of(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(float(np.mean(vals)), 4) if vals else None


def median_of(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(float(statistics.median(vals)), 3) if vals else None


def pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)), 4)
