"""Bring your own environment, end to end on the CPU (issue 24): a domain folder written by the test
in a temp dir goes through `dojo synth tasks` -> 2 `dojo train` steps -> `dojo eval run`, and so does
an MCP server of the test's own with declared state hooks (`dojo zoo import-mcp --domain`, its tasks
imported with `dojo synth import-tasks`). Short on purpose: transformers generation (no vLLM start),
a 32-token completion budget, 2 turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.byoe_domains import write_mcp_server, write_planted_domain
from tests.conftest import any_backend

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[1]
DOJO = [str(Path(sys.executable).parent / "dojo")]


def _dojo(cwd: Path, *args: str, timeout: int = 900) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TOOLDOJO_TEST_SECRET": "s3cret"}
    env.pop("TOOLDOJO_DOMAIN_DIRS", None)
    p = subprocess.run([*DOJO, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, f"dojo {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def _train_and_eval(tmp: Path, domains: Path, tasks: Path) -> dict[str, str]:
    """`dojo train` (2 steps) then `dojo eval run` on the run: their outputs (checked by _check_train_and_eval)."""
    backend = any_backend()
    out = _dojo(tmp, "train", str(ROOT / "examples" / "train_tiny.yaml"), f"data.tasks={tasks}",
                f"data.domain_dirs=[{domains}]", "data.domains=null", "grpo.max_steps=2", "rollout.use_vllm=false",
                "grpo.per_device_train_batch_size=4", "grpo.num_generations=2", "grpo.max_completion_length=32",
                "rollout.max_turns=2", f"run.output_dir={tmp / 'run'}", f"rollout.sandbox_backend={backend}",
                "run.logging=[]", "run.save_steps=2")
    suite = tmp / "suite"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text((tasks / "tasks.jsonl").read_text())
    first = json.loads((tasks / "tasks.jsonl").read_text().splitlines()[0])["id"]
    (suite / "byoe.yaml").write_text(f"name: byoe\ncases:\n- name: mine\n  inputs: {{task: {first}, max_turns: 2}}\n"
                                     "  evaluators:\n  - EpisodeReward\n")
    evaluated = _dojo(tmp, "eval", "run", str(suite), "--model", str(tmp / "run"), "--domain-dir", str(domains),
                      "--history", str(tmp / "hist"), "-q", "-b", backend, "--max-tokens", "32")
    return {"train": out, "eval": evaluated}


def _check_train_and_eval(tmp: Path, outs: dict[str, str], name: str) -> None:
    summary = json.loads(outs["train"].strip().splitlines()[-1])
    assert summary["steps"] == 2
    episodes = [json.loads(x) for x in (tmp / "run" / "episodes" / "step-000001.jsonl").read_text().splitlines()]
    assert episodes and {e["domain"] for e in episodes} == {name}
    assert all(e["termination"] not in ("setup_error", "sandbox_dead") for e in episodes), episodes[0]["error"]
    assert all(e["components"] for e in episodes)
    out = outs["eval"]
    assert "byoe/mine" in out and "cases passed" in out
    # scored by the rewards over the domain's world state, not lost to a setup error
    assert "world_state" in out or "1/1" in out, out


def _desk_flow(tmp: Path) -> dict[str, str]:
    """The out-of-tree domain: `dojo synth tasks`, then train and eval."""
    domains = tmp / "my_domains"
    markers = tmp / "markers"
    markers.mkdir()
    write_planted_domain(domains, markers, "e2e_desk", users=6)
    synth = _dojo(tmp, "synth", "tasks", "--n", "4", "--out", str(tmp / "tasks"), "--domain-dir", str(domains),
                  "-b", any_backend(), "--sandboxes", "2")
    return {"synth": synth, **_train_and_eval(tmp, domains, tmp / "tasks")}


def _ship_flow(tmp: Path) -> dict[str, str]:
    """The MCP server with state hooks: `dojo zoo import-mcp --domain`, `dojo synth import-tasks`, train, eval."""
    server = write_mcp_server(tmp)
    domains = tmp / "mcp_domains"
    _dojo(tmp, "zoo", "import-mcp", "--command", f"{sys.executable} {server}", "--out", str(domains),
          "--name", "e2e_ship", "--domain", "--state-read", "get_state", "--state-reset", "reset_state")
    (tmp / "gold.json").write_text(json.dumps([
        {"instruction": f"Move user u{i} to {city}, NV.", "outputs": [city],
         "actions": [{"name": "modify_user_address", "kwargs": {"user_id": f"u{i}", "city": city, "state": "NV"}}]}
        for i, city in ((1, "Reno"), (2, "Elko"), (3, "Ely"))] + [
        {"instruction": "Move user u9 away.", "actions": [{"name": "modify_user_address",  # no state: bad arguments
                                                           "kwargs": {"user_id": "u9", "city": "X"}}]}]))
    imported = _dojo(tmp, "synth", "import-tasks", str(tmp / "gold.json"), "--domain", "e2e_ship",
                     "--domain-dir", str(domains), "--out", str(tmp / "tasks"), "-b", any_backend())
    return {"import": imported, **_train_and_eval(tmp, domains, tmp / "tasks")}


FLOWS = {"test_an_out_of_tree_domain_synthesises_trains_and_evaluates": ("desk", _desk_flow),
         "test_an_mcp_server_with_state_hooks_trains_and_evaluates": ("ship", _ship_flow)}


@pytest.fixture(scope="module")
def flows(request, tmp_path_factory) -> Iterator[dict[str, tuple[Path, Future]]]:
    """Both flows (those of this module's selected tests) run side by side, each in its own temp dir (issue 31:
    each keeps about one core busy, mostly in `dojo` subprocesses); a test waits for its own flow, whose
    failure (a `dojo` command's exit code) fails that test alone."""
    wanted = {FLOWS[item.name] for item in request.session.items
              if item.module is request.module and item.name in FLOWS}
    any_backend()  # a missing backend skips or fails here, not in a flow's thread
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = {}
        for key, flow in sorted(wanted, key=lambda x: x[0]):
            tmp = tmp_path_factory.mktemp(key)
            started[key] = (tmp, pool.submit(flow, tmp))
        yield started


def _result(flows: dict[str, tuple[Path, Future]], key: str) -> tuple[Path, dict[str, str]]:
    tmp, future = flows[key]
    return tmp, future.result(timeout=1800)


@pytest.mark.slow
def test_an_out_of_tree_domain_synthesises_trains_and_evaluates(flows):
    """The folder's __init__.py, tools.py and data.py each try to leave a marker with a secret on the host
    (issue 30): synthesis, training and the eval run its seed() and tools in sandboxes only."""
    tmp, outs = _result(flows, "desk")
    assert "4/4 tasks" in outs["synth"]
    _check_train_and_eval(tmp, outs, "e2e_desk")
    assert sorted(p.name for p in (tmp / "markers").iterdir()) == [], "the domain folder's code ran on the host"


@pytest.mark.slow
def test_an_mcp_server_with_state_hooks_trains_and_evaluates(flows):
    tmp, outs = _result(flows, "ship")
    assert "3 tasks kept, 1 dropped" in outs["import"]
    _check_train_and_eval(tmp, outs, "e2e_ship")
