"""The demo's HTML report (rl.demo_report.write_report), rendered from a made-up result: no demo runs here
(tests/rl/test_demo.py runs one)."""

from __future__ import annotations

import re

import yaml

from rl.demo import DemoConfig, DemoResult
from rl.demo_report import settings_groups, stage_table, write_report
from rl.evaluate import PolicyEval

EVIL = "<script>alert(1)</script>"


def _result(tmp_path, stages):
    return DemoResult(base_success=0.0, sft_success=0.25, grpo_success=0.5, base_greedy_success=0.0,
                      sft_greedy_success=0.25, grpo_greedy_success=0.5, held_out_tasks=4, train_tasks=10,
                      eval_samples=2, condition=EVIL, minutes=sum(stages.values()), stage_minutes=stages,
                      sandbox_backend="local", rollout_engine="vllm", grpo_steps=2, first_reward=0.1,
                      final_reward=0.2, out_dir=str(tmp_path), report=str(tmp_path / "report.html"), target="t",
                      target_met=False)


def _evals():
    return {n: PolicyEval(model=n, tasks=4, samples=2, temperature=1.0, success=s, greedy_success=s, mean_reward=s,
                          mean_sampled_tokens=10.0, seconds=1.0, per_task=[])
            for n, s in (("base", 0.0), ("sft", 0.25), ("grpo", 0.5))}


def test_the_report_shows_stage_times_and_grouped_settings_as_tables(tmp_path):
    stages = {"base model": 0.5, "tasks": 1.0, f"priming traces ({EVIL})": 0.5, "Dr. GRPO": 6.0,
              "held-out evaluation": 2.0}
    cfg = DemoConfig(condition="all", domains=["home_devices"], train={"run": {"seed": 5}, "notes": {"x": EVIL}})
    page = write_report(tmp_path, _result(tmp_path, stages), _evals(), None, cfg).read_text()
    # stage times: a table of stage, minutes and share of the total, with the total last
    assert "<th>stage</th><th>minutes</th><th>share of total</th>" in page
    assert "<tr><td>Dr. GRPO</td><td>6.00</td><td>60.0%</td></tr>" in page
    assert "<tr><td>total</td><td>10.00</td><td>100%</td></tr>" in page
    # settings: one table per group, then the whole config as YAML in a fold
    for group in ("model / base", "tasks", "priming / SFT", "Dr. GRPO", "rollout", "reward", "evaluation"):
        assert f"<h3>{group}</h3><table class=kv><tr><th>setting</th><th>value</th></tr>" in page, group
    assert "<tr><td>train.grpo.loss_type</td><td>dr_grpo</td></tr>" in page  # the train section as GRPO gets it
    assert "<tr><td>train.run.seed</td><td>5</td></tr>" in page  # the config's own value over DEFAULT_TRAIN
    assert "<tr><td>sft.epochs</td><td>2.0</td></tr>" in page and "<tr><td>eval_samples</td><td>4</td></tr>" in page
    fold = re.search(r"<details><summary>full configuration.*?</summary><pre>(.*?)</pre></details>", page, re.S)
    assert fold is not None
    import html

    assert yaml.safe_load(html.unescape(fold.group(1))) == cfg.model_dump(mode="json")
    # no raw JSON dumps left, and every value escaped
    assert '"base model":' not in page and EVIL not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_base_evaluated_without_a_greedy_episode_shows_none(tmp_path):
    res = _result(tmp_path, {"tasks": 1.0}).model_copy(update={"base_greedy_success": None, "base_eval_samples": 1})
    evals = _evals()
    evals["base"] = evals["base"].model_copy(update={"greedy_success": None, "samples": 1})
    page = write_report(tmp_path, res, evals, None, DemoConfig()).read_text()
    assert "greedy: one per task (none for the base)" in page and "1 for the base" in page
    assert re.search(r"<tr><td>base</td><td>0.0%</td><td></td>", page)
    assert "<tr><td>sft</td><td>25.0%</td><td>25.0%</td>" in page


def test_settings_groups_put_every_train_section_somewhere():
    cfg = DemoConfig(train={"grpo": {"max_steps": 3}, "logging": {"wandb": False}})
    groups = settings_groups(cfg)
    keys = {k for rows in groups.values() for k, _ in rows}
    assert "train.grpo.max_steps" in keys and ("train.grpo.max_steps", "3") in groups["Dr. GRPO"]
    assert ("train.logging.wandb", "false") in groups["Dr. GRPO"]  # a section no group names
    assert ("train.rollout.use_vllm", "true") in groups["rollout"]
    assert {"base", "tasks", "condition", "curve_every"} <= keys


def test_the_stage_table_of_an_empty_run():
    assert "<td>total</td><td>0.00</td><td></td>" in stage_table({}, 0.0)


def test_the_behaviour_table_shows_the_counters_precision_and_recall(tmp_path):
    """Issue 33 #2: next to the counts, the counter's precision / recall on its labelled set; and the episodes
    section (#1) says when there is nothing to show."""
    import json

    from rl.behaviours import BehaviourReport, BehaviourStat, GroupReport
    from rl.demo_report import COUNTER_ACCURACY, counter_accuracy_row

    stat = BehaviourStat(mean=0.5, frac=0.25, counted=4)
    names = ["subgoal", "verification", "backtracking", "backward_chaining"]
    rep = BehaviourReport(source="x", counter="heuristic",
                          groups=[GroupReport(group="sft", files=[], n=4, behaviours=dict.fromkeys(names, stat))])
    page = write_report(tmp_path, _result(tmp_path, {"tasks": 1.0}), _evals(), rep, DemoConfig()).read_text()
    acc = json.loads(COUNTER_ACCURACY.read_text())["behaviours"]
    cells = "".join(f"<td>{acc[n]['precision']:.2f} / {acc[n]['recall']:.2f}</td>" for n in names)
    assert "<td><i>counter precision / recall</i> (labelled set," in page and cells in page
    assert "<tr><td>sft</td><td>4</td><td>0.50 (25%)</td>" in page
    assert counter_accuracy_row(names, tmp_path / "missing.json") == ""
    assert "<h2>Episodes: base, primed and Dr. GRPO side by side</h2><p>No held-out episodes to show.</p>" in page
