"""Executable plans: the stored block (render, strict parse), binding resolution, and plans
induced by rule from hand-made clusters and from the shipped corpora."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from skillsynth.errors import PlanError, SkillError
from skillsynth.pipeline.cluster import Cluster
from skillsynth.pipeline.detect import SessionSequence
from skillsynth.pipeline.distill import distill_trace
from skillsynth.pipeline.induce import induce_plan
from skillsynth.pipeline.plan import (
    MAX_PLAN_CHARS,
    Const,
    FromInput,
    FromStep,
    InputSlot,
    ListOf,
    ObjectOf,
    Plan,
    PlanStep,
    PlanStop,
    find_plan,
    parse_plan,
    render_plan,
    strip_plan,
    with_plan,
)
from skillsynth.pipeline.provenance import read_result
from skillsynth.pipeline.resolve import resolve_binding, resolve_path
from skillsynth.pipeline.skill import PROFILES, Skill, validate_dir, validate_gaia691
from skillsynth.store import ToolCall

T = "2026-01-01T00:00:00"


def _session(sid, goal, calls):
    """A successful session from (tool, arguments, result) triples."""
    rows = tuple(ToolCall(sid, t, json.dumps(a), r if isinstance(r, str) else json.dumps(r),
                          True, T) for t, a, r in calls)
    return SessionSequence(sid, goal, rows, rows, True)


def _return(sid, name, zip_code, orders, reason, pay, *, items=("i1",), said=None):
    """A return: find the user by name and zip, read the user, read the order, return its
    items. ``orders``: the user's orders (the first is returned); ``said``: the goal."""
    user = f"{name.lower()}_{zip_code}"
    order = orders[0]
    goal = said or f"I am {name}, zip {zip_code}. Return my order {order}; reason: {reason}."
    return _session(sid, goal, [
        ("find_user_id_by_name_zip", {"first_name": name, "zip": zip_code}, user),
        ("get_user_details", {"user_id": user},
         {"user_id": user, "orders": list(orders), "payment_methods": {pay: {"kind": "x"}}}),
        ("get_order_details", {"order_id": order},
         {"order_id": order, "items": [{"item_id": i, "price": 5} for i in items]}),
        ("return_delivered_order_items",
         {"order_id": order, "item_ids": list(items), "payment_method_id": pay,
          "reason": reason, "notify": True}, "ok")])


A = _return("a", "Mei", "28236", ["#W111"], "defective", "paypal_1", items=("i1", "i2"))
B = _return("b", "Yusuf", "10001", ["#W222"], "defective", "card_2", items=("i3",))
C = _return("c", "Ana", "90210", ["#W333"], "unwanted", "gift_3", items=("i4", "i5", "i6"))


def _cluster(*members):
    return Cluster(tuple(members), "agglomerative", "calls", 1.0, True)


def _plan(*members, **kw):
    return induce_plan(members, members[0], **kw)


# ---------------------------------------------------------------------- induction
def test_a_cluster_that_agrees_everywhere_gives_a_complete_plan():
    plan = _plan(A, B, C)
    assert plan is not None and plan.complete and plan.stop is None
    assert plan.inputs == (InputSlot("first_name", "string"), InputSlot("zip", "string"),
                           InputSlot("reason", "string"))
    assert [s.tool for s in plan.steps] == ["find_user_id_by_name_zip", "get_user_details",
                                            "get_order_details",
                                            "return_delivered_order_items"]
    assert plan.steps[1].args == {"user_id": FromStep(1, "")}  # a text result, whole
    assert plan.steps[2].args == {"order_id": FromStep(2, "orders[]")}
    assert plan.steps[3].args == {
        "order_id": FromStep(3, "order_id"),  # the nearest result that holds it
        "item_ids": FromStep(3, "items[].item_id", every=True),  # all items, any number
        "payment_method_id": FromStep(2, "payment_methods.<key>"),
        "reason": FromInput("reason"), "notify": Const(True)}
    # no member's value anywhere in the stored form
    text = render_plan(plan)
    for v in ("Mei", "28236", "#W111", "paypal_1", "i1", "defective", "mei_28236"):
        assert v not in text


