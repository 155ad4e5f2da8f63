"""Issue 23 #1: the three multi-step task families are made by the synthesiser, have their shape,
replay like every task, and split into train and held-out disjoint by entity."""

from __future__ import annotations

import json

import anyio
import pytest

from synth.task_families import (MULTISTEP, entities, family_of, split_by_entity, synthesize_family_tasks)
from synth.tasks import Action, Rubric, Task, UserScenario, replay_tasks
from synth.task_values import _dumps
from synth.usersim import ScriptedUser, user_only_info


PROGRESS: list[tuple[str, int, int]] = []


@pytest.fixture(scope="module")
def made() -> dict[str, list[Task]]:
    return synthesize_family_tasks({f: 10 for f in MULTISTEP}, seed=3, domains=["home_devices"], backend="local",
                                   sandboxes=2, progress=lambda phase, done, total: PROGRESS.append((phase, done, total)))


def test_progress_names_the_family_of_each_batch(made: dict[str, list[Task]]) -> None:
    """Issue 33 #4: the demo's task-synthesis bars, one per family and phase."""
    assert {p for p, _, _ in PROGRESS} == {f"{f} {phase}" for f in MULTISTEP for phase in ("generate", "replay")}
    assert all(0 < done <= total for _, done, total in PROGRESS)


def test_each_family_is_made_with_its_shape_and_replays(made: dict[str, list[Task]]) -> None:
    assert set(made) == set(MULTISTEP)
    tasks = [t for f in MULTISTEP for t in made[f]]
    assert all(len(made[f]) == 10 for f in MULTISTEP), {f: len(v) for f, v in made.items()}
    assert all(family_of(t) == f for f in MULTISTEP for t in made[f])
    assert len({t.id for t in tasks}) == len(tasks)
    results = replay_tasks(tasks, backend="local", sandboxes=2)
    for t, r in zip(tasks, results, strict=True):
        assert r.ok and r.final_state_hash == t.final_state_hash, (t.id, r.reason)
        outputs = [_dumps(o) for o in r.outputs]
        if family_of(t) == "lookup_act":
            # a write's argument the user never says: only an earlier call's output holds it
            hidden = [v for a in t.gold_actions[1:] for v in a.arguments.values()
                      if isinstance(v, str) and v not in t.instruction]
            assert hidden and all(any(v in o for o in outputs[:-1]) for v in hidden), t
        elif family_of(t) == "read_report":
            # the answer is a value of a tool's output, not of the request
            assert t.expected_outputs and all(any(v in o for o in outputs) for v in t.expected_outputs)
            assert not any(v in t.instruction for v in t.expected_outputs)


def test_ask_user_tasks_need_the_detail_the_user_gives_only_when_asked(made: dict[str, list[Task]]) -> None:
    for t in made["ask_user"]:
        hidden = user_only_info(t)
        assert hidden, t.id
        user = ScriptedUser(max_turns=5)
        opening = anyio.run(user.first_message, t)
        gold_values = json.dumps([a.arguments for a in t.gold_actions])
        for key, value in hidden.items():
            assert value not in opening and value in gold_values  # the task cannot be done without it
            convo = [{"role": "user", "content": opening}]
            silent = anyio.run(user.reply, t, convo + [{"role": "assistant", "content": "Done."}])
            assert value not in silent
            asked = anyio.run(user.reply, t, convo + [{"role": "assistant", "content": f"What is the {key}?"}])
            assert value in asked, (t.id, key, asked)


def test_held_out_tasks_name_no_entity_of_their_familys_training_tasks(made: dict[str, list[Task]]) -> None:
    train, held = split_by_entity(made, held_per_family=3, seed=0)
    for f in MULTISTEP:
        h = [t for t in held if family_of(t) == f]
        tr = [t for t in train if family_of(t) == f]
        assert 1 <= len(h) <= 3 and tr, (f, len(h), len(tr))
        assert not set().union(*map(entities, h)) & set().union(*map(entities, tr)), f
    assert not {t.id for t in train} & {t.id for t in held}
    assert split_by_entity(made, held_per_family=3, seed=0) == (train, held)  # seeded


def _task(actions: list[tuple[str, dict]], instruction: str, outputs: list[str] = (), needs: bool = False,
          known: dict | None = None) -> Task:
    return Task(id="x", domain="home_devices", seed=0, instruction=instruction, persona="p",
                user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="i",
                                           known_info=known or {}),
                gold_actions=[Action(name=n, arguments=a) for n, a in actions], expected_outputs=list(outputs),
                rubric=Rubric(), tools=[n for n, _ in actions], difficulty="easy", needs_user_info=needs)


def test_family_of_tells_the_shapes_from_single_actions() -> None:
    lookup = [("list_home_devices", {}), ("set_door_lock", {"device_id": "LK-3", "locked": True})]
    assert family_of(_task(lookup, "Lock the door (for the device whose name is Garage door).")) == "lookup_act"
    assert family_of(_task(lookup, "Lock the door (device id: LK-3).")) == "list_home_devices"  # said: no look-up
    status = [("get_home_device_status", {"device_id": "LT-2"})]
    assert family_of(_task(status, "Show LT-2 and tell me the room.", ["kitchen"])) == "read_report"
    listing = [("list_home_scenes", {})]
    assert family_of(_task(listing, "List scenes.", ["SC-1", "SC-2", "LT-1"])) == "list_home_scenes"
    ask = _task([("delete_home_scene", {"scene_id": "SC-2"})], "Delete a scene.", needs=True,
                known={"scene id": "SC-2"})
    assert family_of(ask) == "ask_user"
    assert family_of(ask.model_copy(update={"needs_user_info": False})) == "delete_home_scene"
