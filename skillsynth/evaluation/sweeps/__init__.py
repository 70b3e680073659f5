"""Sweeps: a grid of points run through papermill, on this machine or a Dask cluster.

* :mod:`.spec`: the sweep spec (YAML) and its points; :mod:`.run`: :func:`~.run.run_sweep`
  and :func:`~.run.aggregate`; :mod:`.summary`: the run summary, typed
  (:class:`~.summary.SweepSummary`); :mod:`.execute`: one point's notebook executed (every
  transport's);
* :mod:`.notebooks`: the shipped notebooks and how they are executed; :mod:`.similarity`:
  goal similarities, same family against different (`similarity.json`);
* :mod:`.dask_cluster`: points on a Dask cluster; :mod:`.backends`: a worker's models;
  :mod:`.shipping`: the shipped transport; :mod:`.results_url`: a run folder at a URL;
* :mod:`.overhead`: the sweep-overhead benchmark.

Imports :mod:`..point` and :mod:`..live`; the reports read what it writes.
"""

__all__: list[str] = []
