"""Corpora of every kind the importers read, built from the shipped datasets (for tests)."""

from __future__ import annotations

from pathlib import Path

from skillsynth.corpora import (
    LabelStore,
    SessionLabel,
    export_jsonl,
    generate_corpus,
    import_corpus,
    labels_path_for,
)
from skillsynth.store import MemoryStore

#: Corpus kinds :func:`build_corpus` knows.
KINDS = ("synthetic", "taubench", "tau2-airline", "tau2-retail", "jsonl", "gaia-db")

DATASETS = Path(__file__).resolve().parent.parent / "datasets"


def build_corpus(kind: str, tmp: Path) -> Path:
    """A corpus memory.db (labels beside it) of one kind, from the shipped datasets."""
    db = tmp / f"{kind}.db"
    if kind == "synthetic":
        generate_corpus(db, families=4, attempts=5, seed=1)
    elif kind == "taubench":
        import_corpus("taubench", DATASETS / "taubench-airline-gpt4o" / "gpt-4o-airline.json.gz",
                      db)
    elif kind in ("tau2-airline", "tau2-retail"):
        import_corpus("tau2", DATASETS / kind, db)
    elif kind == "jsonl":
        generate_corpus(tmp / "g.db", families=3, attempts=5, seed=4)
        export_jsonl(tmp / "g.db", tmp / "g.jsonl")
        import_corpus("jsonl", tmp / "g.jsonl", db)
    else:  # a user's GAIA memory.db: no task ids, so everything is history
        src = tmp / "memory.db"
        with MemoryStore.init(src) as s:
            for i in range(5):
                s.log_tool_call(f"u{i}", "read_file", {"i": i}, "ok", True)
                s.add_turn(f"u{i}", "user", f"read file {i}")
        import_corpus("gaia-db", src, db)
    return db


def tiny_corpus(tmp: Path, attempts: int = 4) -> Path:
    """Three tasks x ``attempts`` (one a day); the answers in the tests are worked out by hand.

    invoice: 3-step history runs; probe = search(fail), search, read, reply (4 calls).
    mail: 3-step history runs; probe = list_inbox, read_file, draft_reply (3 calls).
    jira: 2-step runs (below min_steps 3: never distilled); probe 2 calls.
    """
    db = tmp / "tiny.db"
    plan = {"invoice": (("search_file", "read_file", "reply"), "find the invoice {i}"),
            "mail": (("list_inbox", "read_file", "draft_reply"), "answer the mail {i}"),
            "jira": (("jira_search", "read_file"), "check the jira ticket {i}")}
    labels = []
    with MemoryStore.init(db) as s:
        for attempt in range(1, attempts + 1):
            for fam, (tools, goal) in plan.items():
                sid = f"{fam}-{attempt}"
                ts = f"2026-01-0{attempt}T10:00:0{len(labels) % 10}.000000+00:00"
                with s.transaction():
                    if fam == "invoice" and attempt >= 4:
                        s.log_tool_call(sid, "search_file", {"try": 0}, None, False,
                                        error="timeout", timestamp=ts)
                    for n, t in enumerate(tools):
                        s.log_tool_call(sid, t, {"n": n}, "ok", True, timestamp=ts)
                    s.add_turn(sid, "user", goal.format(i=attempt), timestamp=ts)
                labels.append(SessionLabel(sid, "test", fam, attempt, success=True,
                                           started_at=ts))
    with LabelStore(labels_path_for(db), create=True) as ls:
        ls.add(labels)
    return db


#: gold_corpus's tasks: goal, then gold actions (tool, arguments) in order.
GOLD_TASKS = {
    "invoice": ("find the invoice {i}", (("search_file", {"q": "invoice"}),
                                         ("read_file", {"path": "inv.pdf"}),
                                         ("reply", {"to": "ann"}))),
    "mail": ("answer the mail {i}", (("list_inbox", {"folder": "in"}),
                                     ("read_file", {"path": "mail.txt"}),
                                     ("draft_reply", {"to": "bob"}))),
    "jira": ("check the jira ticket {i}", (("jira_search", {"key": "J-1"}),
                                           ("read_file", {"path": "j.txt"}))),
}


def gold_corpus(tmp: Path, *, without_gold: tuple[str, ...] = ()) -> Path:
    """Three tasks x 4 attempts whose labels carry gold actions (tau2-style); worked by hand.

    Attempts 1-3 make exactly the gold calls. The probes (attempt 4):
    invoice: search_file fails once, then the 3 gold calls (4 calls; the oracle saves 1);
    mail: the gold calls with read_file repeated (4 calls; the oracle saves 1);
    jira: the 2 gold calls (nothing to save). Tasks in ``without_gold`` have no actions.
    """
    db = tmp / "gold.db"
    labels = []
    with MemoryStore.init(db) as s:
        for attempt in range(1, 5):
            for task, (goal, gold) in GOLD_TASKS.items():
                sid = f"{task}-{attempt}"
                ts = f"2026-01-0{attempt}T10:00:0{len(labels) % 10}.000000+00:00"
                calls = list(gold)
                if attempt == 4 and task == "mail":
                    calls.insert(2, calls[1])
                with s.transaction():
                    if attempt == 4 and task == "invoice":
                        s.log_tool_call(sid, "search_file", gold[0][1], None, False,
                                        error="timeout", timestamp=ts)
                    for tool, args in calls:
                        s.log_tool_call(sid, tool, args, f"{tool} ok", True, timestamp=ts)
                    s.add_turn(sid, "user", goal.format(i=attempt), timestamp=ts)
                actions = None if task in without_gold else tuple(
                    {"name": t, "arguments": a} for t, a in gold)
                labels.append(SessionLabel(sid, "test", task, attempt, success=True,
                                           started_at=ts, actions=actions))
    with LabelStore(labels_path_for(db), create=True) as ls:
        ls.add(labels)
    return db


def sessions_by_task(kind: str, tmp: Path) -> dict[str, list]:
    """A shipped corpus's sessions that have a goal and a successful call, grouped by their
    labelled task (every task's sessions as one cluster: the labels decide, no embedder)."""
    from skillsynth.config import Thresholds
    from skillsynth.corpora import LabelStore, labels_path_for
    from skillsynth.pipeline.detect import extract_sequences

    db = build_corpus(kind, tmp)
    with MemoryStore.open(db, read_only=True) as store, \
            LabelStore(labels_path_for(db)) as labels:
        seqs = extract_sequences(store, Thresholds(min_steps=1), advance=False).sequences
        task = {x.session_id: x.task_id for x in labels.all()}
    out: dict[str, list] = {}
    for s in seqs:
        if s.goal and s.span and task.get(s.session_id) is not None:
            out.setdefault(str(task[s.session_id]), []).append(s)
    return out
