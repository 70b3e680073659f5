"""A point's gold source: its labels and families, the world it acts in, and (for the
oracle-run, oracle-dataflow and oracle-plan arms) a successful history run per task, recalled
as it ran or traced for its argument sources."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...corpora.labels import SessionLabel
from ...errors import EvaluationError
from .controls import CONTROLS, FROM_RUN, TRACED, GoldSource, call_arguments, tool_descriptions
from .options import PointOptions
from .split import Split

__all__ = ["gold_source", "successful_runs"]


def successful_runs(corpus: str | Path, sessions: Iterable[str],
                    labels: Mapping[str, SessionLabel], *, calls_that_failed: bool = True
                    ) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Task -> the calls of its first successful session among ``sessions`` (by attempt),
    with arguments that are JSON objects (a session with any other is passed over). The
    traced arms take every call (executed again, a failing one is left out there);
    oracle-run, which recalls the calls as they are, passes ``calls_that_failed=False``."""
    from ...store import MemoryStore

    ok = sorted((labels[s].attempt or 0, s) for s in sessions
                if s in labels and labels[s].success and labels[s].task_id is not None)
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    with MemoryStore.open(corpus, read_only=True) as store:
        for _, s in ok:
            task = str(labels[s].task_id)
            if task in out:
                continue
            calls = [(c.tool_name, call_arguments(c.args)) for c in store.tool_calls(s)
                     if calls_that_failed or c.success]
            if calls and all(a is not None for _, a in calls):
                out[task] = [(n, a) for n, a in calls if a is not None]
    return out


def gold_source(cfg: PointOptions, labels: Mapping[str, SessionLabel], split: Split,
                skills_dir: Path | None = None, corpus: str | Path | None = None
                ) -> GoldSource:
    """The point's gold source: its labels, its families and, where the point acts in a
    named world, that world's tasks and tool descriptions. Recalled control skills are kept
    under ``skills_dir`` (control points only). For the arms that read a run (oracle-run,
    and the traced oracle-dataflow, oracle-plan, mismatched-plan), ``corpus``'s successful
    history sessions per task (:func:`successful_runs`)."""
    from ..live.worlds import get_world

    world = None
    if cfg.world != "replay" and (cfg.live or cfg.history != "corpus"):
        world = get_world(cfg.world)
    elif cfg.strategy in TRACED:  # replay: the world the corpus was recorded in
        domains = {x.extra.get("domain") for x in labels.values() if x.source == "tau2"}
        if len(domains - {None}) != 1:
            raise EvaluationError(
                f"strategy {cfg.strategy} executes a task's calls in its world to "
                "trace where the arguments come from; in replay that needs a tau2 corpus of "
                f"one domain (found {sorted(map(str, domains)) or 'no tau2 labels'}); run it "
                "live (world: tau2:...) otherwise")
        world = get_world(f"tau2:{next(iter(domains - {None}))}")
    descriptions = tool_descriptions(world.tool_specs()) if world is not None else {}
    runs = successful_runs(corpus, split.history, labels,
                           calls_that_failed=cfg.strategy != "oracle-run") \
        if cfg.strategy in FROM_RUN and corpus is not None else {}
    return GoldSource(labels=labels, families=dict(split.families),
                      world=world,  # type: ignore[arg-type]
                      descriptions=descriptions, seed=cfg.seed,
                      skills_dir=skills_dir if cfg.strategy in CONTROLS else None, runs=runs,
                      plan_choices=cfg.plan_choices)
