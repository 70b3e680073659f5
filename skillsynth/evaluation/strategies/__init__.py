"""Procedural-memory designs run through the same evaluation protocol.

A strategy is two choices: how procedures are synthesized from the history store, and how
they are recalled for a new goal. The evaluation runs every strategy on the same split,
the same models and the same replay rule, so their KPIs are comparable.

=============  ==========================================  ==================================
strategy       synthesis                                   recall
=============  ==========================================  ==================================
skillsynth     goal clusters (average linkage at tau)      embeddings, cosine >= tau, top_k
gaia-greedy    GAIA's greedy seed clustering               embeddings, cosine >= tau, top_k
               (skillsynth's re-implementation, in
               skillsynth's pass)
gaia-shipped   the installed amd-gaia's own pass, run      embeddings, cosine >= tau, top_k
               unchanged (:mod:`.gaia_shipped`): at most
               2 distillations a pass, GAIA's marks and
               watermark, its YAML prompt and reconcile
cortexprism    one extraction per session with >= 2        embeddings, cosine >= tau, top_k
               successful calls, no clustering, merged
               into an existing skill at cosine >= 0.78
pheron         as skillsynth                               keyword overlap, top 3, no tau
none           nothing                                     nothing (the no-memory arm)
oracle         nothing                                     the probe task's gold procedure,
                                                           tool names and descriptions
oracle-args    nothing                                     the same with the gold arguments
oracle-        nothing                                     the same with each argument's
dataflow                                                   source (a result field, the
                                                           customer, a constant), no value
mismatched     nothing                                     another family's oracle procedure
mismatched-    nothing                                     another family's oracle-plan (the
plan                                                       plan form's negative control)
inert          as skillsynth                               nothing, and the memory arm still
                                                           runs (it must equal no-memory)
=============  ==========================================  ==================================

The arms from ``oracle`` on are control arms (:mod:`skillsynth.evaluation.point.controls`;
``oracle-plan`` too): they recall by the
probe itself, so a recall function takes the probe's session id beside its goal, and the
protocol hands a control its point's gold source.

``pheron`` keeps skillsynth's synthesis so that the comparison isolates the recall method
(seed 003's keyword matching against vector search). ``gaia-shipped`` needs amd-gaia
(``pip install 'skillsynth[gaia]'``); :func:`get_strategy` says so when it is missing. Its
recall is skillsynth's, over the when_to_use vectors GAIA stores in ``procedures.embedding``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ...config import Thresholds
from ...errors import ConfigError, EvaluationError
from ...models.embed import Embeds
from ...pipeline.cluster import Method, RateDefinition
from ...pipeline.distill import (
    PROMPT_VERSION,
    TRACE_VERSION,
    VALUES_VERSION,
    DistillArgs,
    Distiller,
    DistillMode,
)
from ...pipeline.provenance import SOURCES_VERSION
from ...pipeline.recall import RECALL_KEYS, Recall, RecallKey, recall, recall_index
from ...pipeline.synthesize import PassReport, synthesize_skills
from ...pipeline.verify import Verifier, VerifyRule
from ...protocols import ChatModel
from ...store import MemoryStore, Procedure
from .gaia_shipped import (
    gaia_distill_cap,
    gaia_distill_prompt_version,
    gaia_shipped_pass,
    require_gaia,
)
from .keyword import KeywordIndex

#: The control arms (METHODS.md 2b; built in :mod:`skillsynth.evaluation.point.controls`).
ControlKind = Literal["oracle", "oracle-args", "oracle-run", "oracle-dataflow", "oracle-plan",
                      "mismatched", "mismatched-plan", "inert"]


class ControlSource(Protocol):
    """Where a control arm's procedure for a probe comes from: the point's gold source
    (:class:`skillsynth.evaluation.point.controls.GoldSource`)."""

    def recall(self, control: ControlKind, probe: str) -> Procedure: ...

__all__ = [
    "CORTEXPRISM_DEDUP_TAU",
    "PHERON_TOP_K",
    "STRATEGIES",
    "ControlKind",
    "ControlSource",
    "ControlStrategy",
    "GaiaShipped",
    "Recaller",
    "Strategy",
    "StrategyName",
    "get_strategy",
]

StrategyName = Literal["skillsynth", "gaia-greedy", "gaia-shipped", "cortexprism", "pheron",
                       "none", "oracle", "oracle-args", "oracle-run", "oracle-dataflow",
                       "oracle-plan", "mismatched", "mismatched-plan", "inert"]
#: CortexPrism merges a new extraction into an existing skill at this cosine (seed 002).
CORTEXPRISM_DEDUP_TAU = 0.78
#: Pheron adds the top 3 keyword matches to the system prompt (seed 003).
PHERON_TOP_K = 3



class Recaller(Protocol):
    """A recall function bound to one store's procedures: goal -> recalled, best first.

    ``session`` is the probe's session id; only the control arms read it (they recall by
    the probe, not by its goal).
    """

    def __call__(self, goal: str, session: str | None = None) -> list[Recall]: ...


def _nothing(goal: str, session: str | None = None) -> list[Recall]:
    return []


@dataclass(frozen=True)
class Strategy:
    """One design: a synthesis method and a recall method.

    Attributes:
        name: the strategy's name in sweeps and reports.
        method: the clustering method handed to the synthesis pass (None: no synthesis).
        synth_overrides: thresholds the design fixes for synthesis, whatever the sweep sets.
        recall_kind: ``embedding``, ``keyword``, ``none`` or ``control``.
    """

    name: str
    method: Method | None
    synth_overrides: Mapping[str, Any]
    recall_kind: Literal["embedding", "keyword", "none", "control"]

    @property
    def runs_empty_memory_arm(self) -> bool:
        """Live, run the memory arm even when nothing was recalled (else it is the no-memory
        run: same inputs, same run)."""
        return False

    def synthesis_config(self, config: Thresholds) -> Thresholds:
        """The thresholds the synthesis pass runs with under this design."""
        return config.merge(dict(self.synth_overrides), source=f"strategy {self.name}")

    def synthesize(self, store: MemoryStore, llm: ChatModel, embedder: Embeds, config: Thresholds,
                   *, mode: DistillMode = "json", memory_disabled: bool = False,
                   rate: RateDefinition = "calls", outcomes: Mapping[str, bool] | None = None,
                   force: bool = False, verifier: Verifier | None = None,
                   args: DistillArgs = "none", distiller: Distiller = "llm"
                   ) -> PassReport | None:
        """One synthesis pass over ``store`` (None when the design has no synthesis).

        ``rate``, ``outcomes``, ``force``, ``verifier``, ``args`` and ``distiller`` go to
        :func:`~skillsynth.pipeline.synthesize.synthesize_skills`; the pass keeps GAIA's
        synthesis marks and watermark in ``store``, so a later pass skips what it consumed.
        """
        if self.method is None:
            return None
        return synthesize_skills(store, llm, embedder, self.synthesis_config(config),
                                 method=self.method, mode=mode, rate=rate, outcomes=outcomes,
                                 force=force, memory_disabled=memory_disabled,
                                 verifier=verifier, args=args, distiller=distiller)

    def distill_cap(self, config: Thresholds) -> int | None:
        """The most distillations one pass spends under this design (None: no synthesis):
        ``max_distill_calls_per_pass`` within ``max_clusters_per_pass``."""
        if self.method is None:
            return None
        c = self.synthesis_config(config)
        return c.max_clusters_per_pass if c.max_distill_calls_per_pass is None else \
            min(c.max_clusters_per_pass, c.max_distill_calls_per_pass)

    def check_available(self) -> None:
        """Raise unless what this design runs is installed (every built-in one is)."""

    def distill_prompt(self, args: DistillArgs = "none", distiller: Distiller = "llm") -> str:
        """The version of the distillation prompt this design's pass sends (for records):
        the trace rule's where no model distils, with the arguments shown where any are and
        how their sources were read where sources are stated."""
        if distiller != "llm":
            writes = "-writes" if distiller == "trace-writes" else ""
            return TRACE_VERSION + writes + ("-values" if args == "values" else
                                             f"-{SOURCES_VERSION}")
        return PROMPT_VERSION + ("" if args == "none" else f"-{VALUES_VERSION}"
                                 if args == "values" else f"-{args}-{SOURCES_VERSION}")

    def check_distillation(self, args: DistillArgs, distiller: Distiller) -> None:
        """Raise ConfigError unless this design's pass can distil as asked (its own does)."""

    def check_rate(self, rate: str) -> None:
        """Raise ConfigError unless this design's synthesis can qualify clusters by ``rate``."""

    def check_verify(self, rule: VerifyRule) -> None:
        """Raise ConfigError unless this design's pass can verify its candidates by ``rule``
        (every synthesizing design can: skillsynth's pass before it writes,
        :mod:`skillsynth.pipeline.verify`; GAIA's own pass at its mark, :mod:`.gaia_verify`)."""

    def check_recall_key(self, key: str) -> None:
        """Raise ConfigError unless this design can recall by ``key``.

        Only embedding recall has keys (``none`` recalls nothing whatever the key).
        """
        if key not in RECALL_KEYS:
            raise ConfigError(f"recall key must be one of {', '.join(RECALL_KEYS)}, got "
                              f"{key!r}", key="recall_key")
        if self.recall_kind == "keyword" and key != "when_to_use":
            raise ConfigError(f"strategy {self.name} recalls by keywords of when_to_use; it "
                              f"cannot recall by {key!r}", key="recall_key")

    def recaller(self, store: MemoryStore, embedder: Embeds, config: Thresholds,
                 key: RecallKey = "when_to_use", *, gold: ControlSource | None = None
                 ) -> Recaller:
        """A recall function over the store's active procedures as they are now.

        ``gold``: the point's gold source (read by the control arms only).
        """
        self.check_recall_key(key)
        if self.recall_kind == "none":
            return _nothing
        if self.recall_kind == "keyword":
            kw = KeywordIndex(store.procedures(active_only=True))
            return lambda goal, session=None: kw.search(goal, top_k=PHERON_TOP_K)
        index = recall_index(store, embedder, key)
        return lambda goal, session=None: recall(store, embedder, goal, config, index=index,
                                                 touch=False)


