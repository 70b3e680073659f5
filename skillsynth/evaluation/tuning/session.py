"""Threshold tuning: the computations behind the tuning notebook's views, without widgets.

:meth:`TuningSession.prepare` does the expensive work once (detect the history's sessions,
embed their goals and the probes' goals, sample goal pairs). Every view after that is
cheap: :meth:`TuningSession.view` re-clusters only when the method or tau changed (the
grouping is cached per method and tau; min_occurrences and min_success_rate re-judge the
cached groups), takes distillations only from the call cache (:func:`distill_cached`:
never a model call; clusters not yet distilled are listed as such), and recalls with
FAISS over the distilled procedures' when_to_use vectors.

The corpus is opened read-only; the probes (attempt k+1 of each task) are only recalled
for, exactly as in the evaluation protocol. :func:`write_settings_block` writes the chosen
thresholds as GAIA's ``memory_settings.json`` block.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...config import SETTINGS_BLOCK, Thresholds
from ...corpora.labels import labels_path_for
from ...errors import ConfigError, EvaluationError, MalformedSkill
from ...models.embed import Embeds
from ...pipeline.cluster import Cluster, Method, cluster_by_goal, embed_goals, requalify
from ...pipeline.detect import SessionSequence, extract_sequences
from ...pipeline.distill import DistillMode, distill, distill_cached
from ...pipeline.inject import inject
from ...pipeline.skill import Skill
from ...protocols import ChatModel
from ...store import MemoryStore
from ..point.split import FamilyRule, load_split

__all__ = [
    "CHARS_PER_TOKEN",
    "PairSample",
    "PairStats",
    "PreviewProcedure",
    "PromptSize",
    "RecallDecision",
    "TuningSession",
    "TuningView",
    "pair_stats",
    "plot_pairs",
    "prompt_size",
    "sample_pairs",
    "write_settings_block",
]

#: Characters per token for the prompt-size estimate (English text, BPE tokenizers).
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class PairSample:
    """Cosines of goal pairs and whether each pair is of one task family (labelled only)."""

    cosines: np.ndarray
    same: np.ndarray
    n_sessions: int
    sampled: bool


def sample_pairs(vectors: np.ndarray, families: Sequence[str | None], *,
                 max_pairs: int = 200_000, seed: int = 0) -> PairSample:
    """All labelled pairs, or ``max_pairs`` of them drawn uniformly (seeded) when more."""
    idx = np.array([i for i, f in enumerate(families) if f is not None], dtype=np.int64)
    fam = np.array([families[i] for i in idx], dtype=object)
    n = len(idx)
    total = n * (n - 1) // 2
    if total == 0:
        return PairSample(cosines=np.zeros(0, np.float32), same=np.zeros(0, bool), n_sessions=n,
                          sampled=False)
    if total <= max_pairs:
        a, b = np.triu_indices(n, k=1)
        sampled = False
    else:
        rng = np.random.default_rng(seed)
        a = rng.integers(0, n, size=max_pairs * 2)
        b = rng.integers(0, n, size=max_pairs * 2)
        keep = a != b
        a, b = a[keep][:max_pairs], b[keep][:max_pairs]
        sampled = True
    va, vb = vectors[idx[a]], vectors[idx[b]]
    return PairSample(cosines=np.einsum("ij,ij->i", va, vb).astype(np.float32),
                      same=fam[a] == fam[b], n_sessions=n, sampled=sampled)


@dataclass(frozen=True)
class PairStats:
    """Pairwise "same family" predicted by cosine >= tau, against the labels.

    precision: predicted pairs that are same-family; recall: same-family pairs predicted.
    """

    tau: float
    precision: float | None
    recall: float | None
    predicted: int
    same_family: int
    n_pairs: int
    sampled: bool


def pair_stats(sample: PairSample, tau: float) -> PairStats:
    """Precision and recall of "cosine >= tau means same family" over the pair sample."""
    pred = sample.cosines >= tau
    tp = int(np.sum(pred & sample.same))
    n_pred, n_same = int(pred.sum()), int(sample.same.sum())
    return PairStats(tau=tau, precision=tp / n_pred if n_pred else None,
                     recall=tp / n_same if n_same else None, predicted=n_pred, same_family=n_same,
                     n_pairs=len(sample.cosines), sampled=sample.sampled)


@dataclass(frozen=True)
class PromptSize:
    """The injected block at a max_recall_body_chars."""

    chars: int
    tokens_estimate: int
    truncated: int
    block: str


def prompt_size(skills: Sequence[Skill], config: Thresholds) -> PromptSize:
    """Characters, estimated tokens (characters / 4) and truncated bodies of the block."""
    block = inject(skills, config)
    cut = sum(1 for s in skills if len(s.body) > config.max_recall_body_chars)
    return PromptSize(chars=len(block), tokens_estimate=math.ceil(len(block) / CHARS_PER_TOKEN),
                      truncated=cut, block=block)


@dataclass(frozen=True)
class PreviewProcedure:
    """A qualified cluster's distillation, as recall would see it."""

    cluster: int
    skill: Skill
    families: tuple[str, ...]


