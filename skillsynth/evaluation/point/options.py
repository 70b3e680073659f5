"""A point's options, declared once.

:class:`PointOptions` is the one place a point's settings (other than its corpus, labels,
thresholds and model endpoints) are declared, with their defaults, allowed values, help
text and checks. Everything else derives from it: :class:`~.run.EvalConfig` extends
it, a sweep spec (:class:`~..sweeps.spec.SweepSpec`) holds one as every point's defaults and
reads its keys from its fields, the sweep-point notebook receives one whole (as JSON), the
``skillsynth eval`` command builds its flags from it (:func:`add_cli_options`), and the
gate reads the defaults of the sweepable ones. Each field also declares its stage
(:data:`Role`: which points share a synthesis, which settings a verification twin may differ
in) and how a point id abbreviates it (``short``; a shipped option's must never change, as
committed results are found by id). Adding an option is one field here plus its
use where it takes effect (``tests/test_options.py`` fails when another place declares an
option this class lacks).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import ConfigError
from ...pipeline.cluster import RateDefinition
from ...pipeline.distill import DISTILL_ARGS, DISTILLERS, DistillArgs, Distiller, DistillMode
from ...pipeline.inject import RECALL_CUTS, RecallCut
from ...pipeline.recall import RECALL_KEYS, RecallKey
from ...pipeline.verify import VERIFY_CALLS, VERIFY_RULES, VerifyCalls, VerifyRule
from ..live.gaia_context import RECALL_LAYOUTS, RecallLayout
from ..live.plan_tool import PROCEDURE_FORMS, ProcedureForm
from ..strategies import STRATEGIES, get_strategy
from .metrics import N_BOOT
from .split import FAMILY_RULES, PROBE_RULES, FamilyRule, ProbeRule

__all__ = ["CADENCE_UNITS", "HISTORY_SOURCES", "PROTOCOLS", "ROLES", "CadenceUnit",
           "EvalProtocol", "HistorySource", "PointOptions", "Role", "add_cli_options",
           "cli_values"]

#: Where a point's history came from.
HistorySource = Literal["corpus", "live", "ideal"]
HISTORY_SOURCES: tuple[HistorySource, ...] = ("corpus", "live", "ideal")
#: How history and probes are drawn from the corpus.
EvalProtocol = Literal["strict", "rolling"]
PROTOCOLS: tuple[EvalProtocol, ...] = ("strict", "rolling")
#: What a rolling point's cadence counts.
CadenceUnit = Literal["sessions", "days"]
CADENCE_UNITS: tuple[CadenceUnit, ...] = ("sessions", "days")


#: The stage an option belongs to: ``synthesis`` (what the history store holds: the split,
#: the pass), ``verify`` (the pass's check of each candidate), ``recall`` (what a probe
#: recalls from that store), ``live`` (how live probes run) or ``report`` (how results are
#: summarised). Points that differ in recall, live or report options alone run the same
#: synthesis, so a sweep runs one of them first and the others find its answers cached.
Role = Literal["synthesis", "verify", "recall", "live", "report"]
ROLES: tuple[Role, ...] = ("synthesis", "verify", "recall", "live", "report")


def _opt(default: Any, doc: str, *, role: Role, choices: Sequence[str] | None = None,
         sweep: bool = False, short: str | None = None) -> Any:
    """A field with its documentation (``doc``), its stage (``role``), allowed values,
    whether a grid varies it and, if so, how a point id abbreviates it (``short`` + value;
    default: the name)."""
    return field(default=default, metadata={"doc": doc, "role": role, "choices": choices,
                                            "sweep": sweep, "short": short})


@dataclass(frozen=True, kw_only=True)
class PointOptions:
    """How one evaluation point runs (every field documented in its metadata's ``doc``)."""

    strategy: str = _opt("skillsynth", "the procedural-memory design under test (skillsynth, "
                         "gaia-greedy, gaia-shipped, cortexprism, pheron, none) or a control "
                         "arm (oracle, oracle-args, oracle-run, oracle-dataflow, oracle-plan, "
                         "mismatched, mismatched-plan, inert; "
                         "METHODS.md 2b)",
                         choices=tuple(STRATEGIES), sweep=True, role="synthesis")
    k: int = _opt(3, "attempts per family in the history; attempt k+1 is the probe",
                  role="synthesis")
    family: FamilyRule = _opt("task", "how sessions form families: task (the same task) or "
                              "tools (the same kind of task)", choices=FAMILY_RULES,
                              role="synthesis")
    probes: ProbeRule = _opt("first", "strict: which attempts after a family's k-th are "
                             "probes: first (attempt k+1, #887's 4th attempt; later ones are "
                             "left out) or every (each later one too, all against the same "
                             "history of the first k; under family tools, each other task "
                             "of the kind)", choices=PROBE_RULES, sweep=True,
                             short="probes-", role="synthesis")
    mode: DistillMode = _opt("json", "distillation mode: json (suits small models) or yaml "
                             "(GAIA's)", choices=("json", "yaml"), role="synthesis")
    distill_args: DistillArgs = _opt("none", "what the distiller sees of the calls' "
                                     "arguments: none (GAIA: tool names only), provenance "
                                     "(each argument's source, no value) or values (the "
                                     "values: an upper bound that shows user data to the "
                                     "model)", choices=DISTILL_ARGS, sweep=True,
                                     short="args-", role="synthesis")
    distiller: Distiller = _opt("llm", "who writes a cluster's procedure: llm (the chat "
                                "model), trace (by rule from the runs with their "
                                "arguments' sources; no model call) or trace-writes (the "
                                "trace rule keeping only the run's state-changing calls; a "
                                "source names the read it comes from by its tool)", choices=DISTILLERS,
                                sweep=True, short="distiller-", role="synthesis")
    seed: int = _opt(0, "the bootstrap (and any other sampling) seed", role="report")
    n_boot: int = _opt(N_BOOT, "bootstrap resamples per interval", role="report")
    protocol: EvalProtocol = _opt("strict", "strict (one pass on attempts 1..k, attempt k+1 "
                                  "the probe) or rolling (time order, a pass per simulated "
                                  "process start, every later attempt a probe)",
                                  choices=PROTOCOLS, sweep=True, short="", role="synthesis")
    recall_key: RecallKey = _opt("when_to_use", "what procedures are recalled by: when_to_use "
                                 "(GAIA), goals (their member sessions' goals) or both",
                                 choices=RECALL_KEYS, sweep=True, short="key-", role="recall")
    recall_cut: RecallCut = _opt("raw", "how a recalled body longer than "
                                 "max_recall_body_chars is cut: raw (GAIA: a character "
                                 "slice, possibly mid-step) or whole_steps (after the last "
                                 "whole step or edge case that fits; research, amd/gaia#2676)",
                                 choices=RECALL_CUTS, sweep=True, short="cut-", role="recall")
    recall_layout: RecallLayout = _opt("main", "where recalled procedures reach the agent: "
                                       "main (#887 and GAIA's main: a block in the system "
                                       "prompt, in skillsynth's words) or release (amd-gaia "
                                       "0.25.1: the release's own block in the turn's memory "
                                       "context, before the user's message; needs amd-gaia)",
                                       choices=RECALL_LAYOUTS, sweep=True, short="layout-",
                                       role="recall")
    rate: RateDefinition = _opt("calls", "the success signal clusters qualify by: calls "
                                "(GAIA's per-call rate) or session (the session's labelled "
                                "outcome)", choices=("calls", "session"), sweep=True,
                                short="rate-", role="synthesis")
    cadence: int = _opt(20, "rolling: a synthesis pass every `cadence` sessions or days",
                       role="synthesis")
    cadence_unit: CadenceUnit = _opt("sessions", "rolling: the cadence's unit",
                                     choices=CADENCE_UNITS, role="synthesis")
    live: bool = _opt(False, "also run the live agent, both arms per probe", role="live")
    step_limit: int = _opt(12, "the live agent's most tool calls per arm", role="live")
    world: str = _opt("replay", "where live probes run: replay (the corpus's recordings) or a "
                      "world from `skillsynth world list` (the corpus's task ids and goals "
                      "must be the world's)", role="live")
    history: HistorySource = _opt("corpus", "corpus (imported recordings), live (the corpus "
                                  "is the agent's own runs in `world`) or ideal (each task's "
                                  "reference run, a recorded success else its gold calls, "
                                  "executed in `world` k+1 times: GAIA's planted ideal "
                                  "attempts)",
                                  choices=HISTORY_SOURCES, role="synthesis")
    repeats: int = _opt(1, "live runs per arm per probe (more than 1 samples at "
                        "`temperature`, seed = repeat)", role="live")
    temperature: float = _opt(0.7, "sampling temperature of repeated live runs (a single "
                              "run is greedy)", role="live")
    policy: bool = _opt(True, "give the live agent the world's policy text", role="live")
    procedure_form: ProcedureForm = _opt("prose", "how a recalled procedure reaches the live "
                                         "agent: prose (GAIA: its body in the system "
                                         "prompt), plan (its executable plan, where it has "
                                         "one, as one more tool instead of its prose) or "
                                         "both (the prose, and the tool)",
                                         choices=PROCEDURE_FORMS, sweep=True, short="form-",
                                         role="live")
    plan_choices: bool = _opt(False, "plans (procedure_form plan or both) leave a choice the "
                              "runs made among an earlier result's values (which order, "
                              "which item) to the agent, who is shown the values to pick "
                              "from, instead of ending the plan there", sweep=True,
                              short="choices-", role="live")
    verify: VerifyRule = _opt("none", "verify each distilled candidate before activating it: "
                              "none (GAIA: activate all), world (try it live on its member "
                              "tasks in `world`) or trace (its steps realised in a held-out "
                              "member's recorded calls; weaker)", choices=VERIFY_RULES,
                              sweep=True, short="verify-", role="verify")
    verify_tasks: int = _opt(3, "verify world: most member tasks a candidate is tried on",
                             sweep=True, short="vtasks", role="verify")
    verify_min_success: float = _opt(0.5, "verify world: the share of tries that must "
                                     "succeed, in (0, 1]", sweep=True, short="vmin",
                                     role="verify")
    verify_calls: VerifyCalls = _opt("none", "verify world: what else a try must show: none, "
                                     "or median (no more tool calls than the median of the "
                                     "candidate's member sessions)", choices=VERIFY_CALLS,
                                     sweep=True, short="vcalls-", role="verify")
    tasks: tuple[str, ...] | None = _opt(None, "only probes of these task ids run live "
                                         "(None: every probe)", role="live")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(PointOptions):
            choices = f.metadata["choices"]
            value = getattr(self, f.name)
            if choices is not None and f.name != "strategy" and value not in choices:
                raise ConfigError(f"{f.name} must be one of {', '.join(choices)}, got "
                                  f"{value!r}", key=f.name)
        strategy = get_strategy(self.strategy)  # before any work
        strategy.check_recall_key(self.recall_key)
        strategy.check_rate(self.rate)
        strategy.check_distillation(self.distill_args, self.distiller)
        for name, least in (("k", 1), ("step_limit", 1), ("repeats", 1), ("n_boot", 1),
                            ("verify_tasks", 1)):
            if getattr(self, name) < least:
                raise ConfigError(f"{name} must be >= {least}, got {getattr(self, name)}",
                                  key=name)
        if not 0 < self.verify_min_success <= 1:
            raise ConfigError(f"verify_min_success must be in (0, 1], got "
                              f"{self.verify_min_success}", key="verify_min_success")
        if self.verify_calls != "none" and self.verify != "world":
            raise ConfigError(f"verify_calls {self.verify_calls} counts a live try's calls "
                              f"and applies to verify: world only, got verify: {self.verify}",
                              key="verify_calls")
        if self.verify != "none" and strategy.method is None:
            raise ConfigError(f"strategy {self.strategy} distils nothing, so there is "
                              "nothing to verify; use verify: none", key="verify")
        strategy.check_verify(self.verify)
        if self.probes != "first" and self.protocol != "strict":
            raise ConfigError(f"probes {self.probes} chooses the strict protocol's probes; "
                              f"under {self.protocol} every attempt after a family's k-th is "
                              "a probe already: leave probes first", key="probes")
        if self.strategy in ("oracle-plan", "mismatched-plan") and \
                self.procedure_form == "prose":
            prose = "oracle" if self.strategy == "oracle-plan" else "mismatched"
            raise ConfigError(f"strategy {self.strategy} offers a task's calls as a plan the "
                              f"agent calls; as prose it is the {prose} arm: set "
                              "procedure_form to plan or both", key="procedure_form")
        if self.recall_layout == "release":
            if self.recall_cut != "raw":
                raise ConfigError(f"recall_layout release cuts bodies as the release does; "
                                  f"recall_cut {self.recall_cut} applies to main only",
                                  key="recall_cut")
            from ..live.gaia_context import require_release_renderer

            require_release_renderer()  # amd-gaia installed: before any work
        if self.plan_choices and self.procedure_form == "prose":
            raise ConfigError("plan_choices shapes the plans a point offers as tools, and "
                              "procedure_form prose offers none: set procedure_form to plan "
                              "or both", key="plan_choices")
        if self.cadence < 1:
            raise ConfigError(f"cadence must be >= 1 {self.cadence_unit}, got {self.cadence}",
                              key="cadence")
        if self.protocol == "rolling" and self.live:
            raise ConfigError("live probes run under protocol strict only (a rolling point's "
                              "probes are scored by the replay rule)", key="protocol")
        from ..live.worlds import WORLDS

        if self.world != "replay" and self.world not in WORLDS:
            raise ConfigError(f"unknown world {self.world!r}; known: replay, "
                              f"{', '.join(WORLDS)}", key="world")
        if self.history != "corpus" and self.world == "replay":
            raise ConfigError(f"history: {self.history} needs a tau2 world to run the "
                              f"attempts in ({', '.join(WORLDS)})", key="history")
        if self.tasks is not None:
            object.__setattr__(self, "tasks", tuple(str(t) for t in self.tasks))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option's name, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(PointOptions))

    @classmethod
    def sweepable(cls) -> tuple[str, ...]:
        """The options a sweep's grid may vary."""
        return tuple(f.name for f in dataclasses.fields(PointOptions) if f.metadata["sweep"])

    @classmethod
    def with_role(cls, *roles: Role) -> tuple[str, ...]:
        """The options of the stages ``roles``, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(PointOptions)
                     if f.metadata["role"] in roles)

    @classmethod
    def role(cls, name: str) -> Role:
        """The stage option ``name`` belongs to."""
        role: Role = _field(name).metadata["role"]
        return role

    @classmethod
    def short(cls, name: str) -> str:
        """How a point id abbreviates option ``name`` (its value follows)."""
        short = _field(name).metadata["short"]
        return name if short is None else str(short)

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every option's default."""
        return {f.name: f.default for f in dataclasses.fields(PointOptions)}

    @classmethod
    def doc(cls, name: str) -> str:
        """The documentation of option ``name``."""
        return str(_field(name).metadata["doc"])

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str | None = None) -> PointOptions:
        """Options from plain values (a spec file, the notebook's JSON), types checked.

        Keys that are not options are refused; missing ones take their defaults.

        Raises:
            ConfigError: naming the key (and ``source``) of an unknown or ill-typed value.
        """
        unknown = sorted(set(data) - set(cls.names()))
        if unknown:
            raise ConfigError(f"unknown option(s) {unknown}; known: {', '.join(cls.names())}",
                              key=unknown[0], source=source)
        values = {k: _coerce(k, v, source) for k, v in data.items()}
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(exc.args[0], key=exc.key, source=source) from None

    def only_options(self) -> PointOptions:
        """These options alone (a subclass's extra fields dropped)."""
        return PointOptions(**{n: getattr(self, n) for n in self.names()})

    def replace(self, **changes: Any) -> PointOptions:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self.only_options(), **changes)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready (``tasks`` as a list); :meth:`from_mapping` reads it back."""
        d = {n: getattr(self, n) for n in self.names()}
        d["tasks"] = None if self.tasks is None else list(self.tasks)
        return d


def _field(name: str) -> dataclasses.Field[Any]:
    return next(f for f in dataclasses.fields(PointOptions) if f.name == name)


def _coerce(key: str, value: Any, source: str | None) -> Any:
    default = PointOptions.defaults()[key]
    if key == "tasks":
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ConfigError(f"tasks must be a list of task ids or null, got {value!r}",
                              key=key, source=source)
        return tuple(str(t) for t in value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}", key=key,
                              source=source)
        return value
    kind = type(default)
    fractional = kind is int and isinstance(value, float) and not value.is_integer()
    if isinstance(value, bool) or fractional:  # True is not 1 here, nor 2.5 a whole number
        return _bad(key, value, kind, source)
    try:
        return kind(value)
    except (TypeError, ValueError):
        return _bad(key, value, kind, source)


def _bad(key: str, value: Any, kind: type, source: str | None) -> Any:
    what = {int: "a whole number", float: "a number", str: "a string"}.get(kind, kind.__name__)
    raise ConfigError(f"{key} must be {what}, got {value!r}", key=key, source=source)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_cli_options(parser: argparse.ArgumentParser) -> None:
    """Add one flag per option to ``parser`` (defaults, choices and help from the fields)."""
    for f in dataclasses.fields(PointOptions):
        doc, choices = f.metadata["doc"], f.metadata["choices"]
        if isinstance(f.default, bool):
            if f.default:  # on by default: the flag turns it off
                parser.add_argument("--no-" + f.name.replace("_", "-"), dest=f.name,
                                    action="store_false", help=f"do not: {doc}")
            else:
                parser.add_argument(_flag(f.name), dest=f.name, action="store_true", help=doc)
        elif f.name == "tasks":
            parser.add_argument(_flag(f.name), dest=f.name, default=None, metavar="ID,ID,...",
                                help=doc.replace("(None: every probe)", "(default: every "
                                                 "probe)"))
        else:
            parser.add_argument(_flag(f.name), dest=f.name, default=f.default,
                                type=type(f.default), choices=choices,
                                help=f"{doc} (default: {f.default})")


def cli_values(args: argparse.Namespace) -> dict[str, Any]:
    """The options' values from parsed flags (see :func:`add_cli_options`)."""
    values = {n: getattr(args, n) for n in PointOptions.names()}
    if values["tasks"] is not None:
        values["tasks"] = tuple(t for t in str(values["tasks"]).split(",") if t) or None
    return values
