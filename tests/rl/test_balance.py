"""Balanced task draws (rl.balance): each kind of training task as often as any other, in the train
dataset, the difficulty filter's replacements and dynamic sampling's refills; uniform draws unchanged."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rl.balance import MIN_KIND, draw_weights, kind_weights, task_kind, weighted_sample
from rl.config import TrainConfig
from rl.difficulty import DifficultyFilter
from synth.task_models import Action, Rubric, Task, UserScenario


def _read(tid: str, device: str, value: str = "heat") -> Task:
    """A read_report task of the home worlds: read one device's status, report one value."""
    return Task(id=tid, domain="home_devices", seed=0, instruction=f'Tell me the "mode" of {device}.',
                persona="p", user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="t"),
                gold_actions=[Action(name="get_home_device_status", arguments={"device_id": device})],
                expected_outputs=[value], rubric=Rubric(), tools=["get_home_device_status"], difficulty="easy")


# 40 light reads, 10 thermostat reads, 2 lock reads: the imbalance of one demo seed's read_report training tasks
TASKS = ([_read(f"lt{i}", f"LT-{i % 6 + 1}") for i in range(40)] + [_read(f"th{i}", "TH-1") for i in range(10)]
         + [_read(f"lk{i}", "LK-1", "locked") for i in range(2)])


def _kind(tid: str) -> str:
    return tid[:2]


def test_a_kind_is_the_family_and_the_record_sort_not_the_record():
    assert task_kind(TASKS[0]) == ("read_report", "LT-#")
    assert task_kind(TASKS[0]) == task_kind(TASKS[1])  # LT-1 and LT-2: the same kind
    assert task_kind(TASKS[40]) == ("read_report", "TH-#")
    nameless = TASKS[0].model_copy(update={"gold_actions": [Action(name="list_home_devices")]})
    assert task_kind(nameless) == ("read_report", "list_home_devices")


def test_every_kind_weighs_the_same():
    w = kind_weights(TASKS)
    per_kind = Counter()
    for tid, x in w.items():
        per_kind[_kind(tid)] += x
    # a kind of MIN_KIND tasks or more weighs 1; the two lock reads weigh 2 / MIN_KIND
    assert per_kind == pytest.approx({"lt": 1.0, "th": 1.0, "lk": 2 / MIN_KIND})
    assert draw_weights(TASKS, "none") is None
    with pytest.raises(ValueError, match="none or kind"):
        draw_weights(TASKS, "even")


def test_weighted_sample_without_weights_is_the_uniform_draw_it_replaced():
    pool = [t.id for t in TASKS]
    assert weighted_sample(pool, None, 5, random.Random(3)) == random.Random(3).sample(pool, 5)


def test_weighted_sample_is_distinct_and_favours_the_rare_kind():
    pool, w = [t.id for t in TASKS], kind_weights(TASKS)
    picks = [weighted_sample(pool, w, 4, random.Random(s)) for s in range(400)]
    assert all(len(set(p)) == 4 for p in picks)
    assert weighted_sample(pool[:2], w, 5, random.Random(0)) in (pool[:2], pool[1::-1])
    th = sum(_kind(t) == "th" for p in picks for t in p) / (4 * 400)
    assert th > 0.3  # uniform draws give them 10 / 52 = 19%


def _dataset_kinds(balance: str) -> Counter:
    from rl.rollout import MultiTurnRollout

    ro = MultiTurnRollout(TASKS, tokenizer=None, balance=balance)  # the dataset needs no sandbox
    return Counter(_kind(row["task_id"]) for row in ro.dataset(52 * 20, seed=1))


def test_the_train_dataset_draws_each_kind_equally_with_balance_kind():
    pytest.importorskip("datasets")
    uniform, balanced = _dataset_kinds("none"), _dataset_kinds("kind")
    assert uniform == {"lt": 800, "th": 200, "lk": 40}  # every task once a round
    assert balanced["th"] / balanced["lt"] == pytest.approx(1.0, abs=0.25)


def test_the_rollout_refuses_an_unknown_balance():
    from rl.rollout import MultiTurnRollout

    with pytest.raises(ValueError, match="balance must be none or kind"):
        MultiTurnRollout(TASKS, tokenizer=None, balance="even")


def test_the_difficulty_filter_replaces_with_the_rare_kind_first():
    ids, w = [t.id for t in TASKS], kind_weights(TASKS)
    counts = {}
    for weights in (None, w):
        th = 0
        for step in range(200):
            f = DifficultyFilter(ids, window=1, readmit=0.0, seed=step, weights=weights)
            f.record([("lt0", True)])
            th += _kind(f.select(["lt0"], step=step).tasks[0]) == "th"
        counts["kind" if weights else "none"] = th
    assert counts["none"] < 55 < 80 < counts["kind"]  # 10 of 51 replacements vs about 45%


def test_the_config_names_the_two_ways_to_draw():
    from pydantic import ValidationError

    base = {"model": {"name_or_path": "m"}}
    assert TrainConfig.model_validate(base).data.balance == "none"
    assert TrainConfig.model_validate({**base, "data": {"balance": "kind"}}).data.balance == "kind"
    with pytest.raises(ValidationError, match="balance"):
        TrainConfig.model_validate({**base, "data": {"balance": "even"}})
