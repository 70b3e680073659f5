"""KPIs of one evaluation point, each with n, its task families and a 95% interval.

Each KPI has a kind, declared where it is built, and its interval follows from the kind
(METHODS.md 5):

- ``proportion`` (a share of probes, recalled items, procedures, floors): a Wilson interval
  on the effective sample size n / design effect, the design effect from the data's
  intra-family correlation (Kish: 1 + (m - 1) * ICC, never below 1; one family counts as
  one observation). Honest at small n: 3 of 3 gives [0.44, 1.00], never [1, 1].
- ``mean`` (a mean of per-probe figures; paired figures are differenced per probe): a
  percentile interval of a cluster bootstrap (families resampled whole) with at least
  :data:`MIN_FAMILIES` families; with fewer, a cluster-level t interval (too few
  resamples exist for percentiles); with one family, no interval at all; values without
  any variation: a bound from Wilson's on the share of families that could differ.
- ``ratio``: :func:`oracle_gain_recovered`.
- ``count``: n and no interval.

A KPI built on the replay rule has ``estimate=True`` and says so wherever it is printed.
The interval statistics themselves are :mod:`.intervals` (their names importable here too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from ...pipeline.skill import PROFILES
from .intervals import (
    N_BOOT,
    bootstrap_interval,
    cluster_t_interval,
    design_effect,
    mean_interval,
    wilson_interval,
)

__all__ = [
    "KPI",
    "MIN_FAMILIES",
    "N_BOOT",
    "SHARE",
    "SHARE_CHANGE",
    "KPIKind",
    "ProbeResult",
    "ProcedureCheck",
    "bootstrap_interval",
    "cluster_t_interval",
    "design_effect",
    "mean_kpi",
    "point_kpis",
    "proportion_kpi",
    "wilson_interval",
]

#: The fewest task families a percentile bootstrap is trusted with, and the fewest on which
#: the verdict decides a row. A PASS reads the lower bound of a 95% interval, a one-sided
#: test at 2.5%; the smallest number of independent families whose unanimous agreement
#: reaches that level without assuming a distribution (a sign test) is 6: 0.5**6 = 1.6%,
#: while 0.5**5 = 3.1% (METHODS.md 5).
MIN_FAMILIES = 6
Arm = Literal["no-memory", "memory"]
KPIKind = Literal["proportion", "mean", "ratio", "count"]


@dataclass(frozen=True)
class ProbeResult:
    """One row of the per-probe results table: one probe under one arm.

    Attributes:
        strategy: the design under test (the ``no-memory`` arm repeats it for pairing).
        arm: ``no-memory`` (nothing recalled) or ``memory`` (the strategy's recall).
        probe_session: the held-out session.
        family: the probe's task family (a label: used for scoring only).
        goal: the probe's first user turn (what recall was asked).
        recalled_ids, recalled_scores: what recall returned, best first.
        recalled_right: how many of them came from the probe's family.
        family_has_procedure: an active procedure of the probe's family was in the store.
        steps_recorded: the probe's recorded tool calls.
        steps: the arm's tool steps under ``steps_method``.
        steps_method: ``recorded``, ``replay-v1`` (an estimate) or ``live``.
        success: the arm's outcome (recorded label for replay arms; judged for live).
        prompt_chars: characters of the injected procedures block.
        tokens: model tokens the arm used (live agent only).
        llm_calls, cache_hits: model calls the arm made and cache hits among them.
        wall_s: seconds the arm took.
        failed_calls, turns: live runs: calls the world answered with an error; model turns.
        prompt_tokens, completion_tokens: live runs: tokens as the server reported them.
        reward, termination: live runs: the world's reward; how the run ended.
        repeat: live runs: which of the arm's repeated runs this is (0-based).
        world: live runs: the world the arm ran in.
        best_right_score, best_wrong_score: the highest score of the probe's goal for any
            active procedure of its own family, and of another family, under the point's
            recall key (a diagnostic of where recall's tau should sit; keyword strategies
            are diagnosed by when_to_use; None when there is no such procedure).
        gold_matched: live runs: the share of the task's gold actions the run executed
            (tau2's per-action check; None without gold actions).
        gold_writes_matched: live runs: the same share over the task's state-changing gold
            actions only (None for a task without one): progress on what changes the world.
        decisions: live runs: the agent's model turns that issued a call (a recalled plan's
            call is one decision however many world calls it makes; None: not counted).
        seen_task: another attempt at the probe's own task was in the history it was
            recalled against (always so under the ``task`` family rule; under ``tools`` a
            seen task means the goal was not new). None: unknown (no task id).
    """

    strategy: str
    arm: Arm
    probe_session: str
    family: str
    goal: str
    recalled_ids: tuple[str, ...]
    recalled_scores: tuple[float, ...]
    recalled_right: int
    family_has_procedure: bool
    steps_recorded: int
    steps: int
    steps_method: str
    success: bool | None
    prompt_chars: int = 0
    tokens: int | None = None
    llm_calls: int = 0
    cache_hits: int = 0
    wall_s: float = 0.0
    best_right_score: float | None = None
    best_wrong_score: float | None = None
    failed_calls: int = 0
    turns: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reward: float | None = None
    termination: str | None = None
    repeat: int = 0
    world: str | None = None
    seen_task: bool | None = None
    gold_matched: float | None = None
    decisions: int | None = None
    gold_writes_matched: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (one line of ``results.jsonl``)."""
        d = asdict(self)
        d["recalled_ids"] = list(self.recalled_ids)
        d["recalled_scores"] = list(self.recalled_scores)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProbeResult:
        """Inverse of :meth:`as_dict` (extra keys, such as sweep parameters, are ignored)."""
        names = cls.__dataclass_fields__
        kw = {k: v for k, v in d.items() if k in names}
        kw["recalled_ids"] = tuple(kw["recalled_ids"])
        kw["recalled_scores"] = tuple(float(s) for s in kw["recalled_scores"])
        return cls(**kw)


@dataclass(frozen=True)
class ProcedureCheck:
    """What was checked about one synthesized procedure.

    Attributes:
        id, name: the procedure.
        families: the task families of its provenance sessions (most common first).
        valid: profile -> the exported SKILL.md re-read cleanly by that profile's parser.
        errors: profile -> what the parser said (empty when valid).
        provenance_ok: every provenance session is a history session with tool calls.
    """

    id: str
    name: str
    families: tuple[str, ...]
    valid: Mapping[str, bool]
    errors: Mapping[str, str]
    provenance_ok: bool

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (families as a list, as ``json`` writes a tuple)."""
        return asdict(self) | {"families": list(self.families)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProcedureCheck:
        """Inverse of :meth:`as_dict`."""
        return cls(id=d["id"], name=d["name"], families=tuple(d["families"]), valid=d["valid"],
                   errors=d["errors"], provenance_ok=d["provenance_ok"])


@dataclass(frozen=True)
class KPI:
    """One figure with its sample size and 95% interval.

    The fields after ``estimate`` were added later: a ``summary.json`` written before them
    lacks them, and :meth:`from_dict` gives them their defaults.

    Attributes:
        name: the KPI.
        value: the point value (None when n is 0, or when not measured: ``note`` says why).
        lo, hi: the interval (None for counts, when n is 0, and where no honest interval
            exists, e.g. a mean over one family).
        n: what the value is computed over (``unit`` says of what).
        unit: ``probes``, ``procedures``, ``recalled``, ``floors`` or ``calls``.
        estimate: the value comes from the replay rule, not a measurement.
        kind: ``proportion``, ``mean``, ``ratio`` or ``count``: it decides the interval.
        method: how the interval was made (``wilson``, ``wilson-deff``, ``cluster-bootstrap``,
            ``cluster-t``, ``none``; ``unavailable`` where it could not be).
        n_families: the task families the units fall in (None: the units are not clustered,
            e.g. procedures).
        design_effect: proportions: the Kish design effect n was divided by.
        note: why the value or interval is missing, when it is.
    """

    name: str
    value: float | None
    lo: float | None
    hi: float | None
    n: int
    unit: str
    estimate: bool = False
    kind: KPIKind = "count"
    method: str = "none"
    n_families: int | None = None
    design_effect: float | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], name: str = "") -> KPI:
        """Inverse of :meth:`as_dict`, values as written. A field the dict lacks (a file
        written before it existed, a hand-written table) takes its default; ``name``: the
        KPI map's key, for a dict without one."""
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**({"name": name, "value": None, "lo": None, "hi": None, "n": 0,
                       "unit": ""} | kw))

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.name}: n/a (n={self.n}{'; ' + self.note if self.note else ''})"
        ci = f" [{self.lo:.3f}, {self.hi:.3f}]" if self.lo is not None and self.hi is not None \
            else ""
        fams = f", {self.n_families} families" if self.n_families is not None else ""
        tag = " (estimate)" if self.estimate else ""
        return f"{self.name}: {self.value:.3f}{ci} n={self.n} {self.unit}{fams}{tag}"


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def proportion_kpi(name: str, values: Sequence[float], *, unit: str,
                   clusters: Sequence[Hashable] | None = None, estimate: bool = False,
                   level: float = 0.95) -> KPI:
    """A share (each value in [0, 1]: an outcome, or one probe's success rate over its
    repeats) with a Wilson interval on n / design effect (:func:`design_effect`)."""
    vals = [float(v) for v in values]
    fams = len(set(clusters)) if clusters is not None else None
    if not vals:
        return KPI(name=name, value=None, lo=None, hi=None, n=0, unit=unit, estimate=estimate,
                   kind="proportion", method="none", n_families=fams)
    deff, _ = design_effect(vals, clusters)
    p = float(np.mean(vals))
    lo, hi = wilson_interval(p * len(vals) / deff, len(vals) / deff, level=level)
    return KPI(name=name, value=p, lo=lo, hi=hi, n=len(vals), unit=unit, estimate=estimate,
               kind="proportion", method="wilson" if deff == 1.0 else "wilson-deff",
               n_families=fams, design_effect=round(deff, 4))


