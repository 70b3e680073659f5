"""Evaluation: the 4th-attempt protocol, the replay estimate, KPIs, sweeps and reports.

* :mod:`.split`: which sessions are history and which are probes;
* :mod:`.replay`: the replay estimate of tool steps (rule ``replay-v1``, see METHODS.md);
* :mod:`.metrics`: the per-probe results row and KPIs with bootstrap intervals;
* :mod:`.options`: a point's options, declared once (:class:`PointOptions`);
* :mod:`.protocol`: one evaluation point (split, synthesize, recall, score, write), under
  the strict protocol or :mod:`.rolling` (passes over time, every later attempt a probe);
  :mod:`.scoring` scores one probe's two arms for both;
* :mod:`.notebooks`: the shipped notebooks and the one way they are executed (papermill,
  an IPC kernel, a per-cell time limit);
* :mod:`.sweep`: a grid of points through papermill, resumable and parallel;
* :mod:`.report`: tables and plots over a sweep's results; :mod:`.verdict`: #887's
  criteria and the recommended point; :mod:`.gate`: the CI gate and baselines.
"""

from __future__ import annotations

from .metrics import KPI, ProbeResult, ProcedureCheck, bootstrap_interval, point_kpis
from .options import PointOptions
from .protocol import EvalConfig, PointResult, check_floors, run_point
from .replay import RULE, StepEstimate, estimate_steps
from .split import Split, build_history, load_split, split_attempts

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
