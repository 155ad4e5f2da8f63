"""bench/policy_eval.py: a carried seed's policy evaluated again, as the demo evaluates (issue 28)."""

from __future__ import annotations

import json

import pytest

from tests.bench_module import load_bench

TASK = {"id": "read_report-t204-00074-home_devices", "domain": "home_devices", "seed": 21,
        "instruction": 'Show device "LT-1"; tell me the "name".', "persona": "Kofi",
        "user_scenario": {"persona": "Kofi", "reason_for_call": "a device's state", "task_instructions": "Ask."},
        "gold_actions": [{"name": "get_home_device_status", "arguments": {"device_id": "LT-1"}}],
        "expected_outputs": ["Hallway light"], "tools": ["get_home_device_status"], "rubric": {"success_criteria": ["says the name"]},
        "difficulty": "easy", "final_state_hash": "0" * 64}


def test_a_seed_folder_without_tasks_or_policy_is_a_one_line_error(tmp_path, capsys) -> None:
    main = load_bench("policy_eval").main
    assert main([str(tmp_path), "--out", str(tmp_path / "eval")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "held-out tasks" in err and "tasks/held_out/tasks.jsonl" in err
    (tmp_path / "tasks" / "held_out").mkdir(parents=True)
    (tmp_path / "tasks" / "held_out" / "tasks.jsonl").write_text("")
    assert main([str(tmp_path), "--out", str(tmp_path / "eval")]) == 2
    assert "no policy at" in capsys.readouterr().err and not (tmp_path / "eval").exists()


def test_the_policy_and_overrides_reach_the_evaluation(tmp_path, monkeypatch, capsys) -> None:
    bench = load_bench("policy_eval")
    from bench import _stages

    seen = {}

    def evaluate(cfg, model, held, out_dir, backend):  # the demo's stage 6 is tested where it lives
        seen.update(model=model, seed=cfg.seed, answers=cfg.answers, held=len(held), out=out_dir)
        return {"success": 0.5, "multistep_success": 0.25}

    monkeypatch.setattr(_stages, "evaluate", evaluate)
    monkeypatch.setattr(_stages, "backend_of", lambda cfg, out: "local")
    (tmp_path / "tasks" / "held_out").mkdir(parents=True)
    (tmp_path / "tasks" / "held_out" / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")
    (tmp_path / "trained").mkdir()
    (tmp_path / "trained" / "config.json").write_text("{}")
    save = tmp_path / "r.json"
    assert bench.main([str(tmp_path), "--policy", str(tmp_path / "trained"), "--set", "seed=2", "--set",
                       "answers=keyed", "--out", str(tmp_path / "eval"), "--save", str(save)]) == 0
    assert seen == {"model": tmp_path / "trained", "seed": 2, "answers": "keyed", "held": 1, "out": tmp_path / "eval"}
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["policy"] == str(tmp_path / "trained") and line["multistep_success"] == 0.25
    assert json.loads(save.read_text())["sets"] == ["seed=2", "answers=keyed"]
    with pytest.raises(SystemExit):
        bench.main([str(tmp_path)])  # --out is required
