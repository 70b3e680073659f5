"""KPIs of one evaluation point, each with n and a seeded 95% bootstrap interval.

Intervals are percentile intervals of a cluster bootstrap: probes are resampled by task
family (all probes of a family together), so families with several probes do not count as
independent evidence. Paired quantities (steps with and without memory) are differenced
per probe before resampling. A KPI that is a count (LLM calls) has no interval; a KPI
built on the replay rule has ``estimate=True`` and says so wherever it is printed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from ...pipeline.skill import PROFILES

__all__ = [
    "KPI",
    "N_BOOT",
    "ProbeResult",
    "ProcedureCheck",
    "bootstrap_interval",
    "point_kpis",
]

T = TypeVar("T")
#: Bootstrap resamples per interval.
N_BOOT = 2000
Arm = Literal["no-memory", "memory"]


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


@dataclass(frozen=True)
class KPI:
    """One figure with its sample size and 95% interval.

    Attributes:
        name: the KPI.
        value: the point value (None when n is 0).
        lo, hi: the bootstrap interval (None for counts and when n is 0).
        n: what the value is computed over (``unit`` says of what).
        unit: ``probes``, ``procedures``, ``recalled``, ``floors`` or ``calls``.
        estimate: the value comes from the replay rule, not a measurement.
    """

    name: str
    value: float | None
    lo: float | None
    hi: float | None
    n: int
    unit: str
    estimate: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def __str__(self) -> str:
        if self.value is None:
            return f"{self.name}: n/a (n=0)"
        ci = f" [{self.lo:.3f}, {self.hi:.3f}]" if self.lo is not None and self.hi is not None \
            else ""
        tag = " (estimate)" if self.estimate else ""
        return f"{self.name}: {self.value:.3f}{ci} n={self.n} {self.unit}{tag}"


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


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _kpi(name: str, units: Sequence[T], stat: Callable[[list[T]], float | None], *,
         unit: str, clusters: Sequence[Hashable] | None = None, n: int | None = None,
         estimate: bool = False, seed: int, n_boot: int) -> KPI:
    lo, hi = bootstrap_interval(units, stat, clusters=clusters, n_boot=n_boot, seed=seed)
    return KPI(name, stat(list(units)), lo, hi, len(units) if n is None else n, unit, estimate)


def _reduction(r: ProbeResult) -> float:
    return (r.steps_recorded - r.steps) / r.steps_recorded


def _valid_share(profile: str) -> Callable[[list[ProcedureCheck]], float | None]:
    return lambda cs: _mean([float(c.valid.get(profile, False)) for c in cs])


@dataclass(frozen=True)
class _Arm:
    """One arm of one probe over its repeats."""

    family: str
    success: float | None  # share of repeats the world judged a success
    steps_ok: float | None  # mean steps over successful repeats
    prompt_tokens: float | None


def _arm(runs: Sequence[ProbeResult]) -> _Arm:
    judged = [r for r in runs if r.success is not None]
    ok = [r.steps for r in judged if r.success]
    toks = [r.prompt_tokens for r in runs if r.prompt_tokens is not None]
    return _Arm(runs[0].family, _mean([float(bool(r.success)) for r in judged]) if judged
                else None, _mean([float(x) for x in ok]) if ok else None,
                _mean([float(x) for x in toks]) if toks else None)


def _live_kpis(live: Sequence[ProbeResult], kw: dict[str, Any]) -> list[KPI]:
    """Paired per probe: the no-memory and memory arms of the live agent.

    With r repeats per arm a probe's arm is summarized first (success rate, mean steps of
    its successful runs, mean prompt tokens), then probes are paired; with r = 1 these are
    the runs themselves. Intervals resample families.
    """
    runs: dict[str, dict[str, list[ProbeResult]]] = defaultdict(lambda: defaultdict(list))
    for r in live:
        runs[r.probe_session][r.arm].append(r)
    pairs = [(_arm(a["no-memory"]), _arm(a["memory"])) for a in runs.values()
             if a.get("no-memory") and a.get("memory")]
    both_ok = [(b, m) for b, m in pairs if b.steps_ok and m.steps_ok is not None]
    known = [(b, m) for b, m in pairs if b.success is not None and m.success is not None]
    toks = [(b, m) for b, m in pairs if b.prompt_tokens and m.prompt_tokens is not None]
    Pairs = list[tuple[_Arm, _Arm]]

    def reduction(ps: Pairs) -> float | None:
        return _mean([(b.steps_ok - m.steps_ok) / b.steps_ok for b, m in ps])  # type: ignore[operator]

    def change(ps: Pairs) -> float | None:
        return _mean([m.success - b.success for b, m in ps])  # type: ignore[operator]

    def worse(ps: Pairs) -> float | None:
        return _mean([float(m.success < b.success  # type: ignore[operator]
                            or (m.success == b.success and b.steps_ok is not None
                                and m.steps_ok is not None and m.steps_ok > b.steps_ok))
                      for b, m in ps])

    def token_change(ps: Pairs) -> float | None:
        return _mean([(m.prompt_tokens - b.prompt_tokens) / b.prompt_tokens  # type: ignore[operator]
                      for b, m in ps])

    def fams(ps: Pairs) -> list[str]:
        return [b.family for b, _ in ps]

    return [
        _kpi("live_step_reduction", both_ok, reduction, unit="probes", clusters=fams(both_ok),
             **kw),
        _kpi("live_success_change", known, change, unit="probes", clusters=fams(known), **kw),
        _kpi("live_share_made_worse", known, worse, unit="probes", clusters=fams(known), **kw),
        _kpi("live_success_no_memory", known, lambda ps: _mean([b.success for b, _ in ps]),  # type: ignore[misc]
             unit="probes", clusters=fams(known), **kw),
        _kpi("live_prompt_token_change", toks, token_change, unit="probes",
             clusters=fams(toks), **kw),
    ]


def point_kpis(rows: Sequence[ProbeResult], procedures: Sequence[ProcedureCheck],
               floors: Mapping[str, bool | None], *, llm_calls: int = 0, cache_hits: int = 0,
               grounded: Sequence[bool] = (), duplicate_names: int = 0,
               seed: int = 0, n_boot: int = N_BOOT) -> dict[str, KPI]:
    """Every KPI of one point from its ``memory``-arm rows and its synthesis checks.

    ``floors`` maps each floor to True (behaved), False (misbehaved) or None (not
    exercised at this point, e.g. nothing to distil). ``grounded`` holds one flag per
    distillation answer that parsed into a skill: did every tool it requires occur among
    its cluster's calls. ``duplicate_names``: written skills renamed because an active
    procedure had their name.
    """
    live = [r for r in rows if r.steps_method == "live"]
    rows = [r for r in rows if r.steps_method != "live"]
    mem = [r for r in rows if r.arm == "memory"]
    fam = [r.family for r in mem]
    with_steps = [r for r in mem if r.steps_recorded > 0]
    # Replay points label every step KPI an estimate (also probes where nothing was recalled:
    # the comparison is still against the rule); only live-agent steps are measurements.
    est = any(r.steps_method != "live" for r in with_steps)
    kw: dict[str, Any] = {"seed": seed, "n_boot": n_boot}

    def share(pred: Callable[[ProbeResult], bool]) -> Callable[[list[ProbeResult]], float | None]:
        return lambda rs: _mean([float(pred(r)) for r in rs])

    def precision(rs: list[ProbeResult]) -> float | None:
        n = sum(len(r.recalled_ids) for r in rs)
        return sum(r.recalled_right for r in rs) / n if n else None

    out = [
        _kpi("synthesis_fired_rate", mem, share(lambda r: r.family_has_procedure),
             unit="probes", clusters=fam, **kw),
        _kpi("recall_hit_rate", mem, share(lambda r: r.recalled_right > 0), unit="probes",
             clusters=fam, **kw),
        _kpi("recall_precision", mem, precision, unit="recalled", clusters=fam,
             n=sum(len(r.recalled_ids) for r in mem), **kw),
        _kpi("step_reduction", with_steps, lambda rs: _mean([_reduction(r) for r in rs]),
             unit="probes", clusters=[r.family for r in with_steps], estimate=est, **kw),
        _kpi("steps_saved", with_steps,
             lambda rs: _mean([float(r.steps_recorded - r.steps) for r in rs]),
             unit="probes", clusters=[r.family for r in with_steps], estimate=est, **kw),
        _kpi("share_made_worse", with_steps, share(lambda r: r.steps > r.steps_recorded),
             unit="probes", clusters=[r.family for r in with_steps], estimate=est, **kw),
    ]
    # where recall's tau can sit under the point's recall key: right vs best wrong
    both = [r for r in mem if r.best_right_score is not None and r.best_wrong_score is not None]
    out += [
        _kpi("recall_separation", both, lambda rs: _mean(
            [float(r.best_right_score - r.best_wrong_score) for r in rs]),  # type: ignore[operator]
            unit="probes", clusters=[r.family for r in both], **kw),
        _kpi("right_above_wrong", both, share(
            lambda r: r.best_right_score > r.best_wrong_score),  # type: ignore[operator]
            unit="probes", clusters=[r.family for r in both], **kw),
    ]
    # probes whose own task was in their history (another attempt at it) say little about
    # new goals: where some were, the recall and step KPIs again over the others only
    if any(r.seen_task for r in mem) and not all(r.seen_task for r in mem):
        new = [r for r in mem if r.seen_task is False]
        new_steps = [r for r in new if r.steps_recorded > 0]
        out += [
            _kpi("recall_hit_rate_unseen_task", new, share(lambda r: r.recalled_right > 0),
                 unit="probes", clusters=[r.family for r in new], **kw),
            _kpi("recall_precision_unseen_task", new, precision, unit="recalled",
                 clusters=[r.family for r in new], n=sum(len(r.recalled_ids) for r in new),
                 **kw),
            _kpi("step_reduction_unseen_task", new_steps,
                 lambda rs: _mean([_reduction(r) for r in rs]), unit="probes",
                 clusters=[r.family for r in new_steps], estimate=est, **kw),
        ]
    if live:
        out += _live_kpis(live, kw)
        # the replay estimate on exactly the probes that ran live, to read beside them
        same = [r for r in with_steps if r.probe_session in {x.probe_session for x in live}]
        out.append(_kpi("step_reduction_live_probes", same,
                        lambda rs: _mean([_reduction(r) for r in rs]), unit="probes",
                        clusters=[r.family for r in same], estimate=est, **kw))
    for profile in PROFILES:
        out.append(_kpi(f"validity_{profile}", procedures, _valid_share(profile),
                        unit="procedures", **kw))
    out.append(_kpi("provenance_integrity", procedures,
                    lambda cs: _mean([float(c.provenance_ok) for c in cs]),
                    unit="procedures", **kw))
    out.append(_kpi("grounded_tools_rate", list(grounded),
                    lambda xs: _mean([float(x) for x in xs]), unit="answers", **kw))
    out.append(KPI("duplicate_name_count", float(duplicate_names), None, None,
                   sum(grounded), "skills"))
    exercised = [ok for ok in floors.values() if ok is not None]
    out.append(_kpi("floors_behaved", exercised, lambda xs: _mean([float(x) for x in xs]),
                    unit="floors", **kw))
    out.append(KPI("llm_calls", float(llm_calls), None, None, llm_calls + cache_hits, "calls"))
    lookups = llm_calls + cache_hits
    out.append(KPI("cache_hit_rate", cache_hits / lookups if lookups else None, None, None,
                   lookups, "calls"))
    return {k.name: k for k in out}
