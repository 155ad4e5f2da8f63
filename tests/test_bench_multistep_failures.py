"""bench/multistep_failures.py: each failed multi-step episode sorted by the first step it got wrong (issue 28)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.bench_module import load_bench


def _bench():
    return load_bench("multistep_failures")


def _traj(calls: list[dict], revealed: int = 0, solved: bool = False, said: str = "") -> dict:
    return {"solved": solved, "tool_calls": calls, "stats": {"user": {"revealed": revealed}},
            "messages": [{"role": "assistant", "content": said}]}


LOOKUP = SimpleNamespace(
    gold_actions=[SimpleNamespace(name="list_home_devices", arguments={}),
                  SimpleNamespace(name="set_home_light", arguments={"device_id": "LT-2", "on": False})],
    expected_outputs=[])
READ = {"name": "list_home_devices", "arguments": {}, "output": [{"device_id": "LT-1"}, {"device_id": "LT-2"}]}


def test_ask_user_episodes_split_by_whether_the_user_was_asked() -> None:
    classify = _bench().classify
    call = {"name": "delete_home_scene", "arguments": {"scene_id": "SC-1"}}
    assert classify(None, "ask_user", _traj([call], revealed=1, solved=True)) == "solved"
    assert classify(None, "ask_user", _traj([call], revealed=1)) == "asked_then_failed"
    assert classify(None, "ask_user", _traj([call])) == "acted_without_asking"
    # the collapse of section 15: half a question, half a tool call, so neither a question nor a call
    assert classify(None, "ask_user", _traj([], said='Sure, I can": "delete_home_scene"')) == "no_question_no_call"
    assert classify(None, "ask_user", _traj([{"name": "delete_home_scene", "arguments": "{broken"}])) == "malformed"


def test_lookup_episodes_name_the_first_wrong_step() -> None:
    classify = _bench().classify
    write = {"name": "set_home_light", "arguments": {"device_id": "LT-1", "on": False}}
    assert classify(LOOKUP, "lookup_act", _traj([READ, write])) == "wrong_id_other_record"
    made_up = {**write, "arguments": {"device_id": "LT-9", "on": False}}
    assert classify(LOOKUP, "lookup_act", _traj([READ, made_up])) == "wrong_id_not_in_output"
    assert classify(LOOKUP, "lookup_act", _traj([READ])) == "stopped_after_read"
    assert classify(LOOKUP, "lookup_act", _traj([write])) == "wrong_first_tool"
    right = {**write, "arguments": {"device_id": "LT-2", "on": False}}
    assert classify(LOOKUP, "lookup_act", _traj([READ, right])) == "right_calls_unsolved"
