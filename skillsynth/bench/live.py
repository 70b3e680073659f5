"""Live runs per hour under each decoding, run order and recall layout (``skillsynth bench live``).

A fixed set of live runs (tau2 tasks x the no-memory and oracle-args arms, greedy, no call
cache) is run once per setting on a fresh chat server: plain decoding, n-gram lookup drafting,
a draft model (:mod:`skillsynth.models.decoding`), each with the arms of a probe interleaved
(no memory, memory, next probe...) or grouped (a probe's runs of one arm back to back, so the
server's prompt cache keeps their shared opening), and the recalled block where #887 puts it
(``main``: in the system prompt, before the tool schemas) or where amd-gaia 0.25.1 does
(``release``: before the user's message, the system prompt frozen "for KV-cache reuse"; the
release's own claim, measured here). The first setting runs again last: the backend's own noise
floor for transcript identity. Figures: seconds per run (median, n; all runs and per arm), runs
per hour, prompt and generated tokens per second, the share of prompt tokens the server took
from its cache, the share of the model's time spent reading new prompt tokens, draft
acceptance, the chat server's peak memory, and the share of runs whose transcript equals the
first setting's of the same layout (the layouts' memory prompts differ, so do their answers;
the first setting of each layout has no figure, n = 0).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..config import Thresholds
from ..evaluation.live.gaia_context import RecallLayout
from ._stats import median_of, share

__all__ = ["LiveSetting", "bench_live", "parse_setting"]

ARMS = ("no-memory", "oracle-args")


@dataclass(frozen=True)
class LiveSetting:
    """One benchmarked setting: a decoding, a run order (``interleaved`` or ``grouped``) and
    where the recalled block goes (``main`` or ``release``: ``recall_layout``)."""

    decoding: str = "none"
    order: str = "interleaved"
    layout: RecallLayout = "main"

    @property
    def label(self) -> str:
        """``decoding/order``, with ``/release`` where the layout is the release's (so the
        labels of earlier records keep their meaning)."""
        return f"{self.decoding}/{self.order}" + ("/release" if self.layout == "release" else "")


def parse_setting(text: str) -> LiveSetting:
    """``DECODING[/ORDER][/LAYOUT]``, e.g. ``ngram/grouped`` or ``none/grouped/release``."""
    decoding, _, rest = text.partition("/")
    order, _, layout = rest.partition("/")
    if order not in ("", "interleaved", "grouped"):
        raise ValueError(f"run order must be interleaved or grouped, got {order!r}")
    if layout not in ("", "main", "release"):
        raise ValueError(f"recall layout must be main or release, got {layout!r}")
    return LiveSetting(decoding=decoding, order=order or "interleaved",
                       layout=cast(RecallLayout, layout or "main"))


class _Metered:
    """A chat client that sums llama-server's timings of every answer (for this benchmark)."""

    def __init__(self, llm: Any):
        self._llm = llm
        self.timings: dict[str, float] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def chat(self, messages: Any, **kw: Any) -> Any:
        r = self._llm.chat(messages, **kw)
        for k, v in (r.timings or {}).items():
            if isinstance(v, int | float):
                self.timings[k] = self.timings.get(k, 0.0) + float(v)
        return r


def _peak_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _transcript(run: Any) -> str:
    """What must not change: calls, results, text, ending (timings and tokens aside)."""
    return json.dumps({"transcript": [{k: v for k, v in t.items() if k != "timestamp"}
                                      for t in run.as_dict()["transcript"]],
                       "termination": run.termination, "answer": run.answer}, sort_keys=True)


def _order(tasks: Sequence[str], order: str) -> list[tuple[str, str]]:
    if order == "grouped":  # every no-memory run first (one shared opening), then each probe's
        return [(t, ARMS[0]) for t in tasks] + [(t, ARMS[1]) for t in tasks]
    return [(t, a) for t in tasks for a in ARMS]