def test_lists_of_one_value_bind_that_value_not_every_value():
    # every member returned the one item its order had: "all items" and "the item" look the
    # same, so the plan takes the one value, and refuses an order with several
    d = _return("d", "Lu", "30301", ["#W444"], "defective", "cash_4", items=("i7",))
    plan = _plan(B, d)
    assert plan.steps[3].args["item_ids"] == ListOf((FromStep(3, "items[].item_id"),))
    with pytest.raises(PlanError, match="2 different values"):
        resolve_binding(plan.steps[3].args["item_ids"],
                        [None, None, {"items": [{"item_id": "x"}, {"item_id": "y"}]}], {})


def test_a_value_the_agent_chose_among_several_ends_the_plan_there():
    # Mei has two orders and said neither: the plan cannot know which one she meant
    two = _return("d", "Lu", "30301", ["#W444", "#W445"], "defective", "cash_4",
                  said="I am Lu, zip 30301. Return my order; reason: defective.")
    plan = _plan(A, B, two)
    assert [s.tool for s in plan.steps] == ["find_user_id_by_name_zip", "get_user_details"]
    assert plan.stop == PlanStop(3, "get_order_details", "order_id", "choice")
    assert not plan.complete
    assert [s.name for s in plan.inputs] == ["first_name", "zip"]  # reason not yet used


def test_with_choices_the_pick_is_left_to_the_caller_and_the_plan_reaches_the_write():
    two = _return("d", "Lu", "30301", ["#W444", "#W445"], "defective", "cash_4",
                  said="I am Lu, zip 30301. Return my order; reason: defective.")
    plan = _plan(A, B, two, choices=True)
    assert plan.complete and plan.version == 2
    pick = InputSlot("order_id", "string", "choice", FromStep(2, "orders[]"))
    assert plan.choices == (pick,)
    assert plan.steps[2].args == {"order_id": FromInput("order_id")}
    assert plan.steps[3].args["order_id"] == FromStep(3, "order_id")  # then bound again
    text = render_plan(plan)
    assert text.startswith("```skillsynth-plan v2\n") and parse_plan(text) == plan
    for v in ("Mei", "#W111", "#W444", "#W445", "cash_4", "i1"):
        assert v not in text
    # a plan with no choice to leave is the v1 plan it was
    assert _plan(A, B, C, choices=True) == _plan(A, B, C) and _plan(A, B, C).version == 1
    # a flag, null or empty text is never picked among a result's values (as provenance
    # never traces one to a result): members that differ still end the plan as before
    def flagged(sid, name, zip_code, order, notify):
        run = _return(sid, name, zip_code, [order], "defective", "pp_1")
        read, last = run.calls[-2], run.calls[-1]
        result = {**json.loads(read.result_summary), "flags": [True, False], "note": "",
                  "gift": None, "tags": ["", "x"]}  # values a flag, null or "" would match
        args = {**json.loads(last.args), "notify": notify}
        rows = (*run.calls[:-2], ToolCall(sid, read.tool_name, read.args, json.dumps(result),
                                          True, T),
                ToolCall(sid, last.tool_name, json.dumps(args), last.result_summary, True, T))
        return SessionSequence(sid, run.goal, rows, rows, True)
    for a, b in ((True, False), (None, ""), ("", "")):
        runs = (flagged("a", "Mei", "28236", "#W1", a), flagged("b", "Ana", "90210", "#W2", b))
        assert _plan(*runs, choices=True) == _plan(*runs), (a, b)


def test_a_chosen_subset_of_an_orders_items_is_one_array_choice():
    def run(sid, name, order, items, returned):
        return _session(sid, f"I am {name}. Return some items of {order}.", [
            ("find_user_id_by_name", {"first_name": name}, f"{name}_1"),
            ("get_order_details", {"order_id": order},
             {"order_id": order, "items": [{"item_id": i} for i in items]}),
            ("return_items", {"order_id": order, "item_ids": list(returned)}, "ok")])
    runs = (run("a", "Mei", "#W1", ["i1", "i2", "i3"], ["i1", "i3"]),
            run("b", "Ana", "#W2", ["i4", "i5"], ["i5"]))
    assert _plan(*runs).stop == PlanStop(3, "return_items", "item_ids", "varies")
    plan = _plan(*runs, choices=True)
    assert plan.complete
    assert plan.choices == (InputSlot("item_ids", "array", "choice",
                                      FromStep(2, "items[].item_id")),)
    assert plan.steps[2].args == {"order_id": FromStep(2, "order_id"),
                                  "item_ids": FromInput("item_ids")}


