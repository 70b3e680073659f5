"""``skillsynth synthesize``, ``recall`` and ``procedures``: the pipeline on a memory.db."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import StoreError
from ..pipeline.skill import PROFILES
from ..store import MemoryStore
from ._common import (
    EXIT_FAIL,
    EXIT_OK,
    clients,
    command,
    group,
    model_options,
    print_json,
    thresholds_of,
)

__all__ = ["register"]


def _synthesize(args: argparse.Namespace) -> int:
    from ..config import gaia_memory_disabled
    from ..models.embed import check_store_embedder
    from ..pipeline.synthesize import LUMPED_SHARE, synthesize_skills

    th = thresholds_of(args)
    with MemoryStore.open(args.db, read_only=args.dry_run) as store, clients(args) as (c, e):
        check_store_embedder(store, e, record=False)  # refuse a mix before any work
        rep = synthesize_skills(store, c, e, th, method=args.method, rate=args.rate,
                                mode=args.mode, dry_run=args.dry_run, force=args.force,
                                memory_disabled=gaia_memory_disabled())
    if args.json:
        print_json(rep.as_dict())
    else:
        for k, v in rep.as_dict().items():
            if v not in ((), {}, "", 0) or k in ("status", "added"):
                print(f"{k:<22} {v}")
    if rep.largest_cluster_share is not None and rep.largest_cluster_share > LUMPED_SHARE:
        print(f"warning: one cluster holds {rep.largest_cluster_share:.0%} of the sessions "
              "clustered: one procedure for everything; raise similarity_tau",
              file=sys.stderr)
    return EXIT_OK if rep.status in ("ran", "dry-run", "synthesis-disabled",
                                     "memory-disabled") else EXIT_FAIL


def _recall(args: argparse.Namespace) -> int:
    from ..pipeline.recall import recall

    th = thresholds_of(args)
    from ..pipeline.recall import ProcedureIndex

    with MemoryStore.open(args.db, read_only=True) as store, clients(args) as (_, e):
        index = ProcedureIndex.from_store(store)
        hits = recall(store, e, args.goal, th, index=index, touch=False)
    if index.unembedded:
        print(f"note: {index.unembedded} active procedure(s) have no embedding and cannot be "
              "recalled", file=sys.stderr)
    rows = [{"id": h.procedure.id, "name": h.procedure.name, "score": round(h.score, 4),
             "when_to_use": h.procedure.when_to_use} for h in hits]
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['score']:.3f}  {r['id']}  {r['name']}: {r['when_to_use']}")
        if not rows:
            print(f"nothing at cosine >= {th.effective_recall_tau}")
    return EXIT_OK


def _procedures(args: argparse.Namespace) -> int:
    from ..pipeline.export import export_skill

    action = args.procedures_command
    with MemoryStore.open(args.db, read_only=action in ("list", "show")) as store:
        if action == "list":
            rows = [{"id": p.id, "name": p.name, "enabled": p.enabled,
                     "superseded_by": p.superseded_by, "success_count": p.success_count,
                     "attempt_count": p.attempt_count} for p in store.procedures()]
            if args.json:
                print_json(rows)
            for r in rows if not args.json else ():
                state = "superseded" if r["superseded_by"] else (
                    "enabled" if r["enabled"] else "disabled")
                print(f"{r['id']}  {r['name']:<40} {state:<10} "
                      f"{r['success_count']}/{r['attempt_count']}")
            return EXIT_OK
        proc = store.get_procedure(args.id)
        if proc is None:
            raise StoreError(f"{args.db}: no procedure with id {args.id!r}")
        if action == "show":
            print_json({k: v for k, v in proc.__dict__.items() if k != "embedding"}
                        | {"embedding_dims": None if proc.embedding is None
                           else len(proc.embedding) // 4})
        elif action in ("enable", "disable"):
            store.set_procedure_enabled(proc.id, action == "enable")
            print(f"{proc.id}: {action}d")
        else:
            out = export_skill(store, proc.id, args.out, args.profile, overwrite=args.overwrite,
                               allow_user_data=args.allow_user_data)
            print(f"wrote {out / 'SKILL.md'} ({args.profile}, valid)")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add this group's commands to the ``skillsynth`` parser."""
    p = command(sub, "synthesize", "run one synthesis pass over a memory.db", _synthesize)
    p.add_argument("db", help="the memory.db (written: procedures, synthesis marks, the "
                              "watermark and meta.embedder_id)")
    p.add_argument("--method", choices=("agglomerative", "hdbscan", "gaia-greedy", "per-session"),
                   default="agglomerative", help="goal clustering method")
    p.add_argument("--rate", choices=("calls", "session"), default="calls",
                   help="success rate per tool call (GAIA) or per session")
    p.add_argument("--mode", choices=("yaml", "json"), default="yaml",
                   help="free-form YAML distillation (GAIA) or JSON-schema constrained")
    p.add_argument("--dry-run", action="store_true",
                   help="detect and cluster only; no model call, nothing written")
    p.add_argument("--force", action="store_true",
                   help="ignore GAIA's synthesis marks and watermark this pass (sessions "
                        "earlier passes consumed are read again); `skillsynth db "
                        "reset-synthesis` forgets them for good")
    model_options(p)
    p = command(sub, "recall", "the procedures a goal would recall (read-only)", _recall)
    p.add_argument("db", help="the memory.db")
    p.add_argument("goal", help="the new goal, in quotes")
    model_options(p)

    prs = group(sub, "procedures", "list, inspect, enable, disable and export procedures")
    p = command(prs, "list", "every procedure with its state and record", _procedures)
    p.add_argument("db", help="the memory.db")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    for name, help_ in (("show", "one procedure as JSON"),
                        ("enable", "make a procedure recallable again"),
                        ("disable", "never recall a procedure (nothing is deleted)"),
                        ("export", "write a procedure as <out>/<name>/SKILL.md")):
        p = command(prs, name, help_, _procedures)
        p.add_argument("db", help="the memory.db")
        p.add_argument("id", help="the procedure id (proc_...)")
        if name == "export":
            p.add_argument("--out", required=True, help="the folder to write into")
            p.add_argument("--profile", choices=PROFILES, default="agentskills",
                           help="SKILL.md profile (agentskills is valid under both validators)")
            p.add_argument("--overwrite", action="store_true", help="replace an existing file")
            p.add_argument("--allow-user-data", action="store_true",
                           help="export a procedure distilled from the runs' argument values "
                           "(distill_args: values), which may hold user data (refused "
                           "otherwise)")
