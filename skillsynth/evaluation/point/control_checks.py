"""What a control point checks and adds to its KPIs (the arms: :mod:`.controls`).

The inertness check compares every inert run with its no-memory twin, turn by turn. Graded
live KPIs see partial progress a binary reward hides: the share of the task's gold actions
a run executed (tau2's action check), the failed-call rate, and the calls made until the
first state-changing gold action. A positive control's sensitivity KPIs are the point's own
step and success KPIs, read under the names a verdict looks for.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ...errors import EvaluationError
from .controls import POSITIVE, GoldAction, GoldSource, action_matches
from .metrics import (
    KPI,
    MIN_FAMILIES,
    N_BOOT,
    SHARE,
    SHARE_CHANGE,
    ProbeResult,
    bootstrap_interval,
    mean_kpi,
)

__all__ = ["SENSITIVITY", "SHOW_CHARS", "Divergence", "InertCheck", "control_kpis",
           "controls_summary", "first_write_at", "gold_share_matched", "gold_writes_matched",
           "graded_kpis", "inert_check", "oracle_gain_recovered"]

#: Characters of each side a divergence shows.
SHOW_CHARS = 300


@dataclass(frozen=True)
class Divergence:
    """Where an inert run first differs from its no-memory twin.

    ``turn`` is the index into the run's transcript (``len(transcript)`` for the run's
    ending: termination, tokens, reward); for replay it is 0 (the recalled set, the block
    and the estimate). Each side is shown as JSON, cut at :data:`SHOW_CHARS`.
    """

    where: Literal["replay", "live"]
    probe_session: str
    repeat: int
    turn: int
    no_memory: str
    inert: str


@dataclass(frozen=True)
class InertCheck:
    """Every pair of a no-memory run and its inert twin: how many were identical."""

    identical: int
    n: int
    replay: tuple[int, int]
    live: tuple[int, int]
    divergences: tuple[Divergence, ...]

    @property
    def share(self) -> float | None:
        """Share of identical pairs (None without pairs)."""
        return self.identical / self.n if self.n else None

    def as_dict(self, show: int = 5) -> dict[str, Any]:
        """JSON-ready (the first ``show`` divergences)."""
        return {"identical": self.identical, "n": self.n, "share": self.share,
                "replay": {"identical": self.replay[0], "n": self.replay[1]},
                "live": {"identical": self.live[0], "n": self.live[1]},
                "divergences": len(self.divergences),
                "first_divergences": [dataclasses.asdict(d) for d in self.divergences[:show]]}


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + "..."


_REPLAY_FIELDS = ("recalled_ids", "prompt_chars", "steps", "steps_method", "success")
_END_FIELDS = ("termination", "steps", "failed_calls", "success", "reward", "prompt_tokens",
               "completion_tokens", "error")


def _replay_side(r: ProbeResult) -> dict[str, Any]:
    d = r.as_dict()
    return {k: d[k] for k in _REPLAY_FIELDS}


def _live_turns(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A run as a list of comparable turns: its transcript without timestamps, then its end."""
    turns = [{k: v for k, v in t.items() if k != "timestamp"} for t in run.get("transcript", [])]
    return [*turns, {"end": {k: run.get(k) for k in _END_FIELDS}}]