def test_a_choice_is_read_strictly():
    plan = _plan(A, B, _return("d", "Lu", "30301", ["#W4", "#W5"], "defective", "c_4",
                               said="I am Lu, zip 30301. Return my order; reason: x."),
                 choices=True)
    text = render_plan(plan)
    with pytest.raises(PlanError, match="inputs\\[3\\].from"):  # a v1 block has no choices
        parse_plan(text.replace("skillsynth-plan v2", "skillsynth-plan v1"))
    with pytest.raises(PlanError, match="inputs\\[3\\].among"):
        parse_plan(text.replace('"path": "orders[]"}}', '"path": "orders[]", "every": true}}'))
    with pytest.raises(PlanError, match="has not run"):  # picked among a later step's values
        parse_plan(text.replace('"among": {"step": 2', '"among": {"step": 3'))
    with pytest.raises(PlanError, match="inputs\\[1\\].among"):  # the customer's inputs pick nothing
        Plan((InputSlot("x", "string", "customer", FromStep(1, "")),),
             (PlanStep("a", {"x": FromInput("x")}),), version=2)


def test_a_value_in_several_results_falls_back_to_the_customers_words():
    # the same two orders, but this customer names the order: it becomes an input
    two = _return("d", "Lu", "30301", ["#W444", "#W445"], "defective", "cash_4")
    plan = _plan(A, B, two)
    assert plan.steps[2].args == {"order_id": FromInput("order_id")}
    assert plan.complete


def test_a_value_found_nowhere_or_differently_typed_ends_the_plan():
    lost = _return("d", "Lu", "30301", ["#W444"], "defective", "cash_4",
                   said="Please return my order.")  # no name or zip in the customer's words
    assert _plan(lost, A) is None  # not even the first call binds
    runs = [_session(sid, f"I am {n}, zip {z}.", [
        ("find_user_id_by_name", {"first_name": n}, f"{n}_1"),
        ("check_zip", {"zip": z}, "ok")])
        for sid, n, z in (("a", "Mei", "28236"), ("b", "Bo", 12345))]
    # the customer gave the zip in both runs, once passed as text, once as a number: one
    # input cannot serve both, and no result holds it
    assert _plan(*runs).stop == PlanStop(2, "check_zip", "zip", "varies")


def test_an_unbound_step_leaves_no_input_behind():
    # the reason comes first (an input), then the order id cannot be bound: the plan
    # ends before the step, and the reason's input goes with it
    runs = [_session(sid, f"I am {n}. Reason: broken.", [
        ("find_user_id_by_name_zip", {"first_name": n}, f"{n}_1"),
        ("note", {"reason": "broken", "order_id": f"#X{sid}"}, "ok")])
        for sid, n in (("a", "Mei"), ("b", "Ana"))]
    plan = _plan(*runs)
    assert plan.stop == PlanStop(2, "note", "order_id", "unknown")
    assert [s.name for s in plan.inputs] == ["first_name"]


def test_constants_are_shared_non_user_values_and_inputs_are_reused():
    specs_enum = {"return_delivered_order_items": {"reason": ("defective", "unwanted")}}
    quiet = [_return(s, n, z, [o], "defective", p, said=f"I am {n}, zip {z}; order {o}.")
             for s, n, z, o, p in (("a", "Mei", "28236", "#W1", "pp_1"),
                                   ("b", "Ana", "90210", "#W2", "cc_2"))]
    plan = _plan(*quiet, enums=specs_enum)
    # every member passed "defective", no customer said it, the schema lists it
    assert plan.steps[3].args["reason"] == Const("defective")
    assert _plan(*quiet).stop.argument == "reason"  # without the enum it is unknown
    # the same customer value in two calls is one input; another value gets its own
    runs = [_session(sid, f"I am {n} {m}.", [
        ("find_user_id_by_name_zip", {"first_name": n}, f"{n}_1"),
        ("greet", {"name": n, "middle": m}, "ok")])
        for sid, n, m in (("a", "Mei", "Lin"), ("b", "Ana", "Sol"))]
    plan = _plan(*runs)
    assert plan.steps[1].args == {"name": FromInput("first_name"), "middle": FromInput("middle")}


