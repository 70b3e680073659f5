"""Reconcile and store: ADD, UPDATE (supersede) or NOOP; never delete.

A candidate is matched to the nearest enabled, non-superseded procedure by meaning (cosine
of the when_to_use embeddings >= ``reconcile_tau``, which is ``similarity_tau`` unless set,
as in GAIA). No match: ADD. A match with fewer successes than the candidate's cluster:
UPDATE, i.e. insert the candidate and point the old row's ``superseded_by`` at it (Zep-style
lineage; the old row stays). Otherwise NOOP. A written candidate whose name an active
procedure already carries (other than the one it supersedes) is renamed by rule,
``<name>-2``, ``-3``, ... (recorded in :attr:`Reconciled.renamed_from` and counted by the
pass as ``duplicate_names``): two procedures with one name would export to the same folder.
``provenance.from_sessions`` lists the cluster's sessions, each checked to exist in
``tool_history`` at synthesis time (later, GAIA's retention may let them dangle).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import Thresholds
from ..errors import StoreError
from ..models.embed import EMBEDDER_META_KEY, Embeds
from ..store import MemoryStore, Procedure, encode_embedding
from .cluster import Cluster
from .recall import ProcedureIndex
from .skill import MAX_NAME_CHARS, Skill

__all__ = ["PROVENANCE_SOURCE", "USER_DATA", "Action", "Reconciled", "reconcile_and_store",
           "unique_name"]

Action = Literal["ADD", "UPDATE", "NOOP"]
PROVENANCE_SOURCE = "skillsynth"
#: The provenance key that marks a procedure whose distiller saw the runs' argument values.
USER_DATA = "user_data"



@dataclass(frozen=True)
class Reconciled:
    """The decision for one candidate.

    Attributes:
        action: ADD, UPDATE or NOOP.
        procedure_id: the row written (ADD/UPDATE) or the existing match (NOOP).
        superseded_id: the row an UPDATE superseded.
        score: cosine to the nearest existing procedure (None when there was none).
        renamed_from: the model's name when it collided with an active procedure's.
    """

    action: Action
    procedure_id: str | None
    superseded_id: str | None = None
    score: float | None = None
    renamed_from: str | None = None


def unique_name(name: str, taken: Collection[str], max_len: int = MAX_NAME_CHARS) -> str:
    """``name``, or ``name-2``, ``name-3``, ... : the first not in ``taken``."""
    if name not in taken:
        return name
    n = 2
    while True:
        suffix = f"-{n}"
        candidate = name[: max_len - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
        n += 1


def _check_provenance(store: MemoryStore, sessions: Sequence[str]) -> None:
    known = store.sessions_with_calls(sessions)
    missing = [s for s in sessions if s not in known]
    if missing:
        raise StoreError(f"provenance names sessions with no tool_history rows: {missing[:5]}",
                         path=str(store.path))


def reconcile_and_store(candidate: Skill, cluster: Cluster, store: MemoryStore,
                        embedder: Embeds, config: Thresholds, *,
                        dry_run: bool = False, vector: np.ndarray | None = None,
                        user_data: bool = False) -> Reconciled:
    """Decide ADD / UPDATE / NOOP for ``candidate`` and write it (unless ``dry_run``) in one
    short transaction. ``vector``: the candidate's description already embedded.
    ``user_data``: its distiller was shown the runs' argument values, so the body may hold
    them; the stored provenance says so (``"user_data": true``) and
    :func:`~.export.export_skill` refuses it unless asked."""
    vec = vector if vector is not None else \
        embedder.embed([candidate.description], kind="document")[0]
    index = ProcedureIndex.from_store(store)
    nearest = index.search(vec, top_k=1, tau=config.effective_reconcile_tau)
    best = nearest[0] if nearest else None
    successes, attempts = cluster.successful_sessions, cluster.size
    if best is not None and successes <= best.procedure.success_count:
        return Reconciled(action="NOOP", procedure_id=best.procedure.id, score=best.score)
    action: Action = "UPDATE" if best is not None else "ADD"
    if dry_run:
        return Reconciled(action=action, procedure_id=None,
                          superseded_id=best.procedure.id if best else None,
                          score=best.score if best else None)
    _check_provenance(store, cluster.session_ids)
    taken = {p.name for p in store.procedures(active_only=True)
             if best is None or p.id != best.procedure.id}
    name = unique_name(candidate.name, taken)
    renamed = candidate.name if name != candidate.name else None
    if renamed:
        candidate = dataclasses.replace(candidate, name=name)
    rep = cluster.representative()
    proc = Procedure(
        name=candidate.name, when_to_use=candidate.description,
        markdown_body=candidate.body, tools_required=candidate.tools_required,
        tool_sequence=tuple({"tool": t} for t in rep.tool_names),
        success_count=successes, attempt_count=attempts,
        provenance={"source": PROVENANCE_SOURCE, "from_sessions": list(cluster.session_ids),
                    **({USER_DATA: True} if user_data else {})},
        version=candidate.version, embedding=encode_embedding(vec))
    with store.transaction():
        embedder_id = embedder.embedder_id
        if embedder_id and store.get_meta(EMBEDDER_META_KEY) is None:
            # the first stored vector records whose it is (not a pass that wrote nothing)
            store.set_meta(EMBEDDER_META_KEY, embedder_id)
        stored = store.put_procedure(proc)
        if best is not None:
            store.supersede_procedure(best.procedure.id, stored.id)
    return Reconciled(action=action, procedure_id=stored.id,
                      superseded_id=best.procedure.id if best else None,
                      score=best.score if best else None, renamed_from=renamed)
