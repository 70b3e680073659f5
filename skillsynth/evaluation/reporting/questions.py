"""GAIA's open questions about #887, answered from a sweep run: the report's section and the
Markdown block for an upstream issue (``skillsynth report RUN --for-issue 2676``).

One row per question: the upstream issue, the KPI that answers it (:mod:`..point.questions`),
its value at GAIA's defaults, at the recommended point and under GAIA's own pass
(``gaia-shipped``) where the sweep ran them, and one line a maintainer can act on. The line
is written from the figures, so a run that measured nothing says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import EvaluationError
from ..point.metrics import KPI, MIN_FAMILIES
from ..sweeps.summary import PointEntry, PointLike, PointT, SweepSummary, as_entry
from .gate import settings_of
from .verdict import GAIA_DEFAULTS, KPILike, gaia_default_point, recommend

if TYPE_CHECKING:
    import pandas as pd

    from .report import Run

__all__ = ["ISSUES", "Issue", "QuestionRow", "fmt_kpi", "for_issue", "gaia_shipped_point",
           "question_rows", "question_table"]

Point = PointEntry


@dataclass(frozen=True)
class Issue:
    """An upstream question and what answers it.

    Attributes:
        ref: the upstream reference (``amd/gaia#2676``).
        title: the question, in a few words.
        kpis: the KPIs that answer it, the first the headline.
        vary: the settings whose variants the export shows beside each labelled point.
    """

    ref: str
    title: str
    kpis: tuple[str, ...]
    vary: tuple[str, ...] = ()


#: The questions ``--for-issue`` knows, by issue number (1828 is 1818's companion).
ISSUES: dict[str, Issue] = {
    "2676": Issue(ref="amd/gaia#2676",
                  title="recalled procedures cut mid-step at max_recall_body_chars",
                  kpis=("recall_body_cut_mid_step_share", "recall_body_cut_share",
                        "active_body_cut_mid_step_share", "active_body_cut_share",
                        "live_step_reduction", "live_success_change"),
                  vary=("recall_cut", "max_recall_body_chars")),
    "4033": Issue(ref="amd/gaia#4033",
                  title="fragmented procedures and the cost of a process start",
                  kpis=("procedures_per_family", "fragmented_family_share", "families_served",
                        "starts_until_drained", "startup_model_calls", "startup_seconds",
                        "startup_sessions_consumed", "startup_backlog_max", "distill_cap"),
                  vary=("max_distill_calls_per_pass", "protocol")),
    "2685": Issue(ref="amd/gaia PR #2685",
                  title="success_count / attempt_count never move after insert",
                  kpis=("outcome_updates_recorded", "outcome_updates_possible",
                        "outcome_failures_possible", "recalled_outcome_success_share",
                        "procedures_below_rate_with_feedback"), vary=("protocol",)),
    "1818": Issue(ref="amd/gaia#1818, #1828",
                  title="procedures that say the same thing under different names",
                  kpis=("duplicate_procedure_pairs", "duplicate_procedure_share",
                        "duplicate_pairs_same_family"), vary=("protocol",)),
    "tau": Issue(ref="GAIA memory: 0.82 and its embedder",
                 title="recall gated at 0.82 with an embedder whose related queries score lower",
                 kpis=("recall_hit_rate", "recall_separation", "right_above_wrong",
                       "recall_precision", "share_made_worse", "largest_procedure_share"),
                 vary=("similarity_tau", "recall_tau", "reconcile_tau")),
}
ISSUES["1828"] = ISSUES["1818"]


@dataclass(frozen=True)
class QuestionRow:
    """One row of the report's "GAIA's open questions" section.

    Attributes:
        issue: the upstream reference; question: what it asks; kpi: the headline KPI.
        gaia_defaults, recommended, gaia_shipped: the KPI (and its companions) at each of
            those points, "not run" where the sweep has no such point.
        take: what a maintainer should take from it, in one line.
    """

    issue: str
    question: str
    kpi: str
    gaia_defaults: str
    recommended: str
    gaia_shipped: str
    take: str

    def as_dict(self) -> dict[str, str]:
        """JSON-ready."""
        return asdict(self)


def _k(point: Point | None, name: str) -> KPI | None:
    return None if point is None else point.kpi(name)


def _v(point: Point | None, name: str) -> float | None:
    k = _k(point, name)
    return None if k is None or k.value is None else float(k.value)


def fmt_kpi(k: KPILike | None, digits: int = 2) -> str:
    """``value [lo, hi] n=N unit (F families)``, or ``n/a (n=N; why)``."""
    if not k:
        return "n/a (not in this run)"
    k = k if isinstance(k, KPI) else KPI.from_dict(k)
    n, unit = int(k.n or 0), k.unit
    if k.value is None:
        return f"n/a (n={n}{'; ' + k.note if k.note else ''})"
    ci = f" [{k.lo:.{digits}f}, {k.hi:.{digits}f}]" if k.lo is not None \
        and k.hi is not None else ""
    fams = k.n_families
    tail = f", {fams} famil{'y' if fams == 1 else 'ies'}" \
        if fams is not None and unit != "families" else ""
    return f"{k.value:.{digits}f}{ci} n={n} {unit}{tail}".rstrip()


def gaia_shipped_point(points: Sequence[PointT]) -> PointT | None:
    """GAIA 0.25.1's own pass at GAIA's shipped settings (the rolling protocol's where both
    ran), if the sweep ran it."""
    found = [(p, e) for p, e in zip(points, map(as_entry, points), strict=True)
             if e.strategy == "gaia-shipped"
             and all(e.params.get(k) == v for k, v in GAIA_DEFAULTS.items())
             and e.protocol.get("recall_cut", "raw") == "raw"]
    rolling = [(p, e) for p, e in found if e.protocol.get("protocol") == "rolling"]
    return (rolling or found)[0][0] if found else None


def _twin(point: Point | None, points: Sequence[Point], **changes: Any) -> Point | None:
    """The point that differs from ``point`` in ``changes`` only."""
    if point is None:
        return None
    want = settings_of(point) | changes
    return next((p for p in points if p.strategy == point.strategy
                 and settings_of(p) == want), None)


def _other_tau(point: Point | None, points: Sequence[Point]) -> Point | None:
    """The point that differs from ``point`` only in its taus (the first such)."""
    if point is None:
        return None
    taus = ("similarity_tau", "recall_tau", "reconcile_tau")
    mine = {k: v for k, v in settings_of(point).items() if k not in taus}
    return next((q for q in points if q.id != point.id and q.strategy == point.strategy
                 and {k: v for k, v in settings_of(q).items() if k not in taus} == mine), None)


def _cell(p: Point | None, main: str, *extra: tuple[str, str]) -> str:
    if p is None:
        return "not run"
    text = fmt_kpi(_k(p, main))
    more = [f"{label} {_v(p, name):.2f}" for label, name in extra if _v(p, name) is not None]
    return text + ("; " + ", ".join(more) if more else "")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _few(p: Point | None, name: str) -> str:
    k = _k(p, name)
    fams = None if k is None else k.n_families
    return f" (only {fams} famil{'y' if fams == 1 else 'ies'}: indicative)" \
        if fams is not None and fams < MIN_FAMILIES else ""


def _take_cut(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    p = g or b
    if p is None:
        return "not measured: the sweep ran neither GAIA's defaults nor a recommended point"
    mid, n = _v(p, "recall_body_cut_mid_step_share"), _k(p, "recall_body_cut_mid_step_share")
    limit = p.params.get("max_recall_body_chars")
    if mid is None or n is None or not n.n:
        return (f"nothing was recalled here, so no recalled body was cut; of the active "
                f"procedures {_pct(_v(p, 'active_body_cut_mid_step_share'))} would be cut "
                f"mid-step at {limit} characters")
    few = _few(p, "recall_body_cut_mid_step_share")
    if mid == 0:
        return (f"no recalled procedure was cut mid-step at {limit} characters{few} (cut: "
                f"{_pct(_v(p, 'recall_body_cut_share'))}); the cap is not the problem here")
    return (f"{_pct(mid)} of recalled procedures reach the planner cut inside a step at "
            f"{limit} characters{few}; cutting at the last whole step removes that by "
            "construction")


def _take_whole(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    if w is None:
        return "not run: add recall_cut: whole_steps beside GAIA's defaults to compare"
    live, base = _v(w, "live_step_reduction"), _v(g, "live_step_reduction")
    if live is not None and base is not None:
        return (f"live step reduction {live:.2f} with whole steps against "
                f"{base:.2f} with GAIA's raw cut: what the cut costs the agent")
    return (f"mid-step cuts {_pct(_v(w, 'recall_body_cut_mid_step_share'))} with whole steps; "
            "the replay estimate cannot price the cut (it reads tools only): run it live")


def _subject(g: Point | None, s: Point | None) -> tuple[Point | None, str]:
    """GAIA's own pass where it stored procedures, else skillsynth at GAIA's defaults."""
    stored = _k(s, "procedures_per_family")
    if s is not None and stored is not None and stored.n > 0:
        return s, "GAIA's own pass"
    if s is not None:
        return g, "GAIA's defaults (GAIA's own pass stored no procedure)"
    return g, "GAIA's defaults"


def _take_frag(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    p, who = _subject(g, s)
    per, share = _v(p, "procedures_per_family"), _v(p, "fragmented_family_share")
    if per is None:
        return "not measured: no procedure served a labelled goal"
    if per <= 1.0:
        return f"{who}: one active procedure per served goal, no fragmentation on this corpus"
    return (f"{who}: {per:.1f} active procedures per served goal, {_pct(share)} of goals "
            "served by more than one: procedures fragment; reconcile across passes")


def _take_start(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    p, who = _subject(g, s)
    if p is None:
        return "not measured"
    k = _k(p, "starts_until_drained") or KPI(name="starts_until_drained", value=None, lo=None,
                                             hi=None, n=0, unit="")
    cap, calls, secs = _v(p, "distill_cap"), _v(p, "startup_model_calls"), \
        _v(p, "startup_seconds")
    cost = (f"{calls:.1f} distillations and {secs:.1f} s per start here"
            if calls is not None and secs is not None else "no pass ran")
    cap_s = "no cap" if cap is None else f"a cap of {cap:.0f}"
    if k.value is None:
        return (f"{who}: with {cap_s} the backlog (at most {_v(p, 'startup_backlog_max') or 0:.0f}"
                f" clusters) was not drained in {k.n} starts; {cost}")
    return f"{who}: with {cap_s} every qualifying cluster is distilled within " \
        f"{k.value:.0f} start(s); {cost}"


def _take_outcomes(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    p, who = _subject(g, s)
    rec, pos = _v(p, "outcome_updates_recorded"), _v(p, "outcome_updates_possible")
    if rec is None or pos is None:
        return "not measured"
    below = _v(p, "procedures_below_rate_with_feedback") or 0
    return (f"{who}: {rec:.0f} count update(s) recorded against {pos:.0f} known outcomes of "
            f"recalled procedures; fed back, {below:.0f} procedure(s) would fall below "
            "min_success_rate")


def _take_dups(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    p, who = _subject(g, s)
    pairs = _v(p, "duplicate_procedure_pairs")
    if pairs is None:
        return "not measured"
    if pairs == 0:
        return f"{who}: no two active procedures say the same thing under different names"
    same = _v(p, "duplicate_pairs_same_family") or 0
    head = (f"{who}: {pairs:.0f} duplicate pair(s), "
            f"{_pct(_v(p, 'duplicate_procedure_share'))} of active procedures; {same:.0f} "
            "within one labelled goal")
    if same == 0:
        return (head + ": they look alike but serve different goals, so merging by meaning "
                "at this threshold would lump goals; names are not the problem here")
    return head + ": reconcile by meaning and tools, not by name"


def _take_tau(g: Point | None, b: Point | None, s: Point | None, w: Point | None) -> str:
    """``w`` here: GAIA's defaults at another tau (the calibrated one), if the sweep ran it."""
    hit_g, hit_b = _v(g, "recall_hit_rate"), _v(b, "recall_hit_rate")
    if hit_g is None:
        return "not measured: the sweep did not run GAIA's defaults"
    params = b.params if b is not None else {}
    tau_b = params.get("recall_tau") or params.get("similarity_tau")
    better = f"; at the recommended point (recall tau {tau_b}) {_pct(hit_b)}" \
        if hit_b is not None and b is not g else ""
    head = f"at 0.82 recall finds a procedure of the probe's own goal for {_pct(hit_g)} of " \
        f"probes{better}"
    if w is None or _v(w, "recall_hit_rate") is None:
        return head + ": calibrate tau per embedder (skillsynth calibrate) and judge it downstream"
    tau_w = w.params.get("recall_tau") or w.params.get("similarity_tau")
    return (f"{head}; at recall tau {tau_w} {_pct(_v(w, 'recall_hit_rate'))}, but precision "
            f"{_pct(_v(w, 'recall_precision'))} against {_pct(_v(g, 'recall_precision'))} and "
            f"{_pct(_v(w, 'share_made_worse'))} of probes made worse against "
            f"{_pct(_v(g, 'share_made_worse'))}: a lower tau finds more and the wrong thing")


Take = Callable[[Point | None, Point | None, Point | None, Point | None], str]
_ROWS: tuple[tuple[str, str, str, tuple[tuple[str, str], ...], Take], ...] = (
    ("2676", "How often does the cap cut a recalled procedure mid-step?",
     "recall_body_cut_mid_step_share", (("cut", "recall_body_cut_share"),), _take_cut),
    ("2676", "And cut at the last whole step instead (recall_cut: whole_steps)?",
     "recall_body_cut_mid_step_share", (("live steps", "live_step_reduction"),), _take_whole),
    ("4033", "How many active procedures serve one real goal?", "procedures_per_family",
     (("share > 1", "fragmented_family_share"),), _take_frag),
    ("4033", "What does a process start cost; how many until every cluster is distilled?",
     "starts_until_drained", (("calls/start", "startup_model_calls"),
                              ("s/start", "startup_seconds"), ("cap", "distill_cap")),
     _take_start),
    ("2685", "Do success_count / attempt_count move after insert?",
     "outcome_updates_recorded", (("possible", "outcome_updates_possible"),), _take_outcomes),
    ("1818", "Do active procedures say the same thing under different names?",
     "duplicate_procedure_pairs", (("share", "duplicate_procedure_share"),), _take_dups),
    ("tau", "Does recall at 0.82 find the right procedure with this embedder?",
     "recall_hit_rate", (("separation", "recall_separation"),), _take_tau),
)


def question_rows(points: Sequence[PointLike]) -> list[QuestionRow]:
    """The section's rows from a sweep summary's ``points`` (see the module docstring)."""
    entries = [as_entry(p) for p in points]
    g, b, s = gaia_default_point(entries), recommend(entries), gaia_shipped_point(entries)
    rows = []
    for key, question, kpi, extra, take in _ROWS:
        whole = key == "2676" and "whole" in question
        at = (lambda p: _twin(p, entries, recall_cut="whole_steps")) if whole else \
            (lambda p: p)
        w = _other_tau(g, entries) if key == "tau" else \
            _twin(g, entries, recall_cut="whole_steps")
        rows.append(QuestionRow(issue=ISSUES[key].ref, question=question, kpi=kpi,
                                gaia_defaults=_cell(at(g), kpi, *extra),
                                recommended=_cell(at(b), kpi, *extra),
                                gaia_shipped=_cell(at(s), kpi, *extra), take=take(g, b, s, w)))
    return rows


def question_table(run: Run) -> pd.DataFrame:
    """The rows as a DataFrame (``run``: a :class:`~.report.Run`), for the report notebook."""
    import pandas as pd

    rows = question_rows(run.summary.points)
    return pd.DataFrame([r.as_dict() for r in rows]).rename(columns={
        "gaia_defaults": "GAIA defaults", "gaia_shipped": "gaia-shipped"})


def _label_points(points: Sequence[Point], issue: Issue) -> list[tuple[str, Point]]:
    """GAIA's defaults, the recommended point and GAIA's own pass (one label when they are
    one point), each followed by its variants in the issue's ``vary`` settings (every point
    listed once, variants numbered)."""
    primaries: list[tuple[str, Point]] = []
    for label, p in (("GAIA defaults", gaia_default_point(points)),
                     ("recommended", recommend(points)),
                     ("gaia-shipped", gaia_shipped_point(points))):
        if p is None:
            continue
        same = next((i for i, (_, q) in enumerate(primaries) if q.id == p.id), None)
        if same is None:
            primaries.append((label, p))
        else:
            primaries[same] = (f"{primaries[same][0]} = {label}", p)
    seen = {p.id for _, p in primaries}
    out: list[tuple[str, Point]] = []
    for label, p in primaries:
        out.append((label, p))
        mine, variant = settings_of(p), 0
        for q in points:
            theirs = settings_of(q)
            if q.id in seen or q.strategy != p.strategy or any(
                    mine.get(k) != theirs.get(k) for k in set(mine) | set(theirs)
                    if k not in issue.vary):
                continue
            seen.add(q.id)
            variant += 1
            out.append((f"{label}, variant {variant}", q))
    return out


def _describe_settings(p: Point) -> str:
    s = settings_of(p)
    keys = ("similarity_tau", "recall_tau", "min_occurrences", "max_recall_body_chars",
            "max_distill_calls_per_pass", "protocol", "recall_cut")
    return ", ".join(f"{k} {s[k]}" for k in keys if s.get(k) is not None)


def for_issue(run_dir: str | Path, issue: str) -> str:
    """A Markdown block for an upstream issue: the figures with n and intervals at each
    relevant point, the settings, the reading, and the command that reproduces them.

    Raises:
        EvaluationError: an unknown issue (the message lists the known ones), or a folder
            without a finished sweep (a block for upstream is not written from part of one).
    """
    key = str(issue).lstrip("#")
    if key not in ISSUES:
        raise EvaluationError(f"no question for issue {issue!r}; known: "
                              f"{', '.join(sorted(ISSUES))}")
    found = Path(run_dir) / "summary.json"
    if not found.exists():
        raise EvaluationError(f"{run_dir} has no summary.json; run `skillsynth sweep` first")
    summary = SweepSummary.load(run_dir)
    if summary.finished < summary.n_points:
        raise EvaluationError(f"{run_dir}: {summary.finished} of {summary.n_points} point(s) "
                              "finished; resume the sweep (`skillsynth sweep` again) before "
                              "writing its figures for an upstream issue")
    points, q = summary.points, ISSUES[key]
    first = points[0] if points else PointEntry("")
    versions, corpus = first.versions, first.corpus
    git = summary.record.get("git")
    where = (f"Run `{summary.name}` (skillsynth {versions.skillsynth}"
             f"{f', git {str(git)[:12]}' if git else ''}): corpus `{corpus.path}` "
             f"(sha256 `{str(corpus.sha256)[:12]}`), chat model "
             f"`{versions.chat_model}`, embedder `{versions.embedder}`.")
    labelled = _label_points(points, q)
    lines = [f"#### skillsynth measurement for {q.ref}: {q.title}", "", where, ""]
    lines += [f"- **{label}**: {p.strategy}, {_describe_settings(p)}"
              for label, p in labelled]
    if labelled:
        lines += ["", "| KPI | " + " | ".join(label for label, _ in labelled) + " |",
                  "| --- |" + " --- |" * len(labelled)]
        for name in q.kpis:
            if any(name in p.kpis for _, p in labelled):
                lines.append(f"| `{name}` | " + " | ".join(
                    fmt_kpi(_k(p, name)) if name in p.kpis else "-"
                    for _, p in labelled) + " |")
    else:
        lines.append("The run has no point at GAIA's defaults, no recommended point and no "
                     "gaia-shipped point: nothing to report.")
    rows = [r for r in question_rows(points) if r.issue == q.ref]
    lines += [""] + [f"**Reading:** {r.take}." for r in rows]
    name = summary.name
    intervals = ("Intervals: 95%, clustered by task family (Wilson on the effective sample "
                 "size for shares, cluster bootstrap or cluster t for means; none for counts "
                 "and per-start means); skillsynth's METHODS.md, section 5.")
    again = (f"Reproduce: `skillsynth sweep eval/sweeps/{name}.yaml && skillsynth report "
             f"eval/results/{name} --for-issue {key}`")
    lines += ["", intervals, "", again]
    return "\n".join(lines) + "\n"
