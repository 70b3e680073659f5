"""Tool worlds: tau2's airline and retail domains executed for real, scored by tau2's
evaluators; the closed loop's history written as GAIA would; live KPIs over repeats."""

from __future__ import annotations

import importlib
import json

import pytest
from fakes import FakeAgentAnswer, FakeScriptedAgent

from skillsynth.config import Thresholds
from skillsynth.corpora.labels import LabelStore, labels_path_for
from skillsynth.errors import SkillsynthError, WorldError
from skillsynth.evaluation.live.agent import DONE_TOOL, SOLO_NUDGE, run_agent
from skillsynth.evaluation.live.history import live_history
from skillsynth.evaluation.live.worlds import WORLDS, Turn, get_world
from skillsynth.evaluation.live.worlds import tau2 as tau2_world
from skillsynth.evaluation.point.metrics import ProbeResult, point_kpis
from skillsynth.evaluation.point.split import load_split
from skillsynth.pipeline.skill import Skill
from skillsynth.store import MemoryStore

pytestmark = pytest.mark.live  # every test here acts in a tau2 world


@pytest.fixture(scope="module")
def airline():
    return get_world("tau2:airline")


def _golden(world, task_id):
    return world.gold_actions(task_id)


def test_worlds_are_listed_and_unknown_names_and_tasks_are_refused(airline):
    assert set(WORLDS) == {"tau2:airline", "tau2:retail", "tau2:mock"}
    with pytest.raises(WorldError, match="unknown world 'tau2:bank'.*tau2:airline"):
        get_world("tau2:bank")
    assert len(airline.tasks()) == 50 and len(airline.tool_specs()) == 14
    assert "airline" in airline.policy().lower()
    assert airline.task("airline/9").task_id == "9"  # the tau2 importer's qualified ids
    with pytest.raises(WorldError, match="no task '999'"):
        airline.start("999")
    retail = get_world("tau2:retail")
    assert len(retail.tasks()) == 114 and len(retail.tool_specs()) == 15


def test_the_mock_world_scores_its_gold_call_and_refuses_tasks_it_cannot_set_up():
    mock = get_world("tau2:mock")
    assert len(mock.tasks()) == 9 and len(mock.tool_specs()) == 4
    (name, args), = mock.gold_actions("create_task_1")
    ep = mock.start("create_task_1")
    out = ep.execute(name, args)
    assert out.ok and "Important Meeting" in out.result
    done = ep.score([Turn("call", name, args, out.result, out.ok),
                     Turn("answer", content="Created.")], "agent-stop")
    assert (done.success, done.reward) == (True, 1.0)
    idle = mock.start("create_task_1").score([Turn("answer", content="No.")], "agent-stop")
    assert idle.success is False  # the task list never changed
    # an environment assertion about a task the run never created: tau2's tool raises;
    # the assertion is not met, and the score says why
    unmet = mock.start("create_task_1_with_env_assertions").score(
        [Turn("answer", content="No.")], "agent-stop")
    assert (unmet.success, unmet.reward) == (False, 0.0)
    assert "task_2 not found" in unmet.detail["assertion_error"]
    # a task that starts from seeded data or actions already taken starts from them: its
    # task_2 exists only there, and the gold call on it meets the database check
    for task_id in ("update_task_with_initialization_data",
                    "update_task_with_initialization_actions"):
        (name, args), = mock.gold_actions(task_id)
        assert not mock.start("create_task_1").execute(name, args).ok  # no task_2 unseeded
        ep = mock.start(task_id)
        out = ep.execute(name, args)
        assert out.ok and '"completed"' in out.result
        seeded = ep.score([Turn("call", name, args, out.result, out.ok)], "agent-stop")
        assert seeded.detail["breakdown"]["DB"] == 1.0
    # an earlier conversation is not replayed: refused by name
    for task_id in ("update_task_with_message_history",
                    "update_task_with_history_and_env_assertions"):
        with pytest.raises(WorldError, match=f"'{task_id}'.*sets message_history.*not replay"):
            mock.start(task_id)
        with pytest.raises(WorldError, match="message_history"):
            mock.task(task_id)  # the closed loop checks ids with task(): refused up front


def test_a_missing_tau2_package_names_the_install_command(monkeypatch):
    def no_tau2(name, *a, **kw):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(importlib, "import_module", no_tau2)
    with pytest.raises(WorldError, match="skillsynth world prepare"):
        tau2_world.Tau2World("retail")


