"""Issue 28: look-up priming traces that narrow the listing by what the user said (synth.narrow_reads)."""

from __future__ import annotations

import json

import anyio
import pytest

from sandboxes import SandboxConfig, SandboxPool
from synth.behaviours import agenerate_traces
from synth.narrow_reads import anarrow_lookups, narrowing_filters, records_of
from synth.task_families import family_of, synthesize_family_tasks
from synth.tasks import Task, replay_tasks
from toolzoo.domains import load_domain

LIST = load_domain("home_devices").tool("list_home_devices").parameters
HALLWAY = {"device_id": "LT-6", "type": "light", "name": "Hallway light", "room": "hallway", "online": True}


def test_filters_are_the_records_fields_the_user_says_in_the_users_spelling() -> None:
    said = "Please switch a light on (for the device whose name is Hallway light)."
    assert narrowing_filters(LIST, {}, HALLWAY, said) == {"room": "Hallway", "device_type": "light"}
    # a filter the gold call already sets stays as it is; a value the user never says is no filter
    assert narrowing_filters(LIST, {"device_type": "light"}, HALLWAY, said) == {"room": "Hallway"}
    assert narrowing_filters(LIST, {}, HALLWAY, "Please switch the porch lamp on.") == {}
    # whole words only: "hallways" does not say "hallway"
    assert narrowing_filters(LIST, {}, {**HALLWAY, "type": "lock"}, "both hallways") == {}


def test_an_enum_filter_takes_the_records_own_value_and_only_one_the_enum_has() -> None:
    rec = {**HALLWAY, "type": "Light"}
    assert narrowing_filters(LIST, {}, rec, "a LIGHT in the Hallway") == {"room": "Hallway"}


def test_records_of_a_listing() -> None:
    assert records_of({"devices": [HALLWAY, 3]}) == [HALLWAY]
    assert records_of([HALLWAY]) == [HALLWAY]
    assert records_of({"count": 1}) == [] and records_of("text") == []


@pytest.fixture(scope="module")
def lookups() -> list[Task]:
    made = synthesize_family_tasks({"lookup_act": 40}, seed=5, domains=["home_devices"], backend="local", sandboxes=2)
    return made["lookup_act"]


def test_narrowed_lookups_list_fewer_records_and_replay_to_the_same_state(lookups: list[Task]) -> None:
    async def go() -> tuple[list[Task], dict[str, int], object]:
        async with SandboxPool(SandboxConfig(backend="local"), size=2) as pool:
            out, why = await anarrow_lookups(lookups, pool)
            traces = await agenerate_traces(lookups, "none", pool=pool, narrow_reads=True, seed=0)
            return out, why, traces

    out, why, traces = anyio.run(go)
    changed = [(a, b) for a, b in zip(lookups, out, strict=True) if a.gold_actions != b.gold_actions]
    assert why["narrowed"] == len(changed) > 0, why
    assert sum(why.values()) == len(lookups)
    for a, b in changed:
        read, new = a.gold_actions[0], b.gold_actions[0]
        assert new.name == read.name and set(read.arguments) < set(new.arguments)
        assert b.gold_actions[1:] == a.gold_actions[1:] and family_of(b) == "lookup_act"
    results = replay_tasks([b for _, b in changed], backend="local", sandboxes=2)
    for (a, b), r in zip(changed, results, strict=True):
        assert r.ok and r.final_state_hash == a.final_state_hash, (b.id, r.reason)
        shown = json.dumps(r.outputs[0])
        assert b.gold_actions[1].arguments["device_id"] in shown
    # the traces call the narrowed read, reach the gold state, and say how many were narrowed
    assert traces.narrowed == why and traces.summary()["narrowed"] == why
    by_id = {t.task_id: t for t in traces.trajectories}
    for _, b in changed:
        t = by_id[b.id]
        first = next(m for m in t.messages if m.get("tool_calls"))["tool_calls"][0]["function"]
        assert json.loads(first["arguments"]) == b.gold_actions[0].arguments
        assert t.reached_expected_state