@dataclass(frozen=True)
class RecallDecision:
    """What one probe would recall at the view's tau and top_k."""

    probe_session: str
    family: str
    goal: str
    recalled: tuple[str, ...]
    scores: tuple[float, ...]
    right: bool | None
    prompt_chars: int = 0

    @property
    def best_score(self) -> float | None:
        """The top recalled score (None when nothing was recalled)."""
        return self.scores[0] if self.scores else None


@dataclass(frozen=True)
class TuningView:
    """Everything the tuning notebook shows for one setting of the thresholds."""

    config: Thresholds
    method: str
    pairs: PairStats
    clusters: list[Cluster]
    procedures: list[PreviewProcedure]
    not_distilled: int
    malformed: int
    recalls: list[RecallDecision]
    prompt: PromptSize
    consumed: Mapping[str, int] | None = None

    @property
    def mean_prompt_chars(self) -> float | None:
        """Mean injected block over probes that recall something."""
        sizes = [r.prompt_chars for r in self.recalls if r.recalled]
        return sum(sizes) / len(sizes) if sizes else None

    def clusters_frame(self, families: dict[str, str | None]) -> pd.DataFrame:
        """Qualified clusters: size, success rate, families and member goals."""
        return pd.DataFrame([{
            "size": c.size, "success_rate": round(c.success_rate, 3),
            "families": ", ".join(sorted({str(families.get(s)) for s in c.session_ids})),
            "goals": " | ".join(dict.fromkeys(c.goals))[:300]}
            for c in self.clusters if c.qualified])

    def recalls_frame(self) -> pd.DataFrame:
        """One row per probe: what is recalled, its best score and whether it is right."""
        return pd.DataFrame([{"family": r.family, "goal": r.goal[:80],
                              "recalled": ", ".join(r.recalled) or "-",
                              "best_score": r.best_score, "right": r.right,
                              "prompt_chars": r.prompt_chars}
                             for r in self.recalls])

    def summary(self) -> dict[str, Any]:
        """The headline numbers of the view (the notebook prints them above the tables)."""
        decided = [r for r in self.recalls if r.recalled]
        c = self.config
        return {"tau": c.similarity_tau, "min_occurrences": c.min_occurrences,
                "min_success_rate": c.min_success_rate,
                "max_recall_body_chars": c.max_recall_body_chars, "top_k": c.recall_top_k,
                "method": self.method, "pair_precision": self.pairs.precision, "pair_recall": self.pairs.recall,
                "qualified_clusters": sum(c.qualified for c in self.clusters),
                "distilled": len(self.procedures), "not_distilled": self.not_distilled,
                "probes": len(self.recalls), "probes_recalling": len(decided),
                "right": sum(bool(r.right) for r in decided),
                "mean_prompt_chars": self.mean_prompt_chars,
                "largest_prompt_chars": self.prompt.chars,
                "largest_prompt_tokens_estimate": self.prompt.tokens_estimate} | {
                    f"history_{k}": v for k, v in (self.consumed or {}).items()}