def inert_check(rows: Sequence[ProbeResult], runs: Sequence[Mapping[str, Any]]) -> InertCheck:
    """Compare every inert run with its no-memory twin, turn by turn.

    Replay: per probe, the recalled set, the injected block's length, the step estimate and
    the outcome. Live: per probe and repeat, every transcript turn (call, arguments,
    result, answer; not its timestamp), then the run's ending (termination, steps, failed
    calls, reward, prompt and completion tokens). A difference names the first turn where
    the two differ.
    """
    divs: list[Divergence] = []
    replay_ok = replay_n = live_ok = live_n = 0
    by: dict[str, dict[str, ProbeResult]] = defaultdict(dict)
    for r in rows:
        if r.steps_method != "live":
            by[r.probe_session][r.arm] = r
    for probe, arms in sorted(by.items()):
        if "no-memory" in arms and "memory" in arms:
            replay_n += 1
            a, b = _replay_side(arms["no-memory"]), _replay_side(arms["memory"])
            if a == b:
                replay_ok += 1
            else:
                divs.append(Divergence(where="replay", probe_session=probe, repeat=0, turn=0,
                                       no_memory=_show(a), inert=_show(b)))
    pairs: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for run in runs:
        pairs[(str(run["probe_session"]), int(run.get("repeat", 0)))][str(run["arm"])] = run
    for (probe, rep), twins in sorted(pairs.items()):
        if "no-memory" not in twins or "memory" not in twins:
            continue
        live_n += 1
        ta, tb = _live_turns(twins["no-memory"]), _live_turns(twins["memory"])
        at = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), None)
        if at is None and len(ta) != len(tb):
            at = min(len(ta), len(tb)) - 1  # one run has more turns: the shorter one's end
        if at is None:
            live_ok += 1
        else:
            divs.append(Divergence(where="live", probe_session=probe, repeat=rep, turn=at,
                                   no_memory=_show(ta[at] if at < len(ta) else None),
                                   inert=_show(tb[at] if at < len(tb) else None)))
    return InertCheck(identical=replay_ok + live_ok, n=replay_n + live_n,
                      replay=(replay_ok, replay_n), live=(live_ok, live_n), divergences=tuple(divs))


# ---------------------------------------------------------------------- KPIs
def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def gold_share_matched(gold: Sequence[GoldAction], calls: Sequence[tuple[str, Any]]
                       ) -> float | None:
    """Share of ``gold`` matched by some call (tau2's per-action check; None without gold)."""
    if not gold:
        return None
    return sum(any(action_matches(g, n, a) for n, a in calls) for g in gold) / len(gold)


def gold_writes_matched(gold: Sequence[GoldAction], calls: Sequence[tuple[str, Any]]
                        ) -> float | None:
    """Share of ``gold``'s state-changing actions matched by some call: graded progress on
    what changes the world (reads matched count in :func:`gold_share_matched`, not here);
    None for a task without a gold write."""
    return gold_share_matched([g for g in gold if g.state_changing], calls)


def first_write_at(gold: Sequence[GoldAction], calls: Sequence[tuple[str, Any]]) -> int | None:
    """Calls made up to and including the first that matches a state-changing gold action
    (1-based; None when none does)."""
    writes = [g for g in gold if g.state_changing]
    for i, (n, a) in enumerate(calls, 1):
        if any(action_matches(g, n, a) for g in writes):
            return i
    return None


@dataclass(frozen=True)
class _Graded:
    """One arm of one probe, averaged over its repeats (None: no run measured it)."""

    matched: float | None
    failed_rate: float | None
    first_write: float | None
    decisions: float | None = None
    writes: float | None = None


def _graded_arm(runs: Sequence[Mapping[str, Any]], gold: Sequence[GoldAction]) -> _Graded:
    matched, failed, first, writes = [], [], [], []
    decisions = [float(r["decisions"]) for r in runs if "decisions" in r]
    for run in runs:
        calls = [(str(c[0]), c[1]) for c in run.get("calls", [])]
        m = gold_share_matched(gold, calls)
        if m is not None:
            matched.append(m)
        made = gold_writes_matched(gold, calls)
        if made is not None:
            writes.append(made)
        if run.get("steps"):
            failed.append(run.get("failed_calls", 0) / run["steps"])
        w = first_write_at(gold, calls)
        if w is not None:
            first.append(float(w))
    return _Graded(matched=_mean(matched), failed_rate=_mean(failed), first_write=_mean(first),
                   decisions=_mean(decisions), writes=_mean(writes))


