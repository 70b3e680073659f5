"""Leave-one-corpus-out validation: does a calibration hold on a corpus it was not fitted to?

Separating pairs on the corpora it was fitted to is not evidence that a threshold helps: the
first shipped calibration did that and lumped most of every real history into one procedure.
So for each labelled corpus in turn, :func:`~.calibrate.calibrate` is fitted on the *others*,
and the held-out corpus's point (strict protocol, :func:`~..point.run.run_point`) runs twice:
at the fold's proposal and at GAIA's thresholds (``base``, default :class:`Thresholds`). Each
run's downstream KPIs are kept with n and interval: :data:`FIGURES`.

The decision (:data:`RULE`, :func:`hold`): on a held-out corpus the proposal *holds* when its
recall precision is not below the lower bound of GAIA's 95% interval and its share of probes
made worse is not above the upper bound of GAIA's. A point value outside GAIA's own interval
on the bad side is a loss; inside it, the two are not told apart at this n. A figure missing on
either side (nothing recalled, no probe with steps) leaves that corpus undecided, and the
validation passes only when the proposal holds on every held-out corpus: it never passes
without the figures.

Files under ``out_dir``: ``points/<n>-<corpus>/<arm>/`` (each a full point; a finished one is
read back, so an interrupted run resumes), ``leave-one-out.json`` (:meth:`Validation.as_dict`)
and ``leave-one-out.md`` (:meth:`Validation.table`). :func:`record_validation` writes the
result into a calibration file's ``validation``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ...config import CALIBRATED_KEYS, Thresholds
from ...errors import ConfigError, EvaluationError
from ...models.embed import Embeds
from ...pipeline.distill import DistillMode
from ...protocols import ChatModel
from ..point.metrics import KPI, N_BOOT
from ..point.record import RunRecord, model_of, utc_now
from ..point.run import SUMMARY, EvalConfig, run_point
from ..point.scoring import progress_bar
from ..point.summary import PointSummary
from .calibrate import METHOD, Calibration, CalibrationCorpus, calibrate, check_corpora

__all__ = [
    "ARMS",
    "FIGURES",
    "RULE",
    "Arm",
    "Fold",
    "HeldOut",
    "Hold",
    "Validation",
    "folds",
    "hold",
    "leave_one_out",
    "record_validation",
]

Arm = Literal["proposed", "gaia"]
#: The thresholds each held-out corpus runs at: the fold's proposal and GAIA's (``base``).
ARMS: tuple[Arm, ...] = ("proposed", "gaia")
#: The point KPIs kept per held-out corpus and arm, with the table's column titles.
FIGURES = {"synthesis_fired_rate": "fired", "recall_hit_rate": "recall hit",
           "recall_precision": "precision", "share_made_worse": "made worse (est.)",
           "procedures_per_family": "procedures per family",
           "largest_procedure_share": "largest procedure share"}
#: The hold rule, recorded with every validation.
RULE = ("holds-v1: per held-out corpus, strict protocol, the proposal holds when its "
        "recall_precision >= the lower bound of GAIA's 95% interval and its share_made_worse "
        "<= the upper bound of GAIA's; a figure missing on either side: undecided; passed "
        "when it holds on every held-out corpus")


@dataclass(frozen=True)
class Fold:
    """One held-out corpus and the corpora its calibration is fitted on."""

    held_out: CalibrationCorpus
    fitted_on: tuple[CalibrationCorpus, ...]


def folds(corpora: Sequence[CalibrationCorpus]) -> list[Fold]:
    """Each corpus held out once, fitted on all the others (in the order given).

    Raises:
        ConfigError: fewer than two corpora, or one given twice.
    """
    if len(corpora) < 2:
        raise ConfigError("leave-one-out needs at least two labelled corpora (one is held "
                          f"out, the others fit), got {len(corpora)}")
    seen = [(c.path, c.family) for c in corpora]
    if len(set(seen)) < len(seen):
        raise ConfigError("a corpus is given twice: it would be fitted on while held out")
    return [Fold(held_out=c, fitted_on=tuple(o for j, o in enumerate(corpora) if j != i))
            for i, c in enumerate(corpora)]


@dataclass(frozen=True)
class Hold:
    """Whether the proposal held on one corpus (None: undecided), and why."""

    holds: bool | None
    reasons: tuple[str, ...]


def _side(name: str, mine: KPI | None, theirs: KPI | None, worse_if: Literal["below", "above"]
          ) -> tuple[bool | None, str]:
    if mine is None or mine.value is None or theirs is None or theirs.lo is None \
            or theirs.hi is None:
        return None, f"{name} not measured on both sides"
    bound = theirs.lo if worse_if == "below" else theirs.hi
    lost = mine.value < bound if worse_if == "below" else mine.value > bound
    where = f"{mine.value:.2f} vs GAIA's [{theirs.lo:.2f}, {theirs.hi:.2f}]"
    return (not lost), (f"{name} {worse_if} GAIA's interval: {where}" if lost
                        else f"{name} within or better: {where}")


def hold(proposed: Mapping[str, KPI], gaia: Mapping[str, KPI]) -> Hold:
    """:data:`RULE` on one held-out corpus's two points' KPIs."""
    sides = [_side("recall precision", proposed.get("recall_precision"),
                   gaia.get("recall_precision"), "below"),
             _side("share made worse", proposed.get("share_made_worse"),
                   gaia.get("share_made_worse"), "above")]
    oks = [ok for ok, _ in sides]
    verdict = False if False in oks else (None if None in oks else True)
    return Hold(holds=verdict, reasons=tuple(why for _, why in sides))


@dataclass(frozen=True)
class HeldOut:
    """One held-out corpus: what it was fitted on, each arm's thresholds, KPIs and folder."""

    corpus: CalibrationCorpus
    fitted_on: tuple[str, ...]
    thresholds: Mapping[Arm, Mapping[str, float | None]]
    kpis: Mapping[Arm, Mapping[str, KPI]]
    hold: Hold
    points: Mapping[Arm, str]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"corpus": self.corpus.path, "family": self.corpus.family,
                "fitted_on": list(self.fitted_on),
                "thresholds": {a: dict(t) for a, t in self.thresholds.items()},
                "kpis": {a: {n: k.as_dict() for n, k in ks.items()}
                         for a, ks in self.kpis.items()},
                "holds": self.hold.holds, "reasons": list(self.hold.reasons),
                "points": dict(self.points)}