@dataclass
class TuningSession:
    """The once-computed state of a tuning notebook over one corpus."""

    corpus: Path
    sequences: tuple[SessionSequence, ...]
    vectors: np.ndarray
    families: dict[str, str | None]
    probes: list[tuple[str, str, str]]
    probe_vectors: np.ndarray
    pairs: PairSample
    embedder: Embeds
    #: How much of the history GAIA's passes already consumed, by outcome (``db info``'s
    #: synthesis line); None for a file without ``synthesis_marks``. Views preview a pass
    #: over the whole history, as ``skillsynth synthesize --force`` would run it.
    consumed: Mapping[str, int] | None = None
    _groups: dict[tuple[str, float, int], list[Cluster]] = field(default_factory=dict)
    _wtu: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def prepare(cls, corpus_db: str | Path, embedder: Embeds, *, k: int = 3,
                min_steps: int = 3, labels_path: str | Path | None = None,
                family: FamilyRule = "task", seed: int = 0) -> TuningSession:
        """Detect the history, embed its goals and the probes' goals, sample goal pairs.

        The database is opened read-only. A user's own GAIA ``memory.db`` (no labels file
        beside it) works as it is: every session is history, and with no families there
        are no probes and no pairwise precision; clusters, their members and prompt sizes
        still show.

        Raises:
            EvaluationError: no history session has a goal and ``min_steps`` calls.
        """
        db = Path(corpus_db)
        lab = Path(labels_path) if labels_path else labels_path_for(db)
        split = load_split(db, k, labels_path=lab, family=family) if lab.exists() else None
        fam: dict[str, str | None] = dict(split.families) if split else {}
        probe_labels = split.probes if split else ()
        with MemoryStore.open(db, read_only=True) as store:
            det = extract_sequences(store, Thresholds(min_steps=min_steps), advance=False)
            goals = store.first_user_turns([p.session_id for p in probe_labels])
            consumed = store.info().synthesis
        seqs = tuple(s for s in det.qualified if split is None or s.session_id in split.history)
        if not seqs:
            raise EvaluationError(f"{db}: no history session has a goal and {min_steps} "
                                  "successful calls; nothing to cluster")
        vectors = embed_goals(seqs, embedder)
        probes = [(p.session_id, str(fam.get(p.session_id)), goals[p.session_id].content)
                  for p in probe_labels if p.session_id in goals]
        pv = embedder.embed([g for _, _, g in probes], kind="query") if probes else \
            np.zeros((0, vectors.shape[1]), np.float32)
        pairs = sample_pairs(vectors, [fam.get(s.session_id) for s in seqs], seed=seed)
        return cls(corpus=db, sequences=seqs, vectors=vectors, families=fam, probes=probes,
                   probe_vectors=np.asarray(pv, np.float32), pairs=pairs, embedder=embedder,
                   consumed=consumed)

    def clusters(self, config: Thresholds, method: Method = "agglomerative") -> list[Cluster]:
        """Clusters at ``config``; grouping is cached per (method, tau)."""
        key = (method, round(config.similarity_tau, 6),
               config.min_occurrences if method == "hdbscan" else 0)
        if key not in self._groups:
            loose = config.merge(min_occurrences=1, min_success_rate=0.0)
            self._groups[key] = cluster_by_goal(self.sequences, None, loose, method,
                                                embeddings=self.vectors)
        return requalify(self._groups[key], config)

    def _when_to_use_vectors(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._wtu]
        if todo:
            for t, v in zip(todo, self.embedder.embed(todo, kind="document"), strict=True):
                self._wtu[t] = np.asarray(v, np.float32)
        return np.vstack([self._wtu[t] for t in texts]) if texts else \
            np.zeros((0, self.vectors.shape[1]), np.float32)

    def distill_missing(self, config: Thresholds, llm: ChatModel, method: Method = "agglomerative",
                        mode: DistillMode = "json") -> int:
        """Distil (model calls) the qualified clusters the cache does not hold; how many.

        The one step of tuning that calls the LLM; the answers land in the call cache, so
        every later view at these clusters is free. At most ``max_clusters_per_pass``.
        """
        n = 0
        qualified = [c for c in self.clusters(config, method) if c.qualified]
        for c in qualified[: config.max_clusters_per_pass]:
            try:
                if distill_cached(c, llm, mode) is not None:
                    continue
            except MalformedSkill:
                continue  # cached, only malformed
            try:
                distill(c, llm, config, mode)
            except MalformedSkill:
                pass  # the answer is cached; the view counts it as malformed
            n += 1
        return n

    def view(self, config: Thresholds, method: Method = "agglomerative", *, llm: ChatModel | None = None,
             mode: DistillMode = "json") -> TuningView:
        """Every view at ``config``. ``llm`` (a cached ChatClient) supplies distillations."""
        clusters = self.clusters(config, method)
        procs: list[PreviewProcedure] = []
        missing = malformed = 0
        for i, c in enumerate(x for x in clusters if x.qualified):
            if i >= config.max_clusters_per_pass:
                break
            try:
                d = distill_cached(c, llm, mode) if llm is not None else None
            except MalformedSkill:
                malformed += 1
                continue
            if d is None:
                missing += 1
            elif d.skill is not None:
                counts = Counter(self.families.get(s) for s in c.session_ids)
                counts.pop(None, None)
                top = max(counts.values(), default=0)
                procs.append(PreviewProcedure(cluster=i, skill=d.skill, families=tuple(sorted(
                    str(f) for f, n in counts.items() if n == top))))
        recalls, largest = self._recall(procs, config)
        return TuningView(config=config, method=method,
                          pairs=pair_stats(self.pairs, config.similarity_tau), clusters=clusters,
                          procedures=procs, not_distilled=missing, malformed=malformed,
                          recalls=recalls, prompt=prompt_size(largest, config),
                          consumed=self.consumed)

    def _recall(self, procs: Sequence[PreviewProcedure], config: Thresholds
                ) -> tuple[list[RecallDecision], list[Skill]]:
        """Decisions per probe, and the skills of the largest injected block among them."""
        vec = self._when_to_use_vectors([p.skill.description for p in procs])
        out = []
        largest: list[Skill] = []
        scores = self.probe_vectors @ vec.T if len(procs) else None
        for j, (sid, fam, goal) in enumerate(self.probes):
            picked: list[tuple[float, PreviewProcedure]] = []
            if scores is not None:
                order = np.argsort(-scores[j])[: config.recall_top_k]
                picked = [(float(scores[j][i]), procs[i]) for i in order
                          if scores[j][i] >= config.effective_recall_tau]
            right = any(fam in p.families for _, p in picked) if picked else None
            skills = [p.skill for _, p in picked]
            chars = len(inject(skills, config))
            if chars > len(inject(largest, config)):
                largest = skills
            out.append(RecallDecision(probe_session=sid, family=fam, goal=goal,
                                      recalled=tuple(s.name for s in skills),
                                      scores=tuple(round(s, 4) for s, _ in picked), right=right,
                                      prompt_chars=chars))
        return out, largest