def bench_live(settings: Sequence[LiveSetting], *, world: str = "tau2:retail",
               tasks: Sequence[str] = ("36", "70", "71"), chat: str = "qwen2.5-coder-1.5b",
               step_limit: int = 8, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Run the fixed set of live runs under each setting (module docstring); the figures.

    The first setting is run again at the end as the noise floor (``<label> again``).
    """
    from ..evaluation.live.agent import run_agent
    from ..evaluation.live.gaia_context import require_release_renderer
    from ..evaluation.live.worlds import Tau2World, get_world
    from ..evaluation.point.controls import gold_actions, oracle_skill, tool_descriptions
    from ..models.chat import ChatClient
    from ..models.decoding import Decoding
    from ..models.serve import locate_models, serve_local

    if any(s.layout == "release" for s in settings):
        require_release_renderer()  # before any server starts: amd-gaia renders the block
    w = get_world(world)
    assert isinstance(w, Tau2World)  # every named world is one
    specs = w.tool_specs()
    descriptions = tool_descriptions(specs)
    skills = {t: oracle_skill(gold_actions(w.gold_actions(t)), descriptions, with_args=True)
              for t in tasks}
    models = locate_models(chat=chat)
    plan = [*settings, settings[0]]
    out: dict[str, Any] = {"runs": {}, "settings": {}}
    first: dict[tuple[str, str, str], str] = {}
    for i, setting in enumerate(plan):
        label = setting.label + (" again" if i == len(plan) - 1 else "")
        walls: list[float] = []
        by_arm: dict[str, list[float]] = {a: [] for a in ARMS}
        with serve_local(models, embed=False, decoding=Decoding(setting.decoding)) as srv:  # type: ignore[arg-type]
            assert srv.chat is not None
            llm = _Metered(ChatClient(srv.chat))
            same = compared = 0
            for task, arm in _order(tasks, setting.order):
                t0 = time.perf_counter()
                run = run_agent(llm, w.start(task), tool_specs=specs, policy="",  # type: ignore[arg-type]
                                recalled=[skills[task]] if arm != ARMS[0] else [],
                                config=Thresholds(), step_limit=step_limit, temperature=0.0,
                                seed=0, solo=True, recall_layout=setting.layout)
                walls.append(time.perf_counter() - t0)
                by_arm[arm].append(walls[-1])
                text, key = _transcript(run), (task, arm, setting.layout)
                if key in first:  # the first setting of a layout has nothing to equal
                    compared += 1
                    same += first[key] == text
                first.setdefault(key, text)
                log(f"  {label:<22} task {task:>4} {arm:<11} {walls[-1]:6.1f} s, "
                    f"{run.steps} calls, {run.termination}")
            tm = llm.timings
            peak = _peak_kib(srv.servers[0].process.pid)
        n = len(walls)
        prompt = tm.get("prompt_n", 0.0) + tm.get("cache_n", 0.0)
        out["settings"][label] = {
            "seconds_per_run": {"median": median_of(walls), "n": n, "unit": "s"},
            **{f"seconds_per_run, {arm}": {"median": median_of(ws), "n": len(ws), "unit": "s"}
               for arm, ws in by_arm.items()},
            "runs_per_hour": {"value": round(3600 * n / sum(walls), 1), "n": n},
            "generated_tokens_per_s": {
                "value": round(1000 * tm.get("predicted_n", 0) / tm["predicted_ms"], 2)
                if tm.get("predicted_ms") else None, "n": int(tm.get("predicted_n", 0))},
            "prompt_tokens_per_s": {
                "value": round(1000 * tm.get("prompt_n", 0) / tm["prompt_ms"], 1)
                if tm.get("prompt_ms") else None, "n": int(tm.get("prompt_n", 0))},
            "prompt_tokens_from_cache": share(int(tm.get("cache_n", 0)), int(prompt)),
            # where the model's time goes: prefill of new prompt tokens, against generation
            "prompt_share_of_model_time": {
                "value": round(tm["prompt_ms"] / (tm["prompt_ms"] + tm["predicted_ms"]), 3)
                if tm.get("prompt_ms") and tm.get("predicted_ms") else None,
                "n": int(tm.get("prompt_n", 0) + tm.get("predicted_n", 0)),
                "unit": "tokens"},
            "draft_accepted": share(int(tm.get("draft_n_accepted", 0)),
                                    int(tm.get("draft_n", 0))),
            "transcripts_identical_to_first": share(same, compared),
            "chat_server_peak_mib": {"value": None if peak is None else round(peak / 1024),
                                     "n": 1}}
    return out