@dataclass(frozen=True)
class Validation:
    """A leave-one-corpus-out run: every held-out corpus and the overall result."""

    embedder: str
    chat_model: str | None
    method: str
    held_out: tuple[HeldOut, ...]
    rule: str = RULE
    protocol: str = "strict"
    record: Mapping[str, Any] | None = None

    @property
    def passed(self) -> bool | None:
        """True: held on every corpus; False: lost on one; None: some undecided, none lost."""
        got = [h.hold.holds for h in self.held_out]
        if not got or None in got:
            return False if False in got else None
        return all(got)

    def status(self) -> str:
        """``passed``, ``failed`` or ``undecided`` (with how many corpora held)."""
        word = {True: "passed", False: "failed", None: "undecided"}[self.passed]
        held = sum(h.hold.holds is True for h in self.held_out)
        return f"{word}: held on {held} of {len(self.held_out)} held-out corpora"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``leave-one-out.json``)."""
        return {"embedder": self.embedder, "chat_model": self.chat_model,
                "method": self.method, "rule": self.rule, "protocol": self.protocol,
                "passed": self.passed, "status": self.status(),
                "held_out": [h.as_dict() for h in self.held_out], "record": self.record}

    def table(self) -> str:
        """One Markdown row per held-out corpus and arm (``leave-one-out.md``)."""
        head = ["held-out corpus", "fitted on", "thresholds", "sim / recall / reconcile",
                *FIGURES.values(), "holds"]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for h in self.held_out:
            for arm in ARMS:
                taus = " / ".join("-" if h.thresholds[arm].get(k) is None
                                  else f"{h.thresholds[arm][k]:.2f}" for k in CALIBRATED_KEYS)
                cells = [_cell(h.kpis[arm].get(n)) for n in FIGURES]
                verdict = {True: "yes", False: "**no**", None: "undecided"}[h.hold.holds] \
                    if arm == "proposed" else ""
                lines.append("| " + " | ".join([
                    f"{Path(h.corpus.path).name}::{h.corpus.family}",
                    ", ".join(Path(p).name for p in h.fitted_on) if arm == "proposed" else "",
                    arm, taus, *cells, verdict]) + " |")
        return "\n".join(lines) + f"\n\n{self.status()}. Rule: {self.rule}.\n"


def _cell(k: KPI | None) -> str:
    if k is None or k.value is None:
        return f"n/a (n={k.n})" if k is not None else "n/a"
    ci = f" [{k.lo:.2f}, {k.hi:.2f}]" if k.lo is not None and k.hi is not None else ""
    return f"{k.value:.2f}{ci} n={k.n}"


def _taus(th: Thresholds) -> dict[str, float | None]:
    return {k: getattr(th, k) for k in CALIBRATED_KEYS}


def _point(cfg: EvalConfig, llm: ChatModel, embedder: Embeds, out: Path, progress: bool
           ) -> dict[str, KPI]:
    """The point's KPIs in :data:`FIGURES`: run, or read back when it is already done at
    exactly these settings (a resumed validation)."""
    if (out / SUMMARY).exists():
        summary = PointSummary.load(out / SUMMARY)
        if summary.config != json.loads(json.dumps(cfg.as_dict(), default=str)):
            raise EvaluationError(f"{out} holds a point at other settings (another "
                                  "calibration?); use a new output folder")
        kpis = dict(summary.kpis)
    else:
        kpis = run_point(cfg, llm, embedder, out, progress=progress).kpis
    return {n: kpis[n] for n in FIGURES if n in kpis}


def leave_one_out(corpora: Sequence[CalibrationCorpus], embedder: Embeds, llm: ChatModel,
                  out_dir: str | Path, *, base: Thresholds | None = None, k: int = 3,
                  min_occurrences: int = 2, mode: DistillMode = "json", seed: int = 0,
                  n_boot: int = N_BOOT, progress: bool = False) -> Validation:
    """Fit on all corpora but one, run the held-out one at the proposal and at ``base``.

    Args:
        corpora: two or more labelled corpora with their family rules; each point reads its
            families by the same rule.
        embedder, llm: the models calibrated and evaluated (the same for every fold).
        out_dir: where the points and the table go (see the module docstring).
        base: GAIA's thresholds (default :class:`Thresholds`); the proposal replaces its taus.
        k, min_occurrences, mode: the calibration's recall pass (:func:`calibrate`); ``k`` is
            also the points' attempts per family in the history.
        seed, n_boot: the points' bootstrap.

    Raises:
        ConfigError: fewer than two corpora, one given twice, or one unlabelled (before any
            model call).
        EvaluationError: a point folder holds a point at other settings.
    """
    plan = folds(corpora)
    check_corpora(corpora)  # every corpus labelled, before any model call
    out = Path(out_dir)
    started = utc_now()
    base = base or Thresholds()
    rows = []
    for i, fold in enumerate(progress_bar(plan, progress, "held-out corpora"), start=1):
        cal = calibrate(fold.fitted_on, embedder, llm=llm, mode=mode, k=k,
                        min_occurrences=min_occurrences)
        arms: dict[Arm, Thresholds] = {"proposed": base.merge(cal.settings_block()),
                                       "gaia": base}
        kpis: dict[Arm, dict[str, KPI]] = {}
        points: dict[Arm, str] = {}
        for arm, th in arms.items():
            where = out / "points" / f"{i}-{Path(fold.held_out.path).stem}" / arm
            cfg = EvalConfig(fold.held_out.path, thresholds=th, family=fold.held_out.family,
                             k=k, mode=mode, protocol="strict", seed=seed, n_boot=n_boot)
            kpis[arm] = _point(cfg, llm, embedder, where, progress)
            points[arm] = str(where)
        rows.append(HeldOut(corpus=fold.held_out, fitted_on=tuple(c.path for c in fold.fitted_on),
                            thresholds={a: _taus(t) for a, t in arms.items()}, kpis=kpis,
                            hold=hold(kpis["proposed"], kpis["gaia"]), points=points))
    record = RunRecord(kind="leave-one-out",
                       config={"corpora": [asdict(c) for c in corpora], "k": k,
                               "min_occurrences": min_occurrences, "mode": mode, "seed": seed,
                               "n_boot": n_boot, "base": asdict(base)},
                       started_utc=started, finished_utc=utc_now(),
                       models={"chat": model_of(llm), "embed": model_of(embedder)}).as_dict()
    result = Validation(embedder=embedder.embedder_id, chat_model=llm.model_id, method=METHOD,
                        held_out=tuple(rows), record=record)
    out.mkdir(parents=True, exist_ok=True)
    (out / "leave-one-out.json").write_text(json.dumps(result.as_dict(), indent=1, default=str)
                                            + "\n", encoding="utf-8")
    (out / "leave-one-out.md").write_text(result.table(), encoding="utf-8")
    return result


def record_validation(calibration_file: str | Path, result: Validation) -> Calibration:
    """Write ``result`` into a calibration file's ``validation`` (``leave_one_out``, and
    ``downstream`` when the file was made by the method validated) and return it.

    Raises:
        ConfigError: the file is not a calibration.
    """
    path = Path(calibration_file)
    try:
        cal = Calibration.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"not a calibration file: {exc}", source=str(path)) from exc
    validation = dict(cal.validation)
    same = cal.method == result.method and cal.embedder == result.embedder
    validation["leave_one_out"] = {**result.as_dict(), "same_method_and_embedder": same}
    # opt-in whatever the result (config.py): a pass is the evidence for changing that
    validation["default"] = False
    if same:
        validation["downstream"] = (f"{result.status()} (leave-one-corpus-out, "
                                    f"{result.rule.split(':')[0]}; see leave_one_out)")
    else:
        validation["downstream_note"] = (
            "the leave-one-out run validated method/embedder "
            f"{result.method.split(':')[0]}/{result.embedder}, not this file's "
            f"{cal.method.split(':')[0]}/{cal.embedder}: recalibrate and validate again")
    updated = Calibration.from_dict({**asdict(cal), "validation": validation})
    path.write_text(updated.to_json(), encoding="utf-8")
    return updated
