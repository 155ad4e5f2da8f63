"""bench/train_multi.py --quick: 1 process vs 2 (gloo, tiny model), one JSON line last, the baselines from the same run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
