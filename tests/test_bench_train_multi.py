"""bench/train_multi.py --quick: 1 process vs 2 (gloo, tiny model), one JSON line last, the baselines from the same run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_module import load_bench

ROOT = Path(__file__).resolve().parents[1]


def test_bench_train_multi_quick_prints_one_json_line_last(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    from tests.conftest import any_backend

    r = subprocess.run([sys.executable, str(ROOT / "bench" / "train_multi.py"), "--quick", "--backend", any_backend(),
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["bench"] == "train_multi" and result["quick"] is True and result["nproc"] == 2
    runs = result["runs"]
    assert [runs[k]["procs"] for k in ("one_small", "multi", "one_big")] == [1, 2, 1]
    for name, run in runs.items():
        assert run["returncode"] == 0, (name, run.get("error"))
        assert run["steps"] == 2 and run["timed_steps"] == 1 and run["tokens_per_s"] > 0, name
        assert len(run["peak_mem_gb"]) == run["procs"] and all(m > 0 for m in run["peak_mem_gb"])
    # the scaling baseline (1 x b) and the agreement baseline (1 x 2b) come from this same run
    assert result["scaling"] == pytest.approx(
        runs["multi"]["tokens_per_s"] / runs["one_small"]["tokens_per_s"], rel=0.01)
    assert result["agreement"]["reward"]["steps"] == 2
    assert result["target_met"] is None  # smoke values on CPU


def _train_multi():
    return load_bench("train_multi")


def test_the_ranks_keep_the_users_pythonpath():
    tm = _train_multi()
    env = tm.rank_env({"PYTHONPATH": "/opt/extra:/opt/more", "OMP_NUM_THREADS": "4"})
    assert env["PYTHONPATH"].split(":") == [str(ROOT), "/opt/extra", "/opt/more"] and env["OMP_NUM_THREADS"] == "4"
    assert tm.rank_env({})["PYTHONPATH"] == str(ROOT) and tm.rank_env({})["OMP_NUM_THREADS"] == "1"


def test_a_target_is_judged_only_when_its_runs_ran():
    tm = _train_multi()
    fsdp = {"fsdp": {"trains_on_n_gpus": True, "fits_one_gpu": None}}
    assert tm.judge(fsdp, {"fsdp"}) == {}  # an FSDP-only call measured no scaling: nothing judged
    assert tm.judge({"fsdp": {"trains_on_n_gpus": True, "fits_one_gpu": False}}, {"fsdp", "fsdp_one"}) == \
        {"fsdp_beyond_one_gpu": True}
    ddp = {"scaling": 1.5, "agreement": {"reward": {"within_noise": True}}}
    assert tm.judge(ddp, {"one_small", "multi", "one_big"}) == {"scaling": False, "agreement": True}
    assert tm.judge(ddp, {"one_small", "multi"}) == {"scaling": False}


def test_the_model_is_built_in_a_child_process(tmp_path):
    """The parent never holds the model (on a GPU its cache stayed reserved while the ranks started)."""
    import os

    tm = _train_multi()
    shape = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
             "intermediate_size": 128}
    out = tm.build_model(tmp_path / "m", shape)
    meta = json.loads((out / "bench-model.json").read_text())
    assert meta["shape"] == shape and meta["parameters"] > 0 and meta["built_by_pid"] != os.getpid()
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    assert tm.build_model(tmp_path / "m", shape) == out  # built once


def test_a_failed_rank_is_named_with_what_it_raised(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    tm = _train_multi()
    res = tm.launch("bad", tmp_path, 2, ["model.tiny=false", f"model.name_or_path={tmp_path / 'no-such-model'}",
                                         "rollout.use_vllm=false", "run.logging=[]"], timeout=600)
    assert res["returncode"] != 0
    ranks = res["failed_ranks"]
    # Both ranks raise, but the launcher stops the other rank as soon as one fails: a rank stopped before it
    # wrote its error is not named (a race), so every named rank is one of the two, named once, in order.
    named = [r["rank"] for r in ranks]
    assert named and named == sorted(set(named)) and set(named) <= {0, 1}, res
    assert all("no-such-model" in r["error"] for r in ranks), ranks


def test_the_fsdp_shape_is_one_no_single_gpu_can_train_but_n_can_hold():
    tm = _train_multi()
    for card in (80 * 2**30, 141 * 2**30):  # an H100's, an H200's memory
        name, shape = tm.fsdp_shape("auto", card, 2)
        p = tm.shape_parameters(shape)
        assert name.startswith("auto-") and 8 * p > card and 8 * p / 2 <= 0.8 * card
    with pytest.raises(SystemExit, match="cannot hold"):
        tm.fsdp_shape("auto", 80 * 2**30, 1)
    assert tm.fsdp_shape("0.5b", None, 2) == ("0.5b", tm.SHAPES["0.5b"])
    name, shape = tm.fsdp_shape("num_hidden_layers=3,hidden_size=1024", None, 2)
    assert shape["num_hidden_layers"] == 3 and shape["hidden_size"] == 1024 and name.startswith("custom-")
    for bad in ("big", "hidden_size=1024", "num_hidden_layers=2,depth=3"):
        with pytest.raises(SystemExit):
            tm.fsdp_shape(bad, None, 2)


def test_the_parameter_count_is_the_models():
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tm = _train_multi()
    shape = {"hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
             "intermediate_size": 512}
    with torch.device("meta"):
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=2048, tie_word_embeddings=True, **shape))
    assert tm.shape_parameters(shape) == sum(p.numel() for p in model.parameters())


def test_the_memory_target_needs_both_the_peak_and_the_speed():
    tm = _train_multi()
    free = {"tokens_per_s": 1000.0, "peak_mem_gb": [38.9], "phases_gb": [{"generation": 38.9}]}
    work = {"tokens_per_s": 950.0, "peak_mem_gb": [9.5], "phases_gb": [{"generation": 6.0}]}
    multi = {"peak_mem_gb": [9.8, 9.7]}
    m = tm.memory_figures(free, work, multi)
    assert m["met"] and m["speed_kept"] == 0.95 and m["peak_gb_free"] == 38.9 and m["peak_gb_work_ddp"] == 9.8
    assert not tm.memory_figures(free, {**work, "tokens_per_s": 850.0}, multi)["met"]  # too slow
    assert not tm.memory_figures(free, work, {"peak_mem_gb": [12.5, 9.0]})["met"]  # a DDP rank above 12 GB
    result = {"nproc": 4, "scaling": 3.6, "memory": m}
    assert tm.judge(result, {"one_small_free", "one_small", "multi"}) == {"scaling": True, "memory": True}
    assert tm.judge({**result, "scaling": 3.4}, {"one_small", "multi"}) == {"scaling": False}


def test_throughput_splits_steps_and_can_be_taken_again_over_fewer_steps():
    tm = _train_multi()
    run = {"procs": 2, "steps": 3, "stamps": [0.0, 1.0, 3.0, 5.0], "num_tokens": [100, 300, 500],
           "rollout_s_steps": [0.9, 1.5, 1.5]}
    first = tm.throughput(run)
    assert first == {"timed_steps": 2, "step_s": 2.0, "tokens_per_s": 100.0, "tokens_per_s_per_process": 50.0,
                     "rollout_s": 1.5, "train_s": 0.5}
    run.update(first)  # as launch() does; the multi run's figures are then taken again over the baseline's steps
    assert tm.throughput(run, upto=2)["step_s"] == 2.0 and tm.throughput(run, upto=2)["rollout_s"] == 1.5
