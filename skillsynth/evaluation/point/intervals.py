"""Interval statistics behind the KPIs: bootstrap, Wilson, Kish's design effect, cluster t.

Plain numbers in, ``(lo, hi)`` out; which one a KPI uses follows from its kind and is decided
in :mod:`.metrics` (METHODS.md 5). Kept apart so the statistics can be read, and checked,
without the per-probe rows and KPI assembly around them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from statistics import NormalDist
from typing import TypeVar

import numpy as np

from ...errors import EvaluationError

__all__ = ["N_BOOT", "bootstrap_interval", "cluster_t_interval", "design_effect",
           "mean_interval", "no_variation_interval", "wilson_interval"]

T = TypeVar("T")
#: Bootstrap resamples per interval.
N_BOOT = 2000


def bootstrap_interval(units: Sequence[T], stat: Callable[[list[T]], float | None], *,
                       clusters: Sequence[Hashable] | None = None, n_boot: int = N_BOOT,
                       seed: int = 0, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of ``stat`` under a (cluster) bootstrap of ``units``.

    Args:
        units: the sample (probes, procedures).
        stat: the statistic; may return None for a resample where it is undefined
            (e.g. precision with nothing recalled), which is dropped.
        clusters: one key per unit; whole clusters are resampled (default: each unit alone).
        n_boot: resamples.
        seed: the generator seed (the same seed gives the same interval).
        level: coverage.
    """
    if not units:
        return None, None
    keys = list(clusters) if clusters is not None else list(range(len(units)))
    groups: dict[Hashable, list[T]] = defaultdict(list)
    for u, k in zip(units, keys, strict=True):
        groups[k].append(u)
    members = list(groups.values())
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(members), size=(n_boot, len(members)))
    values = []
    for row in draws:
        v = stat([u for i in row for u in members[i]])
        if v is not None:
            values.append(v)
    if not values:
        return None, None
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(values, dtype=np.float64), [a, 1.0 - a])
    return float(lo), float(hi)


def _z(level: float) -> float:
    return NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)


def wilson_interval(successes: float, n: float, *, level: float = 0.95
                    ) -> tuple[float | None, float | None]:
    """Wilson score interval of a proportion; ``successes`` and ``n`` may be fractional (an
    effective sample size). Unlike the normal approximation it has width at 0 of n and n of
    n, and its coverage stays near nominal at small n."""
    if n <= 0:
        return None, None
    z = _z(level)
    p = min(max(successes / n, 0.0), 1.0)
    den = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / den
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def no_variation_interval(value: float, n_families: int,
                          bounds: tuple[float | None, float | None], *, level: float = 0.95
                          ) -> tuple[float | None, float | None]:
    """The interval of a mean whose values are all ``value``, over ``n_families`` families.

    A resampling interval of identical values has no width, and 20 families with no change
    do not show that no family ever changes. The share of families whose value differs
    from ``value`` is bounded by Wilson's upper bound for 0 of ``n_families`` (a family
    counts as one observation: the conservative reading), and each such family can move
    the mean at most as far as the values' range allows, so the mean lies within that
    share of the distance to each bound. None where a bound is unknown (nothing limits how
    far an unseen value could move the mean) or with fewer than one family.
    """
    low, high = bounds
    if low is None or high is None or n_families < 1:
        return None, None
    _, w = wilson_interval(0.0, float(n_families), level=level)
    assert w is not None
    return value - w * (value - low), value + w * (high - value)


