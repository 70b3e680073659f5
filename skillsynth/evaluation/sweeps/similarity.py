"""Goal similarities: where tau sits for an embedder, same family against different.

Every sweep writes ``similarity.json`` beside its points from these (the report's similarity
plot); on a shipped Dask cluster a worker computes them with its own models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...corpora.labels import LabelStore, labels_path_for
from ...models.backend import BackendSpec, open_clients
from ...models.embed import Embeds
from ...store import MemoryStore
from ..point.split import FamilyRule, family_of

__all__ = ["goal_similarities", "similarities_with"]


def goal_similarities(corpus_db: str | Path, embedder: Embeds, *, max_pairs: int = 20000,
                      seed: int = 0, family: FamilyRule = "task") -> dict[str, Any]:
    """Cosines between labelled sessions' goals, same family vs different family.

    What a maintainer looks at to place tau for an embedder: tau should sit above most
    different-family pairs and below most same-family pairs. Pairs are sampled (seeded)
    when there are more than ``max_pairs`` of a kind.
    """
    with LabelStore(labels_path_for(corpus_db)) as ls:
        fam = {x.session_id: f for x in ls.all() if (f := family_of(x, family)) is not None}
    with MemoryStore.open(corpus_db, read_only=True) as store:
        goals = {s: t.content for s, t in store.first_user_turns(list(fam)).items()}
    ids = sorted(goals)
    if len(ids) < 2:
        return {"same": [], "different": [], "n_sessions": len(ids)}
    v = embedder.embed([goals[s] for s in ids], kind="document")
    sims = v @ v.T
    iu = np.triu_indices(len(ids), k=1)
    same_mask = np.array([fam[ids[i]] == fam[ids[j]] for i, j in zip(*iu, strict=True)])
    vals = sims[iu]
    rng = np.random.default_rng(seed)

    def sample(x: np.ndarray) -> list[float]:
        if len(x) > max_pairs:
            x = rng.choice(x, size=max_pairs, replace=False)
        return [round(float(a), 4) for a in x]

    return {"same": sample(vals[same_mask]), "different": sample(vals[~same_mask]),
            "n_sessions": len(ids), "embedder": embedder.embedder_id,
            "family": family}


def similarities_with(corpus: Path, seed: int, family: FamilyRule, *,
                  backend: BackendSpec) -> dict[str, Any]:
    """:func:`goal_similarities` with the embedder of ``backend`` (a worker runs this)."""
    with open_clients(backend) as (_, emb):
        return goal_similarities(corpus, emb, seed=seed, family=family)
