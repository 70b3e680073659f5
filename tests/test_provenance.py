"""Argument provenance: where each value of a run's calls comes from, and the oracle-dataflow
control that carries those sources instead of the values (FAKE world, hand-worked)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from skillsynth.config import Thresholds
from skillsynth.corpora import SessionLabel
from skillsynth.errors import ArmSkipped
from skillsynth.evaluation.live.worlds.base import CallOutcome, WorldTask
from skillsynth.evaluation.point.controls import GoldSource
from skillsynth.pipeline.inject import inject
from skillsynth.pipeline.provenance import (
    ArgSource,
    TracedCall,
    argument_sources,
    describe_sources,
    enum_values,
    source_counts,
)
from skillsynth.pipeline.recall import skill_from_procedure

PROMPT = ("My name is Mei Kovacs and my zip code is 28236. I want to return the water bottle "
          "from order #W6390527 and get the refund to my paypal; the other order is fine.")
USER = {"user_id": "mei_kovacs_8020", "name": {"first_name": "Mei", "last_name": "Kovacs"},
        "orders": ["#W6390527", "#W7800651"],
        "payment_methods": {"paypal_7644869": {"source": "paypal"},
                            "credit_card_1": {"source": "credit_card"}}}
ORDER = {"order_id": "#W6390527", "status": "delivered",
         "items": [{"item_id": "8538875209", "name": "Water Bottle", "options": {"size": "1L"}},
                   {"item_id": "1111111111", "name": "Mug"}]}
RESULTS = {"find_user_id_by_name_zip": "mei_kovacs_8020", "get_user_details": json.dumps(USER),
           "get_order_details": json.dumps(ORDER),
           "return_delivered_order_items": json.dumps({**ORDER, "status": "return requested"})}
GOLD = (
    {"name": "find_user_id_by_name_zip",
     "arguments": {"first_name": "Mei", "last_name": "Kovacs", "zip": "28236"}},
    {"name": "get_user_details", "arguments": {"user_id": "mei_kovacs_8020"}},
    {"name": "get_order_details", "arguments": {"order_id": "#W6390527"}},
    {"name": "return_delivered_order_items",
     "arguments": {"order_id": "#W6390527", "item_ids": ["8538875209"],
                   "payment_method_id": "paypal_7644869", "notify": True,
                   "reason": "defective"}},
)
SPECS = [{"type": "function", "function": {
    "name": "return_delivered_order_items", "description": "Return items of a delivered order.",
    "parameters": {"type": "object", "properties": {
        "order_id": {"type": "string"}, "reason": {"type": "string",
                                                   "enum": ["defective", "unwanted"]}}}}}]


def _calls():
    return [TracedCall(g["name"], g["arguments"], RESULTS[g["name"]]) for g in GOLD]


def test_each_value_is_traced_to_the_nearest_result_the_customer_or_a_constant():
    got = argument_sources(_calls(), PROMPT, enums=enum_values(SPECS))
    assert got[0] == {k: (ArgSource("customer"),) for k in ("first_name", "last_name", "zip")}
    assert got[1] == {"user_id": (ArgSource("step", step=1, path=""),)}  # a text result
    # in the customer's words too, but the result is where a procedure can take it from
    assert got[2] == {"order_id": (ArgSource("step", step=2, path="orders[]"),)}
    ret = got[3]
    assert ret["order_id"] == (ArgSource("step", step=3, path="order_id"),)  # the nearest
    assert ret["item_ids"] == (ArgSource("step", step=3, path="items[].item_id"),)
    assert ret["payment_method_id"] == (ArgSource("step", step=2, path="payment_methods.<key>"),)
    assert ret["notify"] == (ArgSource("constant", value=True),)
    assert ret["reason"] == (ArgSource("constant", value="defective"),)  # the schema's enum
    assert source_counts(got) == {"step": 5, "customer": 3, "constant": 2, "unknown": 0}


def test_results_cut_as_gaia_stores_them_keep_the_paths_before_the_cut():
    # GAIA keeps 500 characters of a result: the order's id and its first item lie before
    # the cut and keep their fields; the second item's id is cut through, so it is found only
    # in the text (the step, no path); a value past the cut is not in the step at all.
    order = {"order_id": "#W6390527", "notes": "n" * 380,
             "items": [{"item_id": "8538875209"}, {"item_id": "1111111111"}],
             "tail": "t" * 600}
    cut = json.dumps(order)[:500]
    assert cut.count("1111111111") == 1 and not cut.endswith("1111111111\"}")
    cut = cut[:cut.index("1111111111") + 10]  # the cut falls inside the second item
    calls = [TracedCall("get_order_details", {"order_id": "#W6390527"}, cut),
             TracedCall("return_delivered_order_items",
                        {"order_id": "#W6390527", "item_ids": ["8538875209", "1111111111"],
                         "reason": "t" * 30}, "")]
    got = argument_sources(calls, "return order #W6390527")[1]
    assert got["order_id"] == (ArgSource("step", step=1, path="order_id"),)
    assert got["item_ids"] == (ArgSource("step", step=1, path="items[].item_id"),
                               ArgSource("step", step=1, path=""))
    assert got["reason"] == (ArgSource("unknown"),)  # "t" * 600 lies past the cut
    assert describe_sources(got).startswith("order_id = the order_id in step 1's result; "
                                            "item_ids = the items[].item_id in step 1's "
                                            "result and step 1's result")


def test_a_whole_result_is_searched_by_its_fields_not_as_text():
    # "economy" is inside a key of a result that parses whole: not a leaf, so the customer's
    # words are its source (only a text result, or a cut one's broken tail, is read as text)
    calls = [TracedCall("prices", {}, json.dumps({"prices": {"basic_economy": 3}})),
             TracedCall("book", {"cabin": "economy"}, "")]
    assert argument_sources(calls, "one economy seat")[1]["cabin"] == (ArgSource("customer"),)


def test_a_path_through_a_field_named_after_a_passed_value_says_the_step_alone():
    # the baggage count is found under available_seats.economy, and the run books economy:
    # the path would carry the customer's cabin into the procedure
    seats = {"flights": [{"available_seats": {"economy": 2, "business": 5}}]}
    calls = [TracedCall("search", {}, json.dumps(seats)),
             TracedCall("book", {"cabin": "economy", "total_baggages": 2}, "")]
    got = argument_sources(calls, "economy please")[1]
    assert got["total_baggages"] == (ArgSource("step", step=1, path=""),)
    assert "economy" not in describe_sources({"total_baggages": got["total_baggages"]})


def test_a_value_found_nowhere_is_unknown_and_short_values_match_only_whole():
    calls = [TracedCall("a", {}, json.dumps({"qty": 12, "code": "AB12"})),
             TracedCall("b", {"qty": 1, "code": "AB", "note": "secret-ish"}, "")]
    (_, got) = argument_sources(calls, "I need 1 of them")
    # 1 is no leaf of step 1 (12 is), and "AB" is not a whole token in "AB12"
    assert got["qty"] == (ArgSource("customer"),)
    assert got["code"] == (ArgSource("unknown"),) == got["note"]
    assert "secret" not in describe_sources(got) and "AB" not in describe_sources(got)


def test_sources_in_words_name_no_value():
    got = argument_sources(_calls(), PROMPT, enums=enum_values(SPECS))
    assert describe_sources(got[3]) == (
        "order_id = the order_id in step 3's result; item_ids = the items[].item_id in "
        "step 3's result; payment_method_id = the payment_methods.<key> in step 2's result; "
        'notify = true; reason = "defective"')
    assert describe_sources(got[0]) == ("first_name from the customer; last_name from the "
                                        "customer; zip from the customer")


@dataclass
class FakeRetailWorld:
    """FAKE world: one retail task whose calls answer from RESULTS."""

    executed: list[str] = field(default_factory=list)

    def tool_specs(self):
        return SPECS

    def task(self, task_id):
        return WorldTask(task_id, "return an item", PROMPT, task_id)

    def start(self, task_id):
        world = self

        class Episode:
            def execute(self, name, arguments):
                world.executed.append(name)
                return CallOutcome(RESULTS[name], True)

        return Episode()

    def gold_actions(self, task_id):
        return [(g["name"], g["arguments"]) for g in GOLD]


def test_oracle_dataflow_recalls_the_gold_calls_with_sources_and_no_user_value(tmp_path):
    world = FakeRetailWorld()
    labels = {"p": SessionLabel("p", "tau2", "5", 4, actions=GOLD)}
    gold = GoldSource(labels, {"p": "5"}, world, skills_dir=tmp_path)
    proc = gold.recall("oracle-dataflow", "p")
    assert world.executed == [g["name"] for g in GOLD]  # executed once, in a fresh episode
    steps = [x for x in proc.markdown_body.splitlines() if x[:1].isdigit()]
    assert steps[0].startswith("1. Call find_user_id_by_name_zip with first_name from the "
                               "customer;")
    assert steps[1].startswith("2. Call get_user_details with user_id = step 1's result:")
    text = inject([skill_from_procedure(proc)], Thresholds(max_recall_body_chars=5000))
    for value in ("Mei", "Kovacs", "28236", "mei_kovacs", "W6390527", "8538875209",
                  "paypal_7644869"):
        assert value not in text
    assert (tmp_path / "oracle-dataflow" / "p").is_dir()  # through the #691 path
    assert gold.dataflow_counts() == {"step": 5, "customer": 3, "constant": 2, "unknown": 0,
                                      "from_history": 0, "from_gold": 1}
    assert gold.recall("oracle-dataflow", "p") is proc and len(world.executed) == 4


def test_oracle_dataflow_without_a_world_is_skipped_with_its_reason():
    labels = {"p": SessionLabel("p", "tau2", "5", 4, actions=GOLD)}
    gold = GoldSource(labels, {"p": "5"}, None)
    with pytest.raises(ArmSkipped, match="no world to execute the calls in"):
        gold.recall("oracle-dataflow", "p")
    assert "no world" in gold.skipped["p"]


def test_a_list_whose_values_come_from_several_results_names_the_path_once():
    calls = [TracedCall("a", {}, json.dumps({"variants": {"111": {}}})),
             TracedCall("b", {}, json.dumps({"variants": {"222": {}}})),
             TracedCall("c", {"ids": ["111", "222"]}, "")]
    got = argument_sources(calls, "")[2]
    assert got["ids"] == (ArgSource("step", step=1, path="variants.<key>"),
                          ArgSource("step", step=2, path="variants.<key>"))
    assert describe_sources(got) == "ids = the variants.<key> in steps 1 and 2' results"


def test_oracle_dataflow_traces_a_successful_history_run_where_the_task_has_one(tmp_path):
    # tau2's gold actions often hold only the write; the reads that produce its values are
    # in a successful run of the task, so that run is traced where the history has one
    from corpus_kinds import tiny_corpus

    from skillsynth.evaluation.point.gold_source import successful_runs
    from skillsynth.store import MemoryStore

    db = tiny_corpus(tmp_path)
    with MemoryStore.open(db) as store:
        sessions = sorted({c.session_id for c in store.tool_calls()})
    labels = {s: SessionLabel(s, "test", "5", i, success=i != 2)
              for i, s in enumerate(sessions[:3], 1)}
    runs = successful_runs(db, labels, labels)
    with MemoryStore.open(db, read_only=True) as store:
        first = [c.tool_name for c in store.tool_calls(sessions[0])]
    assert list(runs) == ["5"] and [n for n, _ in runs["5"]] == first  # attempt 1 succeeded
    world = FakeRetailWorld()
    write_only = {"p": SessionLabel("p", "tau2", "5", 4, actions=GOLD[3:])}
    history = [(g["name"], g["arguments"]) for g in GOLD]
    gold = GoldSource(write_only, {"p": "5"}, world, runs={"5": history})
    proc = gold.recall("oracle-dataflow", "p")
    assert world.executed == [g["name"] for g in GOLD]
    assert "4. Call return_delivered_order_items with order_id = the order_id in step 3's" \
        in proc.markdown_body
    assert gold.dataflow_counts()["from_history"] == 1


def test_oracle_run_recalls_the_history_run_with_its_values_reads_first():
    """tau2's gold often lists only the write, so oracle-args puts it first; oracle-run is the
    same task's successful run as recorded: the same values at the run's own depth."""
    write_only = {"p": SessionLabel("p", "tau2", "5", 4, actions=GOLD[3:])}
    history = [(g["name"], g["arguments"]) for g in GOLD]
    gold = GoldSource(write_only, {"p": "5"}, None, runs={"5": history})  # nothing executed
    steps = [x for x in gold.recall("oracle-run", "p").markdown_body.splitlines()
             if x[:1].isdigit()]
    assert [x.split()[2].rstrip(":") for x in steps] == [g["name"] for g in GOLD]
    assert '"zip": "28236"' in steps[0] and '"item_ids": ["8538875209"]' in steps[3]
    args = [x for x in gold.recall("oracle-args", "p").markdown_body.splitlines()
            if x[:1].isdigit()]
    assert len(args) == 1 and args[0].startswith("1. Call return_delivered_order_items")
    no_run = GoldSource(write_only, {"p": "5"}, None)
    with pytest.raises(ArmSkipped, match="no successful history run of its task"):
        no_run.recall("oracle-run", "p")
