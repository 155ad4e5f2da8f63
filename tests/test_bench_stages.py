"""bench/_stages.run_grpo reads a finished run back instead of training it again: a study job whose
device call ran out during the evaluation is evaluated, not retrained, on the next call
(bench/results/reader_gpu.md, section 17)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import _stages


def finished(run_dir: Path, status: str = "finished", final: bool = True) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"final_step": 32, "status": status}))
    rows = [{"step": 1, "reward": 0.25, "frac_reward_zero_std": 0.5}, {"step": 2, "loss": 0.1},
            {"step": 32, "reward": 0.75, "frac_reward_zero_std": 0.25}]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    if final:
        (run_dir / "final").mkdir()
        (run_dir / "final" / "config.json").write_text("{}")
    return run_dir


def test_a_finished_run_is_read_back_with_its_rewards(tmp_path):
    run = finished(tmp_path / "grpo")
    assert _stages.finished_run(run) == {"grpo_steps": 32, "first_reward": 0.25, "final_reward": 0.75,
                                         "final_dir": str(run / "final"), "fresh_rl_tasks": None, "resumed": True}


@pytest.mark.parametrize("case", ["running", "no_final", "no_run_json", "broken_run_json", "run_json_a_list"])
def test_an_unfinished_or_unreadable_run_is_not(tmp_path, case):
    run = finished(tmp_path / "grpo", status="running" if case == "running" else "finished",
                   final=case != "no_final")
    if case == "no_run_json":
        (run / "run.json").unlink()
    if case == "broken_run_json":
        (run / "run.json").write_text("{not json")
    if case == "run_json_a_list":
        (run / "run.json").write_text('["finished"]')
    assert _stages.finished_run(run) is None


def test_run_grpo_does_not_train_a_finished_run(tmp_path, monkeypatch):
    import rl.trainer

    def no_training(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(rl.trainer, "train", no_training)
    run = finished(tmp_path / "v" / "grpo")
    cfg = _stages.demo_config([f"out_dir={tmp_path / 'v'}"])
    res = _stages.run_grpo(cfg, tmp_path / "tasks", tmp_path / "sft", run)
    assert res["resumed"] is True and res["grpo_steps"] == 32 and res["final_dir"] == str(run / "final")
    # and one that did not finish goes to the trainer
    (run / "run.json").write_text(json.dumps({"final_step": 7, "status": "running"}))
    with pytest.raises(AssertionError, match="trained again"):
        _stages.run_grpo(cfg, tmp_path / "tasks", tmp_path / "sft", run)


def test_a_seed_carried_without_its_priming_traces_gets_the_same_ones_made_again(tmp_path):
    """The replay (rl.replay) of a seed whose ``prime/`` was not carried (reader_gpu.sh's tarballs of
    section 18) trains on the traces priming made: generate_traces is seeded, so they are made again,
    identical; a seed that kept its ``prime/`` replays that one."""
    from synth.behaviours import generate_traces
    from synth.sft_data import read_trajectories
    from synth.tasks import export_tasks, synthesize_tasks
    from tests.conftest import any_backend

    backend = any_backend()
    made = synthesize_tasks(4, seed=3, domains=["home_devices"], backend=backend, sandboxes=2)
    seed_dir = tmp_path / "seed-0"
    export_tasks(made, seed_dir / "tasks" / "train")
    export_tasks(made, seed_dir / "tasks" / "held_out")
    cfg = _stages.demo_config(["seed=0", "answers=keyed", "train.replay.coef=0.1", f"out_dir={seed_dir / 'v'}",
                               f"train.rollout.sandbox_backend={backend}"])
    tcfg = _stages.grpo_config(cfg, seed_dir / "tasks", seed_dir / "sft", seed_dir / "v" / "grpo")
    assert tcfg.replay.data == str(seed_dir / "v" / "prime") and not (seed_dir / "v" / "prime").exists()
    got = _stages.replay_traces(cfg, tcfg, seed_dir / "tasks")
    assert got.replay.data == tcfg.replay.data
    remade = read_trajectories(seed_dir / "v" / "prime" / "trajectories.jsonl")
    primed = generate_traces(made.tasks, cfg.condition, backend=backend, seed=0, answers="keyed",
                             system_prompt=tcfg.rollout.system_prompt)
    assert [t.messages for t in remade] == [t.messages for t in primed] and len(remade) == 4
    (seed_dir / "v" / "prime").rename(seed_dir / "prime")  # a seed that kept its own traces
    kept = _stages.replay_traces(cfg, tcfg, seed_dir / "tasks")
    assert kept.replay.data == str(seed_dir / "prime") and not (seed_dir / "v" / "prime").exists()


def test_the_training_sample_follows_the_held_out_families_and_the_seed(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr("synth.task_families.family_of", lambda t: t.fam)
    train = [SimpleNamespace(id=f"{f}-{i}", fam=f) for f, n in (("read_report", 10), ("ask_user", 3), ("lights", 5))
             for i in range(n)]
    held = [SimpleNamespace(id=f"h{i}", fam=f) for i, f in enumerate(["read_report"] * 6 + ["ask_user"] * 6 + ["scenes"])]
    sample = _stages.train_sample(train, held, 4, seed=0)
    fams = [t.fam for t in sample]
    # up to 4 a held-out family, never more than the training tasks have, none of a family held-out lacks
    assert fams.count("read_report") == 4 and fams.count("ask_user") == 3 and "lights" not in fams
    assert [t.id for t in sample] == [t.id for t in train if t in sample]  # the training order
    assert [t.id for t in _stages.train_sample(train, held, 4, seed=0)] == [t.id for t in sample]
    draws = {tuple(t.id for t in _stages.train_sample(train, held, 4, seed=s)) for s in range(6)}
    assert len(draws) > 1
    assert len(_stages.train_sample(train, held[:2], 4, seed=0)) == 2  # capped at the held-out count
