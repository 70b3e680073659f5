"""What ``skillsynth sweep SPEC`` would do, before it does it (``--dry-run``): nothing written.

Each point is ``done`` (its ``summary.json`` exists: skipped), ``stale`` (done, by a skillsynth
that distils or replays it differently: a run refuses to resume until its folder is moved
aside), ``resume`` (a folder without a summary: a killed or invalid point, cleaned and redone)
or ``new``. The model-call estimate is an
upper bound where the spec fixes it (a live point: probes x 2 arms x repeats agent runs of at
most ``step_limit`` calls each, plus a synthesis pass of at most one distillation per cluster);
answered calls in the cache cost nothing, so a warm re-run costs far less.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..point.summary import SUMMARY
from .resume import stale_points
from .spec import SweepSpec, expand_points

__all__ = ["PlannedPoint", "SweepPlan", "plan_sweep"]

PointState = Literal["done", "stale", "resume", "new"]


@dataclass(frozen=True)
class PlannedPoint:
    """One point as the sweep would treat it.

    Attributes:
        id: the point's id (its folder under ``points/``).
        state: ``done``, ``stale``, ``resume`` or ``new`` (module docstring).
        strategy: the design or control it runs.
        live_runs: agent runs it would make (probes x arms x repeats); None: not live, or the
            probes are known only once the corpus is built.
        max_agent_calls: ``live_runs`` x ``step_limit``: an upper bound on agent model calls.
        live: the point runs the agent live (with or without a count of its runs).
    """

    id: str
    state: PointState
    strategy: str
    live_runs: int | None
    max_agent_calls: int | None
    live: bool = False


@dataclass(frozen=True)
class SweepPlan:
    """The points of a sweep and where its results would go."""

    name: str
    run_dir: Path
    points: tuple[PlannedPoint, ...]

    def to_run(self) -> list[PlannedPoint]:
        """The points a run would execute (new and resumed)."""
        return [p for p in self.points if p.state not in ("done", "stale")]

    def lines(self) -> list[str]:
        """The plan in words, one line per point, then a total."""
        out = [f"dry run of sweep {self.name} ({self.run_dir}); nothing is written"]
        for p in self.points:
            live = f"; {p.live_runs} live run(s), <= {p.max_agent_calls} agent call(s)" \
                if p.live_runs is not None else \
                "; live, its runs counted once the corpus gives its probes" if p.live else ""
            out.append(f"  {p.state:<6} {p.id} ({p.strategy}{live})")
        todo = self.to_run()
        calls = [p.max_agent_calls for p in todo if p.max_agent_calls is not None]
        out.append(f"would run {len(todo)} of {len(self.points)} point(s)"
                   + (f"; live agent calls <= {sum(calls)} before the cache" if calls else ""))
        stale = sum(p.state == "stale" for p in self.points)
        if stale:
            out.append(f"refused as it stands: {stale} stale point(s), run by another version "
                       "of skillsynth; move their folders out of points/ to run them again")
        return out


def plan_sweep(spec: SweepSpec | str | Path, *, results_root: str | Path = "eval/results"
               ) -> SweepPlan:
    """The sweep's plan (see the module docstring); reads the run folder, writes nothing."""
    spec = spec if isinstance(spec, SweepSpec) else SweepSpec.load(spec)
    run_dir = (Path(results_root) / spec.name).resolve()
    points = expand_points(spec)
    stale = stale_points(spec, points, run_dir)
    planned = []
    for p in points:
        folder = run_dir / "points" / p.id
        state: PointState = "stale" if p.id in stale else "done" \
            if (folder / SUMMARY).exists() else "resume" if folder.exists() else "new"
        opts = p.point_options(spec)
        runs = None
        if opts.live and opts.tasks:
            runs = len(opts.tasks) * 2 * opts.repeats
        bound = None if runs is None else runs * opts.step_limit
        planned.append(PlannedPoint(id=p.id, state=state, strategy=p.strategy, live_runs=runs,
                                    max_agent_calls=bound, live=bool(opts.live)))
    return SweepPlan(name=spec.name, run_dir=run_dir, points=tuple(planned))