#: The range of a share (a rate in [0, 1]) and of a paired change in one.
SHARE, SHARE_CHANGE = (0.0, 1.0), (-1.0, 1.0)


def mean_kpi(name: str, values: Sequence[float], *, unit: str, clusters: Sequence[Hashable],
             estimate: bool = False, seed: int = 0, n_boot: int = N_BOOT,
             level: float = 0.95,
             bounds: tuple[float | None, float | None] = (None, None)) -> KPI:
    """A mean of per-probe figures: a cluster bootstrap with :data:`MIN_FAMILIES` families
    or more, a cluster-level t interval with fewer, no interval with one family (a
    resample of one family is that family: a zero-width interval says nothing), a bound
    from the families that could differ where the values have no variation
    (:func:`.intervals.mean_interval`).

    ``bounds``: the range every value lies in (a share's change: -1 to 1), to which the
    interval is clipped: a t interval over few families can reach past what the mean can
    be (0.75 [-0.05, 1.55] over 4), and a bound it cannot take is no information."""
    vals = [float(v) for v in values]
    if not vals:
        return KPI(name=name, value=None, lo=None, hi=None, n=0, unit=unit, estimate=estimate,
                   kind="mean", method="none", n_families=0)
    g = len(set(clusters))
    lo, hi, method, note = mean_interval(vals, clusters, bounds=bounds,
                                         min_families=MIN_FAMILIES, n_boot=n_boot, seed=seed,
                                         level=level)
    value = float(np.mean(vals))
    return KPI(name=name, value=value, lo=lo, hi=hi, n=len(vals), unit=unit, estimate=estimate,
               kind="mean", method=method, n_families=g, note=note)


