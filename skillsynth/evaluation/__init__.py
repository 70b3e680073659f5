"""Evaluation: the 4th-attempt protocol, KPIs, sweeps, reports and tuning, one room per job.

Sub-packages, lowest first (each imports only from those before it; a test holds it):

* :mod:`.strategies`: the procedural-memory designs compared (skillsynth, GAIA's passes,
  peers, the no-memory arm);
* :mod:`.live`: the agent, the simulated user, the worlds it acts in, live histories;
* :mod:`.point`: one evaluation point: its options, split, passes, scoring (the replay
  estimate and the live arms), KPIs and run record;
* :mod:`.tuning`: interactive tuning and per-embedder calibration;
* :mod:`.sweeps`: a grid of points through papermill, in a thread pool or on Dask;
* :mod:`.reporting`: the KPI report, #887's verdict and the CI gate.

The names below are the stable public API of one point.
"""

from __future__ import annotations

from .point.estimate import RULE, StepEstimate, estimate_steps
from .point.floors import check_floors
from .point.metrics import KPI, ProbeResult, ProcedureCheck, bootstrap_interval, point_kpis
from .point.options import PointOptions
from .point.run import EvalConfig, PointResult, run_point
from .point.split import Split, build_history, load_split, split_attempts

__all__ = [
    "KPI",
    "RULE",
    "EvalConfig",
    "PointOptions",
    "PointResult",
    "ProbeResult",
    "ProcedureCheck",
    "Split",
    "StepEstimate",
    "bootstrap_interval",
    "build_history",
    "check_floors",
    "estimate_steps",
    "load_split",
    "point_kpis",
    "run_point",
    "split_attempts",
]
