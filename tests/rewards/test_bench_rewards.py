"""bench/rewards.py --quick against the session's vLLM server: it runs and reports every figure (no assertion on speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"verifiable_rewards_per_s", "verifiable_rewards_per_s_warm", "reward_scores_per_s", "judge_calls_per_s",
        "judge_cache_hit_speedup", "judge_memo_speedup", "unit_tests_per_s", "verifiable", "judge", "unit_tests",
        "backend", "server", "phase_s", "errors", "config"}

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def test_bench_rewards_quick_prints_one_json_line_last(vllm_server):
    require("docker")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "rewards.py"), "--quick", "--backend", "docker",
                        "--tasks", "4", "--judge-calls", "4", "--unit-tests", "4", "--judge-max-tokens", "128",
                        "--base-url", vllm_server.base_url, "--model", vllm_server.model],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert KEYS <= set(result), KEYS - set(result)
    assert result["errors"] == {}
    assert result["server"] == {"started_by_bench": False, "base_url": vllm_server.base_url, "model": vllm_server.model}
    assert result["verifiable"]["trajectories"] >= 1 and result["judge"]["calls"] >= 1
    for key in ("verifiable_rewards_per_s", "judge_calls_per_s", "judge_cache_hit_speedup", "unit_tests_per_s"):
        assert isinstance(result[key], (int, float)), key
    assert result["unit_tests"]["all_passed"] is True


def test_bench_judge_prompt_quick_prints_one_json_line_last():
    """bench/judge_prompt.py --quick: every figure, the budget holds and nothing it must escape leaks."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "judge_prompt.py"), "--quick", "--steps", "60"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["prompt_chars"] <= result["max_prompt_chars"] < result["baseline_prompt_chars"]
    assert result["leaked_characters"] == 0 and result["baseline_leaked_characters"] > 0
    for key in ("build_ms", "baseline_build_ms", "escape_mb_per_s", "baseline_escape_mb_per_s"):
        assert result[key] > 0, key