def test_every_episode_starts_from_a_fresh_database(airline):
    (cancel, args), _ = _golden(airline, "9")
    first = airline.start("9")
    assert first.execute(cancel, args).ok
    again = first.execute("get_reservation_details", {"reservation_id": args["reservation_id"]})
    assert json.loads(again.result)["status"] == "cancelled"
    second = airline.start("9")  # no state leaks from the first run
    fresh = second.execute("get_reservation_details", {"reservation_id": args["reservation_id"]})
    assert json.loads(fresh.result)["status"] != "cancelled"


def test_bad_calls_are_failed_calls_the_agent_sees_never_crashes(airline, monkeypatch):
    ep = airline.start("9")
    bad = ep.execute("get_user_details", {"bogus": 1})
    assert not bad.ok and "unexpected keyword argument 'bogus'" in bad.result
    assert not ep.execute("no_such_tool", {}).ok
    assert "not valid JSON" in ep.execute("get_user_details", "{oops").result
    assert not ep.execute("get_user_details", "[1, 2]").ok

    def boom(call):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ep._env, "get_response", boom)
    raised = ep.execute("get_user_details", {"user_id": "x"})
    assert not raised.ok and "RuntimeError: disk on fire" in raised.result


def test_taus_own_evaluators_score_the_run(airline):
    plan = _golden(airline, "9")
    ep = airline.start("9")
    turns = []
    for name, args in plan:
        out = ep.execute(name, args)
        turns.append(Turn("call", name, args, out.result, out.ok))
    done = ep.score([*turns, Turn("answer", content="Cancelled.")], "agent-stop")
    assert (done.success, done.reward) == (True, 1.0)
    assert done.detail["breakdown"]["DB"] == 1.0
    idle = airline.start("9").score([Turn("answer", content="Sorry.")], "agent-stop")
    assert (idle.success, idle.reward) == (False, 0.0)  # the database never changed
    cut = ep.score(turns, "step-limit")  # tau2: a run that did not end by itself earns 0
    assert (cut.success, cut.reward) == (False, 0.0)
    assert cut.detail["breakdown"]["DB"] == 1.0  # the evaluators still say how far it got


def test_the_agent_loop_acts_in_the_world_and_reports_every_figure(airline):
    plan = _golden(airline, "9")
    llm = FakeScriptedAgent([("get_user_details", {"user_id": "nobody"}), *plan],
                            final="Your reservation is cancelled.", guided=plan)
    kw = {"tool_specs": airline.tool_specs(), "policy": airline.policy(),
          "config": Thresholds(), "solo": True}
    base = run_agent(llm, airline.start("9"), **kw)
    assert (base.steps, base.failed_calls, base.termination, base.success, base.reward) == (
        3, 1, "agent-stop", True, 1.0)
    system = llm.requests[0][0][0]["content"]
    assert "Airline Agent Policy" in system and "not available" in system
    assert llm.requests[0][0][1]["content"] == airline.task("9").prompt
    # the text answer after the plan is met by two reminders, then ends the run
    assert (base.prompt_tokens, base.completion_tokens, base.turns, base.nudges) == (
        48, 12, 6, 2)
    assert llm.requests[4][0][-1] == {"role": "user", "content": SOLO_NUDGE}
    assert "done" in [t["function"]["name"] for t in llm.requests[0][1]]
    skill = Skill(name="cancel", description="The user wants to cancel a reservation",
                  body="1. Call cancel_reservation", tools_required=("cancel_reservation",
                                                                     "not_a_world_tool"))
    mem = run_agent(llm, airline.start("9"), recalled=[skill], **kw)
    assert (mem.steps, mem.failed_calls, mem.success) == (2, 0, True)
    offered = [t["function"]["name"] for t in llm.requests[-1][1]]
    assert offered[0] == "cancel_reservation" and "not_a_world_tool" not in offered
    looping = FakeScriptedAgent([("get_user_details", {"user_id": "x"})] * 50)
    loop = run_agent(looping, airline.start("9"), step_limit=5, **kw)
    assert (loop.steps, loop.termination, loop.reward) == (5, "step-limit", 0.0)
    silent = run_agent(FakeScriptedAgent([], final="I cannot help."), airline.start("9"), **kw)
    assert (silent.steps, silent.termination, silent.success) == (0, "agent-stop", False)
    guess = FakeScriptedAgent([], final='{"name": "cancel_it", "arguments": {"id": "X"}}')
    guessed = run_agent(guess, airline.start("9"), **kw)  # a tool the world does not offer
    assert (guessed.steps, guessed.unoffered_text_calls, guessed.termination) == (
        0, 3, "agent-stop")  # written in the first answer and after each of two reminders
    line = json.loads(json.dumps(base.as_dict()))
    assert line["transcript"][0]["name"] == "get_user_details" and not line["transcript"][0]["ok"]


