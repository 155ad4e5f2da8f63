"""bench/train_memory.py's summary: means over rounds, and the speed kept against the baseline with as many
processes (issue 32: the DDP bench's tokens/s against today's DDP tokens/s, not against one GPU)."""

from __future__ import annotations


import pytest

from tests.bench_module import load_bench

pytest.importorskip("torch")


def _bench():
    return load_bench("train_memory")


def _launch(tps: float, procs: int, peak: list[float], rc: int = 0) -> dict:
    return {"procs": procs, "returncode": rc, "tokens_per_s": tps, "tokens_per_s_per_process": tps / procs,
            "step_s": 5.0, "rollout_s": 4.0, "train_s": 1.0, "peak_mem_gb": peak}


def test_speed_is_kept_against_the_baseline_with_as_many_processes():
    tm = _bench()
    result = {"variants": {
        "before": {"launches": [_launch(1000.0, 1, [18.0]), _launch(1200.0, 1, [18.2])]},
        "before_ddp2": {"launches": [_launch(2000.0, 2, [24.0, 21.0])]},
        "gc2": {"launches": [_launch(990.0, 1, [9.0])]},
        "gc2_ddp2": {"launches": [_launch(1900.0, 2, [10.5, 9.9]), _launch(0.0, 2, [], rc=1)]},
    }}
    tm.summarise(result)
    v = result["variants"]
    assert v["before"]["tokens_per_s"] == 1100.0 and v["before"]["peak_mem_gb"] == 18.2
    assert v["gc2"]["speed_kept"] == 0.9 and v["gc2"]["speed_kept_against"] == "before"
    # the failed launch counts neither in the mean nor in the peak
    assert v["gc2_ddp2"]["ran"] == 1 and v["gc2_ddp2"]["peak_mem_gb"] == 10.5
    assert v["gc2_ddp2"]["speed_kept"] == 0.95 and v["gc2_ddp2"]["speed_kept_against"] == "before_ddp2"


def test_without_a_ddp_baseline_two_gpus_are_held_to_one_gpu_per_process_and_summarising_again_is_stable():
    tm = _bench()
    result = {"variants": {"before": {"launches": [_launch(1000.0, 1, [18.0])]},
                           "gc_ddp2": {"launches": [_launch(1800.0, 2, [6.0, 5.5])]}}}
    tm.summarise(result)
    tm.summarise(result)  # the bench summarises after every launch
    g = result["variants"]["gc_ddp2"]
    assert g["speed_kept"] == 0.9 and g["speed_kept_against"] == "before, per process"
    assert g["tokens_per_s"] == 1800.0 and g["ran"] == 1
