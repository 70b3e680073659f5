"""Control arms: can the instrument see an effect at all?

Four strategies (:mod:`.strategies.controls`) bound what a recalled procedure can do. They
run through the same protocol, the same recall slot and the same injection as every design,
replay and live, so a point's KPIs read the same way:

=============  ==========================================================================
strategy       what is recalled for a probe (at rank 1, score 1.0)
=============  ==========================================================================
oracle         the ideal procedure synthesis could produce: the probe task's gold actions as
               tool names in order, each with a one-line description (the world's own where
               it has one, else a line made from the name), no argument values
oracle-args    the same, each step with the gold argument values (tau2's LLMGTAgent bound)
mismatched     another family's oracle procedure, the family drawn by the point's seed
               (never the probe's own, never one with the probe's state-changing tools)
inert          skillsynth's memory arm (its synthesis runs) with recall forced empty: it must
               reproduce the no-memory arm exactly; :func:`inert_check` checks every pair
=============  ==========================================================================

An oracle procedure is built from the labels at recall time, rendered to a #691 SKILL.md and
read back through the profile's parser (the path every exported skill takes), and recalled
as a :class:`~skillsynth.store.Procedure` that is never written anywhere: oracle and
mismatched run no synthesis, and probes never enter the history. Labels are otherwise read
for scoring only; the oracle is the one declared exception (METHODS.md).

A probe whose task has no gold actions is left out of an oracle point with a counted reason
(:class:`~skillsynth.errors.ArmSkipped`); a point where no probe has any is an error, raised
before any work. Gold actions come from the label (tau2 ``evaluation_criteria.actions``,
tau-bench task actions), else from the live world's task (a history the agent generated
has no actions in its labels).

Graded live KPIs see partial progress a binary reward hides: the share of the task's gold
actions a run executed (tau2's action check: same name, equal arguments on the keys the
call passed, or on the action's ``compare_args``), the failed-call rate, and the calls made
until the first state-changing gold action.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from ..corpora.labels import SessionLabel
from ..errors import ArmSkipped, EvaluationError, WorldError
from ..pipeline.skill import MAX_NAME_CHARS, Skill
from ..store import Procedure
from .metrics import KPI, N_BOOT, ProbeResult, bootstrap_interval
from .split import READ_ONLY_PREFIXES, Split

__all__ = ["CONTROLS", "ORACLE_PREFIX", "POSITIVE", "ControlKind", "Divergence", "GoldAction",
           "GoldSource", "InertCheck", "action_matches", "check_gold", "control_kpis",
           "controls_summary", "first_write_at", "generic_line", "gold_actions",
           "gold_share_matched", "graded_kpis", "inert_check", "mismatched_session",
           "one_line", "oracle_procedure", "oracle_skill", "read_back_691", "tool_descriptions"]

ControlKind = Literal["oracle", "oracle-args", "mismatched", "inert"]
CONTROLS: tuple[ControlKind, ...] = ("oracle", "oracle-args", "mismatched", "inert")
#: The positive controls (the ones a sensitivity KPI is read from).
POSITIVE: tuple[ControlKind, ...] = ("oracle", "oracle-args")
#: The id prefix of a recalled control procedure (no store id has it).
ORACLE_PREFIX = "oracle:"
#: A one-line tool description is cut here (at a word, with "...").
DESCRIPTION_CHARS = 160
_EDGE = ("If a call fails, read its error, correct the arguments and call it again; do not "
         "skip a step.")
#: Characters of each side a divergence shows.
SHOW_CHARS = 300


# ---------------------------------------------------------------------- gold actions
@dataclass(frozen=True)
class GoldAction:
    """One ground-truth call: tool, arguments and (tau2) the argument keys it is judged by."""

    name: str
    arguments: Mapping[str, Any]
    compare_args: tuple[str, ...] | None = None

    @property
    def state_changing(self) -> bool:
        """Not a read by name (the ``tools`` family rule's prefixes)."""
        return not self.name.startswith(READ_ONLY_PREFIXES)


def gold_actions(raw: Iterable[Mapping[str, Any] | tuple[str, Mapping[str, Any]]]
                 ) -> tuple[GoldAction, ...]:
    """Gold actions from a label's ``{"name", "arguments"}`` dicts or a world's pairs."""
    out = []
    for a in raw:
        if isinstance(a, Mapping):
            keys = a.get("compare_args")
            out.append(GoldAction(str(a["name"]), dict(a.get("arguments") or {}),
                                  None if keys is None else tuple(keys)))
        else:
            out.append(GoldAction(str(a[0]), dict(a[1] or {})))
    return tuple(out)


def _args(arguments: Any) -> dict[str, Any] | None:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments) if arguments else {}
    except (TypeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def action_matches(gold: GoldAction, name: str, arguments: Any) -> bool:
    """tau2's action check: the same tool, and equal values on the keys compared.

    The keys are the action's ``compare_args`` where it has them, else the keys the call
    passed (so an argument the call left out is not held against it, and one the gold
    action lacks is). Arguments that are not a JSON object never match.
    """
    if name != gold.name:
        return False
    args = _args(arguments)
    if args is None:
        return False
    keys = gold.compare_args if gold.compare_args is not None else tuple(args)
    if not keys:
        return True
    return ({k: v for k, v in args.items() if k in keys}
            == {k: v for k, v in gold.arguments.items() if k in keys})


def gold_share_matched(gold: Sequence[GoldAction], calls: Sequence[tuple[str, Any]]
                       ) -> float | None:
    """Share of ``gold`` matched by some call (tau2's per-action check; None without gold)."""
    if not gold:
        return None
    return sum(any(action_matches(g, n, a) for n, a in calls) for g in gold) / len(gold)


def first_write_at(gold: Sequence[GoldAction], calls: Sequence[tuple[str, Any]]) -> int | None:
    """Calls made up to and including the first that matches a state-changing gold action
    (1-based; None when none does)."""
    writes = [g for g in gold if g.state_changing]
    for i, (n, a) in enumerate(calls, 1):
        if any(action_matches(g, n, a) for g in writes):
            return i
    return None


# ---------------------------------------------------------------------- descriptions
def one_line(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """The first sentence of a tool's description on one line, cut at ``limit``."""
    flat = " ".join(str(text).split())
    m = re.match(r"(.+?[.!?])(\s|$)", flat)
    line = m.group(1) if m else flat
    if len(line) > limit:
        line = line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return line


def generic_line(name: str) -> str:
    """A description made from a tool's name, for a world that has none."""
    words = " ".join(w for w in re.split(r"[_.\-\s]+", name) if w)
    return (words[:1].upper() + words[1:] + ".") if words else f"Use {name}."


def tool_descriptions(specs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Tool name -> its one-line description, from OpenAI function schemas."""
    out = {}
    for s in specs:
        fn = s.get("function") or {}
        if fn.get("name") and str(fn.get("description") or "").strip():
            out[str(fn["name"])] = one_line(str(fn["description"]))
    return out


# ---------------------------------------------------------------------- the oracle skill
def _kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _name(actions: Sequence[GoldAction]) -> str:
    changing = [a.name for a in actions if a.state_changing]
    words = _kebab("-".join(dict.fromkeys(changing or [a.name for a in actions])))
    if len(words) > MAX_NAME_CHARS:
        words = words[:MAX_NAME_CHARS].rsplit("-", 1)[0]
    return words or "procedure"


def _when(actions: Sequence[GoldAction]) -> str:
    changing = list(dict.fromkeys(a.name for a in actions if a.state_changing))
    if changing:
        return "The user wants to " + " and ".join(" ".join(_kebab(n).split("-"))
                                                   for n in changing)
    reads = ", ".join(dict.fromkeys(a.name for a in actions))
    return f"The user wants information that {reads} look up"


def oracle_skill(actions: Sequence[GoldAction], descriptions: Mapping[str, str], *,
                 with_args: bool) -> Skill:
    """The procedure synthesis would ideally write for a task with these gold ``actions``.

    One numbered step per action, in order (a repeated tool is a repeated step):
    ``Call <tool>: <one-line description>``, and with ``with_args`` the gold arguments as
    JSON after the tool. The name and ``when_to_use`` are made from the tool names, so no
    task-specific value appears unless ``with_args`` puts it there.
    """
    if not actions:
        raise ArmSkipped("no gold actions to write an oracle procedure from")
    steps = []
    for i, a in enumerate(actions, 1):
        desc = descriptions.get(a.name) or generic_line(a.name)
        args = f" with {json.dumps(dict(a.arguments), ensure_ascii=False)}" if with_args else ""
        steps.append(f"{i}. Call {a.name}{args}: {desc}")
    body = "\n".join(steps) + f"\n\n## Edge cases\n- {_EDGE}"
    return Skill(name=_name(actions), description=_when(actions), body=body,
                 tools_required=tuple(dict.fromkeys(a.name for a in actions)))


def read_back_691(skill: Skill, where: Path | None = None) -> Skill:
    """``skill`` written as a #691 SKILL.md and read back by that profile's parser.

    ``where``: the folder to keep the file in (default a scratch folder, removed).

    Raises:
        SkillValidationError: the document fails #691's validator.
    """
    if where is not None:
        return Skill.read(skill.write(where, "gaia691", overwrite=True), "gaia691")
    with tempfile.TemporaryDirectory(prefix="skillsynth-oracle-") as tmp:
        return Skill.read(skill.write(tmp, "gaia691"), "gaia691")


def oracle_procedure(skill: Skill, *, control: str, probe: str,
                     families: Sequence[str]) -> Procedure:
    """The recalled shape of an oracle skill (never stored; its id says what it is)."""
    return Procedure(name=skill.name, when_to_use=skill.description, markdown_body=skill.body,
                     tools_required=skill.tools_required, version=skill.version,
                     id=f"{ORACLE_PREFIX}{control}:{probe}",
                     provenance={"control": control, "probe": probe,
                                 "families": list(families)})


# ---------------------------------------------------------------------- the gold source
class _GoldWorld(Protocol):
    def gold_actions(self, task_id: str) -> list[tuple[str, dict[str, Any]]]: ...


@dataclass(frozen=True)
class GoldSource:
    """Each session's gold actions, for scoring and for the oracle arms' recall.

    Attributes:
        labels: session -> label (the labels file).
        families: session -> family (the split's, scoring only).
        world: a live world whose tasks have gold actions (labels without actions fall
            back to it), or None.
        descriptions: tool -> one-line description (the world's; empty: made from names).
        seed: the point's seed (mismatched draws by it).
        skills_dir: where recalled control skills are kept as SKILL.md (None: not kept).
        skipped: probe -> why a control arm was skipped for it (filled at recall).
    """

    labels: Mapping[str, SessionLabel]
    families: Mapping[str, str]
    world: _GoldWorld | None = None
    descriptions: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0
    skills_dir: Path | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    def actions(self, session: str) -> tuple[GoldAction, ...]:
        """The session's gold actions (empty: none known)."""
        key = ("gold", session)
        if key not in self._cache:
            label = self.labels.get(session)
            got: tuple[GoldAction, ...] = ()
            if label is not None and label.actions:
                got = gold_actions(label.actions)
            elif label is not None and label.task_id is not None and self.world is not None:
                try:
                    got = gold_actions(self.world.gold_actions(str(label.task_id)))
                except WorldError:
                    got = ()
            self._cache[key] = got
        return self._cache[key]  # type: ignore[no-any-return]

    def origin(self) -> str:
        """Where gold actions come from: ``labels``, ``world`` or ``labels+world``."""
        have = [s for s in self.families if self.actions(s)]
        from_labels = any(self.labels[s].actions for s in have)
        from_world = any(not self.labels[s].actions for s in have)
        return "+".join(n for n, on in (("labels", from_labels), ("world", from_world)) if on) \
            or "none"

    def representatives(self) -> dict[str, str]:
        """Family -> its first session (by id) that has gold actions."""
        if "reps" not in self._cache:
            reps: dict[str, str] = {}
            for s in sorted(self.families):
                f = self.families[s]
                if f not in reps and self.actions(s):
                    reps[f] = s
            self._cache["reps"] = reps
        return dict(self._cache["reps"])

    def skip(self, probe: str, reason: str) -> ArmSkipped:
        """Record why ``probe`` has no control arm; the exception to raise."""
        self.skipped[probe] = reason
        return ArmSkipped(f"probe {probe}: {reason}")

    def recall(self, control: ControlKind, probe: str) -> Procedure:
        """The control procedure recalled for ``probe`` (built once, then reused).

        Raises:
            ArmSkipped: the probe has no gold actions (oracle arms), or no other family has
                a different procedure (mismatched); the reason is recorded.
        """
        key = (control, probe)
        if key not in self._cache:
            self._cache[key] = self._build(control, probe)
        got = self._cache[key]
        if isinstance(got, ArmSkipped):
            raise got
        return got  # type: ignore[no-any-return]

    def _build(self, control: ControlKind, probe: str) -> Procedure | ArmSkipped:
        source = probe
        if control == "mismatched":
            picked = mismatched_session(self, probe)
            if picked is None:
                return self.skip(probe, "no other family with a different procedure")
            source = picked
        acts = self.actions(source)
        if not acts:
            return self.skip(probe, "no gold actions")
        skill = oracle_skill(acts, self.descriptions, with_args=control == "oracle-args")
        where = None if self.skills_dir is None else \
            self.skills_dir / control / _kebab(probe)[:80]
        fam = self.families.get(source)
        return oracle_procedure(read_back_691(skill, where), control=control, probe=probe,
                                families=() if fam is None else (fam,))


def _shape(actions: Sequence[GoldAction]) -> Any:
    """What makes two procedures the same for the negative control: the set of their
    state-changing tools (read-only ones: their whole tool sequence)."""
    changing = frozenset(a.name for a in actions if a.state_changing)
    return changing if changing else tuple(a.name for a in actions)


def mismatched_session(gold: GoldSource, probe: str) -> str | None:
    """The session whose oracle procedure the negative control recalls for ``probe``.

    A family other than the probe's whose procedure differs from the probe's own (by
    :func:`_shape`, where the probe's gold is known), drawn uniformly by a generator seeded
    with the point's seed and the probe, so the draw does not depend on probe order. None
    when there is no such family.
    """
    own = gold.families.get(probe)
    own_shape = _shape(gold.actions(probe)) if gold.actions(probe) else None
    reps = gold.representatives()
    cands = sorted(f for f, s in reps.items()
                   if f != own and (own_shape is None or _shape(gold.actions(s)) != own_shape))
    if not cands:
        return None
    return reps[random.Random(f"mismatched:{gold.seed}:{probe}").choice(cands)]


def check_gold(control: str | None, gold: GoldSource, split: Split) -> None:
    """Raise before any work when a control arm could not run on a single probe.

    Raises:
        EvaluationError: an oracle arm where no probe has gold actions, or a mismatched arm
            with fewer than two families that have them (the message says what to use).
    """
    if control in POSITIVE:
        if not any(gold.actions(p.session_id) for p in split.probes):
            raise EvaluationError(
                f"strategy {control} writes each probe's procedure from its task's gold "
                f"actions, and none of the {len(split.probes)} probes has any (labels' "
                "actions, or the live world's task); use a tau2 or tau-bench corpus, or a "
                "history generated in a tau2 world")
    elif control == "mismatched" and len(gold.representatives()) < 2:
        raise EvaluationError(
            "strategy mismatched recalls another family's gold procedure, and fewer than two "
            "families have gold actions; use a tau2 or tau-bench corpus with several tasks")


# ---------------------------------------------------------------------- inertness
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
                divs.append(Divergence("replay", probe, 0, 0, _show(a), _show(b)))
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
            divs.append(Divergence("live", probe, rep, at,
                                   _show(ta[at] if at < len(ta) else None),
                                   _show(tb[at] if at < len(tb) else None)))
    return InertCheck(replay_ok + live_ok, replay_n + live_n, (replay_ok, replay_n),
                      (live_ok, live_n), tuple(divs))


# ---------------------------------------------------------------------- KPIs
def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


def _kpi(name: str, units: Sequence[Any], stat: Callable[[list[Any]], float | None],
         clusters: Sequence[str], *, unit: str = "probes", seed: int, n_boot: int) -> KPI:
    lo, hi = bootstrap_interval(units, stat, clusters=clusters, n_boot=n_boot, seed=seed)
    return KPI(name, stat(list(units)), lo, hi, len(units), unit)


@dataclass(frozen=True)
class _Graded:
    """One arm of one probe, averaged over its repeats (None: no run measured it)."""

    matched: float | None
    failed_rate: float | None
    first_write: float | None


def _graded_arm(runs: Sequence[Mapping[str, Any]], gold: Sequence[GoldAction]) -> _Graded:
    matched, failed, first = [], [], []
    for run in runs:
        calls = [(str(c[0]), c[1]) for c in run.get("calls", [])]
        m = gold_share_matched(gold, calls)
        if m is not None:
            matched.append(m)
        if run.get("steps"):
            failed.append(run.get("failed_calls", 0) / run["steps"])
        w = first_write_at(gold, calls)
        if w is not None:
            first.append(float(w))
    return _Graded(_mean(matched), _mean(failed), _mean(first))


def graded_kpis(runs: Sequence[Mapping[str, Any]], gold: GoldSource,
                family_of: Mapping[str, str], *, seed: int = 0,
                n_boot: int = N_BOOT) -> list[KPI]:
    """Partial-progress KPIs per arm, and their paired change (memory minus no-memory).

    Per probe, each arm's runs are averaged first (repeats), then probes are compared in
    pairs; intervals resample families. ``live_gold_actions_matched_*``: share of the
    task's gold actions a run executed (tau2's check). ``live_failed_call_rate_*``: failed
    calls over calls (runs that made one). ``live_calls_to_first_write_*``: calls up to and
    including the first state-changing gold action (runs that made one).
    """
    by: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        by[str(run["probe_session"])][str(run["arm"])].append(run)
    arms: dict[str, dict[str, _Graded]] = {}
    for probe, got in by.items():
        acts = gold.actions(probe)
        arms[probe] = {arm: _graded_arm(rs, acts) for arm, rs in got.items()}
    out: list[KPI] = []
    for metric, label in (("matched", "live_gold_actions_matched"),
                          ("failed_rate", "live_failed_call_rate"),
                          ("first_write", "live_calls_to_first_write")):
        for arm, suffix in (("no-memory", "no_memory"), ("memory", "memory")):
            units = [(p, getattr(a[arm], metric)) for p, a in sorted(arms.items())
                     if arm in a and getattr(a[arm], metric) is not None]
            out.append(_kpi(f"{label}_{suffix}", units, lambda us: _mean([v for _, v in us]),
                            [family_of.get(p, p) for p, _ in units], seed=seed, n_boot=n_boot))
        pairs = [(p, getattr(a["memory"], metric) - getattr(a["no-memory"], metric))
                 for p, a in sorted(arms.items())
                 if "memory" in a and "no-memory" in a
                 and getattr(a["memory"], metric) is not None
                 and getattr(a["no-memory"], metric) is not None]
        out.append(_kpi(f"{label}_change", pairs, lambda us: _mean([v for _, v in us]),
                        [family_of.get(p, p) for p, _ in pairs], seed=seed, n_boot=n_boot))
    return out


def control_kpis(control: str | None, rows: Sequence[ProbeResult], kpis: Mapping[str, KPI],
                 runs: Sequence[Mapping[str, Any]], gold: GoldSource | None, *,
                 seed: int = 0, n_boot: int = N_BOOT) -> tuple[dict[str, KPI],
                                                               InertCheck | None]:
    """The KPIs a control point adds to the point's own, and its inertness check.

    Positive controls (oracle, oracle-args): ``replay_sensitivity_steps`` is the point's
    ``step_reduction`` (the replay estimate, paired: oracle arm against none), and on live
    points ``live_sensitivity_success`` and ``live_sensitivity_steps`` are its
    ``live_success_change`` and ``live_step_reduction`` (the same definitions and intervals,
    read under the names a verdict looks for). ``inert``: ``inert_identical``, the share
    of pairs identical (n pairs; no interval: a check). Every live point with gold actions
    gets :func:`graded_kpis`.
    """
    out: dict[str, KPI] = {}
    if control in POSITIVE:
        for src, name in (("step_reduction", "replay_sensitivity_steps"),
                          ("live_success_change", "live_sensitivity_success"),
                          ("live_step_reduction", "live_sensitivity_steps")):
            if src in kpis:
                out[name] = dataclasses.replace(kpis[src], name=name)
    check = None
    if control == "inert":
        check = inert_check(rows, runs)
        out["inert_identical"] = KPI("inert_identical", check.share, None, None, check.n,
                                     "runs")
    if runs and gold is not None and any(gold.actions(str(r["probe_session"])) for r in runs):
        family_of = {r.probe_session: r.family for r in rows}
        out.update({k.name: k for k in graded_kpis(runs, gold, family_of, seed=seed,
                                                   n_boot=n_boot)})
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
    if check is not None:
        out["inert"] = check.as_dict()
    return out


# ---------------------------------------------------------------------- a point's source
class _PointConfig(Protocol):
    """What :func:`gold_source` reads of a point's configuration."""

    @property
    def world(self) -> str: ...
    @property
    def live(self) -> bool: ...
    @property
    def history(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def strategy(self) -> str: ...


def gold_source(cfg: _PointConfig, labels: Mapping[str, SessionLabel], split: Split,
                skills_dir: Path | None = None) -> GoldSource:
    """The point's gold source: its labels, its families and, where the point acts in a
    named world, that world's tasks and tool descriptions. Recalled control skills are kept
    under ``skills_dir`` (control points only)."""
    world = None
    if cfg.world != "replay" and (cfg.live or cfg.history == "live"):
        from .worlds import get_world

        world = get_world(cfg.world)
    descriptions = tool_descriptions(world.tool_specs()) if world is not None else {}
    return GoldSource(labels, dict(split.families), world,  # type: ignore[arg-type]
                      descriptions, cfg.seed,
                      skills_dir if cfg.strategy in CONTROLS else None)
