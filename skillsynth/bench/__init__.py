"""Benchmarks: figures printed by ``skillsynth bench``, never asserted in unit tests.

One module per subject: ``models`` (server throughput), ``scale`` (the pipeline at 10k-100k
sessions, the tuning session), ``distill`` (distillation quality), ``worlds`` (tool worlds and
live runs), ``live`` (live runs per hour by decoding and run order). Sweep overhead is in :mod:`skillsynth.evaluation.sweeps.overhead`. ``measured``
turns each bench's figures into a :class:`~skillsynth.figures.Measurement` record.
"""

from .distill import bench_distill
from .live import bench_live
from .models import bench_models
from .scale import bench_pipeline, bench_tuning
from .worlds import bench_worlds

__all__ = ["bench_distill", "bench_live", "bench_models", "bench_pipeline", "bench_tuning", "bench_worlds"]
