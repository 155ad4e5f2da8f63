"""bench/reader_worlds.py: several primed checkpoints evaluated on one folder's held-out tasks (issue 28)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_module import load_bench

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    return load_bench("reader_worlds")


def test_models_are_named_and_a_name_given_twice_is_refused() -> None:
    mod = _bench()
    assert mod.parse_models("one=/a/sft, many=/b/sft") == {"one": Path("/a/sft"), "many": Path("/b/sft")}
    assert mod.parse_models("/a/sft") == {"/a/sft": Path("/a/sft")}
    with pytest.raises(SystemExit, match="given twice"):
        mod.parse_models("x=/a,x=/b")
    with pytest.raises(SystemExit, match="no model"):
        mod.parse_models(" , ")


def test_summary_keeps_the_compared_figures_and_the_reading_families() -> None:
    res = {"success": 0.25, "greedy_success": 0.5, "pass_at_k": 0.75, "multistep_success": 0.1,
           "multistep_greedy_success": None, "multistep_pass_at_k": 0.2, "seconds": 3.0,
           "by_tool": {"read_report": {"tasks": 2, "success": 0.5, "pass_at_k": 1.0, "never_solved": 0, "x": 1},
                       "set_home_light": {"tasks": 1, "success": 1.0, "pass_at_k": 1.0, "never_solved": 0}}}
    row = _bench().summary(res)
    assert row == {"success": 0.25, "greedy_success": 0.5, "pass_at_k": 0.75, "multistep_success": 0.1,
                   "multistep_pass_at_k": 0.2,
                   "families": {"read_report": {"tasks": 2, "success": 0.5, "pass_at_k": 1.0, "never_solved": 0}}}


def test_two_models_on_the_same_tasks_end_to_end(tmp_path: Path) -> None:
    """The shipped base under two names on three held-out tasks: one JSON line, both models scored on the
    same tasks with the same seed, so the same weights score the same."""
    from synth.tasks import export_tasks, synthesize_tasks
    from tests.conftest import backend_status

    ok, why = backend_status("local")
    if not ok:
        pytest.skip(f"local backend unavailable: {why}")
    made = synthesize_tasks(3, seed=1, domains=["home_devices"], backend="local", sandboxes=2, lengths={1: 1.0})
    export_tasks(made, tmp_path / "run" / "tasks" / "held_out")
    base = ROOT / "rl" / "base"
    cmd = [sys.executable, str(ROOT / "bench" / "reader_worlds.py"), "--models", f"a={base},b={base}",
           "--tasks-dir", str(tmp_path / "run"), "--samples", "1", "--work", str(tmp_path / "work"),
           "--set", "train.rollout.use_vllm=false", "--set", "train.rollout.sandbox_backend=local",
           "--out", str(tmp_path / "out.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout.strip().splitlines()[-1])
    assert res == json.loads((tmp_path / "out.json").read_text())
    assert res["held_out_tasks"] == 3 and set(res["models"]) == {"a", "b"}
    a, b = res["models"]["a"], res["models"]["b"]
    assert 0.0 <= a["success"] <= 1.0 and a["greedy_success"] is not None
    assert {k: v for k, v in a.items() if k != "path"} == {k: v for k, v in b.items() if k != "path"}