def mean_interval(values: Sequence[float], clusters: Sequence[Hashable], *,
                  bounds: tuple[float | None, float | None], min_families: int,
                  n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95
                  ) -> tuple[float | None, float | None, str, str]:
    """A mean's interval, the method that gave it and a note: ``lo, hi, method, note``.

    With one family, none (a resample of one family is that family); values without any
    variation, :func:`no_variation_interval` (either resampling interval would have no
    width); from ``min_families`` families, the cluster bootstrap; with fewer, the
    cluster t. The interval is clipped to ``bounds``: a t interval over few families can
    reach past what the mean can be, and a bound it cannot take is no information.
    """
    vals = [float(v) for v in values]
    g = len(set(clusters))
    if g < 2:
        return None, None, "unavailable", "one family: no interval"
    if min(vals) == max(vals):  # already within the bounds: nothing to clip
        lo, hi = no_variation_interval(vals[0], g, bounds, level=level)
        note = "" if lo is not None else \
            f"every value {vals[0]:g} over {g} families and no bound on them: no interval"
        return lo, hi, "no-variation", note
    if g >= min_families:
        lo, hi = bootstrap_interval(vals, lambda xs: float(np.mean(xs)), clusters=clusters,
                                    n_boot=n_boot, seed=seed, level=level)
        method = "cluster-bootstrap"
    else:
        lo, hi = cluster_t_interval(vals, clusters, level=level)
        method = "cluster-t"
    low, high = bounds
    if lo is not None and hi is not None:
        lo, hi = (lo if low is None else max(lo, low)), (hi if high is None else min(hi, high))
    return lo, hi, method, ""


def _groups(values: Sequence[float], clusters: Sequence[Hashable]) -> list[list[float]]:
    if len(values) != len(clusters):
        raise EvaluationError(f"{len(values)} values but {len(clusters)} cluster keys")
    g: dict[Hashable, list[float]] = defaultdict(list)
    for v, k in zip(values, clusters, strict=True):
        g[k].append(float(v))
    return list(g.values())


def design_effect(values: Sequence[float], clusters: Sequence[Hashable] | None
                  ) -> tuple[float, float | None]:
    """Kish's design effect ``1 + (m* - 1) * ICC`` of clustered values and the ICC used.

    ``m*`` is sum(m_g^2) / n (the size-weighted cluster size; the mean size when sizes are
    equal). The ICC is the one-way ANOVA estimate, clipped to [0, 1] so the effect is never
    below 1. Where it cannot be estimated (one cluster; no variation at all) it is taken as
    1: the units of a family are then counted as one observation, the conservative reading
    (and the true one for family-level outcomes such as "a procedure exists"). Unclustered
    or singleton clusters: 1.0 and no ICC.
    """
    if clusters is None or not values:
        return 1.0, None
    groups = _groups(values, clusters)
    n, g = len(values), len(groups)
    if g == n:
        return 1.0, None
    m_star = sum(len(x) ** 2 for x in groups) / n
    icc = 1.0
    if g > 1:
        grand = float(np.mean(values))
        msb = sum(len(x) * (float(np.mean(x)) - grand) ** 2 for x in groups) / (g - 1)
        msw = sum(float(np.sum((np.asarray(x) - np.mean(x)) ** 2)) for x in groups) / (n - g)
        m0 = (n - m_star) / (g - 1)
        den = msb + (m0 - 1.0) * msw
        if den > 1e-12:
            icc = min(max((msb - msw) / den, 0.0), 1.0)
    return 1.0 + (m_star - 1.0) * icc, icc


def cluster_t_interval(values: Sequence[float], clusters: Sequence[Hashable], *,
                       level: float = 0.95) -> tuple[float | None, float | None]:
    """The mean's t interval with a cluster-robust (CR1) standard error and G - 1 degrees
    of freedom, G the number of clusters: for few clusters, where a percentile bootstrap has
    too few distinct resamples to cover. With equal cluster sizes it is the t interval of
    the cluster means. None with fewer than two clusters (no variance can be estimated)."""
    groups = _groups(values, clusters)
    g, n = len(groups), len(values)
    if g < 2:
        return None, None
    from scipy.stats import t as student_t

    mean = float(np.mean(values))
    sums = [sum(v - mean for v in x) for x in groups]
    se = math.sqrt(g / (g - 1) * sum(s * s for s in sums)) / n
    half = float(student_t.ppf(1.0 - (1.0 - level) / 2.0, g - 1)) * se
    return mean - half, mean + half
