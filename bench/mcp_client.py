"""Benchmark the MCP client's fault handling (issue 22): what keeping an HTTP session costs, and how soon a
stdio server that breaks the protocol is known.

    python bench/mcp_client.py [--quick] [--calls N] [--timeout S]

The server is tests/toolzoo/mcp_servers/foreign_server.py (built with the `mcp` SDK), on 127.0.0.1.
Progress goes to stderr; the LAST line on stdout is one JSON object (milliseconds unless the key says
otherwise):

* http_connect_ms / http_call_p50_ms: ours, toolzoo.mcp.McpClient over streamable HTTP with the
  initialize handshake (the server keeps a session, so a restart is seen: McpSessionLost): the
  connect + tools/list, median of --connects fresh clients; then `kv.get`, --calls times;
* baseline_http_connect_ms / baseline_http_call_p50_ms: the same with the SDK's default (mode "auto":
  the sessionless 2026 protocol, where a restarted server goes unnoticed), in the same run;
* stray_byte_error_s: seconds from calling `garble` (the server writes b"\\xff\\n" to stdout) to the
  McpConnectionError, with McpClient (its guarded stdio transport);
* baseline_stray_byte_error_s: the same call through the SDK's own stdio transport: it waits out the
  call timeout (--timeout), and so does every later call.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)
import anyio
from rich.console import Console

SERVER = _common.ROOT / "tests" / "toolzoo" / "mcp_servers" / "foreign_server.py"
console = Console(stderr=True)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_http(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the server did not listen on 127.0.0.1:{port}")


async def bench_http(url: str, connects: int, calls: int, mode: str) -> dict[str, Any]:
    """Connect + list `connects` times, then `calls` calls of kv.get, with mode "legacy" (ours) or "auto"."""
    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    from toolzoo.mcp_transport import HttpTransport

    def client() -> Client:
        return Client(HttpTransport(url, create_mcp_http_client(), streamable_http_client), mode=mode)

    connect = []
    for _ in range(connects):
        t0 = time.perf_counter()
        async with client() as c:
            await c.list_tools()
        connect.append(time.perf_counter() - t0)
    samples = []
    async with client() as c:
        await c.call_tool("kv.set", {"key": "k", "value": "v"})
        for _ in range(calls):
            t0 = time.perf_counter()
            r = await c.call_tool("kv.get", {"key": "k"})
            samples.append(time.perf_counter() - t0)
            if r.is_error:
                raise RuntimeError(f"kv.get failed: {r.content}")
    return {"connect_ms": _ms(statistics.median(connect)), "call_p50_ms": _ms(statistics.median(samples)),
            "calls": len(samples)}


async def bench_stray_byte(timeout: float) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    from toolzoo.mcp import McpClient, McpConnectionError, import_mcp_tools
    from toolzoo.spec import McpSource

    source = McpSource(command=[sys.executable, str(SERVER)])
    tools = {t.mcp_name: t for t in (await import_mcp_tools(source)).tools}
    async with McpClient(call_timeout=timeout) as ours:
        await ours.call(tools["get-weather"], {})  # the session is open: only the failure is timed
        t0 = time.perf_counter()
        try:
            await ours.call(tools["garble"], {})
            raise RuntimeError("McpClient did not raise on the stray byte")
        except McpConnectionError:
            ours_s = time.perf_counter() - t0
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    outcome, t0 = "answered", time.perf_counter()
    try:
        async with Client(params, read_timeout_seconds=timeout) as sdk:
            await sdk.call_tool("get-weather", {})
            t0 = time.perf_counter()
            with anyio.fail_after(timeout):
                await sdk.call_tool("garble", {})
    except TimeoutError:
        outcome = "timeout"
    except BaseException as e:  # noqa: BLE001 - whatever the SDK raises (on close: its reader's decode error)
        if outcome == "answered" and not isinstance(e, Exception | BaseExceptionGroup):
            raise
        outcome = "timeout" if isinstance(e, BaseExceptionGroup) and e.subgroup(TimeoutError) else type(e).__name__
    sdk_s = time.perf_counter() - t0
    return {"stray_byte_error_s": round(ours_s, 3), "baseline_stray_byte_error_s": round(sdk_s, 3),
            "baseline_stray_byte_outcome": outcome, "call_timeout_s": timeout}


def run(args: argparse.Namespace, result: dict[str, Any]) -> None:
    phase = _common.phase_runner(result, console)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = _serve_http(port)
    try:
        for mode, prefix in (("auto", "baseline_http_"), ("legacy", "http_"), ("auto", "baseline_http_"),
                             ("legacy", "http_")):  # interleaved twice; the second round counts (warm)
            phase(f"{prefix}{mode}", lambda m=mode, p=prefix: {
                p + k: v for k, v in anyio.run(bench_http, url, args.connects, args.calls, m).items()},
                (f"{prefix}connect_ms", f"{prefix}call_p50_ms"))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    phase("stray_byte", lambda: anyio.run(bench_stray_byte, args.timeout),
          ("stray_byte_error_s", "baseline_stray_byte_error_s"))


KEYS = ("http_connect_ms", "baseline_http_connect_ms", "http_call_p50_ms", "baseline_http_call_p50_ms",
        "stray_byte_error_s", "baseline_stray_byte_error_s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 connects, 50 calls, a 5 s call timeout")
    ap.add_argument("--calls", type=int, default=None, metavar="N", help="timed calls per mode (default 300)")
    ap.add_argument("--connects", type=int, default=None, metavar="N", help="fresh connects per mode (default 20)")
    ap.add_argument("--timeout", type=float, default=None, metavar="S", help="call timeout of the stray-byte run (default 10)")
    args = ap.parse_args()
    args.calls = args.calls or (50 if args.quick else 300)
    args.connects = args.connects or (5 if args.quick else 20)
    args.timeout = args.timeout or (5.0 if args.quick else 10.0)
    if args.calls < 1 or args.connects < 1 or not 0 < args.timeout <= 600:
        ap.error("--calls and --connects must be >= 1, --timeout in (0, 600]")
    result: dict[str, Any] = {"quick": bool(args.quick), "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                                                                     "python": platform.python_version()}}
    t0 = time.perf_counter()
    rc = 0
    try:
        run(args, result)
    except KeyboardInterrupt:
        result["error"], rc = "interrupted", 130
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    if result.get("errors"):
        rc = rc or 1
    _common.emit(result, ("quick", *KEYS))
    return rc


if __name__ == "__main__":
    sys.exit(main())
