"""A point measures only what ran to its end: a model failure makes it invalid, never a null.

GAIA's pass ends ``llm-unavailable`` and its agent keeps going when the model is down; that
is right for an agent and wrong for an evaluation, where the pass that stored nothing would
read as "synthesis fired 0.00" and a live run cut off by a timeout as "no progress". Each
stage that depends on a model calls one of these as soon as it has a result, so an outage
stops the point before more work is spent on it (:class:`~skillsynth.errors.PointInvalid`).
"""

from __future__ import annotations

from typing import Protocol

from ...errors import PointInvalid
from ...pipeline.synthesize import PassReport

__all__ = ["INCOMPLETE_PASS", "require_pass", "require_run"]

#: Pass statuses that mean the model or server failed before the pass could finish (a
#: verification try that ends on a model error ends its pass this way too).
INCOMPLETE_PASS = frozenset({"llm-unavailable"})


class _Run(Protocol):
    @property
    def termination(self) -> str: ...

    @property
    def error(self) -> str | None: ...


def require_pass(report: PassReport | None, where: str) -> None:
    """Raise :class:`PointInvalid` if a synthesis pass stopped on a model failure."""
    if report is not None and report.status in INCOMPLETE_PASS:
        raise PointInvalid(f"{where}: the synthesis pass did not run to its end "
                           f"({report.status}: {report.message}); the point is invalid and "
                           "left unfinished: re-run the sweep when the server answers",
                           stage="synthesis", cause=report.message or report.status)


def require_run(run: _Run, where: str) -> None:
    """Raise :class:`PointInvalid` if a live agent run ended on a model error."""
    if run.termination == "model-error":
        raise PointInvalid(f"{where}: the live run ended on a model error ({run.error}); the "
                           "point is invalid and left unfinished: re-run the sweep when the "
                           "server answers", stage="live", cause=str(run.error))
