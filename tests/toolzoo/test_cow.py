"""Copy on write for write tools, no copy for reads, and the tool server's kept digest (issue 24)."""

from __future__ import annotations

import copy
import json
import random

import pytest

from sandboxes import SandboxConfig, SyncSandbox, toolserver
from sandboxes.models import DomainBundle, state_digest
from tests.conftest import any_backend
from toolzoo import dsl


def _state(rng: random.Random) -> dict:
    return {"users": {f"u{i}": {"name": f"n{i}", "tags": ["a", "b"], "addr": {"city": "c", "zip": i}}
                      for i in range(40)},
            "orders": [{"id": i, "items": [{"sku": "s", "qty": 1}]} for i in range(5)], "meta": {"v": 1}}


def _mutate(s: dict, rng: random.Random) -> None:
    """A random write tool: reads through every access path tools use, then changes something."""
    uid = rng.choice(sorted(s["users"]))
    op = rng.randrange(10)
    if op == 0:
        s["users"][uid]["addr"]["city"] = "z"
    elif op == 1:
        s["users"][uid]["tags"].append("c")
    elif op == 2:
        for _k, u in s["users"].items():
            u["addr"]["zip"] += 1
    elif op == 3:
        moved = s["users"].pop(uid)
        moved["name"] = "moved"
        s.setdefault("archive", {})[uid] = moved
    elif op == 4:
        for o in s["orders"]:
            if o["items"]:
                o["items"][0]["qty"] += 1
    elif op == 5:
        s["orders"][-1]["items"].append({"sku": "t", "qty": 2})
    elif op == 6:
        clone = dict(s["users"][uid])
        clone["tags"].append("via-dict-copy")
    elif op == 7:
        for u in list(s["users"].values())[:3]:
            u.get("addr")["city"] = "y"
    elif op == 8:
        s["orders"][1:3][0]["id"] = 99
    else:
        for o in reversed(s["orders"]):
            o["items"].clear()


def test_copy_on_write_acts_like_a_deep_copy():
    rng = random.Random(7)
    for trial in range(300):
        committed = _state(rng)
        for _ in range(rng.randrange(4)):  # a history of committed writes (closed views in the state)
            w = dsl.begin_write(committed)
            _mutate(w, rng)
            committed = dsl.commit_write(committed, w)
        before = json.dumps(committed, sort_keys=True)
        expected = copy.deepcopy(committed)
        seed = rng.random()
        _mutate(expected, random.Random(seed))
        working = dsl.begin_write(committed)
        _mutate(working, random.Random(seed))
        assert json.dumps(committed, sort_keys=True) == before, f"trial {trial}: the committed state changed"
        assert json.dumps(dsl.commit_write(committed, working), sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_a_write_copies_only_what_it_reaches():
    big = {"rows": {f"r{i}": {"v": i} for i in range(1000)}, "other": {"x": [1, 2]}}
    w = dsl.begin_write(big)
    w["rows"]["r5"]["v"] = -1
    new = dsl.commit_write(big, w)
    assert big["rows"]["r5"]["v"] == 5 and new["rows"]["r5"]["v"] == -1
    assert dict.__getitem__(new, "other") is big["other"]                      # untouched: shared
    assert dict.__getitem__(new["rows"], "r6") is big["rows"]["r6"]


_SOURCE = '''
from toolzoo.dsl import ToolFailure, tool

@tool()
def peek(state, key: str) -> dict:
    """Read a row.

    Args:
        key: the row.
    """
    return state["rows"][key]

@tool(effect="write")
def bump(state, key: str, fail: bool = False) -> dict:
    """Change a row, then maybe fail.

    Args:
        key: the row.
        fail: fail after the change.
    """
    state["rows"][key]["v"] += 1
    state["rows"][key]["seen"].append(1)
    if fail:
        raise ToolFailure("boom", "failed half-way")
    return state["rows"][key]
'''


def _bundle() -> DomainBundle:
    from toolzoo.introspect import spec_from_function
    from toolzoo.runtime import bundle
    from toolzoo.spec import Domain

    ns: dict = {}
    exec(compile(_SOURCE, "<t>", "exec"), ns)
    specs = [spec_from_function(ns[n], domain="rows", category="ecommerce") for n in ("peek", "bump")]
    dom = Domain(name="rows", category="ecommerce", description="rows", policy="", source="def seed(rng):\n"
                 "    return {'rows': {f'r{i}': {'v': i, 'seen': []} for i in range(100)}, 'n': 1}\n" + _SOURCE,
                 tools=specs)
    return bundle(dom)


def test_tool_server_rolls_back_a_failed_write_and_keeps_the_digest_exact(tmp_path):
    # In-process: its scratch dirs must be the test's own (reset empties them; the default is /tmp).
    server = toolserver.Server({"workdir": str(tmp_path), "scratch": [str(tmp_path)]})
    b = _bundle()
    server.op_load_domain(b.name, b.source, b.state)
    digest = lambda: server.op_digest()["digest"]  # noqa: E731
    exact = lambda: state_digest(server.op_snapshot()["state"])  # noqa: E731
    assert digest() == exact()
    assert server.op_call_tool("peek", {"key": "r1"})["output"]["v"] == 1
    assert server.op_call_tool("bump", {"key": "r1"})["output"] == {"v": 2, "seen": [1]}
    assert digest() == exact()
    err = server.op_call_tool("bump", {"key": "r2", "fail": True})
    assert err["ok"] is False and server.op_snapshot()["state"]["rows"]["r2"] == {"v": 2, "seen": []}
    for i in range(30):
        server.op_call_tool("bump", {"key": f"r{i % 7}"})
        assert digest() == exact()
    server.op_restore({"rows": {"r1": {"v": 0, "seen": []}}, "n": 1})
    assert digest() == exact()
    server.op_reset()
    assert digest() == exact()


def test_sandbox_digest_matches_the_snapshot():
    with SyncSandbox(SandboxConfig(backend=any_backend())) as sb:
        sb.load_domain(_bundle())
        assert sb.digest() == sb.snapshot().digest
        assert sb.call_tool("bump", {"key": "r3"}).ok
        assert sb.digest() == sb.snapshot().digest
        assert not sb.call_tool("bump", {"key": "r3", "fail": True}).ok
        assert sb.snapshot().state["rows"]["r3"] == {"v": 4, "seen": [1]}


@pytest.mark.parametrize("key", [1, "1"])
def test_digest_falls_back_for_keys_json_would_rename(key):
    d = toolserver._Digests()
    state = {"rows": {key: 1, "2": 2}}
    assert d.digest(state) == state_digest(json.loads(json.dumps(state)))


def test_big_state_bench_prints_one_json_line_last():
    """bench/big_state.py --quick on a small database: every figure (no assertion on speed)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "bench" / "big_state.py"), "--quick", "--mb", "0.2", "--calls", "5",
                        "--backend", any_backend()], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["big_db_bytes"] >= 200_000
    for key in ("big_read_p50_ms", "big_write_p50_ms", "big_digest_p50_ms", "big_snapshot_digest_p50_ms",
                "legacy_big_read_p50_ms", "legacy_big_write_p50_ms", "small_read_p50_ms", "small_write_p50_ms"):
        assert result[key] > 0, key