@dataclass(frozen=True)
class GaiaShipped(Strategy):
    """The installed amd-gaia's own synthesis pass (:mod:`.gaia_shipped`), skillsynth's recall.

    ``method`` names GAIA's clustering for records; the pass itself is GAIA's. ``mode`` is
    ignored (GAIA has one prompt, free-form YAML). GAIA keeps its own ``synthesis_marks`` in
    the store, and ``PassReport.handed`` reads them back. ``verify`` runs skillsynth's
    verification inside GAIA's pass, through the host's seams (:mod:`.gaia_verify`).
    """

    def check_available(self) -> None:
        """Raise EvaluationError naming the install command when amd-gaia is missing."""
        require_gaia()

    def distill_cap(self, config: Thresholds) -> int | None:
        """GAIA's own cap, as its pass resolves the settings (2 in 0.25.1 when unset)."""
        return gaia_distill_cap(self.synthesis_config(config))

    def distill_prompt(self, args: DistillArgs = "none", distiller: Distiller = "llm") -> str:
        """GAIA's prompt, named by the installed release."""
        return gaia_distill_prompt_version()

    def check_distillation(self, args: DistillArgs, distiller: Distiller) -> None:
        """GAIA's pass distils with its own prompt: names only, by its model."""
        if args != "none" or distiller != "llm":
            raise ConfigError(f"strategy {self.name} runs GAIA's own distillation (tool names "
                              "only, by its model); distill_args and distiller need "
                              "skillsynth's pass (gaia-greedy)", key="distiller")

    def check_rate(self, rate: str) -> None:
        """GAIA qualifies clusters by its per-call success rate only."""
        if rate != "calls":
            raise ConfigError(f"strategy {self.name} runs GAIA's own pass, which qualifies "
                              f"clusters by the per-call success rate; rate {rate!r} needs "
                              "skillsynth's pass (gaia-greedy)", key="rate")

    def synthesize(self, store: MemoryStore, llm: ChatModel, embedder: Embeds, config: Thresholds,
                   *, mode: DistillMode = "json", memory_disabled: bool = False,
                   rate: RateDefinition = "calls", outcomes: Mapping[str, bool] | None = None,
                   force: bool = False, verifier: Verifier | None = None,
                   args: DistillArgs = "none", distiller: Distiller = "llm"
                   ) -> PassReport | None:
        """One pass of GAIA's ``_synthesize_skills(force=force)`` over ``store``; a
        ``verifier`` judges each procedure GAIA stores before its cluster is marked
        (:mod:`.gaia_verify`)."""
        self.check_rate(rate)
        self.check_distillation(args, distiller)
        return gaia_shipped_pass(store, llm, embedder, self.synthesis_config(config),
                                 memory_disabled=memory_disabled, outcomes=outcomes,
                                 force=force, verifier=verifier)


