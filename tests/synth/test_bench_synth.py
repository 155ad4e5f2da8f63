"""bench/synth.py --quick against the session's vLLM server: it runs and reports every figure (no assertion on speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"episodes_per_min_scripted", "tasks_per_min", "task_replay_pass_rate", "agent_tokens_per_s",
        "raw_vllm_tokens_per_s", "rollout_efficiency", "target", "meets_target", "backend", "machine", "phase_s",
        "agent", "raw", "scripted", "tasks", "server"}

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def test_bench_synth_quick_prints_one_json_line_last(vllm_server):
    require("docker")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "synth.py"), "--quick", "--backend", "docker",
                        "--base-url", vllm_server.base_url, "--model", vllm_server.model],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert KEYS <= set(result), KEYS - set(result)
    assert result["errors"] == {}
    assert result["backend"] == "docker" and result["quick"] is True
    assert result["server"]["started_by_bench"] is False and result["server"]["base_url"] == vllm_server.base_url
    assert result["tasks_per_min"] > 0 and 0 < result["task_replay_pass_rate"] <= 1
    assert result["tasks"]["kept"] >= 1
    assert result["episodes_per_min_scripted"] > 0
    assert result["scripted"]["episodes"] == result["config"]["scripted_episodes"]
    assert result["agent_tokens_per_s"] > 0 and result["raw_vllm_tokens_per_s"] > 0
    agent, raw = result["agent"], result["raw"]
    assert agent["episodes"] == result["config"]["agent_episodes"] and agent["llm_calls"] >= agent["episodes"]
    # the raw baseline replays exactly the agent's successful requests: the same tokens, full length
    assert raw["requests"] == agent["llm_calls"] and raw["errors"] == 0
    assert raw["completion_tokens"] == agent["completion_tokens"] == agent["llm_calls"] * result["config"]["max_tokens"]
    assert result["rollout_efficiency"] == pytest.approx(
        result["agent_tokens_per_s"] / result["raw_vllm_tokens_per_s"], abs=1e-3)
    assert result["target"] == {"rollout_efficiency_min": 0.8}
    assert isinstance(result["meets_target"], bool)
    assert result["meets_target"] == (result["rollout_efficiency"] >= 0.8)
