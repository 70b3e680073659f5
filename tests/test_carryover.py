"""What a values procedure can carry to another task of its kind or customer (hand-worked)."""

from __future__ import annotations

import pytest

from skillsynth.errors import EvaluationError
from skillsynth.evaluation.point.carryover import group_of, value_carryover, write_values
from skillsynth.evaluation.point.controls import GoldAction as G


def _ret(user, order, items, reason="defective"):
    return (G("get_user_details", {"user_id": user}),
            G("return_delivered_order_items",
              {"order_id": order, "item_ids": items, "reason": reason, "user_id": user}))


GOLD = {
    # two returns by one customer: the same user and reason, other order and items
    "1": _ret("u1", "#W1", ["i1", "i2"]),
    "2": _ret("u1", "#W2", ["i3"]),
    # a return by another customer with another reason
    "3": _ret("u2", "#W3", ["i4"], reason="unwanted"),
    # a cancel: its own kind, and u2's second task
    "4": (G("cancel_pending_order", {"order_id": "#W9", "user_id": "u2"}),),
    # reads only: no write value, in no group
    "5": (G("get_user_details", {"user_id": "u1"}),),
}


def test_write_values_count_a_lists_elements_and_no_read():
    assert write_values(GOLD["1"]) == {
        ("return_delivered_order_items", "order_id", '"#W1"'),
        ("return_delivered_order_items", "item_ids", '"i1"'),
        ("return_delivered_order_items", "item_ids", '"i2"'),
        ("return_delivered_order_items", "reason", '"defective"'),
        ("return_delivered_order_items", "user_id", '"u1"')}
    assert write_values(GOLD["5"]) == frozenset()
    assert group_of(GOLD["4"], "kind") == "cancel_pending_order"
    assert group_of(GOLD["5"], "kind") is None and group_of(GOLD["3"], "user") == "u2"
    with pytest.raises(EvaluationError, match="kind, user"):
        group_of(GOLD["1"], "order")  # type: ignore[arg-type]


def test_carryover_by_kind_and_by_user_is_the_hand_worked_mean_over_ordered_pairs():
    kind = value_carryover(GOLD, "kind", n_boot=200)
    # returns 1, 2, 3 (the cancel is alone): 6 ordered pairs, share of the probe's values
    # 1<-2: reason, user of 5 = 2/5; 1<-3: 0/5; 2<-1: reason, user of 4 = 2/4; 2<-3: 0/4;
    # 3<-1: 0/4; 3<-2: 0/4
    assert (kind.tasks, kind.groups, kind.pairs, kind.whole) == (4, 1, 6, 0)
    assert kind.mean == pytest.approx((2 / 5 + 2 / 4) / 6)
    # one group: every resample is that group, so the interval is the point
    assert kind.interval == pytest.approx((kind.mean, kind.mean))
    # shared values are not a matched action: every return names its own order
    assert kind.matched == 0.0 and kind.matched_interval == (0.0, 0.0)
    user = value_carryover(GOLD, "user", n_boot=200)
    # u1: 1 and 2 (2/5, 2/4); u2: 3 and 4 share no value (the user_id of another tool)
    assert (user.groups, user.pairs) == (2, 4)
    assert user.mean == pytest.approx((2 / 5 + 2 / 4) / 4)
    lo, hi = user.interval
    assert lo == pytest.approx(0.0) and hi == pytest.approx((2 / 5 + 2 / 4) / 2)
    assert "4 ordered pairs in 2 groups of 4 tasks" in user.line()


def test_a_task_repeated_verbatim_carries_every_value_and_no_pair_is_said_so():
    same = value_carryover({"a": GOLD["1"], "b": GOLD["1"]}, "kind", n_boot=50)
    assert (same.mean, same.whole, same.matched) == (1.0, 2, 1.0)
    # tau2 compares only an action's compare_args: the same order with another reason
    # matches where the reason is not compared
    keyed = (G("return_delivered_order_items", {"order_id": "#W1", "reason": "unwanted"},
               compare_args=("order_id",)),)
    loose = value_carryover({"a": keyed, "b": GOLD["1"]}, "kind", n_boot=50)
    assert loose.matched == pytest.approx((1 + 0) / 2)  # a <- b matches; b <- a does not
    alone = value_carryover({"a": GOLD["1"]}, "kind")
    assert alone.mean is None and "no two tasks share a group" in alone.line()
