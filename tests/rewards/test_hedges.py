"""A hedge tells nothing: an answer that gives one key several values, one of them not expected, does not meet the
communication check (rewards.mentions.without_hedges; bench/results/reader_gpu.md section 30: after Dr. GRPO, a
third of one seed's solved read_report episodes answered `"room": "kitchen", ..., "room": "porch", "room": "hallway"`)."""

from __future__ import annotations

import pytest

from rewards.mentions import told_between_reads, without_hedges
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
    # the honest answer is credited; a value changed in a later message with no new read in between is a guess
    # (the default scope), a correction when the scope is one message
    assert (await CommunicationReward().score(task, _said('All done. "type": "light", "room": "porch"'))).score == 1.0
    fixed = _said('"room": "kitchen", "type": "light"', 'Sorry, I misread it: "room": "porch"')
    assert (await CommunicationReward().score(task, fixed)).score == 0.0
    assert (await CommunicationReward(hedge_scope="message").score(task, fixed)).score == 1.0


def _turns(*steps: str | dict) -> Trajectory:
    """A conversation: a str is an assistant text followed by the user's nudge, a dict a tool result."""
    msgs: list[dict] = [{"role": "user", "content": "hi"}]
    for s in steps:
        if isinstance(s, dict):
            msgs += [{"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {
                "name": "get_home_device_status", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", **s}]
        else:
            msgs += [{"role": "assistant", "content": s}, {"role": "user", "content": "Please go ahead with my request."}]
    return Trajectory(task_id="hd-read", domain="home_devices", termination="user_stop", messages=msgs)


READ = {"content": '{"device_id": "LT-2", "type": "light", "room": "porch"}'}


def test_what_is_told_between_two_reads_is_one_answer():
    traj = _turns("Plan: read it.", READ, '"room": "kitchen"', '"room": "hallway"', READ, '"room": "porch"')
    assert told_between_reads(traj.messages) == ["Plan: read it.", '"room": "kitchen"\n"room": "hallway"', '"room": "porch"']
    assert told_between_reads(_turns(READ).messages) == []


@pytest.mark.anyio
async def test_guessing_a_value_a_turn_at_a_time_is_a_hedge():
    task = _task(["light", "porch"])
    read = CommunicationReward()
    # the scripted user nudges until every expected output is told: one guess a turn finds it
    guesses = _turns(READ, '"type": "light", "room": "kitchen"', '"room": "hallway"', '"room": "porch"')
    assert (await CommunicationReward(hedge_scope="message").score(task, guesses)).score == 1.0
    scored = await read.score(task, guesses)
    assert scored.score == 0.0 and scored.details["hedged_keys"] == ["room"] and scored.details["missing"] == ["porch"]
    # a correction after a new read is credited, and so is one answer however many turns it takes
    assert (await read.score(task, _turns(READ, '"room": "kitchen"', READ, '"type": "light", "room": "porch"'))).score == 1.0
    assert (await read.score(task, _turns(READ, '"type": "light"', '"room": "porch"'))).score == 1.0
    with pytest.raises(ValueError, match="hedge_scope"):
        CommunicationReward(hedge_scope="turn")  # type: ignore[arg-type]


def test_the_rescore_bench_finds_the_hedged_solves_and_reproduces_the_recorded_check(tmp_path):
    import json

    import anyio

    from tests.bench_module import load_bench

    rescore = load_bench("hedge_rescore").rescore

    task = _task(["light", "porch"])
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tasks.jsonl").write_text(task.model_dump_json() + "\n")
    honest, spray = _said('All done. "type": "light", "room": "porch"'), _said(SPRAY)
    by_turn = _turns('"type": "light", "room": "kitchen"', '"room": "porch"')  # a guess a turn, no read between
    rows = []
    for traj in (honest, spray, spray, by_turn, honest):  # four sampled episodes, then the greedy one
        row = json.loads(traj.model_dump_json())
        row["components"] = {"world_state": None, "communication": 1.0}  # as tau-bench's rule recorded them
        rows.append(row)
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = anyio.run(rescore, tmp_path, tmp_path / "tasks")
    assert (out["tau_reproduces_recorded"], out["guard_reproduces_recorded"], out["read_reproduces_recorded"]) == (5, 3, 2)
    assert out["hedged_episodes"] == 2 and out["hedged_episodes_read"] == 3
    assert out["success"]["sampled:read_report"] == {"episodes": 4, "tau": 100.0, "guard": 50.0, "read": 25.0}
    assert out["success"]["greedy:multistep"] == {"episodes": 1, "tau": 100.0, "guard": 100.0, "read": 100.0}


def test_the_rescore_bench_says_when_the_names_do_not_match_the_pairs(tmp_path, monkeypatch, capsys):
    import sys

    from tests.bench_module import load_bench

    bench = load_bench("hedge_rescore")
    monkeypatch.setattr(sys, "argv", ["hedge_rescore.py", str(tmp_path), str(tmp_path), "--names", "a,b"])
    assert bench.main() == 2
    assert "2 names for 1" in capsys.readouterr().err