def test_nested_arguments_bind_element_by_element_and_private_paths_are_refused():
    runs = [_session(sid, f"I am {n}, born {dob}.", [
        ("find_user", {"first_name": n}, {"user_id": f"{n}_9", "accounts": {
            f"{n}_9": {"balance": bal}}}),
        ("book", {"passengers": [{"first_name": n, "dob": dob}], "user_id": f"{n}_9"}, "ok"),
        ("pay", {"amount": bal}, "ok")])
        for sid, n, dob, bal in (("a", "Mei", "1990-01-02", 70), ("b", "Ana", "1985-03-04", 20))]
    plan = _plan(*runs)
    assert plan.steps[1].args == {
        "passengers": ListOf((ObjectOf({"first_name": FromInput("first_name"),
                                        "dob": FromInput("passengers_1_dob")}),)),
        "user_id": FromStep(1, "user_id")}
    # the balance sits under a key that is a member's user id: binding it would store it
    assert plan.stop == PlanStop(3, "pay", "amount", "private")


def test_results_cut_at_500_characters_are_read_as_their_complete_prefix():
    full = {"user_id": "u_1", "orders": ["#W1"], "name": {"first": "Mei"},
            "notes": "x" * 600, "tail": [1, 2]}
    cut = json.dumps(full)[:500]
    assert read_result(cut) == {"user_id": "u_1", "orders": ["#W1"], "name": {"first": "Mei"}}
    assert read_result('{"a": "x\\", y", "b": [1, {"c"') == {"a": 'x", y', "b": [1]}
    assert read_result("plain text") == "plain text"
    runs = [_session(sid, f"I am {n}.", [
        ("find", {"name": n}, json.dumps({"user_id": f"{n}_1", "orders": [o],
                                          "notes": "x" * 600})[:500]),
        ("get_order", {"order_id": o}, "ok")])
        for sid, n, o in (("a", "Mei", "#W1"), ("b", "Ana", "#W2"))]
    assert _plan(*runs).steps[1].args == {"order_id": FromStep(1, "orders[]")}


# ---------------------------------------------------------------------- the stored form
PLAN = Plan(
    inputs=(InputSlot("first_name", "string"), InputSlot("qty", "integer")),
    steps=(PlanStep("find_user", {"first_name": FromInput("first_name")}),
           PlanStep("order", {"user_id": FromStep(1, "user_id"),
                              "items": FromStep(1, "items[].id", every=True),
                              "qty": FromInput("qty"), "gift": Const(False),
                              "mode": Const("fast`est"),
                              "extra": ListOf((Const(None), ObjectOf({"k": Const(1.5)})))})),
    stop=PlanStop(3, "confirm", "code", "unknown"))


def test_a_plan_without_choices_is_stored_as_the_v1_form_it_always_was():
    plan = Plan((InputSlot("first_name", "string"),),
                (PlanStep("find_user", {"first_name": FromInput("first_name")}),
                 PlanStep("get_user", {"user_id": FromStep(1, "")})),
                PlanStop(3, "get_order", "order_id", "choice"))
    assert render_plan(plan) == (
        "```skillsynth-plan v1\n"
        '{"inputs": [\n'
        ' {"name": "first_name", "type": "string", "from": "customer"}\n'
        "],\n"
        '"steps": [\n'
        ' {"tool": "find_user", "args": {"first_name": {"input": "first_name"}}},\n'
        ' {"tool": "get_user", "args": {"user_id": {"step": 1, "path": ""}}}\n'
        "],\n"
        '"stop": {"step": 3, "tool": "get_order", "argument": "order_id", "reason": "choice"}}\n'
        "```")


def test_the_block_renders_one_line_per_input_and_step_and_parses_back_equal():
    text = render_plan(PLAN)
    lines = text.split("\n")
    assert lines[0] == "```skillsynth-plan v1" and lines[-1] == "```"
    assert len(lines) == 11 and text.isascii()
    assert "`est" not in text and "\\u0060est" in text  # no backtick can close the fence
    assert parse_plan(text) == PLAN
    body = "1. Call find_user\n\n## Edge cases\n- none"
    assert find_plan(body) is None and strip_plan(body) == body
    assert find_plan(body + "\n\n" + text) == PLAN
    assert strip_plan(body + "\n\n" + text) == body


def _block(data, version="v1"):
    return f"```skillsynth-plan {version}\n{json.dumps(data)}\n```"


GOOD = json.loads(render_plan(PLAN).split("\n", 1)[1].rsplit("\n", 1)[0])