def _reduction(r: ProbeResult) -> float:
    return (r.steps_recorded - r.steps) / r.steps_recorded


@dataclass(frozen=True)
class _Arm:
    """One arm of one probe over its repeats."""

    family: str
    success: float | None  # share of repeats the world judged a success
    steps_ok: float | None  # mean steps over successful repeats
    prompt_tokens: float | None
    decisions_ok: float | None = None  # mean agent decisions over successful counted repeats


def _arm(runs: Sequence[ProbeResult]) -> _Arm:
    judged = [r for r in runs if r.success is not None]
    ok = [r.steps for r in judged if r.success]
    toks = [r.prompt_tokens for r in runs if r.prompt_tokens is not None]
    dec = [float(r.decisions) for r in judged if r.success and r.decisions is not None]
    return _Arm(family=runs[0].family,
                success=_mean([float(bool(r.success)) for r in judged]) if judged else None,
                steps_ok=_mean([float(x) for x in ok]) if ok else None,
                prompt_tokens=_mean([float(x) for x in toks]) if toks else None,
                decisions_ok=_mean(dec) if dec else None)


def _live_kpis(live: Sequence[ProbeResult], kw: dict[str, Any]) -> list[KPI]:
    """Paired per probe: the no-memory and memory arms of the live agent.

    With r repeats per arm a probe's arm is summarized first (success rate, mean steps of
    its successful runs, mean prompt tokens), then probes are paired; with r = 1 these are
    the runs themselves. Intervals cluster by family. ``live_decision_reduction`` is
    ``live_step_reduction`` on the agent's decisions (the probes solved in both arms): a
    plan's world calls count as steps but its call as one decision, so the two together
    show whether a plan saves the agent's work or only hides calls (runs recorded before
    decisions were counted have none).
    """
    runs: dict[str, dict[str, list[ProbeResult]]] = defaultdict(lambda: defaultdict(list))
    for r in live:
        runs[r.probe_session][r.arm].append(r)
    pairs = [(_arm(a["no-memory"]), _arm(a["memory"])) for a in runs.values()
             if a.get("no-memory") and a.get("memory")]
    both_ok = [(b, m) for b, m in pairs if b.steps_ok and m.steps_ok is not None]
    dec_ok = [(b, m) for b, m in pairs if b.decisions_ok and m.decisions_ok is not None]
    known = [(b, m) for b, m in pairs if b.success is not None and m.success is not None]
    toks = [(b, m) for b, m in pairs if b.prompt_tokens and m.prompt_tokens is not None]
    Pairs = list[tuple[_Arm, _Arm]]

    def fams(ps: Pairs) -> list[str]:
        return [b.family for b, _ in ps]

    def worse(b: _Arm, m: _Arm) -> bool:
        return m.success < b.success or (  # type: ignore[operator]
            m.success == b.success and b.steps_ok is not None and m.steps_ok is not None
            and m.steps_ok > b.steps_ok)

    return [
        mean_kpi("live_step_reduction",
                 [(b.steps_ok - m.steps_ok) / b.steps_ok for b, m in both_ok],  # type: ignore[operator]
                 unit="probes", clusters=fams(both_ok), bounds=(None, 1.0), **kw),
        mean_kpi("live_decision_reduction",
                 [(b.decisions_ok - m.decisions_ok) / b.decisions_ok  # type: ignore[operator]
                  for b, m in dec_ok], unit="probes", clusters=fams(dec_ok),
                 bounds=(None, 1.0), **kw),
        mean_kpi("live_success_change", [m.success - b.success for b, m in known],  # type: ignore[operator]
                 unit="probes", clusters=fams(known), bounds=SHARE_CHANGE, **kw),
        proportion_kpi("live_share_made_worse", [float(worse(b, m)) for b, m in known],
                       unit="probes", clusters=fams(known)),
        # the part of it that is quality, not cost: where the no-memory agent already
        # succeeds, more calls to the same success count as made worse too
        proportion_kpi("live_share_success_lost",
                       [float(m.success < b.success) for b, m in known],  # type: ignore[operator]
                       unit="probes", clusters=fams(known)),
        # with repeats each value is a probe's success rate: still a share in [0, 1]
        proportion_kpi("live_success_no_memory", [b.success for b, _ in known],  # type: ignore[misc]
                       unit="probes", clusters=fams(known)),
        mean_kpi("live_prompt_token_change",
                 [(m.prompt_tokens - b.prompt_tokens) / b.prompt_tokens  # type: ignore[operator]
                  for b, m in toks], unit="probes", clusters=fams(toks), **kw),
    ]