class FakeEarlyReporter(FakeScriptedAgent):
    """FAKE solo agent that reports in text after its first call, goes on when reminded,
    and ends by calling the solo stop tool ``done``."""

    def chat(self, messages, *, tools=None, **kw):
        done = sum(1 for m in messages if m["role"] == "tool")
        reminded = messages[-1] == {"role": "user", "content": SOLO_NUDGE}
        if done == 1 and not reminded and messages[-1]["role"] == "tool":
            self.calls += 1
            self.requests.append((list(messages), tools))
            return FakeAgentAnswer("The customer's user id is known.", ())
        if done >= len(self.plan):
            self.calls += 1
            self.requests.append((list(messages), tools))
            return FakeAgentAnswer(None, ({"id": "stop", "type": "function", "function": {
                "name": DONE_TOOL, "arguments": "{}"}},))
        return super().chat(messages, tools=tools, **kw)


def test_a_solo_agent_that_reports_early_is_reminded_and_stops_with_done(airline):
    plan = [("get_user_details", {"user_id": "nobody"}), *_golden(airline, "9")]
    kw = {"tool_specs": airline.tool_specs(), "config": Thresholds(), "solo": True}
    run = run_agent(FakeEarlyReporter(plan), airline.start("9"), **kw)
    # one reminder after the early report; ``done`` ends the run and is no world call
    assert (run.steps, run.nudges, run.termination, run.success) == (
        len(plan), 1, "agent-stop", True)
    assert DONE_TOOL not in [name for name, _ in run.calls]
    old = run_agent(FakeEarlyReporter(plan), airline.start("9"), solo_nudges=0, **kw)
    assert (old.steps, old.nudges, old.success) == (1, 0, False)  # the agent-v3 loop
    user_led = run_agent(FakeEarlyReporter(plan), airline.start("9"), **{**kw, "solo": False})
    assert DONE_TOOL not in [t["function"]["name"] for t in airline.tool_specs()]
    assert (user_led.steps, user_led.nudges) == (1, 0)  # not solo: no stop tool, no reminder


def test_live_history_writes_gaia_rows_and_labels_and_resumes(tmp_path, airline):
    db = tmp_path / "live.db"
    llm = FakeScriptedAgent(_golden(airline, "9"), final="Cancelled.")
    rep = live_history(airline, llm, db, tasks=["9", "airline/12"], attempts=3, step_limit=8)
    assert (rep.ran, rep.already_present, rep.successes) == (6, 0, 3)  # 12's plan is 9's
    with MemoryStore.open(db, read_only=True) as store:
        sessions = store.session_ids()
        assert len(sessions) == 6
        calls = store.tool_calls(sessions[0])
        assert [c.tool_name for c in calls] == ["cancel_reservation", "search_direct_flight"]
        assert json.loads(calls[0].args)["reservation_id"]
        turns = store.first_user_turns(sessions)
        assert {t.content for t in turns.values()} == {airline.task("9").prompt,
                                                       airline.task("12").prompt}
    with LabelStore(labels_path_for(db)) as ls:
        labels = ls.all()
    assert sorted((x.task_id, x.attempt) for x in labels) == [
        ("12", 1), ("12", 2), ("12", 3), ("9", 1), ("9", 2), ("9", 3)]
    assert {x.extra["world"] for x in labels} == {"tau2:airline"}
    split = load_split(db, 2)
    assert len(split.probes) == 2 and len(split.history) == 4
    again = live_history(airline, llm, db, tasks=["9", "12"], attempts=3)
    assert (again.ran, again.already_present) == (0, 6)
    with pytest.raises(WorldError, match="no task '404'"):
        live_history(airline, llm, db, tasks=["9", "404"], attempts=3)
    with pytest.raises(SkillsynthError, match="attempts must be >= 1"):
        live_history(airline, llm, db, tasks=["9"], attempts=0)


