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