def _recalled_items(rs: Sequence[ProbeResult]) -> tuple[list[float], list[str]]:
    """Recall precision's units: one outcome per recalled procedure (right: of the probe's
    family), clustered by the probe's family."""
    vals: list[float] = []
    fams: list[str] = []
    for r in rs:
        k = len(r.recalled_ids)
        vals += [1.0] * r.recalled_right + [0.0] * (k - r.recalled_right)
        fams += [r.family] * k
    return vals, fams


def point_kpis(rows: Sequence[ProbeResult], procedures: Sequence[ProcedureCheck],
               floors: Mapping[str, bool | None], *, llm_calls: int = 0, cache_hits: int = 0,
               grounded: Sequence[bool] = (), duplicate_names: int = 0,
               seed: int = 0, n_boot: int = N_BOOT) -> dict[str, KPI]:
    """Every KPI of one point from its ``memory``-arm rows and its synthesis checks.

    ``floors`` maps each floor to True (behaved), False (misbehaved) or None (not
    exercised at this point, e.g. nothing to distil). ``grounded`` holds one flag per
    distillation answer that parsed into a skill: did every tool it requires occur among
    its cluster's calls. ``duplicate_names``: written skills renamed because an active
    procedure had their name. Each KPI's kind (and so its interval) is declared here, by
    the builder that makes it: :func:`proportion_kpi` or :func:`mean_kpi`.
    """
    live = [r for r in rows if r.steps_method == "live"]
    rows = [r for r in rows if r.steps_method != "live"]
    mem = [r for r in rows if r.arm == "memory"]
    with_steps = [r for r in mem if r.steps_recorded > 0]
    # Replay points label every step KPI an estimate (also probes where nothing was recalled:
    # the comparison is still against the rule); only live-agent steps are measurements.
    est = any(r.steps_method != "live" for r in with_steps)
    kw: dict[str, Any] = {"seed": seed, "n_boot": n_boot}

    def share(name: str, rs: Sequence[ProbeResult], pred: Callable[[ProbeResult], bool],
              estimate: bool = False) -> KPI:
        return proportion_kpi(name, [float(pred(r)) for r in rs], unit="probes",
                              clusters=[r.family for r in rs], estimate=estimate)

    def mean(name: str, rs: Sequence[ProbeResult], f: Callable[[ProbeResult], float],
             estimate: bool = False) -> KPI:
        return mean_kpi(name, [f(r) for r in rs], unit="probes",
                        clusters=[r.family for r in rs], estimate=estimate, **kw)

    def precision(name: str, rs: Sequence[ProbeResult]) -> KPI:
        vals, fams = _recalled_items(rs)
        return proportion_kpi(name, vals, unit="recalled", clusters=fams)

    out = [
        share("synthesis_fired_rate", mem, lambda r: r.family_has_procedure),
        share("recall_hit_rate", mem, lambda r: r.recalled_right > 0),
        precision("recall_precision", mem),
        mean("step_reduction", with_steps, _reduction, est),
        mean("steps_saved", with_steps, lambda r: float(r.steps_recorded - r.steps), est),
        share("share_made_worse", with_steps, lambda r: r.steps > r.steps_recorded, est),
    ]
    # where recall's tau can sit under the point's recall key: right vs best wrong
    both = [r for r in mem if r.best_right_score is not None and r.best_wrong_score is not None]
    out += [
        mean("recall_separation", both,
             lambda r: float(r.best_right_score - r.best_wrong_score)),  # type: ignore[operator]
        share("right_above_wrong", both,
              lambda r: r.best_right_score > r.best_wrong_score),  # type: ignore[operator]
    ]
    # probes whose own task was in their history (another attempt at it) say little about
    # new goals: where some were, the recall and step KPIs again over the others only
    if any(r.seen_task for r in mem) and not all(r.seen_task for r in mem):
        new = [r for r in mem if r.seen_task is False]
        out += [
            share("recall_hit_rate_unseen_task", new, lambda r: r.recalled_right > 0),
            precision("recall_precision_unseen_task", new),
            mean("step_reduction_unseen_task", [r for r in new if r.steps_recorded > 0],
                 _reduction, est),
        ]
    if live:
        out += _live_kpis(live, kw)
        # the replay estimate on exactly the probes that ran live, to read beside them
        ran = {x.probe_session for x in live}
        out.append(mean("step_reduction_live_probes",
                        [r for r in with_steps if r.probe_session in ran], _reduction, est))
    out += _synthesis_kpis(procedures, floors, grounded, duplicate_names, llm_calls,
                           cache_hits)
    return {k.name: k for k in out}