def _with(path, value):
    data = json.loads(json.dumps(GOOD))
    node = data
    for p in path[:-1]:
        node = node[p]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize("text,field", [
    (_block(GOOD, "v3"), "version"),
    (_block(GOOD, ""), "version"),
    (_block(GOOD) + "\n" + _block(GOOD), "body"),
    ("```skillsynth-plan v1\n{}", "body"),
    ('```skillsynth-plan v1\n{"inputs": [], "inputs": [], "steps": [], "stop": null}\n```',
     "block"),
    ("```skillsynth-plan v1\n{\"inputs\": NaN}\n```", "block"),
    ("```skillsynth-plan v1\nnot json\n```", "block"),
    (_block(_with(["steps", 0, "shell"], "rm -rf ~")), "steps[1]"),
    (_block(_with(["steps", 0, "tool"], "rm -rf ~")), "steps[1].tool"),
    (_block(_with(["steps", 0, "args", "first_name"], {"eval": "x"})), "steps[1].args.first_name"),
    (_block(_with(["steps", 1, "args", "user_id", "step"], 2)), "steps[2].args.user_id.step"),
    (_block(_with(["steps", 1, "args", "user_id", "path"], "a..b")),
     "steps[2].args.user_id.path"),
    (_block(_with(["steps", 1, "args", "mode", "const"], "x" * 5000)), "steps[2].args.mode"),
    (_block(_with(["steps", 1, "args", "mode", "const"], [1])), "steps[2].args.mode"),
    (_block(_with(["steps", 1, "args", "qty"], {"const": 1})), "inputs"),  # qty unused
    (_block(_with(["inputs", 1, "type"], "object")), "inputs[2].type"),
    (_block(_with(["inputs", 1, "from"], "agent")), "inputs[2].from"),
    (_block(_with(["stop", "step"], 9)), "stop.step"),
    (_block(_with(["stop", "reason"], "tired")), "stop.reason"),
    (_block(_with(["stop"], KeyError)), "block"),
    (_block({**GOOD, "steps": []}), "steps"),
    ("```skillsynth-plan v1\n" + " " * (MAX_PLAN_CHARS + 1) + "{}\n```", "block"),
])
def test_a_malformed_or_planted_block_is_refused_naming_the_field(text, field):
    with pytest.raises(PlanError) as err:
        parse_plan("1. step\n\n" + text)
    assert err.value.field == field, str(err.value)
    assert isinstance(err.value, SkillError) and str(err.value).startswith(field)


# ---------------------------------------------------------------------- resolution
RESULT = {"user_id": "u1", "orders": ["#W1", "#W2"], "one": ["#W3", "#W3"],
          "items": [{"id": "a", "n": 1}, {"id": "b", "n": "1"}],
          "payment_methods": {"pp_1": {}}, "grid": [[1, 2], [3]]}


@pytest.mark.parametrize("path,values", [
    ("", [RESULT]), ("user_id", ["u1"]), ("orders[]", ["#W1", "#W2"]),
    ("items[].id", ["a", "b"]), ("payment_methods.<key>", ["pp_1"]), ("grid[][]", [1, 2, 3]),
    ("missing", []), ("user_id[]", []),
])
def test_paths_read_as_provenance_writes_them(path, values):
    assert resolve_path(RESULT, path) == values
    assert resolve_path([{"x": 1}, {"x": 2}], "[].x") == [1, 2]


def test_a_one_value_binding_needs_exactly_one_distinct_value():
    res = [RESULT]
    assert resolve_binding(FromStep(1, "user_id"), res, {}) == "u1"
    assert resolve_binding(FromStep(1, "one[]"), res, {}) == "#W3"  # the same value twice
    assert resolve_binding(FromStep(1, "orders[]", every=True), res, {}) == ["#W1", "#W2"]
    with pytest.raises(PlanError, match="2 different values") as err:
        resolve_binding(FromStep(1, "orders[]"), res, {}, where="steps[2].args.order_id")
    assert err.value.field == "steps[2].args.order_id"
    with pytest.raises(PlanError, match="2 different values"):  # 1 and "1" differ
        resolve_binding(FromStep(1, "items[].n"), res, {})
    with pytest.raises(PlanError, match="no value"):
        resolve_binding(FromStep(1, "missing", every=True), res, {})
    with pytest.raises(PlanError, match="has not run"):
        resolve_binding(FromStep(2, "x"), res, {})
    with pytest.raises(PlanError, match="no input"):
        resolve_binding(FromInput("zip"), res, {})
    assert resolve_binding(ListOf((FromInput("q"), ObjectOf({"k": Const(None)}))), res,
                           {"q": 3}) == [3, {"k": None}]