def _row(probe, arm, steps, ok, rep=0, tokens=100, family=None, decisions=None):
    return ProbeResult("s", arm, probe, family or probe, "g", (), (), 0, False, 4, steps,
                       "live", ok, prompt_tokens=tokens, repeat=rep, decisions=decisions)


def test_live_kpis_summarize_repeats_per_arm_before_pairing_probes():
    rows = [  # probe a: 2 repeats per arm; b: memory loses one success; c: both always fail
        _row("a", "no-memory", 6, True, 0, 100), _row("a", "no-memory", 4, True, 1, 100),
        _row("a", "memory", 3, True, 0, 150), _row("a", "memory", 2, True, 1, 150),
        _row("b", "no-memory", 4, True, 0, 200), _row("b", "no-memory", 4, True, 1, 200),
        _row("b", "memory", 4, True, 0, 200), _row("b", "memory", 9, False, 1, 200),
        _row("c", "no-memory", 8, False, 0, 100), _row("c", "no-memory", 8, False, 1, 100),
        _row("c", "memory", 8, False, 0, 100), _row("c", "memory", 8, False, 1, 100)]
    k = point_kpis(rows, [], {}, n_boot=300)
    # a: (5 - 2.5) / 5 = 0.5; b: (4 - 4) / 4 = 0; c: no successful run, not counted
    assert k["live_step_reduction"].value == pytest.approx(0.25)
    assert k["live_step_reduction"].n == 2
    assert k["live_success_change"].value == pytest.approx((0 - 0.5 + 0) / 3)
    assert k["live_share_made_worse"].value == pytest.approx(1 / 3)  # b lost half its runs
    assert k["live_prompt_token_change"].value == pytest.approx((0.5 + 0 + 0) / 3)
    for name in ("live_step_reduction", "live_success_change", "live_share_made_worse",
                 "live_prompt_token_change"):
        assert k[name].lo is not None and k[name].hi is not None and k[name].n > 0
    assert k["live_decision_reduction"].n == 0  # rows without decisions counted: none


def test_decision_reduction_counts_a_plan_call_as_one_decision_on_solved_probes():
    rows = [  # a: a plan solves it in 2 decisions (5 world calls) against 5; b: memory fails
        _row("a", "no-memory", 5, True, 0, decisions=5), _row("a", "no-memory", 5, False, 1,
                                                              decisions=2),
        _row("a", "memory", 5, True, 0, decisions=2), _row("a", "memory", 5, True, 1,
                                                           decisions=3),
        _row("b", "no-memory", 4, True, 0, decisions=4), _row("b", "memory", 8, False, 0,
                                                              decisions=8),
        _row("c", "no-memory", 3, True, 0, decisions=3), _row("c", "memory", 3, True, 0,
                                                              decisions=6)]
    k = point_kpis(rows, [], {}, n_boot=300)
    # a: no-memory's solved run took 5 decisions, memory's 2.5 on average: (5 - 2.5) / 5;
    # c: (3 - 6) / 3 = -1; b: memory solved none, not counted; steps unchanged on a
    assert k["live_decision_reduction"].value == pytest.approx((0.5 - 1.0) / 2)
    assert k["live_decision_reduction"].n == 2
    assert k["live_step_reduction"].value == pytest.approx(0.0)


def test_world_commands_list_and_refuse_bad_names_before_any_model(capsys):
    from skillsynth.cli import main

    assert main(["world", "list"]) == 0
    out = capsys.readouterr().out
    assert "tau2:airline" in out and "tau2:retail" in out and "replay" in out
    assert main(["world", "list", "tau2:retail", "--json"]) == 0
    tasks = json.loads(capsys.readouterr().out)
    assert len(tasks) == 114 and tasks[5]["task_id"] == "5"
    assert main(["world", "run", "tau2:retail", "999"]) == 1  # fails before a server starts
    assert "no task '999'" in capsys.readouterr().err
    assert main(["world", "list", "tau2:bank"]) == 1
    assert "unknown world" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # --world without --live is a usage error
        main(["eval", "corpus.db", "out", "--world", "tau2:retail"])
    assert exc.value.code == 2