def _synthesis_kpis(procedures: Sequence[ProcedureCheck], floors: Mapping[str, bool | None],
                    grounded: Sequence[bool], duplicate_names: int, llm_calls: int,
                    cache_hits: int) -> list[KPI]:
    """The synthesis checks' KPIs: procedures, answers and floors are not clustered (each is
    its own unit), model calls are counts."""
    out: list[KPI] = []
    for profile in PROFILES:
        out.append(proportion_kpi(f"validity_{profile}",
                                  [float(c.valid.get(profile, False)) for c in procedures],
                                  unit="procedures"))
    out.append(proportion_kpi("provenance_integrity",
                              [float(c.provenance_ok) for c in procedures], unit="procedures"))
    out.append(proportion_kpi("grounded_tools_rate", [float(x) for x in grounded],
                              unit="answers"))
    out.append(KPI(name="duplicate_name_count", value=float(duplicate_names), lo=None, hi=None,
                   n=sum(grounded), unit="skills"))
    exercised = [ok for ok in floors.values() if ok is not None]
    out.append(proportion_kpi("floors_behaved", [float(x) for x in exercised], unit="floors"))
    out.append(KPI(name="llm_calls", value=float(llm_calls), lo=None, hi=None,
                   n=llm_calls + cache_hits, unit="calls"))
    lookups = llm_calls + cache_hits
    out.append(KPI(name="cache_hit_rate", value=cache_hits / lookups if lookups else None, lo=None,
                   hi=None, n=lookups, unit="calls"))
    return out
