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


REPORT = SimpleNamespace(
    instruction='Show device "LT-1"; tell me the "name" and the "type".',
    gold_actions=[SimpleNamespace(name="get_home_device_status", arguments={"device_id": "LT-1"})],
    expected_outputs=["Hallway light", "light"])
STATUS = {"name": "get_home_device_status", "arguments": {"device_id": "LT-1"},
          "output": {"device_id": "LT-1", "type": "light", "name": "Hallway light", "room": "hallway",
                     "on": True, "recent_activity": [{"seq": 1, "device_id": "LT-1", "action": "on=True"}]}}


def test_answer_sources_tell_a_copied_value_from_one_written_from_elsewhere() -> None:
    def sources(task, traj) -> dict:  # the pairs' sources only (the asked keys have their own test)
        return {k: n for k, n in _bench().answer_sources(task, traj).items() if ":" not in k}

    # section 23's seed-0 episode: the right read, then a name no output holds and the right type
    said = _traj([STATUS], said='All done. "type": "light", "name": "Kitchen light"')
    assert sources(REPORT, said) == {"copied": 1, "not_in_output": 1, "asked_key": 2}
    # a value of the output under the wrong key, and a key the user did not ask for
    said = _traj([STATUS], said='All done. "name": "hallway", "room": "hallway"')
    assert sources(REPORT, said) == {"other_key": 1, "copied": 1, "asked_key": 1, "other_key_named": 1}
    # nested records count: the activity's device id is in the output
    said = _traj([STATUS], said='"device_id": "LT-1"')
    assert sources(REPORT, said)["copied"] == 1
    # without the gold read there is nothing to copy from, so nothing is counted
    assert sources(REPORT, _traj([], said='"name": "Hallway light"')) == {}


def test_each_asked_key_counts_whether_the_answer_writes_it() -> None:
    bench = _bench()
    tally = bench.answer_sources(REPORT, _traj([STATUS], said='All done. "type": "light", "room": "hallway"'))
    assert {k: n for k, n in tally.items() if ":" in k} == {"asked:name": 1, "written:name": 0, "asked:type": 1,
                                                            "written:type": 1}
    tally += bench.answer_sources(REPORT, _traj([STATUS], said='"type": "lamp"'))
    assert bench.answer_shares(tally)["asked_written"] == {"name": {"asked": 2, "written": 0.0},
                                                           "type": {"asked": 2, "written": 1.0}}


def test_answer_shares_pool_the_pairs_and_entities_key_the_held_out_ids() -> None:
    bench = _bench()
    from collections import Counter

    shares = bench.answer_shares(Counter({"copied": 3, "not_in_output": 1, "asked_key": 2, "other_key_named": 2}))
    assert shares == {"pairs": 4, "copied": 0.75, "other_key": 0.0, "not_in_output": 0.25, "asked_key": 0.5,
                      "asked_written": {}}
    assert bench.answer_shares(Counter())["copied"] is None
    assert bench.entity_key(REPORT) == "LT-1 get_home_device_status"
    assert bench.entity_key(LOOKUP) == "LT-2 list_home_devices+set_home_light"


def test_the_report_counts_each_held_out_entity_and_the_answers(tmp_path, monkeypatch, capsys) -> None:
    import json
    import sys

    task = {"id": "read_report-t204-00074-home_devices", "domain": "home_devices", "seed": 21,
            "instruction": 'Show device "LT-1"; tell me the "name" and the "type".',
            "gold_actions": [{"name": "get_home_device_status", "arguments": {"device_id": "LT-1"}}],
            "expected_outputs": ["Hallway light", "light"], "tools": ["get_home_device_status"],
            "persona": "Kofi", "user_scenario": {"persona": "Kofi", "reason_for_call": "a device's state",
                                                 "known_info": {"device id": "LT-1"}, "task_instructions": "Ask."},
            "rubric": {"success_criteria": ["the agent tells the user the name: Hallway light"]},
            "difficulty": "easy", "final_state_hash": "0" * 64}
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    solved = {**_traj([STATUS], solved=True, said='"name": "Hallway light", "type": "light"'),
              "task_id": task["id"], "termination": "user_stop"}
    guessed = {**_traj([STATUS], said='"name": "Kitchen light", "type": "light"'),
               "task_id": task["id"], "termination": "user_stop"}
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in (solved, guessed)))
    save = tmp_path / "out.json"
    monkeypatch.setattr(sys, "argv", ["multistep_failures.py", str(tmp_path / "eval"), str(tmp_path / "tasks"),
                                      "--save", str(save)])
    assert _bench().main() == 0
    got = json.loads(save.read_text())
    family = got["families"]["read_report"]
    assert family["share"] == {"solved": 0.5, "value_not_said_but_in_output": 0.5}
    assert family["by_entity"] == {"LT-1 get_home_device_status": {"episodes": 2, "solved": 0.5}}
    assert got["answers"] == {"pairs": 4, "copied": 0.75, "other_key": 0.0, "not_in_output": 0.25, "asked_key": 1.0,
                              "asked_written": {"name": {"asked": 2, "written": 1.0},
                                                "type": {"asked": 2, "written": 1.0}}}
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["families"]["read_report"]["episodes"] == 2


def test_plan_keys_compare_the_planned_keys_with_the_asked_ones() -> None:
    plan_keys = _bench().plan_keys
    task = SimpleNamespace(instruction='Show device "LT-1", then tell me the "name" and the "type".')

    def first(text: str) -> dict:
        return {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": text},
                             {"role": "assistant", "content": 'later: 9) tell the "name" and the "type".'}]}

    assert plan_keys(task, first('Plan: 1) get home device status LT-1 2) tell the "name" and the "type".')) \
        == "same_order"
    assert plan_keys(task, first('Plan: 1) read LT-1 2) tell the "type" and the "name". To read I need LT-1.')) \
        == "same_set"
    assert plan_keys(task, first('Plan: 1) read LT-1 2) tell the "name" and the "room".')) == "one_asked"
    assert plan_keys(task, first('Plan: 1) read LT-1 2) tell the "room" and the "room".')) == "none_asked"
    # only the first turn counts: a later plan does not make up for a first one without the step
    assert plan_keys(task, first("Plan: 1) get home device status LT-1.")) == "no_plan_step"