def plot_pairs(sample: PairSample, tau: float, ax: Any = None) -> Any:
    """Histograms of same- and different-family goal cosines with the tau line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    bins = [float(b) for b in np.linspace(min(-0.1, float(sample.cosines.min(initial=0))),
                                          1.0, 45)]
    ax.hist(sample.cosines[~sample.same], bins=bins, alpha=0.6, density=True,
            label=f"different family (n={int((~sample.same).sum())})")
    ax.hist(sample.cosines[sample.same], bins=bins, alpha=0.6, density=True,
            label=f"same family (n={int(sample.same.sum())})")
    ax.axvline(tau, color="k", ls="--", lw=1)
    st = pair_stats(sample, tau)
    p = "n/a" if st.precision is None else f"{st.precision:.2f}"
    r = "n/a" if st.recall is None else f"{st.recall:.2f}"
    ax.set_title(f"tau={tau:g}: pairwise same-family precision {p}, recall {r}"
                 f"{' (sampled pairs)' if sample.sampled else ''}", fontsize=9)
    ax.set_xlabel("goal cosine")
    ax.legend(fontsize=8)
    return ax


def write_settings_block(config: Thresholds, path: str | Path, *,
                         overwrite: bool = False) -> Path:
    """Write ``config`` as the ``skill_synthesis`` block of a GAIA ``memory_settings.json``.

    An existing file is refused unless ``overwrite``; when overwriting, its other top-level
    keys (GAIA's own settings) are kept and only the block is replaced.

    Raises:
        ConfigError: the file exists (and ``overwrite`` is false) or is not a JSON object.
    """
    p = Path(path)
    data: dict[str, Any] = {}
    if p.exists():
        if not overwrite:
            raise ConfigError("file exists; pass overwrite=True to replace its "
                              f"'{SETTINGS_BLOCK}' block", source=str(p))
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON, not overwritten: {exc}", source=str(p)) from exc
        if not isinstance(data, dict):
            raise ConfigError("top level is not a JSON object, not overwritten", source=str(p))
    data[SETTINGS_BLOCK] = config.to_settings_block()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p

