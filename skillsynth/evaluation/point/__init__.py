"""One evaluation point: what it runs with, how it splits, scores and records.

* :mod:`.options`: a point's options, declared once (:class:`~.options.PointOptions`);
* :mod:`.run`: :func:`~.run.run_point` (split, synthesize on the history, recall for each
  probe, score, write ``summary.json``) and :class:`~.run.EvalConfig`; :mod:`.floors`: #887's
  off-states provoked on the finished store;
* :mod:`.split`: which sessions are history and which are probes, and the family rules;
* :mod:`.rolling`: the rolling protocol (passes over time, every later attempt a probe);
* :mod:`.scoring`: one probe's two arms; :mod:`.estimate`: the replay estimate of tool
  steps (rule ``replay-v1``, METHODS.md); :mod:`.live_arms`: the probes run live;
* :mod:`.metrics`: per-probe rows and KPIs with intervals (:mod:`.intervals`: the interval
  statistics); :mod:`.record`: the run record;
  :mod:`.summary`: the point's ``summary.json``, typed (:class:`~.summary.PointSummary`).

Imports :mod:`..strategies` and :mod:`..live`, never the sweeps or reports above it.
"""

__all__: list[str] = []
