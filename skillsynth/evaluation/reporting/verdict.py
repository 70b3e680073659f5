"""The verdict: #887's acceptance criteria, each against its target, for one point.

A maintainer reads one table: each KPI of GAIA's #887 design with its target, the measured
value with its interval and n, and PASS, FAIL, INCONCLUSIVE (too few families, no
interval, or an interval that holds both a passing and a failing value: :func:`judge`),
INSENSITIVE (the positive control did not separate from no memory, so the instrument
could not have shown an effect: :func:`control_check`) or NOT MEASURED (n = 0). Tool-step
reduction is the live measurement where the point has one, else the replay estimate,
labelled so. A live point with gold actions adds graded progress (the share of the task's
gold actions executed), read against the oracle's change in it: the effect a binary reward
hides. The recommended configuration is the skillsynth point with the best step
reduction that loses no success (ties: fewer probes made worse); GAIA's defaults are the
point at GAIA's shipped thresholds, when run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from ..point.control_checks import SENSITIVITY
from ..point.lumping import LUMPED_SHARE
from ..point.metrics import KPI, MIN_FAMILIES
from ..sweeps.summary import PointEntry, PointLike, PointT, as_entry

__all__ = [
    "CONTROLS",
    "GAIA_DEFAULTS",
    "UNDECIDED",
    "KPILike",
    "Status",
    "VerdictRow",
    "adoptable",
    "control_check",
    "gaia_default_point",
    "judge",
    "no_verdict_reason",
    "recommend",
    "run_control",
    "run_negative",
    "verdict",
    "verdict_points",
]

Status = Literal["PASS", "FAIL", "INCONCLUSIVE", "INSENSITIVE", "NOT MEASURED"]
#: Statuses that decide nothing either way: the gate passes them and prints them loudly.
UNDECIDED: frozenset[str] = frozenset({"INCONCLUSIVE", "INSENSITIVE"})
#: The positive control each effect row needs, by basis: the oracle arm minus the
#: no-memory arm, paired per probe (KPIs written by the control arms; absent before them).
CONTROLS = {"live steps": "live_sensitivity_steps",
            "replay steps": "replay_sensitivity_steps",
            "live success": "live_sensitivity_success",
            "live progress": "live_sensitivity_progress"}
#: GAIA's shipped synthesis settings (#887): the point a maintainer compares against.
GAIA_DEFAULTS = {"similarity_tau": 0.82, "min_occurrences": 3, "max_recall_body_chars": 1500}
#: A KPI, typed or as its JSON dict (what :func:`judge` and :func:`control_check` accept).
KPILike = KPI | Mapping[str, Any]


@dataclass(frozen=True)
class VerdictRow:
    """One acceptance criterion at one point.

    Attributes:
        criterion: the #887 KPI.
        target: what it must reach, in words.
        kpi: the skillsynth KPI measured for it.
        value, lo, hi, n: the measurement (None when not measured).
        status: PASS, FAIL, INCONCLUSIVE, INSENSITIVE or NOT MEASURED (module docstring).
        basis: ``live``, ``replay estimate``, ``checks`` (floors, validity) or ``-``.
        note: what else to read beside it (e.g. the share of probes made worse, the
            positive control).
        why: for INCONCLUSIVE, INSENSITIVE and NOT MEASURED, the reason (n, families,
            the interval and its width, the control).
        n_families: the task families behind n (None where unknown or unclustered).
    """

    criterion: str
    target: str
    kpi: str
    value: float | None
    lo: float | None
    hi: float | None
    n: int
    status: Status
    basis: str
    note: str = ""
    why: str = ""
    n_families: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _kpi(k: KPILike | None, name: str = "") -> KPI | None:
    """``k`` typed; None for no KPI (an empty dict included)."""
    if isinstance(k, KPI) or k is None:
        return k
    return KPI.from_dict(k, name) if k else None


def _k(kpis: Mapping[str, KPI], name: str) -> tuple[float | None, float | None, float | None,
                                                     int]:
    k = kpis.get(name)
    return (None, None, None, 0) if k is None else (k.value, k.lo, k.hi, int(k.n or 0))


def _ran_live(kpis: Mapping[str, KPI]) -> bool:
    """The point ran live arms (judged on them, even where no probe succeeded in both)."""
    return bool(_k(kpis, "live_success_change")[3] or _k(kpis, "live_step_reduction")[3])


def _plural(n: int) -> str:
    return f"{n} famil{'y' if n == 1 else 'ies'}"


def _too_few(k: KPI) -> str:
    """Why a KPI is too small to decide anything, or "". Its families where the KPI says
    (``n_families``); a run written before that field: n, an upper bound on them."""
    fams = k.n_families
    if fams is not None:
        return f"{_plural(int(fams))} < {MIN_FAMILIES}" if fams < MIN_FAMILIES else ""
    n = int(k.n or 0)
    return f"n={n} < {MIN_FAMILIES} (families not recorded)" if n < MIN_FAMILIES else ""


def _ci(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return "(no interval)"
    return f"[{lo:.2f}, {hi:.2f}] (width {hi - lo:.2f})"


def judge(kpi: KPILike | None, target: float, *, strict: bool) -> tuple[Status, str]:
    """The one rule for a criterion read off an interval: the status and why.

    NOT MEASURED: no value or n = 0. INCONCLUSIVE: fewer than
    :data:`~skillsynth.evaluation.metrics.MIN_FAMILIES` families (too few for any interval
    to be trusted), no interval, or an interval holding both a passing and a failing
    value. PASS: every value in the interval passes (above the target; at it too unless
    ``strict``); FAIL: every value fails.
    """
    k = _kpi(kpi)
    if k is None or k.value is None or not k.n:
        return "NOT MEASURED", (k.note if k else "") or "n=0"
    lo, hi, n = k.lo, k.hi, int(k.n)
    few = _too_few(k)
    if few:
        return "INCONCLUSIVE", f"{few}: too few to decide; n={n}, interval {_ci(lo, hi)}"
    if lo is None or hi is None:
        return "INCONCLUSIVE", f"no interval (n={n})"
    if lo > target or (not strict and lo >= target):
        return "PASS", ""
    if hi < target or (strict and hi <= target):
        return "FAIL", ""
    return "INCONCLUSIVE", (f"interval {_ci(lo, hi)} holds passing and failing values for "
                            f"the target {'>' if strict else '>='} {target:g}; n={n}")


def control_check(kpis: Mapping[str, KPILike], name: str) -> tuple[bool | None, str]:
    """Could the instrument see an effect? The positive control ``name`` (oracle minus no
    memory, paired) separates from none when its interval lies above 0, over enough
    families (:func:`judge`'s minimum): an ideal procedure that scores below none shows the
    measure cannot see a gain. None: the control was not run (no such KPI).
    """
    k = _kpi(kpis.get(name), name)
    if k is None:
        return None, f"positive control not run ({name} absent)"
    value, lo, hi, n = k.value, k.lo, k.hi, int(k.n or 0)
    if value is None or n == 0:
        return False, f"positive control {name} not measured (n={n})"
    shown = f"{name} {value:.2f} {_ci(lo, hi)} n={n}" + (
        f" ({k.note})" if str(k.note or "").startswith("from the") else "")
    few = _too_few(k)
    if few:
        return False, f"positive control {shown}: {few}"
    if lo is None or hi is None or lo <= 0 <= hi:
        return False, f"positive control {shown} does not separate from none"
    if hi < 0:  # the ideal procedure scores worse than none: the measure cannot show a gain
        return False, f"positive control {shown} scores below none: the measure cannot show a gain"
    return True, f"positive control {shown} separates from none"


def _row(criterion: str, target: str, kpis: Mapping[str, KPI], name: str, threshold: float,
         *, strict: bool, basis: str, note: str = "", control: str | None = None
         ) -> VerdictRow:
    """A criterion judged on ``name``'s interval, then against its positive control."""
    k = kpis.get(name)
    v, lo, hi, n = _k(kpis, name)
    status, why = judge(k, threshold, strict=strict)
    if control is not None and status != "NOT MEASURED":
        sep, said = control_check(kpis, control)
        if sep is False:
            why = said + (f"; otherwise {status}" + (f" ({why})" if why else ""))
            status = "INSENSITIVE"
        else:
            note = f"{note}; {said}" if note else said
    return VerdictRow(criterion=criterion, target=target, kpi=name, value=v, lo=lo, hi=hi, n=n,
                      status=status, basis=basis, note=note, why=why,
                      n_families=k.n_families if k else None)


def _all(value: float | None, n: int) -> Status:
    if value is None or n == 0:
        return "NOT MEASURED"
    return "PASS" if value >= 1.0 - 1e-9 else "FAIL"


#: The positive controls a run's other points are read against, preferred first: the
#: realistic oracle (the ideal procedure synthesis could write, no argument values), then
#: tau2's upper bound with the gold arguments.
POSITIVE_CONTROLS = ("oracle", "oracle-args")


def run_control(points: Sequence[PointT], point: PointLike) -> tuple[str, PointT] | None:
    """The run's positive-control point for ``point``: same probes (the same protocol; a
    sweep's other settings are the same for all its points), the oracle preferred. None
    when the run has none."""
    for name in POSITIVE_CONTROLS:
        found = _same_protocol(points, point, name)
        if found is not None:
            return name, found
    return None


def run_negative(points: Sequence[PointT], point: PointLike) -> PointT | None:
    """The run's mismatched-control point for ``point`` (same protocol), or None."""
    return _same_protocol(points, point, "mismatched")


def _same_protocol(points: Sequence[PointT], point: PointLike, strategy: str) -> PointT | None:
    """The first of ``points`` running ``strategy`` under ``point``'s protocol."""
    proto = as_entry(point).protocol.get("protocol", "strict")
    return next((p for p in points if as_entry(p).strategy == strategy
                 and as_entry(p).protocol.get("protocol", "strict") == proto), None)


def verdict(point: PointLike, control: tuple[str, PointLike] | None = None,
            negative: PointLike | None = None) -> list[VerdictRow]:
    """#887's criteria at one point of a sweep summary (``summary.json``'s ``points``).

    ``control``: the run's positive-control point (:func:`run_control`): where the point
    has no sensitivity KPI of its own, the control's is read (labelled with its strategy).
    ``negative``: the run's mismatched-control point (:func:`run_negative`): its graded
    progress is shown beside the point's (a wrong procedure that does as much says the
    measure sees that a procedure was recalled, not what it said).
    """
    pt = as_entry(point)
    kpis = dict(pt.kpis)
    if control is not None:
        name, cp = control[0], as_entry(control[1])
        for kpi in CONTROLS.values():
            got = cp.kpis.get(kpi) or cp.kpis.get(SENSITIVITY[kpi])  # older summaries: the source
            if kpi not in kpis and got is not None:
                kpis[kpi] = replace(got, name=kpi, note=f"from the {name} point {cp.id}")
    rows: list[VerdictRow] = []
    rows.append(_row("Auto-synthesis fires", "a procedure exists for families with >= 3 "
                     "similar successes (share of probes > 0)", kpis, "synthesis_fired_rate",
                     0.0, strict=True, basis="replay"))
    has_live = _ran_live(kpis)
    worse_name = "live_share_made_worse" if has_live else "share_made_worse"
    w = _k(kpis, worse_name)
    worse_note = f"{worse_name} {w[0]:.2f} (n={w[3]})" if w[0] is not None else ""
    name, basis = ("live_step_reduction", "live") if has_live else \
        ("step_reduction", "replay estimate")
    note = worse_note
    est = _k(kpis, "step_reduction_live_probes")
    if has_live and est[0] is not None:
        note += f"; replay estimate on these probes {est[0]:.2f} (n={est[3]})"
    rows.append(_row("Tool-step reduction", "the 4th attempt uses fewer tool steps than "
                     "without memory (reduction > 0)", kpis, name, 0.0, strict=True,
                     basis=basis, note=note,
                     control=CONTROLS["live steps" if has_live else "replay steps"]))
    n_change = _k(kpis, "live_success_change")[3]
    rows.append(_row("No harm", "memory never lowers the success rate (change >= 0)", kpis,
                     "live_success_change", 0.0, strict=False,
                     basis="live" if n_change else "-", note=worse_note if has_live else "",
                     control=CONTROLS["live success"]))
    if has_live and "live_gold_actions_matched_change" in kpis:
        rows.append(_progress(kpis, None if negative is None else as_entry(negative)))
    return rows + _checks(kpis, pt.floors)


def _checks(kpis: Mapping[str, KPI], floors: Mapping[str, bool | None]) -> list[VerdictRow]:
    """The criteria read from the point's checks: format validity, grounding, the floors,
    recall precision, the strategy's own and provenance."""
    rows: list[VerdictRow] = []
    for profile in ("gaia691", "agentskills"):
        v, lo, hi, n = _k(kpis, f"validity_{profile}")
        rows.append(VerdictRow(criterion=f"Format validity ({profile})",
                               target="100% of synthesized SKILL.md validate, round-tripped",
                               kpi=f"validity_{profile}", value=v, lo=lo, hi=hi, n=n,
                               status=_all(v, n), basis="checks"))
    v, lo, hi, n = _k(kpis, "grounded_tools_rate")
    rows.append(VerdictRow(criterion="Grounding",
                           target="100% of skills name only tools their runs called",
                           kpi="grounded_tools_rate", value=v, lo=lo, hi=hi, n=n, status=_all(v, n),
                           basis="checks"))
    exercised = {f: ok for f, ok in floors.items() if ok is not None}
    bad = sorted(f for f, ok in exercised.items() if ok is False)
    v, lo, hi, _ = _k(kpis, "floors_behaved")
    rows.append(VerdictRow(criterion="No silent fallback",
                           target="memory off, synthesis off, model down, malformed answer: "
                           "skipped and logged, never a swap",
                           kpi="floors_behaved", value=v, lo=lo, hi=hi, n=len(exercised),
                           status="NOT MEASURED" if not exercised
                           else ("FAIL" if bad else "PASS"), basis="checks",
                           note=f"misbehaved: {', '.join(bad)}" if bad else ""))
    state = [floors.get(f) for f in ("recall-threshold-and-state", "disabled-not-recalled")]
    seen = [s for s in state if s is not None]
    v, lo, hi, n = _k(kpis, "recall_precision")
    # nothing recalled (n = 0): the floors may have behaved, but no recall was judged
    rows.append(VerdictRow(criterion="Recall precision",
                           target="only above tau; a disabled procedure never",
                           kpi="recall_precision", value=v, lo=lo, hi=hi, n=n,
                           status="NOT MEASURED" if not seen or not n
                           else ("PASS" if all(seen) else "FAIL"), basis="checks",
                           note="judged by the recall floors; the value is the share of "
                           "recalled procedures from the probe's own family (informational)",
                           why="nothing was recalled (n=0)" if seen and not n else "",
                           n_families=_families(kpis, "recall_precision")))
    rows.append(_specific(kpis))
    v, lo, hi, n = _k(kpis, "provenance_integrity")
    rows.append(VerdictRow(criterion="Provenance integrity",
                           target="every from_sessions id resolves to a history session",
                           kpi="provenance_integrity", value=v, lo=lo, hi=hi, n=n,
                           status=_all(v, n), basis="checks"))
    return rows


def _progress(kpis: Mapping[str, KPI], negative: PointEntry | None) -> VerdictRow:
    """Graded progress, beside the binary reward (not one of #887's criteria): a small model
    that never finishes a task can still do more of it with a procedure, and its positive
    control is the oracle's change in the same KPI; the mismatched control's is shown."""
    f = _k(kpis, "live_failed_call_rate_change")
    note = f"live_failed_call_rate_change {f[0]:.2f} (n={f[3]})" if f[0] is not None else ""
    wrong = None if negative is None else negative.kpis.get("live_gold_actions_matched_change")
    if wrong is not None and wrong.value is not None:
        note += ("; " if note else "") + (f"mismatched control {wrong.value:.2f} "
                                          f"{_ci(wrong.lo, wrong.hi)} n={wrong.n} (paired "
                                          "against it: the report's controls table)")
    return _row("Graded progress (beside #887)", "memory raises the share of the task's gold "
                "actions the run executes (change > 0)", kpis,
                "live_gold_actions_matched_change", 0.0, strict=True, basis="live", note=note,
                control=CONTROLS["live progress"])


def _families(kpis: Mapping[str, KPI], name: str) -> int | None:
    k = kpis.get(name)
    return None if k is None else k.n_families


def _specific(kpis: Mapping[str, KPI]) -> VerdictRow:
    """The lumping guard: a pass that puts many goals into one procedure recalls one
    procedure for everything (:mod:`..point.lumping`); said loudly, with the shares."""
    v, lo, hi, n = _k(kpis, "lumped_procedure_share")
    big = _k(kpis, "largest_procedure_share")[0]
    target = ("no procedure stands for many goals (none spans 3+ families without a "
              "majority; the largest holds at most half the members)")
    if n == 0 or v is None:
        return VerdictRow(criterion="Procedures stay specific", target=target,
                          kpi="lumped_procedure_share", value=v, lo=lo, hi=hi, n=n,
                          status="NOT MEASURED", basis="checks", why="no active procedure")
    lumped = v > 0 or (big is not None and big > LUMPED_SHARE)
    note = (f"one procedure for everything: {v:.0%} of {n} procedures lump families"
            + (f", the largest holds {big:.0%} of the members" if big is not None else "")
            ) if lumped else (f"largest procedure {big:.0%} of the members"
                              if big is not None else "")
    return VerdictRow(criterion="Procedures stay specific", target=target,
                      kpi="lumped_procedure_share", value=v, lo=lo, hi=hi, n=n,
                      status="FAIL" if lumped else "PASS", basis="checks", note=note)


def _is(point: PointEntry, values: Mapping[str, Any]) -> bool:
    return all(point.params.get(k) == v for k, v in values.items())


def adoptable(point: PointLike) -> bool:
    """GAIA can run this point by settings alone: it recalls by when_to_use, qualifies
    clusters by the per-call rate and cuts recalled bodies raw (other recall keys, signals
    and cuts need a change to GAIA)."""
    opts = as_entry(point).protocol
    return opts.get("recall_key", "when_to_use") == "when_to_use" and \
        opts.get("rate", "calls") == "calls" and opts.get("recall_cut", "raw") == "raw"


def gaia_default_point(points: Sequence[PointT]) -> PointT | None:
    """The skillsynth point at GAIA's shipped settings, if the sweep ran one (the rolling
    protocol's where both ran: it is how GAIA meets its goals over time)."""
    found = [(p, e) for p, e in zip(points, map(as_entry, points), strict=True)
             if e.strategy == "skillsynth" and adoptable(e) and _is(e, GAIA_DEFAULTS)]
    rolling = [(p, e) for p, e in found if e.protocol.get("protocol") == "rolling"]
    return (rolling or found)[0][0] if found else None


def recommend(points: Sequence[PointT]) -> PointT | None:
    """The point to adopt: the best step reduction (live where measured) among skillsynth
    points GAIA can run by settings (:func:`adoptable`) whose success did not drop (the
    no-harm interval reaches 0 or above, or no live arm), ties broken by fewer probes made
    worse; None when no point qualifies."""
    def key(pe: tuple[PointT, PointEntry]) -> tuple[float, float]:
        k = pe[1].kpis
        live = _ran_live(k)
        red = _k(k, "live_step_reduction" if live else "step_reduction")[0]
        worse = _k(k, "live_share_made_worse" if live else "share_made_worse")[0]
        return (red if red is not None else float("-inf"),
                -(worse if worse is not None else 1.0))

    def harmless(e: PointEntry) -> bool:
        ch = e.kpis.get("live_success_change")
        if ch is None:
            return True
        top = ch.hi if ch.hi is not None else ch.value
        return not ch.n or top is None or float(top) >= 0

    ok = [(p, e) for p, e in zip(points, map(as_entry, points), strict=True)
          if e.strategy == "skillsynth" and adoptable(e) and harmless(e)]
    return max(ok, key=key)[0] if ok else None


def verdict_points(points: Sequence[PointT]) -> list[tuple[str, PointT]]:
    """The points a verdict is given for: the recommended one and GAIA's defaults (once
    each), labelled."""
    out: list[tuple[str, PointT]] = []
    best, gaia = recommend(points), gaia_default_point(points)
    if best is not None:
        out.append(("recommended", best))
    if gaia is not None and (best is None or as_entry(gaia).id != as_entry(best).id):
        out.append(("GAIA defaults", gaia))
    return out


def no_verdict_reason(points: Sequence[PointLike]) -> str:
    """Why :func:`verdict_points` is empty, in one sentence for a report."""
    designs = [e for e in map(as_entry, points) if e.strategy == "skillsynth"]
    if not designs:
        return "No skillsynth point finished: no verdict."
    if any(adoptable(e) for e in designs):
        return ("No verdict: every skillsynth point GAIA can run by its settings alone lowered "
                "success (none to recommend), and none is at GAIA's defaults.")
    return (f"No verdict: none of the {len(designs)} skillsynth point(s) is one GAIA can run "
            "by its settings alone (recall by when_to_use, the per-call rate, bodies cut "
            "raw); read them against the controls.")