# ---------------------------------------------------------------------- SKILL.md round trip
@pytest.mark.parametrize("profile", PROFILES)
def test_a_skill_with_a_plan_stays_valid_and_round_trips_under_both_profiles(tmp_path,
                                                                             profile):
    skill = distill_trace(_cluster(A, B, C)).skill
    plan = _plan(A, B, C)
    with_it = with_plan(skill, plan)
    assert with_it.body.startswith(skill.body) and with_it.body.endswith("```")
    assert with_plan(with_it, plan) == with_it  # a plan replaces, never doubles
    assert Skill.parse(with_it.to_intermediate()) == with_it  # the LLM shape's rules hold
    d = with_it.write(tmp_path, profile)
    assert validate_dir(d, profile) == []
    back = Skill.read(d, profile)
    assert back == with_it and find_plan(back.body) == plan
    if profile == "agentskills":  # the agentskills document is valid under #691 too
        assert validate_gaia691(d) == []


def test_export_writes_a_plan_and_refuses_a_broken_one(tmp_path):
    from skillsynth.pipeline.export import export_skill
    from skillsynth.store import MemoryStore, Procedure

    skill = with_plan(distill_trace(_cluster(A, B, C)).skill, _plan(A, B, C))
    broken = Skill("broken-plan", skill.description, skill.body.replace('"stop": null',
                                                                        '"stop": 1'),
                   skill.tools_required)
    with MemoryStore.init(tmp_path / "m.db") as store:
        ids = [store.put_procedure(Procedure(s.name, s.description, s.body,
                                             s.tools_required)).id for s in (skill, broken)]
        for profile in PROFILES:
            d = export_skill(store, ids[0], tmp_path / profile, profile)
            assert find_plan((d / "SKILL.md").read_text()) == _plan(A, B, C)
        with pytest.raises(PlanError, match="stop"):
            export_skill(store, ids[1], tmp_path / "x", "agentskills")
        assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------- shipped corpora
DATASETS = Path(__file__).resolve().parent.parent / "datasets"


def _known_info(kind):
    """tau2 task id -> what its customer knows (the corpus goal is the reason for calling;
    the customer also says these facts: tau2's ``known_info``)."""
    if not kind.startswith("tau2"):
        return {}
    domain = kind.split("-")[1]
    with gzip.open(DATASETS / kind / f"tasks_{domain}_HEAD.json.gz") as fh:
        tasks = json.load(fh)
    return {f"{domain}/{t['id']}": ((t.get("user_scenario") or {}).get("instructions") or {})
            .get("known_info") or "" for t in tasks}


@pytest.mark.slow
@pytest.mark.parametrize("choices", [False, True])
@pytest.mark.parametrize("kind", ["tau2-retail", "tau2-airline", "taubench"])
def test_plans_on_the_shipped_corpora_carry_no_user_value_and_stay_valid(tmp_path, kind,
                                                                         choices):
    # every task's sessions as one cluster (the labels decide): its plan names no argument
    # value of any member unless a constant every member passed that no customer words
    # hold, and the trace skill with the plan is valid under both profiles; with choices
    # too (a choice names a path, never a value)
    from corpus_kinds import sessions_by_task
    from test_distill_provenance import _values

    by_task = sessions_by_task(kind, tmp_path)
    known = _known_info(kind)
    plans = steps = picks = 0
    for tid, members in by_task.items():
        words = {m.session_id: f"{m.goal}\n{known.get(tid, '')}" for m in members}
        cluster = Cluster(tuple(members), "labels", "calls", 1.0, True)
        plan = induce_plan(members, cluster.representative(), customer=words, choices=choices)
        if plan is None:
            continue
        text = render_plan(plan)
        assert parse_plan(text) == plan
        shared = set.intersection(*(_values(m) for m in members))
        allowed = {v for v in shared if not any(v in w for w in words.values())}
        leaked = {v for m in members for v in _values(m) - allowed if v in text}
        assert not leaked, f"task {tid}: {sorted(leaked)[:5]}"
        skill = with_plan(distill_trace(cluster).skill, plan)
        for profile in PROFILES:
            d = skill.write(tmp_path / profile / tid.replace("/", "-"), profile)
            assert validate_dir(d, profile) == [], (tid, profile)
            back = Skill.read(d, profile)
            assert back == skill and find_plan(back.body) == plan
        plans += 1
        steps += len(plan.steps)
        picks += len(plan.choices)
    assert plans >= 10 and steps > plans  # some plans run past their first call
    assert (picks > 0) is choices
