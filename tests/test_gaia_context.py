"""recall_layout: where the live agent is shown a recalled procedure (#887's system-prompt
block, or amd-gaia 0.25.1's memory context before the user's message)."""

from __future__ import annotations

import pytest
from fakes import FakeScriptedAgent

from skillsynth.config import Thresholds
from skillsynth.errors import ConfigError
from skillsynth.evaluation.live import gaia_context
from skillsynth.evaluation.live.agent import run_agent
from skillsynth.evaluation.live.gaia_context import CONTEXT_TAG, recall_block
from skillsynth.evaluation.live.worlds.base import Score, WorldTask
from skillsynth.evaluation.point.options import PointOptions
from skillsynth.pipeline.inject import inject
from skillsynth.pipeline.skill import Skill

WHY = "amd-gaia is not installed (pip install 'skillsynth[gaia]'): the release renders the block"
SKILL = Skill(name="cancel-a-pending-order", description="The user wants to cancel an order",
              body="1. Call find_user\n2. Call cancel_order\n\n## Edge cases\n- Retry once",
              tools_required=("find_user", "cancel_order"))
SPECS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {
    "type": "object", "properties": {}}}} for n in ("find_user", "cancel_order")]


class FakeEpisode:
    """FAKE world episode of one task: no call is expected; the run scores as failed."""

    task = WorldTask("1", "cancel my order", "I am Ann: cancel my pending order.", "1")

    def execute(self, name, arguments):  # pragma: no cover - the scripted agent makes none
        raise AssertionError("no call expected")

    def score(self, turns, termination):
        return Score(success=False, reward=0.0)


def _first_request(layout, recalled=(SKILL,)):
    llm = FakeScriptedAgent([])
    run = run_agent(llm, FakeEpisode(), tool_specs=SPECS, recalled=list(recalled),
                    config=Thresholds(), recall_layout=layout)
    messages = llm.requests[0][0]
    return messages[0]["content"], messages[-1]["content"], run


def test_main_puts_the_block_in_the_system_prompt_and_leaves_the_request_alone():
    system, request, _ = _first_request("main")
    assert inject([SKILL], Thresholds()) in system
    assert request == FakeEpisode.task.prompt


def test_release_puts_the_releases_block_before_the_request_and_none_in_the_system_prompt():
    pytest.importorskip("gaia.agents.base.procedural_memory", reason=WHY)
    system, request, run = _first_request("release")
    assert "1. Call find_user" not in system and "RECALLED PROCEDURES" not in system
    context = recall_block([SKILL], Thresholds(), layout="release")
    assert request == f"{context}\n\n{FakeEpisode.task.prompt}"
    assert context.startswith(CONTEXT_TAG + "\n") and "RECALLED PROCEDURES" in context
    assert f"## {SKILL.name}\nWhen to use: {SKILL.description}" in context  # the release's form
    assert SKILL.body in context
    # the transcript keeps the request as the task wrote it
    assert all(CONTEXT_TAG not in (t.content or "") for t in run.transcript)
    # nothing recalled: the no-memory arm's prompt under either layout
    assert _first_request("release", ())[:2] == _first_request("main", ())[:2]


def test_release_cuts_a_long_body_as_the_release_does():
    pytest.importorskip("gaia.agents.base.procedural_memory", reason=WHY)
    long = Skill(name="long-one", description="d", body="1. step\n" + "x" * 3000,
                 tools_required=("find_user",))
    context = recall_block([long], Thresholds(max_recall_body_chars=100), layout="release")
    assert "… (truncated)" in context and "x" * 200 not in context


def test_release_without_amd_gaia_is_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(gaia_context, "installed_gaia_version", lambda: None)
    gaia_context.require_release_renderer.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"amd-gaia is not installed.*skillsynth\[gaia\]"):
            PointOptions(recall_layout="release")
    finally:
        gaia_context.require_release_renderer.cache_clear()


def test_release_refuses_another_cut():
    with pytest.raises(ConfigError, match="recall_cut whole_steps applies to main only"):
        PointOptions(recall_layout="release", recall_cut="whole_steps")


@pytest.mark.models
@pytest.mark.live
def test_bench_live_times_each_arm_with_the_block_where_the_release_puts_it(monkeypatch):
    # `bench live --setting none/grouped/release`: GAIA's release freezes the system prompt
    # "for KV-cache reuse"; the benchmark times its memory runs apart from the no-memory ones
    # and must run them in that layout (one task, two calls a run: a smoke, not a figure).
    pytest.importorskip("gaia.agents.base.procedural_memory", reason=WHY)
    from skillsynth.bench.live import LiveSetting, bench_live
    from skillsynth.evaluation.live import agent

    layouts = []

    def spy(*args, **kwargs):
        layouts.append((bool(kwargs["recalled"]), kwargs["recall_layout"]))
        return run_agent(*args, **kwargs)

    monkeypatch.setattr(agent, "run_agent", spy)
    figures = bench_live([LiveSetting(order="grouped", layout="release")], tasks=["36"],
                         step_limit=2, log=lambda _: None)
    assert layouts == [(False, "release"), (True, "release")] * 2  # the setting, then again
    first = figures["settings"]["none/grouped/release"]
    assert first["seconds_per_run"]["n"] == 2
    assert first["seconds_per_run, no-memory"]["n"] == 1
    assert first["seconds_per_run, oracle-args"]["n"] == 1
    assert first["seconds_per_run, oracle-args"]["median"] > 0
    assert first["transcripts_identical_to_first"]["n"] == 0  # nothing before it to equal
    again = figures["settings"]["none/grouped/release again"]
    assert again["transcripts_identical_to_first"]["n"] == 2
