"""The replay estimate of tool steps: what an agent following a recalled procedure would do.

Deterministic and model-free, so a sweep can score every grid point on every probe. It is
an *estimate* under the rule below (rule id :data:`RULE`), never a measurement; METHODS.md
states its assumptions and the direction of each bias, and every table labels it.

Rule ``replay-v1``. Let the probe's recorded calls be the baseline (its step count without
memory). Let T be the union of ``tools_required`` of the procedures recalled for it.

* *saved*: each recorded call to a tool in T that failed, or that repeats an earlier
  successful call with the same tool and arguments, is assumed avoided (the procedure says
  how to call that tool; the agent does not have to find out by trying).
* *extra*: each tool in T that the probe never called successfully costs one call (the
  procedure told the agent to use it; the task did not need it).
* Calls to tools outside T are kept as recorded, failures included.

estimate = baseline - saved + extra. With nothing recalled, estimate = baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...store import ToolCall

__all__ = ["RULE", "StepEstimate", "estimate_steps"]

#: The rule's id, recorded in every row it produced.
RULE = "replay-v1"


@dataclass(frozen=True)
class StepEstimate:
    """The replay estimate for one probe under one set of recalled tools.

    Attributes:
        baseline: the probe's recorded tool calls.
        estimate: calls an agent following the procedures would make (an estimate).
        saved: recorded calls the rule removes.
        extra: calls the rule adds for named tools the probe did not use.
        rule: :data:`RULE`.
    """

    baseline: int
    estimate: int
    saved: int
    extra: int
    rule: str = RULE

    @property
    def reduction(self) -> float | None:
        """(baseline - estimate) / baseline; None for a probe without calls."""
        return (self.baseline - self.estimate) / self.baseline if self.baseline else None


def estimate_steps(calls: Sequence[ToolCall], tools: Iterable[str] | None) -> StepEstimate:
    """Apply rule ``replay-v1`` to one probe's recorded ``calls``.

    Args:
        calls: the probe session's tool calls, in order.
        tools: the recalled procedures' tools (None or empty: nothing recalled).
    """
    baseline = len(calls)
    named = set(tools or ())
    if not named:
        return StepEstimate(baseline=baseline, estimate=baseline, saved=0, extra=0)
    seen_ok: set[tuple[str, str | None]] = set()
    saved = 0
    for c in calls:
        key = (c.tool_name, c.args)
        if c.tool_name in named and (not c.success or key in seen_ok):
            saved += 1
        if c.success:
            seen_ok.add(key)
    used_ok = {c.tool_name for c in calls if c.success}
    extra = len(named - used_ok)
    return StepEstimate(baseline=baseline, estimate=baseline - saved + extra, saved=saved,
                        extra=extra)
