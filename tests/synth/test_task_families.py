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


def test_quote_fields_asks_by_the_output_keys_and_quote_values_reaches_the_families() -> None:
    """Issue 28: `quote_fields` names each field to report by the key its tool output writes it under
    (`tell me the "name" and the "type"`), so a keyed answer repeats the question's tokens; `quote_values`
    quotes string values in the families' requests as in single-action ones. Nothing else changes."""
    import re

    from synth.behaviours import generate_traces, keyed_value
    from synth.task_values import humanize

    kw = dict(seed=5, domains=["home_devices"], backend="local", sandboxes=2)
    want = {"read_report": 5, "lookup_act": 3}
    plain = synthesize_family_tasks(want, **kw)
    quoted = synthesize_family_tasks(want, quote_fields=True, quote_values=True, **kw)
    n_fields = n_values = 0
    for family in want:
        assert [t.gold_actions for t in plain[family]] == [t.gold_actions for t in quoted[family]]
        assert [t.expected_outputs for t in plain[family]] == [t.expected_outputs for t in quoted[family]]
        for p, q in zip(plain[family], quoted[family], strict=True):
            values = [v for a in q.gold_actions for v in a.arguments.values() if isinstance(v, str)
                      and f'"{v}"' in q.instruction]
            n_values += len(values)
            ask = re.split(r"(?<=[.?!]) ", q.instruction)[-1] if q.expected_outputs else ""
            keys = re.findall(r'"([^"]+)"', ask)
            n_fields += len(keys)
            back = q.instruction
            for v in values:
                back = back.replace(f'"{v}"', v)
            for k in keys:
                back = back.replace(f'"{k}"', humanize(k))
            assert back == p.instruction
    assert n_values > 0 and n_fields > 0
    # each quoted field is the key the gold episode's tool output holds the reported value under
    tasks = [t for t in quoted["read_report"] if t.expected_outputs]
    for t, traj in zip(tasks, generate_traces(tasks, "none", backend="local"), strict=True):
        keys = re.findall(r'"([^"]+)"', re.split(r"(?<=[.?!]) ", t.instruction)[-1])
        said = [keyed_value(v, traj.messages) for v in t.expected_outputs]
        assert [s.split('": ', 1)[0].strip('"') for s in said] == keys, (t.instruction, said)


def test_domain_seeds_sets_how_many_worlds_the_tasks_come_from() -> None:
    kw = dict(seed=4, domains=["home_devices"], backend="local", sandboxes=2)
    one = synthesize_family_tasks({"read_report": 4}, domain_seeds=1, **kw)["read_report"]
    many = synthesize_family_tasks({"read_report": 8}, domain_seeds=64, **kw)["read_report"]
    assert one and {t.seed for t in one} == {0}
    assert many and all(0 <= t.seed < 64 for t in many) and len({t.seed for t in many}) > 1
