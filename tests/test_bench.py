"""The sandbox benchmark runs and reports every figure (no assertion on speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"tool_call_p50_ms", "tool_call_p99_ms", "docker_exec_p50_ms", "reset_p50_ms", "acquire_p50_ms",
        "fresh_start_p50_ms", "max_concurrent", "rss_per_sandbox_mb", "backend"}


@pytest.mark.slow
def test_bench_quick_prints_one_json_line_last(backend):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "sandboxes.py"), "--quick", "--backend", backend,
                        "--max-sandboxes", "8"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert KEYS <= set(result)
    assert result["backend"] == backend and result["max_concurrent"] == 8
    assert result["tool_call_p50_ms"] > 0 and result["reset_p50_ms"] > 0
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
