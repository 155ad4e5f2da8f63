"""Issue 61: what a tool call, a reset and the kernel's per-uid limits leave for the next episode.

Same rules as tests/test_sealed_sandbox.py: attacks through the public API only, on every
conformance backend, judged by what a later command or the tool server sees afterwards.
"""

from __future__ import annotations

import pytest

from sandboxes import DomainBundle, SandboxConfig, open_sandbox
from conftest import CONFORMANCE_BACKENDS, require

# A domain whose tool runs a command exactly as `exec` does (run_command), like a shell or test tool.
SHELL_SOURCE = '''
def run_shell(state, command):
    r = run_command(command, timeout=30.0)
    return {"exit_code": r["exit_code"]}

def grow(state, key, n):
    state["kv"][key] = "x" * n
    return {"key": key}

def big_output(state, n):
    return {"blob": "y" * n}

TOOLS = [run_shell, grow, big_output]
INITIAL_STATE = {"kv": {}}
'''


@pytest.fixture(params=CONFORMANCE_BACKENDS)
def backend(request) -> str:
    require(request.param)
    return request.param


def config(backend: str, **kw) -> SandboxConfig:
    return SandboxConfig(backend=backend, request_timeout_s=20.0, **kw)


@pytest.fixture
async def shell_sb(backend):
    async with await open_sandbox(config(backend)) as sb:
        await sb.load_domain(DomainBundle(name="shell", source=SHELL_SOURCE))
        yield sb


# ---------------------------------------------------------------- item 1
async def test_a_timed_out_tool_calls_command_is_killed(shell_sb):
    """A tool's command that outlives the tool call's timeout kept running (the alarm unwound
    op_exec past its kills): it wrote a verdict a grader reads after the episode. A reward forge."""
    sb = shell_sb
    forge = "sleep 2; echo PASSED > /workspace/verdict; sleep 30"
    r = await sb.call_tool("run_shell", {"command": ["sh", "-c", forge]}, timeout=0.5)
    assert r.ok is False and r.kind == "timeout", r
    ps = await sb.exec(["sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"], timeout=10)
    assert "PASSED" not in ps.stdout, f"the timed-out tool's command is still running:\n{ps.stdout}"
    r = await sb.exec(["sh", "-c", "sleep 3; cat /workspace/verdict 2>/dev/null || echo none"], timeout=10)
    assert r.stdout == "none\n", f"a timed-out tool call's command wrote after it returned: {r}"
    # The tool server still serves, and the next tool command runs normally.
    assert (await sb.call_tool("run_shell", {"command": ["true"]}, timeout=10)).output == {"exit_code": 0}


# ---------------------------------------------------------------- item 2
async def test_a_state_or_output_too_large_is_a_tool_error_not_a_dead_sandbox(shell_sb):
    """A tool that grew the state past what a restore request may carry left a snapshot that could
    never be restored; an output past the client's line limit killed the sandbox (ProtocolError).
    Both are now a typed tool error, and the state stays as it was before the call."""
    from sandboxes import RequestFailed

    sb = shell_sb
    assert (await sb.call_tool("grow", {"key": "a", "n": 1000})).ok
    before = await sb.snapshot()
    cap = sb.config.limits.max_request_bytes
    r = await sb.call_tool("grow", {"key": "b", "n": cap + 1})
    assert r.ok is False and r.kind == "state_too_large", r
    after = await sb.snapshot()
    assert after.state == before.state, "the call that failed changed the state"
    await sb.restore(after)
    r = await sb.call_tool("big_output", {"n": 34 << 20})
    assert r.ok is False and r.kind == "output_too_large", r
    assert sb.alive and (await sb.call_tool("grow", {"key": "c", "n": 10})).ok
    # A domain whose initial state is already too large to restore is refused at load.
    big = "def noop(state):\n    return {}\nTOOLS = [noop]\nINITIAL_STATE = {'x': 'y' * %d}\n" % (cap + 1)
    with pytest.raises(RequestFailed, match="StateTooLarge"):
        await sb.load_domain(DomainBundle(name="big", source=big))
    assert sb.alive and (await sb.snapshot()).domain == "shell"


def test_wire_len_is_the_length_of_the_ascii_json_the_wire_carries():
    from sandboxes.models import state_digest  # noqa: F401  (the canonical text it hashes)
    from sandboxes.toolserver import _Digests, _wire_len
    import json

    for state in ({"a": "plain"}, {"é": "naïve – 😀"}, {"s": "\ud800 lone"}, {"rows": {str(i): "ü" * i for i in range(40)}}):
        assert _wire_len(_Digests().text(state)) == len(json.dumps(state, separators=(",", ":"))), state
