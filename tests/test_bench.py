"""The sandbox benchmark runs and reports every figure (no assertion on speed)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"tool_call_p50_ms", "tool_call_p99_ms", "docker_exec_p50_ms", "reset_p50_ms", "acquire_p50_ms",
        "fresh_start_p50_ms", "max_concurrent", "rss_per_sandbox_mb", "backend",
        "no_isolation_tool_call_p50_ms", "no_isolation_reset_p50_ms", "isolation_cost_tool_call_p50_ms"}


@pytest.mark.slow
def test_bench_quick_prints_one_json_line_last(backend):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "sandboxes.py"), "--quick", "--backend", backend,
                        "--max-sandboxes", "8"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert KEYS <= set(result)
    assert result["backend"] == backend and result["max_concurrent"] == 8
    assert result["tool_call_p50_ms"] > 0 and result["reset_p50_ms"] > 0
    assert result["no_isolation_tool_call_p50_ms"] > 0 and result["no_isolation_reset_p50_ms"] > 0
    assert result["errors"] == {}
    if backend == "docker":
        assert result["docker_exec_p50_ms"] > 0


EVALS_KEYS = {"cases", "first_run_s", "cached_rerun_s", "cache_speedup", "only_failed_cases"}


@pytest.mark.slow
def test_bench_evals_quick_prints_one_json_line_last(vllm_server):
    """bench/evals.py --quick against the session's vLLM server: every figure, and the re-run is cached."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "evals.py"), "--quick",
                        "--base-url", vllm_server.base_url, "--model", vllm_server.model],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert EVALS_KEYS <= set(result) and result["errors"] == {}
    assert result["cases"] >= 20 and result["first_run_server_requests"] > 0
    assert result["cached_rerun_server_requests"] == 0 and result["only_failed_server_requests"] == 0
    assert result["first_run_s"] > 0 and result["cached_rerun_s"] > 0 and result["cache_speedup"] > 0
    assert 0 < result["only_failed_cases"] <= result["cases"]


TRAIN_STEP_KEYS = {"device", "model_params", "tokens_per_s", "peak_mem_gb", "step_s", "bare_trl_tokens_per_s",
                   "bare_trl_step_s", "generated_tokens_per_step", "bare_trl_generated_tokens_per_step",
                   "overhead_vs_bare_trl", "overhead_per_generated_token", "rollout_s", "generate_s", "target",
                   "meets_target", "backend", "sides", "config", "errors"}


@pytest.mark.slow
def test_bench_train_step_quick_prints_one_json_line_last(tmp_path):
    """bench/train_step.py --quick: the tiny model, 3 steps (1 warm-up), max_completion_length 64, ours and bare TRL."""
    pytest.importorskip("trl")
    from tests.conftest import backend_status, require

    backend = next((b for b in ("local", "docker") if backend_status(b)[0]), None)
    if backend is None:
        require("local")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "train_step.py"), "--quick", "--model", "tiny",
                        "--backend", backend, "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert TRAIN_STEP_KEYS <= set(result), TRAIN_STEP_KEYS - set(result)
    assert result["errors"] == {} and result["quick"] is True and result["backend"] == backend
    assert result["config"]["steps_total"] == 3 and result["config"]["max_completion_length"] == 64
    ours, bare = result["sides"]["ours"], result["sides"]["bare_trl"]
    assert ours["steps_timed"] == bare["steps_timed"] == 2
    assert result["model_params"] > 0 and result["peak_mem_gb"] > 0
    for key in ("tokens_per_s", "bare_trl_tokens_per_s", "step_s", "bare_trl_step_s", "generate_s", "rollout_s"):
        assert result[key] > 0, key
    assert 0 < result["generated_tokens_per_step"] <= 16 * 64 and 0 < result["bare_trl_generated_tokens_per_step"] <= 16 * 64
    # bare TRL trains on the very prompts ours did
    assert ours["prompt_tokens_per_step"] == bare["prompt_tokens_per_step"] > 0
    assert result["overhead_vs_bare_trl"] == pytest.approx(
        result["bare_trl_tokens_per_s"] / result["tokens_per_s"] - 1, abs=2e-3)
    assert result["meets_target"] == (result["overhead_per_generated_token"] <= 0.10)


K8S_PLAN_KEYS = {"target_concurrent_sandboxes", "mode", "pods", "nodes", "warm_pool_size", "pods_per_node",
                 "limiting_resource", "creation_rate_ramp_per_s", "creation_rate_steady_per_s",
                 "api_requests_per_start", "api_qps_ramp", "api_qps_steady", "exec_streams_open", "settings",
                 "assumptions", "requests_source"}


def test_bench_k8s_plan_prints_one_json_line_last():
    """bench/k8s_plan.py sizes 10,000 sandboxes on paper (its request counts measured on the fake API server)."""
    pytest.importorskip("kubernetes")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "k8s_plan.py")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert K8S_PLAN_KEYS <= set(result), K8S_PLAN_KEYS - set(result)
    assert result["target_concurrent_sandboxes"] == 10_000 and result["pods"] >= 10_000
    assert result["nodes"] * result["pods_per_node"] >= result["pods"]
    assert result["api_requests_per_start"] > 0 and result["exec_streams_open"] == 10_000


def test_bench_continuous_batching_quick_prints_one_json_line_last():
    """bench/continuous_batching.py --quick: padded generate vs continuous batching, tiny model (CPU here)."""
    pytest.importorskip("transformers")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "continuous_batching.py"), "--quick", "--model", "tiny"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["model"] == "tiny"
    assert {"padded", "cb_no_graphs"} <= set(result["median_s"])
    assert result["vs_padded"]["padded"] == 1.0
    assert result["vs_padded"]["cb_no_graphs"] == pytest.approx(
        result["median_s"]["cb_no_graphs"] / result["median_s"]["padded"], abs=2e-3)
    assert all(v > 0 for v in result["tokens_per_s"].values())


@pytest.mark.slow
def test_bench_heldout_eval_quick_prints_one_json_line_last():
    """bench/heldout_eval.py --quick: transformers generate vs a vLLM engine loaded with the policy, the
    same held-out episodes (tiny model, 4 tasks); every figure, and both played every episode."""
    pytest.importorskip("transformers")
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "heldout_eval.py"), "--quick"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["quick"] is True and result["episodes"] == 8
    assert set(result["variants"]) == {"transformers_2", "vllm_2"} and result["engine_start_s"] > 0
    assert {v["engine"] for v in result["variants"].values()} == {"transformers", "vllm"}
    assert result["speedup"] == pytest.approx(
        result["variants"]["transformers_2"]["seconds"] / result["variants"]["vllm_2"]["seconds"], abs=0.01)
    assert all(0.0 <= v["success"] <= 1.0 and v["mean_sampled_tokens"] > 0 for v in result["variants"].values())
