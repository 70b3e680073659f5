"""Calibrate the two cosine thresholds for one embedder (and chat model) on labelled corpora.

Cosine scales differ by embedder: GAIA's 0.82 was set for its 768-d EmbeddingGemma, and
all-MiniLM scores paraphrases lower. Two thresholds are calibrated separately:

* ``similarity_tau`` (clustering): goal vs goal. Every pair of distinct goal texts in a
  corpus is a positive when both sessions belong to one family (labels: task, or the
  ``tools`` rule of :mod:`skillsynth.evaluation.point.split`). Identical texts are counted once
  per family (repeated trials of one task carry no evidence about paraphrases).
* ``recall_tau`` (recall): a new goal vs a procedure's ``when_to_use``. Each corpus's
  history (attempts 1..k) goes through a real synthesis pass at the proposed
  ``similarity_tau`` with the chat model, clusters of two or more runs qualifying (more
  families get a procedure; what a trigger says does not depend on it), every qualified
  cluster distilled and nothing reconciled away (``reconcile_tau`` 1.0); then every later
  labelled session (never in the history) is a query. Its top ``recall_top_k`` procedures
  are the candidates a recall could return; a candidate is right when its provenance's
  family is the query's.
* ``reconcile_tau`` (reconcile): a new procedure's ``when_to_use`` vs a stored one's. Over
  the same pass's procedures, the lowest tau at which no two procedures of different
  families would merge (the next 0.01 step above the highest different-family cosine).
  Trigger texts share phrasing, so this sits well above the goal-calibrated
  ``similarity_tau``; GAIA uses one tau for both, which at a low tau merges everything.

On a 0.01 grid, each threshold is chosen by what it does downstream, not only by how well
it separates pairs (pair separation alone proposed 0.31 for MiniLM, which lumps a history
into one procedure):

* ``similarity_tau``: per corpus and tau, the harmonic mean of the pairwise F1 and the
  *cluster purity* of the pipeline's own clustering of the corpus's history at that tau
  (clusters of ``min_occurrences`` or more sessions: the members in their cluster's majority
  family over all their members; no such cluster scores 0, nothing would be synthesized).
  Transitive merging is what lumps; pairs cannot see it, clusters do.
* ``recall_tau``: F0.5 of recall (precision weighs twice recall): a wrong procedure injected
  makes a probe worse, a missed one only forgoes a gain.

The proposal is the tau with the best score averaged over the corpora (each corpus weighs
the same, whatever its size); ties go to the higher tau. This is an estimate from the corpora
given, recorded with them; whether it holds on corpora it was not fitted to is
:mod:`.validate`'s leave-one-corpus-out run, recorded in the file's ``validation``. The
shipped calibration of the embedded embedder is ``data/calibration/<embed model id>.json``,
opt-in (:func:`skillsynth.config.calibrated_defaults`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__
from ...config import Thresholds
from ...corpora.labels import labels_path_for
from ...errors import ConfigError
from ...models.cache import file_sha256
from ...models.embed import Embeds
from ...pipeline.cluster import embed_goals
from ...pipeline.detect import extract_sequences
from ...pipeline.distill import DistillMode
from ...pipeline.synthesize import synthesize_skills
from ...protocols import ChatModel
from ...store import MemoryStore, decode_embedding
from ..point.split import (
    FAMILY_RULES,
    FamilyRule,
    Split,
    build_history,
    load_split,
    procedure_families,
)
from .session import sample_pairs

__all__ = [
    "METHOD",
    "RECALL_BETA",
    "Calibration",
    "CalibrationCorpus",
    "TauRow",
    "calibrate",
    "check_corpora",
    "cluster_purity",
    "history_partitions",
    "tau_table",
]

log = logging.getLogger("skillsynth.evaluation.tuning.calibrate")

#: The rule, recorded with every calibration.
METHOD = ("purity-f05-v3: on a 0.01 grid, averaged over corpora (ties: higher tau); "
          "similarity_tau maximises the harmonic mean of pairwise F1 (pairs of distinct goal "
          "texts, same family = positive) and the cluster purity of the history's clustering "
          "at tau (clusters of min_occurrences+); recall_tau maximises F0.5 over each held-out "
          "goal's top_k procedures by when_to_use, right = provenance family is the goal's; "
          "reconcile_tau: the lowest grid tau above every different-family when_to_use pair "
          "of the recall pass")
#: Recall's F-beta: precision weighs 1/beta = twice recall.
RECALL_BETA = 0.5
GRID = tuple(round(0.05 + 0.01 * i, 2) for i in range(91))  # 0.05 .. 0.95


@dataclass(frozen=True)
class CalibrationCorpus:
    """A labelled corpus and the family rule its labels are read with."""

    path: str
    family: FamilyRule = "task"

    @classmethod
    def parse(cls, text: str) -> CalibrationCorpus:
        """``PATH`` or ``PATH::FAMILY`` (``task`` or ``tools``)."""
        path, _, fam = text.partition("::")
        fam = fam or "task"
        if fam not in FAMILY_RULES:
            raise ConfigError(f"family must be one of {', '.join(FAMILY_RULES)}, got {fam!r}",
                              key="family", source=text)
        return cls(path=path, family=fam)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TauRow:
    """Precision, recall and F1 at one tau (None where nothing was predicted or positive).

    ``purity`` (clustering): the cluster purity of the history's clustering at tau; ``score``:
    what the proposal maximises (see the module docstring; None in files of older methods).
    """

    tau: float
    precision: float | None
    recall: float | None
    f1: float | None
    purity: float | None = None
    score: float | None = None


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` measured and proposes (also the shipped data file's shape).

    Attributes:
        embedder: the embedder id (``<model>:<dimension>``).
        similarity_tau: proposed clustering threshold.
        recall_tau: proposed recall threshold (None: not calibrated, no chat model given).
        reconcile_tau: proposed reconcile threshold (None: no chat model, or no two
            procedures of different families to compare).
        chat_model: the model that wrote the when_to_use texts recall was measured on.
        method: :data:`METHOD`.
        corpora: per corpus: path, sha256 of file and labels, family rule, goals, families,
            pairs, queries, procedures, and precision/recall at the proposals.
        clustering, recall: the tau tables (F1 averaged over corpora).
        created_at: UTC time of the measurement; ``skillsynth``: the version that made it.
        validation: what the proposal was validated by and whether it passed (the
            leave-one-corpus-out run of :mod:`.validate`; empty: never validated).
    """

    embedder: str
    similarity_tau: float
    recall_tau: float | None
    chat_model: str | None
    method: str
    corpora: tuple[dict[str, Any], ...]
    clustering: tuple[TauRow, ...]
    recall: tuple[TauRow, ...] = ()
    reconcile_tau: float | None = None
    reconcile: tuple[TauRow, ...] = ()
    created_at: str = ""
    skillsynth: str = __version__
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] = field(default_factory=dict)

    def settings_block(self) -> dict[str, float]:
        """The proposed thresholds as a ``skill_synthesis`` settings block."""
        out = {"similarity_tau": self.similarity_tau}
        if self.recall_tau is not None:
            out["recall_tau"] = self.recall_tau
        if self.reconcile_tau is not None:
            out["reconcile_tau"] = self.reconcile_tau
        return out

    def at(self, table: str, tau: float) -> TauRow | None:
        """The row of ``clustering`` or ``recall`` at ``tau``."""
        for row in getattr(self, table):
            if abs(row.tau - tau) < 1e-9:
                return row
        return None

    def to_json(self) -> str:
        """JSON text (the shipped data file's format)."""
        return json.dumps(dataclasses.asdict(self), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """Read :meth:`to_json`'s shape back."""
        d = dict(data)
        for key in ("clustering", "recall", "reconcile"):
            d[key] = tuple(TauRow(**r) for r in d.get(key, ()))
        d["corpora"] = tuple(d.get("corpora", ()))
        return cls(**d)


def _f1(p: float | None, r: float | None, beta: float = 1.0) -> float | None:
    if p is None or r is None:
        return None
    b2 = beta * beta
    return 0.0 if p + r == 0 else (1 + b2) * p * r / (b2 * p + r)


def tau_table(scores: np.ndarray, positive: np.ndarray, n_positive: int | None = None,
              grid: Sequence[float] = GRID, hits_of: Any = None) -> list[TauRow]:
    """Precision/recall/F1 of "score >= tau" for each tau of ``grid``.

    ``n_positive`` is the recall denominator (default: the positives among ``scores``);
    ``hits_of(mask)`` counts recall's numerator (default: the positives predicted).
    """
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    denom = int(positive.sum()) if n_positive is None else n_positive
    rows = []
    for tau in grid:
        pred = scores >= tau - 1e-9
        n_pred = int(pred.sum())
        tp = int((pred & positive).sum())
        hits = tp if hits_of is None else int(hits_of(pred))
        p = tp / n_pred if n_pred else None
        r = hits / denom if denom else None
        rows.append(TauRow(tau=tau, precision=p, recall=r, f1=_f1(p, r)))
    return rows


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(float(np.mean(vals)), 4) if vals else None


def _mean_f1(tables: Sequence[Sequence[TauRow]]) -> list[TauRow]:
    """Per tau: every column averaged over corpora (None counts as 0 for F1 and score)."""
    return [TauRow(tau=rows[0].tau, precision=_mean([r.precision for r in rows]),
                   recall=_mean([r.recall for r in rows]),
                   f1=round(float(np.mean([r.f1 or 0.0 for r in rows])), 4),
                   purity=_mean([r.purity for r in rows]),
                   score=round(float(np.mean([r.score or 0.0 for r in rows])), 4))
            for rows in zip(*tables, strict=True)]


def _best(rows: Sequence[TauRow]) -> float:
    best = max(rows, key=lambda r: ((r.score or 0.0), r.tau))
    return best.tau


def cluster_purity(clusters: Sequence[Sequence[str | None]], least: int) -> float | None:
    """Members in their cluster's majority family over all labelled members, over clusters
    of ``least`` or more sessions (each cluster given as its members' families; unlabelled
    members are not counted). None: no such cluster (nothing would be synthesized)."""
    top = total = 0
    for fams in clusters:
        if len(fams) < least:
            continue
        counts = Counter(f for f in fams if f is not None)
        top += max(counts.values(), default=0)
        total += sum(counts.values())
    return top / total if total else None


@dataclass(frozen=True)
class _Labelled:
    """One corpus read once: its split, each labelled session's family, each session's goal."""

    corpus: CalibrationCorpus
    split: Split
    families: dict[str, str]
    goals: dict[str, str]


def _labelled(corpus: CalibrationCorpus, k: int = 3) -> _Labelled:
    """Read ``corpus`` (refusing one that is missing, unlabelled or one-family)."""
    labels = labels_path_for(corpus.path)
    if not Path(corpus.path).exists():
        raise ConfigError("calibration corpus not found", source=corpus.path)
    if not labels.exists():
        raise ConfigError(f"calibration needs labels: no labels file {labels} (import the "
                          "corpus with `skillsynth corpus import` or generate it)",
                          source=corpus.path)
    split = load_split(corpus.path, k, labels_path=labels, family=corpus.family)
    with MemoryStore.open(corpus.path, read_only=True) as store:
        goals = {s: t.content for s, t in store.first_user_turns().items()}
    fams = {s: f for s in goals if (f := split.family(s)) is not None}
    n_fam = len(set(fams.values()))
    if n_fam < 2:
        raise ConfigError(f"calibration needs at least two labelled families; found {n_fam} "
                          f"under the '{corpus.family}' rule", source=corpus.path)
    return _Labelled(corpus=corpus, split=split, families=fams, goals=goals)


def check_corpora(corpora: Sequence[CalibrationCorpus]) -> None:
    """Refuse, before any model starts, a corpus that is missing, unlabelled or one-family.

    Raises:
        ConfigError: naming the corpus and what is wrong.
    """
    if not corpora:
        raise ConfigError("calibration needs at least one labelled corpus")
    for c in corpora:
        _labelled(c)


def _clustering(data: _Labelled, embedder: Embeds, base: Thresholds
                ) -> tuple[list[TauRow], dict[str, Any]]:
    fams, goals = data.families, data.goals
    distinct = sorted({(f, goals[s]) for s, f in fams.items()})
    texts = [t for _, t in distinct]
    vectors = embedder.embed(texts, kind="document", progress=len(texts) > 256)
    sample = sample_pairs(vectors, [f for f, _ in distinct])
    info = {"goals": len(texts), "families": len({f for f, _ in distinct}),
            "pairs": int(sample.cosines.size), "same_family_pairs": int(sample.same.sum()),
            "pairs_sampled": sample.sampled}
    if not sample.same.any():
        raise ConfigError("no two distinct goals share a family: nothing to calibrate "
                          "clustering on (try the 'tools' family rule)",
                          source=data.corpus.path)
    purity, info["purity_sessions"] = _purity(data, embedder, base)
    rows = []
    for row, pur in zip(tau_table(sample.cosines, sample.same), purity, strict=True):
        # a history with nothing to cluster is scored by its pairs alone (said in info)
        score = row.f1 if info["purity_sessions"] < 2 else _f1(row.f1, pur) or 0.0
        rows.append(dataclasses.replace(row, purity=pur, score=score))
    return rows, info


def _purity(data: _Labelled, embedder: Embeds, base: Thresholds
            ) -> tuple[list[float | None], int]:
    """Cluster purity of the history's clustering at each grid tau, and how many history
    sessions were clustered (detected, with a goal)."""
    with MemoryStore.open(data.corpus.path, read_only=True) as store:
        det = extract_sequences(store, base, advance=False)
    seqs = [s for s in det.qualified if s.session_id in data.split.history]
    if len(seqs) < 2:
        return [None] * len(GRID), len(seqs)
    fams = [data.families.get(s.session_id) for s in seqs]
    out = []
    for labels in history_partitions(embed_goals(seqs, embedder), GRID):
        groups: dict[int, list[str | None]] = {}
        for lab, fam in zip(labels.tolist(), fams, strict=True):
            groups.setdefault(lab, []).append(fam)
        out.append(cluster_purity(list(groups.values()), base.min_occurrences))
    return out, len(seqs)


def history_partitions(vectors: np.ndarray, grid: Sequence[float]) -> list[np.ndarray]:
    """The synthesis pass's clustering (average linkage cut at distance ``1 - tau``) at each
    tau of ``grid``, as a cluster label per row, from one dendrogram.

    Equal to :func:`~skillsynth.pipeline.cluster.cluster_by_goal`'s ``agglomerative`` at
    every tau (it links per component of the graph 'cosine >= tau' for scale; average
    linkage never merges across two components below the cut), at the cost of one linkage
    instead of one search per tau.
    """
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    v = np.asarray(vectors, dtype=np.float64)
    tree = linkage(squareform(np.clip(1.0 - v @ v.T, 0.0, 2.0), checks=False), "average")
    return [fcluster(tree, t=1.0 - tau + 1e-9, criterion="distance") for tau in grid]


def _recall(data: _Labelled, llm: ChatModel, embedder: Embeds, config: Thresholds,
            mode: DistillMode) -> tuple[list[TauRow], dict[str, Any], np.ndarray, np.ndarray]:
    """The recall table, the pass's figures, and the procedures' trigger-pair cosines with
    whether each pair is of one family (for reconcile)."""
    split, fams, goals = data.split, data.families, data.goals
    with tempfile.TemporaryDirectory(prefix="skillsynth-calibrate-") as tmp:
        db = Path(tmp) / "history.db"
        build_history(data.corpus.path, split, db)
        with MemoryStore.open(db) as store:
            report = synthesize_skills(store, llm, embedder, config, mode=mode)
            embedded = [(p, decode_embedding(p.embedding))
                        for p in store.procedures(active_only=True) if p.embedding is not None]
    procs = [p for p, _ in embedded]
    proc_fams = [set(procedure_families(p, split)) for p in procs]
    queries = [(s, f) for s, f in fams.items() if s not in split.history and s in goals]
    info = {"history_sessions": len(split.history), "queries": len(queries),
            "procedures": len(procs), "pass": {"qualified": report.qualified,
                                               "distilled": report.distilled,
                                               "llm_calls": report.llm_calls,
                                               "cache_hits": report.cache_hits}}
    mat = np.vstack([v for _, v in embedded]) if embedded else np.zeros((0, 1), np.float32)
    a, b = np.triu_indices(len(procs), k=1)
    pair_cos = np.einsum("ij,ij->i", mat[a], mat[b]) if len(a) else np.zeros(0)
    pair_same = np.array([bool(proc_fams[i] & proc_fams[j]) for i, j in zip(a, b, strict=True)],
                         dtype=bool)
    info["procedure_pairs"] = len(a)
    if not procs or not queries:
        return [TauRow(tau=t, precision=None, recall=None,
                       f1=None) for t in GRID], info, pair_cos, pair_same
    qv = embedder.embed([goals[s] for s, _ in queries], kind="query")
    scores = qv @ mat.T
    top_k = min(config.recall_top_k, len(procs))
    cand_scores, cand_right, cand_query = [], [], []
    for i, (_, fam) in enumerate(queries):
        for j in np.argsort(-scores[i])[:top_k]:
            cand_scores.append(float(scores[i, j]))
            cand_right.append(fam in proc_fams[j])
            cand_query.append(i)
    has_own = [i for i, (_, f) in enumerate(queries) if any(f in pf for pf in proc_fams)]
    info["queries_with_own_procedure"] = len(has_own)
    q_idx, right = np.array(cand_query), np.array(cand_right)

    def hits(mask: np.ndarray) -> int:  # queries with a right candidate at or above tau
        return len(set(q_idx[mask & right].tolist()))

    rows = [dataclasses.replace(r, score=_f1(r.precision, r.recall, RECALL_BETA))
            for r in tau_table(np.array(cand_scores), right, len(has_own), hits_of=hits)]
    return rows, info, pair_cos, pair_same


def calibrate(corpora: Sequence[CalibrationCorpus], embedder: Embeds, *,
              llm: ChatModel | None = None, mode: DistillMode = "json", k: int = 3, min_occurrences: int = 2,
              base: Thresholds | None = None, chat_model: str | None = None) -> Calibration:
    """Measure both thresholds on ``corpora`` and propose values (see the module docstring).

    Args:
        corpora: labelled corpora with their family rules.
        embedder: the embedder to calibrate (``embedder_id`` is recorded).
        llm: the chat model for recall's when_to_use texts; None calibrates clustering only.
        mode: distillation mode for the recall pass.
        k: attempts per family in the recall pass's history.
        min_occurrences: the recall pass's cluster size to qualify.
        base: other thresholds of the recall pass (default GAIA's; the pass has no cap on
            clusters and never reconciles: calibration wants every family's procedure).
        chat_model: the chat model's id, recorded (default the client's endpoint model).

    Raises:
        ConfigError: no corpus, a corpus without labels or with fewer than two families.
    """
    if not corpora:
        raise ConfigError("calibration needs at least one labelled corpus")
    loaded = [_labelled(c, k) for c in corpora]  # each corpus read once, refused early
    base = (base or Thresholds()).merge(max_clusters_per_pass=100_000, reconcile_tau=1.0,
                                        min_occurrences=min_occurrences)
    tables, infos = [], []
    for c, data in zip(corpora, loaded, strict=True):
        rows, info = _clustering(data, embedder, base)
        tables.append(rows)
        infos.append({"path": c.path, "sha256": file_sha256(c.path),
                      "labels_sha256": file_sha256(labels_path_for(c.path)),
                      "family": c.family, **info})
    clustering = _mean_f1(tables)
    sim_tau = _best(clustering)
    for info, rows in zip(infos, tables, strict=True):
        row = next(r for r in rows if abs(r.tau - sim_tau) < 1e-9)
        info["clustering_at_proposal"] = dataclasses.asdict(row)
    recall_rows: list[TauRow] = []
    reconcile_rows: list[TauRow] = []
    recall_tau = reconcile_tau = None
    if llm is not None:
        config = base.merge(similarity_tau=sim_tau)
        rtables, cos_all, same_all = [], [], []
        for data, info in zip(loaded, infos, strict=True):
            rows, rinfo, pair_cos, pair_same = _recall(data, llm, embedder, config, mode)
            rtables.append(rows)
            cos_all.append(pair_cos)
            same_all.append(pair_same)
            info["recall"] = rinfo
        recall_rows = _mean_f1(rtables)
        recall_tau = _best(recall_rows)
        cos, same = np.concatenate(cos_all), np.concatenate(same_all)
        reconcile_rows = tau_table(cos, same) if same.size else []
        if (~same).any():  # the next 0.01 step above the highest different-family pair
            top = float(cos[~same].max())
            reconcile_tau = min(1.0, round(math.floor(top * 100 + 1e-6) / 100 + 0.01, 2))
        for info, rows in zip(infos, rtables, strict=True):
            row = next(r for r in rows if abs(r.tau - recall_tau) < 1e-9)
            info["recall_at_proposal"] = dataclasses.asdict(row)
        chat_model = chat_model or llm.model_id
    extra = ({"k": k, "min_occurrences": min_occurrences, "mode": mode} if llm is not None
             else {})
    return Calibration(
        extra=extra, embedder=embedder.embedder_id,
        similarity_tau=sim_tau,
        recall_tau=recall_tau, chat_model=chat_model if llm is not None else None,
        method=METHOD, corpora=tuple(infos), clustering=tuple(clustering),
        recall=tuple(recall_rows), reconcile_tau=reconcile_tau,
        reconcile=tuple(reconcile_rows),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
