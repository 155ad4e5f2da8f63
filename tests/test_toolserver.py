"""The tool server's protocol and tool semantics, run in-process (no sandbox needed)."""

from __future__ import annotations

import io
import json

import pytest

from sandboxes.toolserver import serve

DOMAIN = '''
def deposit(state, account: str, amount: int):
    """Add money; half-applies then fails on a negative amount (to test rollback)."""
    state["accounts"][account] = state["accounts"].get(account, 0) + amount
    if amount < 0:
        raise ToolFailure("negative_amount", "amount must be >= 0")
    return {"balance": state["accounts"][account]}

def crash(state):
    state["accounts"]["x"] = 1
    return 1 / 0

def spin(state):
    while True:
        pass

def not_json(state):
    return {1, 2, 3}

TOOLS = [deposit, crash, spin, not_json]
INITIAL_STATE = {"accounts": {"alice": 10}}
'''


def run(*requests: dict | bytes, **config) -> list[dict]:
    lines = b"".join(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in requests)
    out = io.BytesIO()
    serve(config, io.BytesIO(lines), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_rollback_on_failure_and_crash():
    load = {"id": 1, "op": "load_domain", "name": "bank", "source": DOMAIN}
    r = run(
        load,
        {"id": 2, "op": "call_tool", "name": "deposit", "args": {"account": "alice", "amount": 5}},
        {"id": 3, "op": "call_tool", "name": "deposit", "args": {"account": "alice", "amount": -50}},
        {"id": 4, "op": "call_tool", "name": "crash", "args": {}},
        {"id": 5, "op": "snapshot"},
    )
    assert r[0]["result"]["tools"] == ["crash", "deposit", "not_json", "spin"]
    assert r[1]["result"]["output"] == {"balance": 15}
    assert r[2]["result"]["error"] == {"kind": "tool_failure", "message": "amount must be >= 0", "code": "negative_amount"}
    assert r[3]["result"]["error"]["kind"] == "internal_error"
    assert "ZeroDivisionError" in r[3]["result"]["error"]["message"] and "crash" in r[3]["result"]["error"]["message"]
    # Neither the failed deposit nor the crash changed the world.
    assert r[4]["result"]["state"] == {"accounts": {"alice": 15}}


def test_tool_timeout_and_non_json_output():
    r = run(
        {"id": 1, "op": "load_domain", "name": "bank", "source": DOMAIN},
        {"id": 2, "op": "call_tool", "name": "spin", "args": {}, "timeout": 0.2},
        {"id": 3, "op": "call_tool", "name": "not_json", "args": {}},
        {"id": 4, "op": "ping"},
    )
    assert r[1]["result"]["error"]["kind"] == "timeout"
    assert r[2]["result"]["error"]["kind"] == "internal_error" and "JSON" in r[2]["result"]["error"]["message"]
    assert r[3]["result"]["pong"] is True


@pytest.mark.parametrize(
    "source, needle",
    [("def broken(:\n", "SyntaxError"), ("TOOLS = 3\n", "TOOLS"), ("raise RuntimeError('boom')\n", "boom"),
     ("def f(state): pass\nTOOLS=[f]\nINITIAL_STATE={'s': {1, 2}}\n", "not JSON-serialisable")],
)
def test_bad_domains_are_typed_errors(source, needle):
    r = run({"id": 1, "op": "load_domain", "name": "bad", "source": source}, {"id": 2, "op": "list_tools"})
    assert r[0]["ok"] is False and needle in r[0]["error"]["message"]
    assert r[0]["error"]["type"] in ("DomainLoadError", "StateNotSerializable")
    assert r[1]["result"]["domain"] == "builtin"  # the old domain is still loaded


def test_protocol_errors_and_shutdown():
    r = run(b"{nope\n", b"42\n", {"id": 3, "op": "read_file"}, {"id": 4, "op": "shutdown"}, {"id": 5, "op": "ping"})
    assert [x["error"]["type"] for x in r[:3]] == ["MalformedRequest", "MalformedRequest", "MalformedRequest"]
    assert r[3]["ok"] is True
    assert len(r) == 4  # nothing is served after shutdown


def test_oversized_request_is_refused_and_skipped():
    big = b'{"id": 1, "op": "ping", "pad": "' + b"x" * 5000 + b'"}\n'
    r = run(big, {"id": 2, "op": "ping"}, max_request_bytes=1024)
    assert r[0]["error"]["type"] == "RequestTooLarge"
    assert r[1]["id"] == 2 and r[1]["ok"] is True