def graded_kpis(runs: Sequence[Mapping[str, Any]], gold: GoldSource,
                family_of: Mapping[str, str], *, seed: int = 0,
                n_boot: int = N_BOOT) -> list[KPI]:
    """Partial-progress KPIs per arm, and their paired change (memory minus no-memory).

    Per probe, each arm's runs are averaged first (repeats), then probes are compared in
    pairs; intervals resample families. ``live_gold_actions_matched_*``: share of the
    task's gold actions a run executed (tau2's check); ``live_gold_writes_matched_*``: the
    same over its state-changing gold actions (tasks with one), so that a gain made of reads
    is told from one that reaches the write. ``live_failed_call_rate_*``: failed
    calls over calls (runs that made one). ``live_calls_to_first_write_*``: calls up to and
    including the first state-changing gold action (runs that made one).
    ``live_agent_decisions_*``: model turns that issued a call (a recalled plan's call is one
    decision however many world calls it makes; runs recorded before the count have none).
    """
    by: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        by[str(run["probe_session"])][str(run["arm"])].append(run)
    arms: dict[str, dict[str, _Graded]] = {}
    for probe, got in by.items():
        acts = gold.actions(probe)
        arms[probe] = {arm: _graded_arm(rs, acts) for arm, rs in got.items()}
    out: list[KPI] = []
    for metric, label, bounds, change in (
            ("matched", "live_gold_actions_matched", SHARE, SHARE_CHANGE),
            ("writes", "live_gold_writes_matched", SHARE, SHARE_CHANGE),
            ("failed_rate", "live_failed_call_rate", SHARE, SHARE_CHANGE),
            ("first_write", "live_calls_to_first_write", (1.0, None), (None, None)),
            ("decisions", "live_agent_decisions", (0.0, None), (None, None))):
        for arm, suffix in (("no-memory", "no_memory"), ("memory", "memory")):
            units = [(p, getattr(a[arm], metric)) for p, a in sorted(arms.items())
                     if arm in a and getattr(a[arm], metric) is not None]
            out.append(mean_kpi(f"{label}_{suffix}", [v for _, v in units], unit="probes",
                                clusters=[family_of.get(p, p) for p, _ in units], seed=seed,
                                n_boot=n_boot, bounds=bounds))
        pairs = [(p, getattr(a["memory"], metric) - getattr(a["no-memory"], metric))
                 for p, a in sorted(arms.items())
                 if "memory" in a and "no-memory" in a
                 and getattr(a["memory"], metric) is not None
                 and getattr(a["no-memory"], metric) is not None]
        out.append(mean_kpi(f"{label}_change", [v for _, v in pairs], unit="probes",
                            clusters=[family_of.get(p, p) for p, _ in pairs], seed=seed,
                            n_boot=n_boot, bounds=change))
    return out


#: A positive control's sensitivity KPIs and the point KPI each one is (oracle minus none).
SENSITIVITY = {"replay_sensitivity_steps": "step_reduction",
               "live_sensitivity_success": "live_success_change",
               "live_sensitivity_steps": "live_step_reduction",
               "live_sensitivity_progress": "live_gold_actions_matched_change"}


def control_kpis(control: str | None, rows: Sequence[ProbeResult], kpis: Mapping[str, KPI],
                 runs: Sequence[Mapping[str, Any]], gold: GoldSource | None, *,
                 seed: int = 0, n_boot: int = N_BOOT) -> tuple[dict[str, KPI],
                                                               InertCheck | None]:
    """The KPIs a control point adds to the point's own, and its inertness check.

    Positive controls (oracle, oracle-args): ``replay_sensitivity_steps`` is the point's
    ``step_reduction`` (the replay estimate, paired: oracle arm against none), and on live
    points ``live_sensitivity_success`` and ``live_sensitivity_steps`` are its
    ``live_success_change`` and ``live_step_reduction`` (the same definitions and intervals,
    read under the names a verdict looks for), and ``live_sensitivity_progress`` its
    ``live_gold_actions_matched_change`` (graded progress). ``inert``: ``inert_identical``,
    the share of pairs identical (n pairs; no interval: a check). Every live point with gold
    actions gets :func:`graded_kpis`.
    """
    out: dict[str, KPI] = {}
    check = None
    if control == "inert":
        check = inert_check(rows, runs)
        out["inert_identical"] = KPI(name="inert_identical", value=check.share, lo=None, hi=None,
                                     n=check.n, unit="runs")
    if runs and gold is not None and any(gold.actions(str(r["probe_session"])) for r in runs):
        family_of = {r.probe_session: r.family for r in rows}
        out.update({k.name: k for k in graded_kpis(runs, gold, family_of, seed=seed,
                                                   n_boot=n_boot)})
    if control in POSITIVE:
        have = {**kpis, **out}
        out.update({name: dataclasses.replace(have[src], name=name)
                    for name, src in SENSITIVITY.items() if src in have})
    return out, check


