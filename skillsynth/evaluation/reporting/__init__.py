"""What a maintainer reads: the KPI report (:mod:`.report`), #887's verdict and the
recommended point (:mod:`.verdict`), and the CI gate with its baselines (:mod:`.gate`).

The top of :mod:`skillsynth.evaluation`: it reads sweep runs and imports everything below.
"""

__all__: list[str] = []
