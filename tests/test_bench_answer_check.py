"""bench/answer_labels.py labels apart from the reward code; bench/answer_check.py scores both rules on them."""

import json

from bench import answer_check, answer_labels

LT2 = {"type": "light", "name": "Porch light", "room": "porch", "online": True}
TASK = {"id": "read_report-t1-00001-home_devices", "domain": "home_devices", "seed": 1,
        "instruction": 'Show me the device (device id: "LT-2"). Please let me know the "type" and the "room".',
        "persona": "p", "user_scenario": {"persona": "p", "reason_for_call": "r", "task_instructions": "t"},
        "gold_actions": [{"name": "get_home_device_status", "arguments": {"device_id": "LT-2"}}],
        "expected_outputs": [{"field": "type", "value": "light"}, {"field": "room", "value": "porch"}],
        "rubric": {}, "tools": ["get_home_device_status"], "difficulty": "easy"}


def episode(answer):
    return {"task_id": TASK["id"], "final_state_hash": "h", "expected_state_hash": "h",
            "final_state": {"devices": {"LT-2": LT2}}, "components": {"world_state": 1.0, "communication": 1.0},
            "messages": [{"role": "user", "content": TASK["instruction"]},
                         {"role": "tool", "content": json.dumps({"device_id": "LT-2"} | LT2)},
                         {"role": "assistant", "content": answer}]}


def test_labels_and_both_rules_on_a_field_answer_with_the_right_word_elsewhere(tmp_path, capsys):
    run = tmp_path / "run"
    eps = [episode('"type": "light", "room": "porch"'), episode('"type": "lock", "name": "Porch light"')]
    for pol in ("base", "sft", "grpo"):
        (run / "eval" / pol).mkdir(parents=True)
        (run / "eval" / pol / "trajectories.jsonl").write_text("\n".join(json.dumps(e) for e in eps) + "\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    out = tmp_path / "labels.json"
    assert answer_labels.main([str(run), str(tasks), "--out", str(out)]) == 0
    labels = [e["label"]["solved"] for e in json.loads(out.read_text())["episodes"]]
    assert labels == [True, False] * 3
    capsys.readouterr()
    assert answer_check.main([str(out)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["rules"]["old"]["false_pos"] == 3 and result["rules"]["old"]["precision"] == 0.5
    assert result["rules"]["new"] == {"precision": 1.0, "recall": 1.0, "true_pos": 3, "false_pos": 0, "false_neg": 0}


def test_the_committed_labelled_set_meets_the_targets_and_its_result_is_what_the_code_gives(capsys):
    from pathlib import Path

    assert answer_check.main(["bench/data/answer_labels_cpu_demo.json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["episodes"] >= 300 and result["target_met"]
    new = result["rules"]["new"]
    assert new["precision"] >= 0.99 and new["recall"] >= 0.97
    assert result["rules"]["old"]["false_pos"] > 0  # what the old rule got wrong is in the set
    kept = json.loads(Path("bench/results/answers_cpu_demo.json").read_text())
    assert kept["rules"] == result["rules"] and kept["success"] == result["success"]
