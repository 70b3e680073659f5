"""Two designs head to head: one point's memory arm against another's, paired per probe.

The report reads every design against its controls (:mod:`.controls`); a researcher also
asks whether one design beats another (the task's own plan against another family's plan,
sources against values). :func:`compare_points` answers it on the probes both points ran,
each probe's runs averaged before pairing, families resampled for the interval, with the
probes on which the first design did better and worse beside the mean: a mean near zero can
hide as many losses as gains. The two points may come from two sweeps of the same probes
(a spec that reuses another's controls); :func:`comparable` refuses a pair whose runs were
decoded differently or drew their probes from different corpora, since such a difference
measures the setting, not the design.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...errors import EvaluationError
from ..point.metrics import KPI, SHARE_CHANGE, mean_kpi
from .controls import Basis, per_probe, probe_families
from .loaded import Run

__all__ = ["BASES", "SAME_KEYS", "Comparison", "comparable", "compare_points", "find_point"]

#: The live bases compared by default: graded progress (the share of the task's gold actions
#: executed), the same over its gold writes, and success.
BASES: tuple[Basis, ...] = ("progress", "writes", "success")
#: Spec keys two sweeps must share for their points to be compared: what the agent, its
#: world and its history were (the grid's keys may differ: they are what is compared).
SAME_KEYS = ("corpus", "world", "backend", "temperature", "repeats", "step_limit", "policy", "user",
             "live", "k", "history", "family", "mode", "seed")
_NAMES = {"progress": "gold actions", "writes": "gold writes", "success": "success",
          "replay": "step reduction (replay estimate)"}


@dataclass(frozen=True)
class Comparison:
    """One basis of a head-to-head comparison.

    Attributes:
        basis: what was compared (:data:`~.controls.Basis`).
        a, b: the two points' ids.
        a_mean, b_mean: each point's mean over the shared probes (None: none shared).
        difference: ``a - b``, paired per probe, with its interval and n (probes).
        better, worse, same: probes on which ``a`` is above, below and equal to ``b``.
    """

    basis: Basis
    a: str
    b: str
    a_mean: float | None
    b_mean: float | None
    difference: KPI
    better: int
    worse: int
    same: int

    def line(self) -> str:
        """The comparison as one sentence of figures."""
        name, k = _NAMES[self.basis], self.difference
        if k.value is None:
            return f"{name}: no probe both points ran on this basis"
        ci = f" [{k.lo:+.2f}, {k.hi:+.2f}]" if k.lo is not None and k.hi is not None else \
            f" ({k.note or 'no interval'})"
        return (f"{name}: A {self.a_mean:.2f}, B {self.b_mean:.2f}; A - B {k.value:+.2f}{ci}, "
                f"n = {k.n} probes ({k.n_families} families, {k.method}); A better on "
                f"{self.better}, worse on {self.worse}, equal on {self.same}")

    def as_dict(self) -> dict[str, Any]:
        return {"basis": self.basis, "a": self.a, "b": self.b, "a_mean": self.a_mean,
                "b_mean": self.b_mean, "difference": self.difference.as_dict(),
                "better": self.better, "worse": self.worse, "same": self.same}


def find_point(run: Run, key: str) -> str:
    """A point of ``run`` by its id, a unique id prefix or a unique strategy name.

    Raises:
        EvaluationError: no point, or several, match (the error lists the run's points).
    """
    ids = [p.id for p in run.summary.points]
    if key in ids:
        return key
    hits = [i for i in ids if i.startswith(key)] or \
        [p.id for p in run.summary.points if p.strategy == key]
    if len(hits) == 1:
        return hits[0]
    listed = "\n  ".join(hits or ids) or "(none finished)"
    what = "several points match" if hits else "no finished point matches"
    raise EvaluationError(f"{run.path}: {what} {key!r}; give an id or a unique prefix of "
                          f"one of:\n  {listed}")


def comparable(run_a: Run, run_b: Run) -> None:
    """Check that two sweeps ran their agents alike on the same probes: the same
    :data:`SAME_KEYS`, and each probe both ran with the same goal (a corpus database's hash
    is no test: an ideal history built twice differs in its timestamps).

    Raises:
        EvaluationError: naming each key that differs, or the first probe whose goal does.
    """
    if run_a.path.resolve() == run_b.path.resolve():
        return
    sa, sb = run_a.summary.spec, run_b.summary.spec
    diffs = [f"{k}: {sa.get(k)!r} vs {sb.get(k)!r}" for k in SAME_KEYS if sa.get(k) != sb.get(k)]
    ga, gb = _goals(run_a.rows), _goals(run_b.rows)
    changed = sorted(p for p in set(ga) & set(gb) if ga[p] != gb[p])
    if changed:
        diffs.append(f"probe {changed[0]}'s goal: {ga[changed[0]][:60]!r} vs "
                     f"{gb[changed[0]][:60]!r}" + (f" (and {len(changed) - 1} more probes)"
                                                  if len(changed) > 1 else ""))
    if diffs:
        raise EvaluationError(f"{run_a.path} and {run_b.path} did not run their probes alike, "
                              "so a difference between their points would measure the setting: "
                              + "; ".join(diffs))


def _goals(rows: pd.DataFrame) -> dict[str, str]:
    """Each probe's goal (rows written without goals give none)."""
    if rows.empty or "goal" not in rows:
        return {}
    first = rows.drop_duplicates("probe_session")
    return {str(p): str(g) for p, g in zip(first["probe_session"], first["goal"], strict=True)}


def compare_points(run_a: Run, a: str, b: str, *, run_b: Run | None = None,
                   bases: Sequence[Basis] = BASES, seed: int = 0) -> list[Comparison]:
    """Point ``a`` of ``run_a`` against point ``b`` (of ``run_b``, default the same run):
    the memory arms' difference per basis, paired per probe on the probes both ran.

    ``a`` and ``b`` are ids, unique id prefixes or unique strategies (:func:`find_point`).
    A basis neither point was scored on gives a comparison with n = 0.

    Raises:
        EvaluationError: a point not found, or two sweeps not :func:`comparable`.
    """
    other = run_b or run_a
    comparable(run_a, other)
    aid, bid = find_point(run_a, a), find_point(other, b)
    rows_a = run_a.rows.assign(point="A:" + run_a.rows["point"].astype(str)) \
        if not run_a.rows.empty else run_a.rows
    rows_b = other.rows.assign(point="B:" + other.rows["point"].astype(str)) \
        if not other.rows.empty else other.rows
    rows = pd.concat([rows_a, rows_b], ignore_index=True)
    out = []
    for basis in bases:
        pa = per_probe(rows, f"A:{aid}", "memory", basis) if not rows.empty else {}
        pb = per_probe(rows, f"B:{bid}", "memory", basis) if not rows.empty else {}
        probes = sorted(set(pa) & set(pb))
        diffs = [pa[p] - pb[p] for p in probes]
        k = mean_kpi(f"{basis}_a_minus_b", diffs, unit="probes", estimate=basis == "replay",
                     clusters=probe_families(rows, probes) if probes else [], seed=seed,
                     bounds=(None, None) if basis == "replay" else SHARE_CHANGE)
        out.append(Comparison(
            basis=basis, a=aid, b=bid,
            a_mean=sum(pa[p] for p in probes) / len(probes) if probes else None,
            b_mean=sum(pb[p] for p in probes) / len(probes) if probes else None,
            difference=k, better=sum(d > 0 for d in diffs), worse=sum(d < 0 for d in diffs),
            same=sum(d == 0 for d in diffs)))
    return out
