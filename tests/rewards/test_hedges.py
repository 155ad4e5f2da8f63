"""A hedge tells nothing: an answer that gives one key several values, one of them not expected, does not meet the
communication check (rewards.mentions.without_hedges; bench/results/reader_gpu.md section 30: after Dr. GRPO, a
third of one seed's solved read_report episodes answered `"room": "kitchen", ..., "room": "porch", "room": "hallway"`)."""

from __future__ import annotations

import pytest

from rewards.mentions import without_hedges
from rewards.verifiable import CommunicationReward
from synth.episode import Trajectory
from synth.tasks import Action, Rubric, Task, UserScenario

SPRAY = 'All done. "room": "kitchen", "type": "light", "room": "porch", "name": "Office light", "room": "hallway"'


def test_a_key_given_an_unexpected_value_beside_the_expected_one_is_a_hedge():
    text, keys = without_hedges(SPRAY, ["light", "porch"])
    assert keys == ["room"] and "porch" not in text and '"type": "light"' in text and '"name": "Office light"' in text
    # one value per key, however wrong: an answer, not a hedge
    assert without_hedges('All done. "room": "kitchen", "type": "light"', ["porch"]) == (
        'All done. "room": "kitchen", "type": "light"', [])
    # the same value twice is not two values (case and spacing as normalize compares them)
    assert without_hedges('"room": "Porch", "room": "porch"', ["porch"])[1] == []
    # numbers too
    assert without_hedges('"target_c": 21.5, "target_c": 19', ["21.5"])[1] == ["target_c"]


def test_a_list_answer_of_expected_values_is_not_a_hedge():
    listed = 'All done. "scene_id": "SC-1", "scene_id": "SC-2", "device_id": "LT-1"'
    assert without_hedges(listed, ["SC-1", "SC-2", "LT-1"]) == (listed, [])
    # one more than asked for is: which of them did the user want?
    assert without_hedges(listed, ["SC-2", "LT-1"])[1] == ["scene_id"]


def _task(outputs: list[str]) -> Task:
    return Task(
        id="hd-read", domain="home_devices", seed=0,
        instruction='Show device "LT-2" and tell me the "type" and the "room".', persona="Uma.",
        user_scenario=UserScenario(persona="Uma.", reason_for_call="A device.", task_instructions="-"),
        gold_actions=[Action(name="get_home_device_status", arguments={"device_id": "LT-2"})],
        expected_outputs=outputs, rubric=Rubric(success_criteria=["tells the type and room"]),
        tools=["get_home_device_status"], difficulty="easy")


def _said(*texts: str) -> Trajectory:
    return Trajectory(task_id="hd-read", domain="home_devices", termination="user_stop",
                      messages=[{"role": "user", "content": "hi"}, *({"role": "assistant", "content": t} for t in texts)])


@pytest.mark.anyio
async def test_the_communication_check_does_not_credit_a_hedge():
    task = _task(["light", "porch"])
    hedged = await CommunicationReward().score(task, _said(SPRAY))
    assert hedged.score == 0.0 and hedged.details["missing"] == ["porch"] and hedged.details["hedged_keys"] == ["room"]
    assert "'room' more than one value" in hedged.reason
    # tau-bench's rule, kept behind the flag, credits it
    assert (await CommunicationReward(hedges=True).score(task, _said(SPRAY))).score == 1.0
    # the honest answer, and a correction in a later message (backtracking), are credited
    assert (await CommunicationReward().score(task, _said('All done. "type": "light", "room": "porch"'))).score == 1.0
    fixed = _said('"room": "kitchen", "type": "light"', 'Sorry, I misread it: "room": "porch"')
    assert (await CommunicationReward().score(task, fixed)).score == 1.0


def test_the_rescore_bench_finds_the_hedged_solves_and_reproduces_the_recorded_check(tmp_path):
    import json

    import anyio

    from tests.bench_module import load_bench

    rescore = load_bench("hedge_rescore").rescore

    task = _task(["light", "porch"])
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    honest, spray = 'All done. "type": "light", "room": "porch"', SPRAY
    rows = []
    for text in (honest, spray, spray, honest):  # three sampled episodes, then the greedy one
        row = json.loads(_said(text).model_dump_json())
        row["components"] = {"world_state": None, "communication": 1.0}  # as tau-bench's rule recorded them
        rows.append(row)
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = anyio.run(rescore, tmp_path, tmp_path / "tasks")
    assert out["tau_reproduces_recorded"] == 4 and out["guard_reproduces_recorded"] == 2 and out["hedged_episodes"] == 2
    assert out["success"]["sampled:read_report"] == {"episodes": 3, "tau": 100.0, "guard": 33.3}
    assert out["success"]["greedy:multistep"] == {"episodes": 1, "tau": 100.0, "guard": 100.0}


def test_the_rescore_bench_says_when_the_names_do_not_match_the_pairs(tmp_path, monkeypatch, capsys):
    import sys

    from tests.bench_module import load_bench

    bench = load_bench("hedge_rescore")
    monkeypatch.setattr(sys, "argv", ["hedge_rescore.py", str(tmp_path), str(tmp_path), "--names", "a,b"])
    assert bench.main() == 2
    assert "2 names for 1" in capsys.readouterr().err