class FakeUser(FakeScriptedAgent):
    """FAKE simulated user: says each line of ``lines`` in turn, then the stop token."""

    def __init__(self, lines):
        super().__init__([])
        self.lines = list(lines)

    def chat(self, messages, **kw):
        self.calls += 1
        self.requests.append((list(messages), None))
        said = messages[-1]["content"].count("\nCustomer: ")  # its lines in the chat so far
        text = self.lines[said] if said < len(self.lines) else "Thanks! ###STOP###"
        return FakeAgentAnswer(text, ())


def test_world_carryover_reads_each_tasks_gold_from_the_world(capsys):
    from skillsynth.cli import main

    assert main(["world", "carryover", "tau2:retail", "--json"]) == 0
    got = {c["group"]: c for c in json.loads(capsys.readouterr().out)["carryover"]}
    kind, user = got["kind"], got["user"]
    # retail's returns, exchanges and modifications come many to a kind; another order of
    # the same kind shares little, the same customer's other request more
    assert kind["groups"] >= 10 and kind["pairs"] > 500 and user["pairs"] > 20
    assert 0 < kind["mean"] < user["mean"] < 1
    assert kind["interval"][0] <= kind["mean"] <= kind["interval"][1]
    assert kind["matched"] <= kind["mean"] and kind["whole"] < kind["pairs"] / 10
    assert main(["world", "carryover", "tau2:bank"]) == 1
    assert "unknown world" in capsys.readouterr().err


def test_a_simulated_user_opens_answers_and_ends_the_conversation(airline):
    from skillsynth.evaluation.live.user_sim import GREETING, UserSimulator

    plan = _golden(airline, "9")
    agent = FakeScriptedAgent(plan, final="Your reservation is cancelled.")
    user = FakeUser(["Hi, please cancel my reservation."])
    kw = {"tool_specs": airline.tool_specs(), "config": Thresholds()}
    run = run_agent(agent, airline.start("9"), user=UserSimulator(
        user, airline.task("9").instructions), **kw)
    assert (run.termination, run.user_turns, run.success, run.steps) == ("user-stop", 2, True, 2)
    first = agent.requests[0][0]
    assert [m["role"] for m in first] == ["system", "assistant", "user"]
    assert first[1]["content"] == GREETING and first[2]["content"] == "Hi, please cancel my reservation."
    assert "not available" not in first[0]["content"]  # not solo: the user is there
    scenario = user.requests[0][0][0]["content"]
    assert "Task instructions" in scenario or "Known info" in scenario
    # the user continues a transcript (a small model handed the agent's words as its user
    # turn answers as the agent); its lines are in the run's transcript, the opening first
    last = user.requests[-1][0]
    assert [m["role"] for m in last] == ["system", "user"]
    assert f"Agent: {GREETING}\nCustomer: Hi, please cancel my reservation.\nAgent: " \
        in last[1]["content"]
    assert [t.content for t in run.transcript if t.kind == "user"] == [
        "Hi, please cancel my reservation.", "Thanks!"]
    assert run.transcript[0].kind == "user"
    # asked first why it came (asked for "the next message", a small model answered the
    # greeting with a refusal), then for its next message
    assert user.requests[0][0][1]["content"].endswith("why you are contacting the agent.")
    assert last[1]["content"].endswith("Write the customer's next message.")
    chatty = FakeScriptedAgent([], final="Could you tell me more?")
    endless = FakeUser(["More."] * 50)
    cut = run_agent(chatty, airline.start("9"), user=UserSimulator(
        endless, airline.task("9").instructions, max_turns=3), **kw)
    assert (cut.termination, cut.user_turns, cut.reward) == ("turn-limit", 3, 0.0)
    with pytest.raises(SkillsynthError, match="user scenario"):
        UserSimulator(endless, "  ")


def test_the_simulated_user_keeps_only_its_own_line():
    from skillsynth.evaluation.live.user_sim import UserSimulator

    rambler = FakeUser(["Customer: I want a refund.\nAgent: Sure, your order id?\nCustomer: #W1"])
    said, stop = UserSimulator(rambler, "Reason for call: a refund").reply("Hi!")
    assert (said, stop) == ("I want a refund.", False)
    said, stop = UserSimulator(FakeUser(["###STOP###"]), "Reason: x").reply("Done.")
    assert (said, stop) == ("", True)