@dataclass(frozen=True)
class ControlStrategy(Strategy):
    """A control arm: ``oracle``, ``oracle-args``, ``oracle-run``, ``oracle-dataflow``,
    ``oracle-plan``, ``mismatched``, ``mismatched-plan`` (no synthesis) or ``inert``
    (skillsynth's synthesis, recall forced empty)."""

    @property
    def control(self) -> ControlKind:
        """Which control this is (its name)."""
        return self.name  # type: ignore[return-value]

    @property
    def runs_empty_memory_arm(self) -> bool:
        """The inert arm runs live with nothing recalled: that run is what is checked."""
        return self.name == "inert"

    def recaller(self, store: MemoryStore, embedder: Embeds, config: Thresholds,
                 key: RecallKey = "when_to_use", *, gold: ControlSource | None = None
                 ) -> Recaller:
        """Nothing (inert), else the probe's control procedure at rank 1, score 1.0.

        Raises (when called): EvaluationError without a gold source or a probe session.
        ArmSkipped: the probe has no control procedure (the reason is counted in ``gold``).
        """
        self.check_recall_key(key)
        if self.name == "inert":
            return _nothing
        control = self.control

        def recall_for(goal: str, session: str | None = None) -> list[Recall]:
            if gold is None or session is None:
                raise EvaluationError(
                    f"strategy {control} builds each probe's procedure from its gold actions; "
                    "it recalls inside an evaluation point (run_point), which hands it the "
                    "probe and the labels")
            return [Recall(procedure=gold.recall(control, session), score=1.0)]

        return recall_for


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy(name="skillsynth", method="agglomerative", synth_overrides={},
             recall_kind="embedding"),
    Strategy(name="gaia-greedy", method="gaia-greedy", synth_overrides={}, recall_kind="embedding"),
    GaiaShipped(name="gaia-shipped", method="gaia-greedy", synth_overrides={},
                recall_kind="embedding"),
    Strategy(name="cortexprism", method="per-session",
             synth_overrides={"min_steps": 2, "min_occurrences": 1,
                              "similarity_tau": CORTEXPRISM_DEDUP_TAU,
                              "reconcile_tau": CORTEXPRISM_DEDUP_TAU,
                              "max_clusters_per_pass": 1_000_000}, recall_kind="embedding"),
    Strategy(name="pheron", method="agglomerative", synth_overrides={}, recall_kind="keyword"),
    Strategy(name="none", method=None, synth_overrides={}, recall_kind="none"),
    ControlStrategy(name="oracle", method=None, synth_overrides={}, recall_kind="control"),
    ControlStrategy(name="oracle-args", method=None, synth_overrides={}, recall_kind="control"),
    ControlStrategy(name="oracle-run", method=None, synth_overrides={}, recall_kind="control"),
    ControlStrategy(name="oracle-dataflow", method=None, synth_overrides={},
                    recall_kind="control"),
    ControlStrategy(name="oracle-plan", method=None, synth_overrides={},
                    recall_kind="control"),
    ControlStrategy(name="mismatched", method=None, synth_overrides={}, recall_kind="control"),
    ControlStrategy(name="mismatched-plan", method=None, synth_overrides={},
                    recall_kind="control"),
    ControlStrategy(name="inert", method="agglomerative", synth_overrides={},
                    recall_kind="control"),
)}


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name``.

    Raises:
        EvaluationError: no such strategy (the message lists them), or one whose optional
            dependency is missing (the message names the install command).
    """
    try:
        strategy = STRATEGIES[name]
    except KeyError:
        raise EvaluationError(f"unknown strategy {name!r}; choose one of "
                              f"{', '.join(STRATEGIES)}") from None
    strategy.check_available()
    return strategy
