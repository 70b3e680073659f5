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
oracle-run     the probe task's successful history run as recorded, each call with its
               values: the reads, then the writes (tau2's gold often lists only the writes,
               so oracle-args puts the write first); the same values as oracle-args at the
               run's own depth. A probe whose task has no successful history run is skipped
oracle-        a successful history run of the task (else its gold calls), each argument with
dataflow       its *source* instead of its value: the field of an earlier step's result,
               "from the customer", or a non-user constant (an enum, a boolean), found by
               executing the calls in the world (:mod:`skillsynth.pipeline.provenance`):
               the rung between names and values
oracle-plan    the oracle procedure (names) with an executable plan of the same calls
               (history run, else gold calls, executed in the world as for oracle-dataflow):
               values found in an earlier result bound to it, the customer's as the plan's
               inputs, non-user constants kept (:func:`~skillsynth.pipeline.induce.induce_plan`
               on that one run, whole results); offered as a tool by ``procedure_form``
               plan or both
mismatched     another family's oracle procedure, the family drawn by the point's seed
               (never the probe's own, never one with the probe's state-changing tools)
mismatched-    the same family's oracle-plan (its run traced in *its own* task and induced
plan           as a plan): the plan form's negative control, offered as a tool by
               ``procedure_form`` plan or both; its inputs are filled by the agent from the
               probe's customer
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

Gold actions are scored by tau2's action check (:func:`action_matches`); the inertness
check and the KPIs a control point adds are in :mod:`.control_checks`.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...corpora.labels import SessionLabel
from ...errors import ArmSkipped, EvaluationError, WorldError
from ...pipeline.detect import is_read
from ...pipeline.plan import Plan, with_plan
from ...pipeline.provenance import (
    ArgSource,
    TracedCall,
    argument_sources,
    describe_sources,
    enum_values,
    source_counts,
)
from ...pipeline.skill import MAX_NAME_CHARS, Skill
from ...store import Procedure
from ..strategies import ControlKind
from .descriptions import generic_line, one_line, tool_descriptions
from .split import Split
from .traced import plan_shape, summed, trace_plan, trace_run

__all__ = ["CONTROLS", "FROM_RUN", "ORACLES", "ORACLE_PREFIX", "POSITIVE", "TRACED", "GoldAction",
           "GoldSource", "action_matches", "call_arguments", "check_gold", "generic_line",
           "gold_actions", "mismatched_session", "one_line", "oracle_procedure", "oracle_skill",
           "read_back_691", "tool_descriptions"]

CONTROLS: tuple[ControlKind, ...] = ("oracle", "oracle-args", "oracle-run", "oracle-dataflow",
                                     "oracle-plan", "mismatched", "mismatched-plan", "inert")
#: The positive controls (the ones a sensitivity KPI is read from).
POSITIVE: tuple[ControlKind, ...] = ("oracle", "oracle-args")
#: The arms that write each probe's own gold procedure (they need its gold actions).
ORACLES: tuple[ControlKind, ...] = ("oracle", "oracle-args", "oracle-run", "oracle-dataflow",
                                    "oracle-plan")
#: The arms that execute a run of a task in its world (its results, its sources): the
#: probe's own, or (mismatched-plan) the drawn family's.
TRACED: tuple[ControlKind, ...] = ("oracle-dataflow", "oracle-plan", "mismatched-plan")
#: The arms that read a successful history run of the task (the traced ones, and oracle-run).
FROM_RUN: tuple[ControlKind, ...] = (*TRACED, "oracle-run")
#: The negative controls: another family's procedure.
MISMATCHED: tuple[ControlKind, ...] = ("mismatched", "mismatched-plan")
#: The id prefix of a recalled control procedure (no store id has it).
ORACLE_PREFIX = "oracle:"
_EDGE = ("If a call fails, read its error, correct the arguments and call it again; do not "
         "skip a step.")


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
        return not is_read(self.name)


