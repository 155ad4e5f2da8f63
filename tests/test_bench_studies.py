"""The efficacy studies (bench/priming_study.py, bench/length_bias.py) run in --quick mode and report
every figure, finite. No assertion on speed, nor on which condition or method wins."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def numbers(obj: Any, path: str = "") -> list[tuple[str, float]]:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return []
    if isinstance(obj, (int, float)):
        return [(path, obj)]
    if isinstance(obj, dict):
        return [n for k, v in obj.items() for n in numbers(v, f"{path}.{k}")]
    if isinstance(obj, list):
        return [n for i, v in enumerate(obj) for n in numbers(v, f"{path}[{i}]")]
    return []


def run_quick(script: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    pytest.importorskip("trl")
    from tests.conftest import backend_status, require

    backend = next((b for b in ("local", "docker") if backend_status(b)[0]), None)
    if backend is None:
        require("local")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick", "--out", str(tmp_path / "work"),
                        "--set", f"train.rollout.sandbox_backend={backend}", *extra],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    bad = [(p, x) for p, x in numbers(result) if not math.isfinite(x)]
    assert not bad, bad
    assert result["quick"] is True and result["errors"] == {}, result["errors"]
    return result


STAT_KEYS = {"mean", "std", "min", "max", "n"}


@pytest.mark.slow
def test_priming_study_quick_prints_one_json_line_last(tmp_path):
    res = run_quick("priming_study.py", tmp_path)
    assert {"conditions", "base", "verdict", "settings", "machine", "minutes", "seeds"} <= set(res)
    assert res["seeds"] == [0] and set(res["conditions"]) == {"all", "none"}
    for row in res["conditions"].values():
        for m in ("sft_success", "sft_greedy_success", "grpo_success", "grpo_greedy_success", "grpo_gain"):
            assert STAT_KEYS <= set(row[m]) and row[m]["n"] == 1, m
            assert row[m]["min"] <= row[m]["mean"] <= row[m]["max"]
        assert row["seeds_ok"] == 1 and row["per_seed"]["0"]["grpo_steps"] == 2
        for m in ("sft_success", "grpo_success"):
            assert 0.0 <= row["per_seed"]["0"][m] <= 1.0
    assert 0.0 <= res["base"]["per_seed"]["0"]["base_success"] <= 1.0
    assert res["base"]["per_seed"]["0"]["held_out_tasks"] == 6
    assert "all_minus_none_grpo_success" in res["verdict"]
    # the seed's shared stages were built once, each condition primed and trained on its own
    work = tmp_path / "work" / "seed-0"
    assert (work / "base" / "config.json").is_file() and (work / "eval" / "base" / "summary.json").is_file()
    for c in ("all", "none"):
        assert (work / c / "sft" / "config.json").is_file() and (work / c / "eval" / "grpo" / "summary.json").is_file()
        assert not (work / c / "tasks").exists()


@pytest.mark.slow
def test_length_bias_quick_prints_one_json_line_last(tmp_path):
    png = tmp_path / "length_bias.png"
    res = run_quick("length_bias.py", tmp_path, "--plot", str(png))
    assert {"methods", "verdict", "settings", "checkpoint", "steps", "k", "minutes"} <= set(res)
    assert res["steps"] == 3 and set(res["methods"]) == {"grpo", "dr_grpo"}
    for m, r in res["methods"].items():
        s = r["len_unsolved"]
        assert {"mean", "per_seed", "first_k", "last_k", "last_minus_first", "slope_per_step"} <= set(s)
        assert len(s["mean"]) == 3 and list(s["per_seed"]) == ["0"]
        assert len(r["solved"]["mean"]) == 3 and all(x is not None for x in r["solved"]["mean"])
        assert r["overrides"][0] == f"train.grpo.loss_type={m}"
    assert png.is_file() and png.stat().st_size > 0 and res["plot"] == str(png)
    # both methods trained the one primed checkpoint
    assert res["checkpoint"]["sft_dir"] == str(tmp_path / "work" / "primed" / "sft")


@pytest.mark.slow
def test_rl_budget_quick_prints_one_json_line_last(tmp_path):
    res = run_quick("rl_budget.py", tmp_path, "--variant", "more:from=big;eval=false", "--variant", "demo:", "--variant",
                    "big:train.grpo.per_device_train_batch_size=16;train.grpo.learning_rate=3e-4", "--train-eval", "2")
    assert {"primed", "variants", "settings", "machine", "minutes", "seeds"} <= set(res)
    assert res["seeds"] == [0] and res["variant_list"] == ["more", "demo", "big"]
    assert res["variants"]["big"]["overrides"] == ["train.grpo.per_device_train_batch_size=16",
                                                   "train.grpo.learning_rate=3e-4"]
    primed = res["primed"]["per_seed"]["0"]
    assert 0.0 <= primed["sft_success"] <= 1.0 and primed["held_out_tasks"] == 6
    fams = primed["by_tool"]
    assert sum(f["tasks"] for f in fams.values()) == 6 and all(0 <= f["never_solved"] <= f["tasks"] for f in fams.values())
    # the families' success, weighted by their tasks, is the overall success (the same samples per task)
    assert sum(f["success"] * f["tasks"] for f in fams.values()) / 6 == pytest.approx(primed["sft_success"], abs=1e-3)
    for name, episodes in (("demo", 2 * 8), ("big", 2 * 16)):
        row = res["variants"][name]
        assert row["seeds_ok"] == 1 and row["gain"]["n"] == 1
        seed = row["per_seed"]["0"]
        assert seed["grpo_steps"] == 2 and seed["episodes"] == episodes
        assert row["gain"]["mean"] == pytest.approx(seed["grpo_success"] - primed["sft_success"])
        assert set(seed["curves"]) == {"episode/solved", "entropy", "completions/mean_length", "frac_reward_zero_std"}
        assert seed["curves"]["entropy"]["first"] is not None
        # a step's seconds, of them the rollout's, of those the generation's (the metrics' own step_time)
        t = seed["step_seconds"]
        assert 0 < t["generate"] <= t["rollout"] and 0 < t["step"]
        assert set(seed["by_tool"]) == set(fams)
        # pass@k of the trained policy: at least its sampled success (a task solved in a sample is solved at k)
        assert seed["grpo_success"] <= seed["grpo_pass_at_k"] <= 1.0
    # --train-eval: the primed policy (once a seed) and each trained one on a sample of the seed's training tasks
    work = tmp_path / "work" / "seed-0"
    from bench import _stages

    train, held = _stages.load_split(work / "tasks")
    n = len(_stages.train_sample(train, held, 2, seed=0))
    primed_te = json.loads((work / "train_eval" / "primed_2.json").read_text())
    for name in ("demo", "big"):
        te, row = res["variants"][name]["per_seed"]["0"]["train_eval"], res["variants"][name]
        assert n > 0 and te["tasks"] == n and te["primed"] == primed_te
        assert 0.0 <= te["trained"]["success"] <= 1.0 and sum(f["tasks"] for f in te["trained"]["by_tool"].values()) == n
        assert row["train_gain"]["mean"] == pytest.approx(te["trained"]["success"] - te["primed"]["success"])
        assert (work / name / "train_eval" / "summary.json").is_file() and "train_eval" in row["per_seed"]["0"]["minutes"]
    # both variants trained the seed's one primed checkpoint, and were evaluated on its held-out tasks
    assert (work / "sft" / "config.json").is_file() and (work / "eval" / "sft" / "summary.json").is_file()
    for name in ("demo", "big"):
        assert (work / name / "grpo" / "final" / "config.json").is_file()
        assert (work / name / "eval" / "summary.json").is_file() and not (work / name / "sft").exists()
    # from=big: trained on from big's policy (after it, though named first); eval=false: not evaluated, no gain
    more = res["variants"]["more"]
    assert more["from"] == "big" and more["seeds_ok"] == 1 and more["per_seed"]["0"]["grpo_steps"] == 2
    assert more["per_seed"]["0"]["start_dir"] == str(work / "big" / "grpo" / "final")
    assert res["variants"]["big"]["per_seed"]["0"]["start_dir"] == str(work / "sft")
    more_final = work / "more" / "grpo" / "final" / "config.json"
    assert more_final.is_file()
    assert (work / "more" / "job.json").stat().st_mtime >= (work / "big" / "grpo" / "final" / "config.json").stat().st_mtime
    assert more["evaluated"] is False and res["variants"]["big"]["evaluated"] is True
    assert more["gain"]["n"] == 0 and more["per_seed"]["0"]["grpo_success"] is None
    assert not (work / "more" / "eval").exists()
    # named again without it (a later call): evaluated, its gain over the primed policy, not trained again
    trained_at = more_final.stat().st_mtime_ns
    again = run_quick("rl_budget.py", tmp_path, "--variant", "more:from=big")["variants"]["more"]
    assert again["evaluated"] is True and again["gain"]["n"] == 1 and more_final.stat().st_mtime_ns == trained_at
    assert again["gain"]["mean"] == pytest.approx(again["per_seed"]["0"]["grpo_success"] - primed["sft_success"])
    assert (work / "more" / "eval" / "summary.json").is_file()


def test_rl_budget_orders_variants_that_train_on_from_another():
    from tests.bench_module import load_bench

    rb = load_bench("rl_budget")
    assert rb.start_of(["from=a", "train.grpo.max_steps=3"]) == (["train.grpo.max_steps=3"], "a")
    assert rb.start_of([]) == ([], None)
    # a variant of an earlier call (not in this run) starts the first wave
    assert rb.waves({"c": ["from=b"], "a": [], "b": ["from=a"], "d": ["from=earlier"]}) == [["a", "d"], ["b"], ["c"]]
    for bad in ({"a": ["from=b"], "b": ["from=a"]}, {"a": ["from=x", "from=y"]}, {"a": ["from="]}):
        with pytest.raises(SystemExit):
            rb.waves(bad)
    # eval=false: a link of a chain, trained only; the flag is no demo override
    assert rb.start_of(["from=a", "eval=false", "seed=1"]) == (["seed=1"], "a")
    assert rb.evaluates([]) and rb.evaluates(["eval=true"]) and not rb.evaluates(["eval=False"])
    for bad in (["eval=no"], ["eval=false", "eval=true"]):
        with pytest.raises(SystemExit, match="eval="):
            rb.evaluates(bad)
    with pytest.raises(FileNotFoundError, match="train variant gone first"):
        rb.start_dir(Path("/nonexistent/seed-0"), "gone")
    assert rb.start_dir(Path("/s"), None) == Path("/s/sft")


def test_rl_budget_refuses_a_bad_variant_before_running(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "rl_budget.py"), "--quick", "--out", str(tmp_path / "w"),
                        "--variant", "x:train.grpo.no_such_key=1"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "variant x: train.grpo.no_such_key" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "w").exists()
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "rl_budget.py"), "--variant", "no-colon"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "NAME:KEY=VALUE" in r.stderr


@pytest.mark.slow
@pytest.mark.vllm_engine  # --quick generates with vLLM: in the one vLLM group (tests/conftest.py)
def test_rl_speed_quick_prints_one_json_line_last(tmp_path):
    res = run_quick("rl_speed.py", tmp_path)
    assert res["bench"] == "rl_speed" and res["baseline"] == "today" and res["candidate"] == "fast"
    assert res["episodes"] == 32
    for name, per_step in (("today", 16), ("fast", 32)):
        run = res["variants"][name]["runs"][0]
        # the same episodes, in steps of the variant's size, the whole stage timed
        assert run["episodes"] == 32 and run["episodes_per_step"] == per_step and run["steps"] == 32 // per_step
        assert run["episodes_per_s"] == pytest.approx(run["episodes"] / run["wall_s"], rel=1e-3)
        phases = run["phase_s"]
        assert {"rollout", "generate", "weight_sync", "engine_start", "train_forward", "backward"} <= set(phases)
        assert phases["rollout"] >= phases["generate"] > 0 and run["phase_calls"]["weight_sync"] == run["steps"]
        assert run["in_loop_s"] <= run["wall_s"]
    assert res["speedup"] == pytest.approx(res["candidate_episodes_per_s"] / res["baseline_episodes_per_s"], rel=1e-2)
    # the fast path skips TRL's no-grad old-logprob pass; today's path runs it once per step
    assert "old_logprobs" not in res["variants"]["fast"]["runs"][0]["phase_s"]
    assert res["variants"]["today"]["runs"][0]["phase_calls"]["old_logprobs"] == 2


@pytest.mark.slow
def test_reader_sweep_quick_pretrains_each_shape_and_names_the_one_that_failed(tmp_path):
    """Issue 28's size sweep on a toy corpus: one pretraining per shape, copy accuracy per tool-output
    length, and a shape rl.tiny refuses (head size 16) reported as that shape's error, not a crash."""
    env = {**__import__("os").environ, "TOOLDOJO_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "reader_sweep.py"), "--quick", "--shapes",
                        "ok:64x1x1,bad:32x1x2", "--out", str(tmp_path / "w"), "--save", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["shapes"] == ["ok", "bad"] and json.loads((tmp_path / "r.json").read_text()) == res
    ok = res["pretrain"]["ok"]
    assert ok["parameters"] > 0 and ok["steps"] == 6 and math.isfinite(ok["val_loss"]) and ok["hidden"] == 64
    assert set(ok["copy_tokens_by_length"]) == {"<200", "200-500", "500-1000", "1000+"}
    assert list(res["errors"]) == ["pretrain/bad"] and "head size" in res["pretrain"]["bad"]["log_tail"]


def test_reader_sweep_refuses_a_malformed_shape():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "reader_sweep.py"), "--shapes", "4M:256x4"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "NAME:HIDDENxLAYERSxHEADS" in r.stderr
