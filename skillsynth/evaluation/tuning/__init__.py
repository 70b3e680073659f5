"""Choosing thresholds: interactive tuning views (:mod:`.session`), their widget
application (:mod:`.app`), per-embedder calibration (:mod:`.calibrate`) and its
leave-one-corpus-out validation (:mod:`.validate`).

Imports :mod:`..point` (splits and families; whole points for the validation), never the
sweeps or reports.
"""

__all__: list[str] = []
