"""Choosing thresholds: interactive tuning views (:mod:`.session`), their widget
application (:mod:`.app`), and per-embedder calibration (:mod:`.calibrate`).

Imports :mod:`..point` (splits and families), never the sweeps or reports.
"""

__all__: list[str] = []