def gold_actions(raw: Iterable[Mapping[str, Any] | tuple[str, Mapping[str, Any]]]
                 ) -> tuple[GoldAction, ...]:
    """Gold actions from a label's ``{"name", "arguments"}`` dicts or a world's pairs."""
    out = []
    for a in raw:
        if isinstance(a, Mapping):
            keys = a.get("compare_args")
            out.append(GoldAction(name=str(a["name"]), arguments=dict(a.get("arguments") or {}),
                                  compare_args=None if keys is None else tuple(keys)))
        else:
            out.append(GoldAction(name=str(a[0]), arguments=dict(a[1] or {})))
    return tuple(out)


def call_arguments(arguments: Any) -> dict[str, Any] | None:
    """A call's arguments as a dict (from a dict or its JSON text), or None when they are not
    a JSON object."""
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
    args = call_arguments(arguments)
    if args is None:
        return False
    keys = gold.compare_args if gold.compare_args is not None else tuple(args)
    if not keys:
        return True
    return ({k: v for k, v in args.items() if k in keys}
            == {k: v for k, v in gold.arguments.items() if k in keys})


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
                 with_args: bool,
                 sources: Sequence[Mapping[str, Sequence[ArgSource]]] | None = None) -> Skill:
    """The procedure synthesis would ideally write for a task with these gold ``actions``.

    One numbered step per action, in order (a repeated tool is a repeated step):
    ``Call <tool>: <one-line description>``, and with ``with_args`` the gold arguments as
    JSON after the tool; with ``sources`` (one mapping per action,
    :func:`~skillsynth.pipeline.provenance.argument_sources`) each argument's source instead.
    The name and ``when_to_use`` are made from the tool names, so no task-specific value
    appears unless ``with_args`` puts it there.
    """
    if not actions:
        raise ArmSkipped("no gold actions to write an oracle procedure from")
    steps = []
    for i, a in enumerate(actions, 1):
        desc = descriptions.get(a.name) or generic_line(a.name)
        args = f" with {json.dumps(dict(a.arguments), ensure_ascii=False)}" if with_args else ""
        if sources is not None and sources[i - 1]:
            args = f" with {describe_sources(sources[i - 1])}"
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

    def tool_specs(self) -> list[dict[str, Any]]: ...

    def task(self, task_id: str) -> Any: ...

    def start(self, task_id: str) -> Any: ...


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
        runs: task -> the calls of a successful *history* session of that task (the
            oracle-dataflow arm traces those where a task has one: tau2's gold actions often
            hold only the writes, and the reads that produce their values are in the run).
        plan_choices: the traced plans (oracle-plan, mismatched-plan) leave the run's
            choices to the agent (the point's ``plan_choices``).
    """

    labels: Mapping[str, SessionLabel]
    families: Mapping[str, str]
    world: _GoldWorld | None = None
    descriptions: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0
    skills_dir: Path | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    runs: Mapping[str, Sequence[tuple[str, Mapping[str, Any]]]] = field(default_factory=dict)
    plan_choices: bool = False
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
        if control in MISMATCHED:
            picked = mismatched_session(self, probe)
            if picked is None:
                return self.skip(probe, "no other family with a different procedure")
            source = picked
        acts = self.actions(source)
        if not acts:
            return self.skip(probe, "no gold actions")
        run = self.run_of(source)
        if control == "oracle-run":
            if not run:
                return self.skip(probe, "no successful history run of its task (oracle-run)")
            acts = gold_actions(run)
        sources: list[dict[str, tuple[ArgSource, ...]]] | None = None
        plan: Plan | ArmSkipped | None = None
        if control in TRACED:
            # a successful history run of the task (its reads, then its writes), else the gold
            ran = gold_actions(run) if run else acts
            if control == "oracle-dataflow":  # its prose is that run's calls with sources
                acts = ran
            traced = self._trace(probe, ran, task_of=source)
            if isinstance(traced, ArmSkipped):
                return traced
            calls, customer = traced
            origin = "history" if run else "gold"
            if control == "oracle-dataflow":
                sources = self._dataflow(probe, [c for c, _ in calls], customer, origin)
            else:
                plan = self._plan(probe, calls, customer, origin)
                if isinstance(plan, ArmSkipped):
                    return plan
        skill = oracle_skill(acts, self.descriptions,
                             with_args=control in ("oracle-args", "oracle-run"),
                             sources=sources)
        if isinstance(plan, Plan):
            skill = with_plan(skill, plan)
        where = None if self.skills_dir is None else \
            self.skills_dir / control / _kebab(probe)[:80]
        fam = self.families.get(source)
        return oracle_procedure(read_back_691(skill, where), control=control, probe=probe,
                                families=() if fam is None else (fam,))


    def run_of(self, session: str) -> Sequence[tuple[str, Mapping[str, Any]]] | None:
        """The calls of a successful history run of the session's task (None: none known)."""
        label = self.labels.get(session)
        return None if label is None else self.runs.get(str(label.task_id))

    def _trace(self, probe: str, acts: Sequence[GoldAction], *, task_of: str
               ) -> tuple[list[tuple[TracedCall, bool]], str] | ArmSkipped:
        """``acts`` executed in a fresh episode of the task of session ``task_of`` (the
        probe's, or the drawn family's; :func:`.traced.trace_run`)."""
        label = self.labels.get(task_of)
        if self.world is None or label is None or label.task_id is None:
            return self.skip(probe, "no world to execute the calls in (oracle-dataflow, "
                                    "oracle-plan and mismatched-plan trace argument sources "
                                    "through the calls' results)")
        try:
            return trace_run(self.world, str(label.task_id),
                             [(a.name, a.arguments) for a in acts])
        except WorldError as exc:
            return self.skip(probe, f"task {label.task_id} cannot be started: {exc}")

    def _dataflow(self, probe: str, calls: Sequence[TracedCall], customer: str, origin: str
                  ) -> list[dict[str, tuple[ArgSource, ...]]]:
        """Each argument's source in the traced calls (counted for the point's summary)."""
        assert self.world is not None  # traced in it
        sources = argument_sources(calls, customer, enums=enum_values(self.world.tool_specs()))
        self._cache[("sources", probe)] = source_counts(sources) | {f"from_{origin}": 1}
        return sources

    def _plan(self, probe: str, calls: Sequence[tuple[TracedCall, bool]], customer: str,
              origin: str) -> Plan | ArmSkipped:
        """The traced run as a plan (:func:`.traced.trace_plan`; its shape counted)."""
        assert self.world is not None  # traced in it
        plan = trace_plan(probe, calls, customer, self.world.tool_specs(),
                          choices=self.plan_choices)
        if plan is None:
            return self.skip(probe, "not even the first gold call's arguments can be bound "
                                    "(no plan)")
        self._cache[("plan", probe)] = plan_shape(plan, calls, origin)
        return plan

    def dataflow_counts(self) -> dict[str, int]:
        """Argument values per source kind over the probes oracle-dataflow traced, and how
        many probes were traced from a history run (``from_history``) or the gold calls."""
        zero = dict.fromkeys(("step", "customer", "constant", "unknown", "from_history",
                              "from_gold"), 0)
        return summed(self._cache, "sources", zero)

    def plan_counts(self) -> dict[str, int]:
        """Over the probes oracle-plan traced (:func:`.traced.plan_shape`)."""
        return summed(self._cache, "plan", {})


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
        EvaluationError: an oracle arm where no probe has gold actions (oracle-run: no
            successful history run of any probe's task), or a mismatched arm with fewer than
            two families that have them (the message says what to use).
    """
    if control in ORACLES:
        if not any(gold.actions(p.session_id) for p in split.probes):
            raise EvaluationError(
                f"strategy {control} writes each probe's procedure from its task's gold "
                f"actions, and none of the {len(split.probes)} probes has any (labels' "
                "actions, or the live world's task); use a tau2 or tau-bench corpus, or a "
                "history generated in a tau2 world")
        if control == "oracle-run" and not any(gold.run_of(p.session_id)
                                               for p in split.probes):
            raise EvaluationError(
                f"strategy oracle-run recalls a successful history run of each probe's task, "
                f"and the history holds none for any of the {len(split.probes)} probes' tasks "
                "(labels with success and a task id)")
    elif control in MISMATCHED and len(gold.representatives()) < 2:
        raise EvaluationError(
            f"strategy {control} recalls another family's gold procedure, and fewer than two "
            "families have gold actions; use a tau2 or tau-bench corpus with several tasks")
