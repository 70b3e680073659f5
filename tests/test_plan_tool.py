"""A recalled plan offered to the live agent as one tool (``procedure_form``), and the
oracle-plan control: what the agent sees, what the world runs, what is counted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from fakes import FakeScriptedAgent

from skillsynth.config import Thresholds
from skillsynth.corpora import SessionLabel
from skillsynth.errors import ConfigError
from skillsynth.evaluation.live.agent import DONE_TOOL, run_agent
from skillsynth.evaluation.live.plan_tool import PLAN_TOOL_PREFIX, plan_tools
from skillsynth.evaluation.live.worlds.base import CallOutcome, Score, WorldTask
from skillsynth.evaluation.point.controls import GoldSource
from skillsynth.evaluation.point.options import PointOptions
from skillsynth.evaluation.reporting.plans import plan_use
from skillsynth.pipeline.plan import (
    Const,
    FromInput,
    FromStep,
    InputSlot,
    Plan,
    PlanStep,
    PlanStop,
    find_plan,
    with_plan,
)
from skillsynth.pipeline.skill import Skill


def _fn(name, props, required=()):
    return {"type": "function", "function": {
        "name": name, "description": name.replace("_", " "),
        "parameters": {"type": "object", "properties": props, "required": list(required)}}}


S = {"type": "string"}
SPECS = [_fn("find_user", {"name": S, "zip": S}, ["name", "zip"]),
         _fn("get_user", {"user_id": S}, ["user_id"]),
         _fn("get_order", {"order_id": S}, ["order_id"]),
         _fn("cancel_order", {"order_id": S, "reason": {"type": "string",
                                                        "enum": ["no longer needed", "other"]}},
             ["order_id", "reason"])]
ANSWERS = {"find_user": "ann_1",
           "get_user": json.dumps({"user_id": "ann_1", "orders": ["#W1"]}),
           "get_order": json.dumps({"order_id": "#W1", "status": "pending"}),
           "cancel_order": json.dumps({"order_id": "#W1", "status": "cancelled"})}
PLAN = Plan(inputs=(InputSlot("name", "string"), InputSlot("zip", "string")),
            steps=(PlanStep("find_user", {"name": FromInput("name"), "zip": FromInput("zip")}),
                   PlanStep("get_user", {"user_id": FromStep(1, "")}),
                   PlanStep("get_order", {"order_id": FromStep(2, "orders[]")})),
            stop=PlanStop(step=4, tool="cancel_order", argument="reason", reason="choice"))
SKILL = with_plan(Skill(name="cancel-a-pending-order",
                        description="The user wants to cancel a pending order",
                        body="1. Call find_user\n2. Call get_user\n3. Call get_order\n"
                             "4. Call cancel_order\n\n## Edge cases\n- Retry once",
                        tools_required=("find_user", "get_user", "get_order", "cancel_order")),
                  PLAN)


@dataclass
class FakeEpisode:
    """FAKE world episode: answers from ANSWERS (a missing user fails), records each call
    and hands the transcript to ``scored``."""

    calls: list[tuple[str, dict]] = field(default_factory=list)
    scored: list = field(default_factory=list)
    task: WorldTask = field(default_factory=lambda: WorldTask(
        "1", "cancel my order", "I am Ann, zip 12345: cancel my pending order.", "1"))

    def execute(self, name, arguments):
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        self.calls.append((name, args))
        if name == "find_user" and args.get("name") != "Ann":
            return CallOutcome("Error: user not found", False)
        return CallOutcome(ANSWERS[name], True)

    def score(self, turns, termination):
        self.scored = list(turns)
        done = any(t.kind == "call" and t.name == "cancel_order" and t.ok for t in turns)
        return Score(success=done, reward=float(done))


def _call(name, args):
    return (name, args)


def test_a_recalled_plan_becomes_one_tool_with_its_inputs_and_where_it_hands_back():
    got = plan_tools([SKILL, Skill(name="prose-only", description="d", body="1. Call get_user",
                                   tools_required=("get_user",))], SPECS)
    assert not got.refused and len(got.tools) == 1  # a skill without a plan offers no tool
    tool = got.tools[0]
    assert tool.name == PLAN_TOOL_PREFIX + "cancel_a_pending_order"
    fn = tool.spec["function"]
    assert fn["parameters"] == {"type": "object", "required": ["name", "zip"], "properties": {
        "name": {"type": "string", "description": "a value the customer gives"},
        "zip": {"type": "string", "description": "a value the customer gives"}}}
    assert "find_user -> get_user -> get_order" in fn["description"]
    assert "ends before cancel_order (you choose its reason)" in fn["description"]


PICK = Plan(inputs=(InputSlot("name", "string"), InputSlot("zip", "string"),
                    InputSlot("order_id", "string", "choice", FromStep(2, "orders[]"))),
            steps=(*PLAN.steps[:2], PlanStep("get_order", {"order_id": FromInput("order_id")}),
                   PlanStep("cancel_order", {"order_id": FromStep(3, "order_id"),
                                             "reason": Const("no longer needed")})),
            version=2)


def test_a_plan_with_a_choice_asks_for_the_pick_and_goes_on_from_there():
    skill = with_plan(SKILL, PICK)
    tool = plan_tools([skill], SPECS).tools[0]
    params = tool.spec["function"]["parameters"]
    assert params["required"] == ["name", "zip"]  # the pick may be left out
    assert params["properties"]["order_id"] == {"type": "string", "description": (
        "your pick among the values at orders[] of step 2 (get_user); leave out to be "
        "shown them")}
    assert "You pick order_id among the values an earlier step returns" in \
        tool.spec["function"]["description"]
    ep = FakeEpisode()
    llm = FakeScriptedAgent([_call(tool.name, {"name": "Ann", "zip": "12345"}),
                             _call(tool.name, {"name": "Ann", "zip": "12345",
                                               "order_id": "#W1"})])
    run = run_agent(llm, ep, tool_specs=SPECS, recalled=[skill], config=Thresholds(),
                    procedure_form="plan")
    # each world call made once: the second call goes on from the pick
    assert [c[0] for c in ep.calls] == ["find_user", "get_user", "get_order", "cancel_order"]
    assert (run.success, run.steps, run.decisions, run.plan_calls, run.plan_steps,
            run.plan_failures) == (True, 4, 2, 2, 4, 0)
    first, second = (json.loads(t.result) for t in ep.scored if t.kind == "plan")
    assert first["status"] == "needs your pick"
    assert first["pick"] == {"input": "order_id", "for": "get_order", "one of": ["#W1"]}
    assert first["next"] == ("call this tool again with order_id set to your pick; it goes on "
                             "from step 3 without repeating the steps above")
    assert second["status"] == "complete"
    assert [(s["step"], s.get("ran")) for s in second["steps"]] == [
        (1, "in your earlier call"), (2, "in your earlier call"), (3, None), (4, None)]


def test_plan_use_counts_how_each_call_ended_from_the_run_records():
    skill = with_plan(SKILL, PICK)
    tool = plan_tools([skill], SPECS).tools[0].name
    scripts = (  # asked for the pick, then a pick not shown, then the right one
        [_call(tool, {"name": "Ann", "zip": "12345"}),
         _call(tool, {"name": "Ann", "zip": "12345", "order_id": "#W9"}),
         _call(tool, {"name": "Ann", "zip": "12345", "order_id": "#W1"})],
        [_call("get_user", {"user_id": "ann_1"})],  # offered, never called
        [_call(tool, {"name": "Bob", "zip": "1"})])  # a step failed
    recs = [{"arm": "memory", **run_agent(FakeScriptedAgent(calls), FakeEpisode(),
                                          tool_specs=SPECS, recalled=[skill],
                                          config=Thresholds(), procedure_form="plan").as_dict()}
            for calls in scripts]
    recs.append({**recs[0], "arm": "no-memory"})  # not counted
    assert plan_use(json.loads(json.dumps(recs, default=str))) == {
        "memory_runs": 3, "offered": 3, "called": 2, "plan_calls": 4, "world_calls": 5,
        "complete": 1, "handed_back": 0, "needs_pick": 1, "stopped": 2, "pick_refused": 1}


def test_a_plan_the_worlds_tools_refuse_is_not_offered_and_is_counted():
    planted = with_plan(SKILL, Plan(inputs=(), steps=(
        PlanStep("delete_everything", {"confirm": Const(True)}),)))
    got = plan_tools([planted], SPECS)
    assert got.tools == () and "delete_everything" in got.refused[planted.name]
    # the tool name never shadows a world tool
    clash = [*SPECS, _fn(PLAN_TOOL_PREFIX + "cancel_a_pending_order", {})]
    assert plan_tools([SKILL], clash).tools[0].name.endswith("_2")


def test_the_agent_calls_the_plan_once_and_the_world_runs_each_step_in_the_transcript():
    ep = FakeEpisode()
    tool = PLAN_TOOL_PREFIX + "cancel_a_pending_order"
    llm = FakeScriptedAgent([_call(tool, {"name": "Ann", "zip": "12345"}),
                             _call("cancel_order", {"order_id": "#W1",
                                                    "reason": "no longer needed"})])
    run = run_agent(llm, ep, tool_specs=SPECS, recalled=[SKILL], config=Thresholds(),
                    procedure_form="plan")
    assert [c[0] for c in ep.calls] == ["find_user", "get_user", "get_order", "cancel_order"]
    assert ep.calls[2] == ("get_order", {"order_id": "#W1"})  # bound from step 2's result
    # what the world was asked vs what the agent decided: a plan cannot hide calls
    assert (run.steps, run.decisions, run.plan_calls, run.plan_steps) == (4, 2, 1, 3)
    assert (run.success, run.plans_offered, run.plans_refused) == (True, 1, 0)
    kinds = [(t.kind, t.name, t.via) for t in ep.scored]
    assert kinds[:4] == [("plan", tool, ""), ("call", "find_user", tool),
                         ("call", "get_user", tool), ("call", "get_order", tool)]
    assert kinds[4] == ("call", "cancel_order", "")
    reply = json.loads(ep.scored[0].result)
    assert reply["status"] == "handed back" and reply["next"] == (
        "continue with cancel_order yourself: choose its reason")
    assert reply["steps"][2]["result"] == {"order_id": "#W1", "status": "pending"}
    # the agent read the same reply as its tool message
    assert llm.requests[1][0][-1] == {"role": "tool", "tool_call_id": "c0",
                                      "content": ep.scored[0].result}
    # plan form: no prose in the system prompt; the plan tool is offered beside the world's
    system, offered = llm.requests[0][0][0]["content"], [
        t["function"]["name"] for t in llm.requests[0][1]]
    assert "RECALLED PROCEDURES" not in system and tool in offered and "get_user" in offered


def test_each_form_shows_the_prose_and_offers_the_plan_as_it_says():
    prose_only = Skill(name="look-up-a-user", description="The user asks who they are",
                       body="1. Call get_user", tools_required=("get_user",))
    for form, prose, offered in (("prose", True, False), ("both", True, True),
                                 ("plan", False, True)):
        llm = FakeScriptedAgent([])
        run = run_agent(llm, FakeEpisode(), tool_specs=SPECS, recalled=[SKILL, prose_only],
                        config=Thresholds(max_recall_body_chars=5000), procedure_form=form)
        system = llm.requests[0][0][0]["content"]
        names = [t["function"]["name"] for t in llm.requests[0][1]]
        assert ("1. Call find_user" in system) is prose
        assert "1. Call get_user" in system  # no plan: its prose is shown under every form
        assert "skillsynth-plan" not in system  # the block is for the harness, not the agent
        assert any(n.startswith(PLAN_TOOL_PREFIX) for n in names) is offered
        assert run.plans_offered == int(offered)
        assert ("Shortcut: the tool procedure_cancel_a_pending_order makes steps 1-3 "
                "(find_user -> get_user -> get_order) in one call; give it name, zip. Then go "
                "on by hand from cancel_order.\n\n1. Call find_user" in system) is (form == "both")
    # a plan the offered world tools cannot run is refused: GAIA loads at most 14 tools
    few = run_agent(FakeScriptedAgent([]), FakeEpisode(), tool_specs=SPECS[:2], recalled=[SKILL],
                    config=Thresholds(), procedure_form="plan")
    assert (few.plans_offered, few.plans_refused) == (0, 1)


def test_a_failing_step_stops_the_plan_with_what_ran_and_the_agent_goes_on():
    ep = FakeEpisode()
    tool = PLAN_TOOL_PREFIX + "cancel_a_pending_order"
    llm = FakeScriptedAgent([_call(tool, {"name": "Bob", "zip": "1"}),
                             _call("find_user", {"name": "Ann", "zip": "12345"})])
    run = run_agent(llm, ep, tool_specs=SPECS, recalled=[SKILL], config=Thresholds(),
                    procedure_form="both")
    reply = json.loads(ep.scored[0].result)
    assert reply["status"] == "stopped" and "find_user failed" in reply["error"]
    assert (run.steps, run.failed_calls, run.plan_steps, run.decisions, run.plan_failures) \
        == (2, 1, 1, 2, 1)
    assert not ep.scored[0].ok  # the plan turn says it failed


def test_bad_inputs_run_nothing_and_the_step_limit_binds_inside_a_plan():
    ep = FakeEpisode()
    tool = PLAN_TOOL_PREFIX + "cancel_a_pending_order"
    bad = run_agent(FakeScriptedAgent([_call(tool, {"name": "Ann"})]), ep, tool_specs=SPECS,
                    recalled=[SKILL], config=Thresholds(), procedure_form="plan")
    assert ep.calls == [] and (bad.steps, bad.plan_calls, bad.decisions) == (0, 1, 1)
    assert "nothing ran" in json.loads(ep.scored[0].result)["error"]
    ep = FakeEpisode()
    cut = run_agent(FakeScriptedAgent([_call(tool, {"name": "Ann", "zip": "12345"})]), ep,
                    tool_specs=SPECS, recalled=[SKILL], config=Thresholds(),
                    procedure_form="plan", step_limit=2)
    assert [c[0] for c in ep.calls] == ["find_user", "get_user"]
    assert (cut.steps, cut.termination, cut.plan_failures) == (2, "step-limit", 1)
    reply = json.loads(ep.scored[0].result)
    assert "steps[3]: not called: the run's step limit" in reply["error"]
    assert [s["tool"] for s in reply["steps"]] == ["find_user", "get_user"]  # what ran


def test_the_done_tool_is_no_decision():
    llm = FakeScriptedAgent([_call("get_user", {"user_id": "ann_1"}), _call(DONE_TOOL, {})])
    run = run_agent(llm, FakeEpisode(), tool_specs=SPECS, config=Thresholds(), solo=True)
    assert (run.steps, run.decisions, run.termination) == (1, 1, "agent-stop")


def test_oracle_plan_needs_a_form_that_offers_the_plan():
    with pytest.raises(ConfigError, match="set procedure_form to plan or both"):
        PointOptions(strategy="oracle-plan")
    assert PointOptions(strategy="oracle-plan", procedure_form="both").procedure_form == "both"
    with pytest.raises(ConfigError, match="plan_choices shapes the plans"):
        PointOptions(plan_choices=True)
    assert PointOptions(strategy="oracle-plan", procedure_form="plan", plan_choices=True)


@dataclass
class FakeCancelWorld:
    """FAKE world with one task (cancel Ann's pending order) whose calls answer from
    ANSWERS."""

    executed: list[str] = field(default_factory=list)

    def tool_specs(self):
        return SPECS

    def task(self, task_id):
        return FakeEpisode().task

    def start(self, task_id):
        world = self

        class Episode(FakeEpisode):
            def execute(self, name, arguments):
                world.executed.append(name)
                return super().execute(name, arguments)

        return Episode()

    def gold_actions(self, task_id):
        return [("find_user", {"name": "Ann", "zip": "12345"}), ("get_user", {"user_id": "ann_1"}),
                ("get_order", {"order_id": "#W1"}),
                ("cancel_order", {"order_id": "#W1", "reason": "no longer needed"})]


def test_oracle_plan_binds_the_gold_calls_and_keeps_the_customers_values_as_inputs(tmp_path):
    world = FakeCancelWorld()
    labels = {"p": SessionLabel("p", "tau2", "1", 4)}
    gold = GoldSource(labels, {"p": "1"}, world, skills_dir=tmp_path)
    proc = gold.recall("oracle-plan", "p")
    assert world.executed == ["find_user", "get_user", "get_order", "cancel_order"]
    plan = find_plan(proc.markdown_body)
    assert plan is not None and plan.complete
    assert [s.name for s in plan.inputs] == ["name", "zip"]  # the customer's words
    assert plan.steps[2].args == {"order_id": FromStep(2, "orders[]")}
    assert plan.steps[3].args == {"order_id": FromStep(3, "order_id"),
                                  "reason": Const("no longer needed")}  # an enum value
    prose = proc.markdown_body.split("```")[0]
    oracle = GoldSource(labels, {"p": "1"}, FakeCancelWorld()).recall("oracle", "p")
    assert prose.strip() == oracle.markdown_body.strip()  # the oracle's prose, and a plan
    for value in ("Ann", "12345", "ann_1", "#W1"):
        assert value not in proc.markdown_body  # no user value anywhere
    assert "4. Call cancel_order" in prose
    assert gold.plan_counts() == {"complete": 1, "prefix": 0, "plan_steps": 4, "run_steps": 4,
                                  "inputs": 2, "from_gold": 1}


@dataclass
class FakeTwoTaskWorld(FakeCancelWorld):
    """FAKE world with two tasks: 1 cancels Ann's order, 2 only reads it."""

    started: list[str] = field(default_factory=list)

    def start(self, task_id):
        self.started.append(task_id)
        return super().start(task_id)

    def gold_actions(self, task_id):
        gold = super().gold_actions(task_id)
        return gold if task_id == "1" else gold[:3]


def test_mismatched_plan_is_the_drawn_familys_run_as_a_plan_traced_in_its_own_task(tmp_path):
    world = FakeTwoTaskWorld()
    labels = {"p": SessionLabel("p", "tau2", "1", 4), "q": SessionLabel("q", "tau2", "2", 4)}
    gold = GoldSource(labels, {"p": "1", "q": "2"}, world, skills_dir=tmp_path)
    proc = gold.recall("mismatched-plan", "p")
    assert world.started == ["2"]  # the other family's task, not the probe's
    assert world.executed == ["find_user", "get_user", "get_order"]
    plan = find_plan(proc.markdown_body)
    assert plan is not None and [s.tool for s in plan.steps] == ["find_user", "get_user",
                                                                 "get_order"]
    assert [s.name for s in plan.inputs] == ["name", "zip"]  # the agent gives them
    # the same family the prose negative control draws, with the plan added
    wrong = GoldSource(labels, {"p": "1", "q": "2"}, FakeTwoTaskWorld()).recall("mismatched", "p")
    assert proc.markdown_body.split("```")[0].strip() == wrong.markdown_body.strip()
    assert proc.provenance["families"] == ["2"] and "cancel_order" not in proc.markdown_body
    assert gold.plan_counts()["complete"] == 1
    for value in ("Ann", "12345", "ann_1", "#W1"):
        assert value not in proc.markdown_body
    with pytest.raises(ConfigError, match="as prose it is the mismatched arm"):
        PointOptions(strategy="mismatched-plan")
    assert PointOptions(strategy="mismatched-plan", procedure_form="plan").strategy == \
        "mismatched-plan"


@pytest.mark.live
def test_oracle_plan_runs_in_tau2_retail_and_taus_evaluators_score_the_run():
    from skillsynth.evaluation.live.worlds import get_world
    from skillsynth.pipeline.recall import skill_from_procedure

    retail = get_world("tau2:retail")
    labels = {"p": SessionLabel("p", "tau2", "39", 4)}  # moving house: update the address
    gold = GoldSource(labels, {"p": "39"}, retail)
    skill = skill_from_procedure(gold.recall("oracle-plan", "p"))
    plan = find_plan(skill.body)
    assert plan is not None and plan.complete and len(plan.steps) == 4  # the failing call left out
    tool = plan_tools([skill], retail.tool_specs()).tools[0]
    inputs = {s.name: v for s, v in zip(plan.inputs, ("Fatima", "Taylor", "32169"),
                                        strict=True)}
    llm = FakeScriptedAgent([(tool.name, inputs), (DONE_TOOL, {})])
    run = run_agent(llm, retail.start("39"), tool_specs=retail.tool_specs(), recalled=[skill],
                    config=Thresholds(), solo=True, procedure_form="plan")
    world_calls = [t for t in run.transcript if t.kind == "call"]
    assert [t.name for t in world_calls] == [a for a, _ in retail.gold_actions("39")][1:]
    assert all(t.via == tool.name and t.ok for t in world_calls)
    assert (run.steps, run.decisions, run.plan_steps, run.termination) == (
        4, 1, 4, "agent-stop")
    assert run.score_detail["breakdown"]["DB"] == 1.0  # tau2 judged the world's state


@pytest.mark.live
def test_a_plan_with_a_choice_reaches_the_write_in_tau2_retail_and_tau2_scores_it():
    from skillsynth.evaluation.live.worlds import get_world
    from skillsynth.pipeline.recall import skill_from_procedure

    retail = get_world("tau2:retail")
    labels = {"p": SessionLabel("p", "tau2", "40", 4)}  # pay a pending order another way
    prefix = find_plan(GoldSource(labels, {"p": "40"}, retail).recall(
        "oracle-plan", "p").markdown_body)
    assert prefix.stop.reason == "choice" and len(prefix.steps) == 3  # ends at the pick
    skill = skill_from_procedure(GoldSource(labels, {"p": "40"}, retail, plan_choices=True)
                                 .recall("oracle-plan", "p"))
    plan = find_plan(skill.body)
    assert plan.complete and [s.name for s in plan.choices] == ["payment_method_id"]
    gold = dict(retail.gold_actions("40"))
    email, pick = (gold["find_user_id_by_email"]["email"],
                   gold["modify_pending_order_payment"]["payment_method_id"])
    tool = plan_tools([skill], retail.tool_specs()).tools[0]
    llm = FakeScriptedAgent([(tool.name, {"email": email}),
                             (tool.name, {"email": email, "payment_method_id": pick}),
                             (DONE_TOOL, {})])
    run = run_agent(llm, retail.start("40"), tool_specs=retail.tool_specs(), recalled=[skill],
                    config=Thresholds(), solo=True, procedure_form="plan")
    first = json.loads(next(t.result for t in run.transcript if t.kind == "plan"))
    assert first["status"] == "needs your pick" and pick in first["pick"]["one of"]
    world_calls = [t.name for t in run.transcript if t.kind == "call"]
    assert world_calls == [a for a, _ in retail.gold_actions("40")]  # none made twice
    assert (run.steps, run.decisions, run.plan_calls, run.plan_steps) == (4, 2, 2, 4)
    assert run.score_detail["breakdown"]["DB"] == 1.0  # tau2 judged the world's state


def test_a_recalled_synthesized_procedure_carries_the_plan_its_member_runs_give(tmp_path):
    from skillsynth.evaluation.point.recall_plans import MemberPlans
    from skillsynth.store import MemoryStore, Procedure

    db = tmp_path / "history.db"
    with MemoryStore.init(db) as s:
        for sid, name, uid, order in (("a", "Ann", "ann_1", "#W1"), ("b", "Bob", "bob_2", "#W7")):
            ts = "2026-01-01T10:00:00.000000+00:00"
            with s.transaction():
                s.add_turn(sid, "user", f"I am {name}, zip 12345: cancel my order.",
                           timestamp=ts)
                s.log_tool_call(sid, "find_user", {"name": name, "zip": "12345"}, uid, True,
                                timestamp=ts)
                s.log_tool_call(sid, "get_user", {"user_id": uid},
                                json.dumps({"user_id": uid, "orders": [order]}), True,
                                timestamp=ts)
                s.log_tool_call(sid, "get_order", {"order_id": order},
                                json.dumps({"order_id": order}), True, timestamp=ts)
    proc = Procedure(name="cancel-order", when_to_use="The user wants to cancel an order",
                     markdown_body="1. Call find_user\n2. Call get_user\n3. Call get_order",
                     tools_required=("find_user", "get_user", "get_order"), id="p1",
                     provenance={"from_sessions": ["a", "b", "gone"]})
    plans = MemberPlans(db, SPECS)
    assert [m.session_id for m in plans.members(proc)] == ["a", "b"]  # "gone": not held
    skill = Skill(name=proc.name, description=proc.when_to_use, body=proc.markdown_body,
                  tools_required=proc.tools_required)
    got = find_plan(plans.skill(proc, skill).body)
    assert got is not None and got.complete and [s.name for s in got.inputs] == ["name", "zip"]
    assert got.steps[1].args == {"user_id": FromStep(1, "")}
    assert got.steps[2].args == {"order_id": FromStep(2, "orders[]")}
    # a body that has a plan keeps it; a procedure without members gets none
    assert plans.skill(proc, SKILL) is SKILL
    lone = Procedure(name="x", when_to_use="y", markdown_body="1. Call get_user", id="p2")
    assert plans.skill(lone, skill) is skill