def controls_summary(control: str | None, gold: GoldSource | None,
                     check: InertCheck | None) -> dict[str, Any] | None:
    """The point summary's ``controls`` entry (None for a point that runs no control)."""
    if control is None:
        return None
    out: dict[str, Any] = {"strategy": control}
    if gold is not None and control != "inert":
        out.update({"gold_from": gold.origin(),
                    "descriptions": "world" if gold.descriptions else "tool names",
                    "skipped": dict(Counter(gold.skipped.values())),
                    "skipped_probes": sorted(gold.skipped)})
    if gold is not None and control == "oracle-dataflow":
        out["argument_sources"] = gold.dataflow_counts()  # values per source kind
    if gold is not None and control in ("oracle-plan", "mismatched-plan"):
        out["plans"] = gold.plan_counts()  # complete or prefix, steps, stop reasons
    if check is not None:
        out["inert"] = check.as_dict()
    return out


def _excludes_zero(k: KPI) -> bool:
    return k.lo is not None and k.hi is not None and (k.lo > 0 or k.hi < 0)


def oracle_gain_recovered(none: Sequence[float], synthesized: Sequence[float],
                          oracle: Sequence[float], families: Sequence[Hashable], *,
                          name: str = "oracle_gain_recovered", unit: str = "probes",
                          seed: int = 0, n_boot: int = N_BOOT, level: float = 0.95,
                          bounds: tuple[float | None, float | None] = (None, None)) -> KPI:
    """(synthesized - none) / (oracle - none): the share of the positive control's gain that
    synthesis recovers, from per-probe figures of three paired arms (one position per
    probe in each sequence).

    NOT MEASURED (value None, ``note`` says why) where the denominator's interval
    (:func:`mean_kpi` of oracle - none) does not exclude 0: a ratio over a gain that may be
    nothing is no figure. The interval resamples families jointly (all three arms of a
    family's probes together); with fewer than :data:`MIN_FAMILIES` families the value is
    given without one. ``bounds``: the range of a per-probe difference (a share's change:
    -1 to 1), which the denominator's interval needs where its values do not vary.
    """
    if not len(none) == len(synthesized) == len(oracle) == len(families):
        raise EvaluationError("oracle_gain_recovered needs one value per probe in each arm "
                              f"(got {len(none)}, {len(synthesized)}, {len(oracle)} and "
                              f"{len(families)} families)")
    triples = [(float(a), float(b), float(c)) for a, b, c in zip(none, synthesized, oracle,
                                                                 strict=True)]
    g = len(set(families))
    if not triples:
        return KPI(name=name, value=None, lo=None, hi=None, n=0, unit=unit, estimate=False,
                   kind="ratio", method="none", n_families=0)
    den = mean_kpi("oracle_minus_none", [c - a for a, _, c in triples], unit=unit,
                   clusters=families, seed=seed, n_boot=n_boot, level=level, bounds=bounds)
    if not _excludes_zero(den):
        ci = f"[{den.lo:.2f}, {den.hi:.2f}]" if den.lo is not None and den.hi is not None \
            else "(no interval)"
        return KPI(name=name, value=None, lo=None, hi=None, n=len(triples), unit=unit,
                   estimate=False, kind="ratio", method="none", n_families=g,
                   note=f"not measured: oracle - none {den.value:.2f} {ci} does not "
                   "exclude 0")

    def ratio(ts: list[tuple[float, float, float]]) -> float | None:
        d = sum(c - a for a, _, c in ts)
        return sum(b - a for a, b, _ in ts) / d if d else None

    value = ratio(triples)
    if g >= MIN_FAMILIES:
        lo, hi = bootstrap_interval(triples, ratio, clusters=families, n_boot=n_boot,
                                    seed=seed, level=level)
        return KPI(name=name, value=value, lo=lo, hi=hi, n=len(triples), unit=unit, estimate=False,
                   kind="ratio", method="cluster-bootstrap", n_families=g)
    return KPI(name=name, value=value, lo=None, hi=None, n=len(triples), unit=unit, estimate=False,
               kind="ratio", method="unavailable", n_families=g,
               note=f"{g} famil{'y' if g == 1 else 'ies'} < {MIN_FAMILIES}: no interval")
