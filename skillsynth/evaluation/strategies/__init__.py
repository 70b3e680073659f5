"""Procedural-memory designs run through the same evaluation protocol.

A strategy is two choices: how procedures are synthesized from the history store, and how
they are recalled for a new goal. The evaluation runs every strategy on the same split,
the same models and the same replay rule, so their KPIs are comparable.

=============  ==========================================  ==================================
strategy       synthesis                                   recall
=============  ==========================================  ==================================
skillsynth     goal clusters (average linkage at tau)      embeddings, cosine >= tau, top_k
gaia-greedy    GAIA's shipped greedy seed clustering       embeddings, cosine >= tau, top_k
cortexprism    one extraction per session with >= 2        embeddings, cosine >= tau, top_k
               successful calls, no clustering, merged
               into an existing skill at cosine >= 0.78
pheron         as skillsynth                               keyword overlap, top 3, no tau
none           nothing                                     nothing (the no-memory arm)
=============  ==========================================  ==================================

``pheron`` keeps skillsynth's synthesis so that the comparison isolates the recall method
(seed 003's keyword matching against vector search).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...config import Thresholds
from ...errors import ConfigError, EvaluationError
from ...models.embed import Embeds
from ...pipeline.cluster import Method, RateDefinition
from ...pipeline.distill import DistillMode
from ...pipeline.recall import RECALL_KEYS, Recall, RecallKey, recall, recall_index
from ...pipeline.synthesize import PassReport, synthesize_skills
from ...protocols import ChatModel
from ...store import MemoryStore
from .keyword import KeywordIndex

__all__ = [
    "CORTEXPRISM_DEDUP_TAU",
    "PHERON_TOP_K",
    "STRATEGIES",
    "Recaller",
    "Strategy",
    "StrategyName",
    "get_strategy",
]

StrategyName = Literal["skillsynth", "gaia-greedy", "cortexprism", "pheron", "none"]
#: CortexPrism merges a new extraction into an existing skill at this cosine (seed 002).
CORTEXPRISM_DEDUP_TAU = 0.78
#: Pheron adds the top 3 keyword matches to the system prompt (seed 003).
PHERON_TOP_K = 3

#: A recall function bound to one store's procedures: goal -> recalled, best first.
Recaller = Callable[[str], list[Recall]]


@dataclass(frozen=True)
class Strategy:
    """One design: a synthesis method and a recall method.

    Attributes:
        name: the strategy's name in sweeps and reports.
        method: the clustering method handed to the synthesis pass (None: no synthesis).
        synth_overrides: thresholds the design fixes for synthesis, whatever the sweep sets.
        recall_kind: ``embedding``, ``keyword`` or ``none``.
    """

    name: str
    method: Method | None
    synth_overrides: Mapping[str, Any]
    recall_kind: Literal["embedding", "keyword", "none"]

    def synthesis_config(self, config: Thresholds) -> Thresholds:
        """The thresholds the synthesis pass runs with under this design."""
        return config.merge(dict(self.synth_overrides), source=f"strategy {self.name}")

    def synthesize(self, store: MemoryStore, llm: ChatModel, embedder: Embeds, config: Thresholds,
                   *, mode: DistillMode = "json", memory_disabled: bool = False,
                   rate: RateDefinition = "calls", outcomes: Mapping[str, bool] | None = None,
                   exclude: Collection[str] = ()) -> PassReport | None:
        """One synthesis pass over ``store`` (None when the design has no synthesis).

        ``rate``, ``outcomes`` and ``exclude`` go to
        :func:`~skillsynth.pipeline.synthesize.synthesize_skills`.
        """
        if self.method is None:
            return None
        return synthesize_skills(store, llm, embedder, self.synthesis_config(config),
                                 method=self.method, mode=mode, rate=rate, outcomes=outcomes,
                                 exclude=exclude, memory_disabled=memory_disabled)

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
                 key: RecallKey = "when_to_use") -> Recaller:
        """A recall function over the store's active procedures as they are now."""
        self.check_recall_key(key)
        if self.recall_kind == "none":
            return lambda goal: []
        if self.recall_kind == "keyword":
            kw = KeywordIndex(store.procedures(active_only=True))
            return lambda goal: kw.search(goal, top_k=PHERON_TOP_K)
        index = recall_index(store, embedder, key)
        return lambda goal: recall(store, embedder, goal, config, index=index, touch=False)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("skillsynth", "agglomerative", {}, "embedding"),
    Strategy("gaia-greedy", "gaia-greedy", {}, "embedding"),
    Strategy("cortexprism", "per-session",
             {"min_steps": 2, "min_occurrences": 1, "similarity_tau": CORTEXPRISM_DEDUP_TAU,
              "reconcile_tau": CORTEXPRISM_DEDUP_TAU,
              "max_clusters_per_pass": 1_000_000}, "embedding"),
    Strategy("pheron", "agglomerative", {}, "keyword"),
    Strategy("none", None, {}, "none"),
)}


def get_strategy(name: str) -> Strategy:
    """The strategy called ``name``.

    Raises:
        EvaluationError: no such strategy (the message lists them).
    """
    try:
        return STRATEGIES[name]
    except KeyError:
        raise EvaluationError(f"unknown strategy {name!r}; choose one of "
                              f"{', '.join(STRATEGIES)}") from None
