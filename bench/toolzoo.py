"""Benchmark the tool zoo: offline tool generation, validation, and calling zoo tools (sandbox and MCP).

    python bench/toolzoo.py [--quick] [--backend auto|docker|local] [--n N] [--calls N]

Progress goes to stderr; the LAST line on stdout is one JSON object with every
number (milliseconds unless the key says otherwise):

* tools_generated, generate_tools_per_s: candidates proposed by the offline
  evolutionary generator (toolzoo.evolve.OfflineGenerator, no LLM) while
  toolzoo.evolve.synthesize grows the seed zoo by --n tools, per second of
  proposing;
* tools_valid: generated tools that passed validation (tools_accepted: those
  of them that joined the zoo, exactly --n unless the generator ran dry);
  validate_tools_per_s: tools validated (seed tools first, then every distinct
  candidate) per second of toolzoo.validate (spec checks, schema-valid and
  schema-invalid calls in a pool of --sandboxes sandboxes);
* categories, domains, tools_total: of the final zoo (seed + evolved);
* zoo_call_p50_ms: a read tool of a zoo domain called through the sandbox tool
  server (sandbox.call_tool), --calls times after a warm-up;
* mcp_call_p50_ms: the same tool called through MCP: `dojo zoo serve-mcp DOMAIN`
  (stdio) spawned as a server, called with toolzoo.mcp.McpClient --calls times.

Latencies are time.perf_counter around each awaited call; percentiles come from
statistics.quantiles over all samples. A phase that fails records its error
under "errors" and leaves its numbers null; the others still run.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

import anyio  # noqa: E402
from rich.console import Console  # noqa: E402

from toolzoo.spec import Zoo  # noqa: E402

console = Console(stderr=True, highlight=False)

# The tool both call measurements use: a read-only lookup, so state never drifts between calls.
CALL_DOMAIN = "retail_orders"
CALL_TOOL = "get_order"
CALL_ARGS = {"order_id": "O-1000"}

# (full, quick)
COUNTS = {"generate": (200, 30), "calls": (200, 200), "warmup": (30, 10)}


def pct(samples_s: list[float], q: int) -> float | None:
    """The q-th percentile of samples (seconds) in milliseconds, rounded to 3 decimals."""
    if not samples_s:
        return None
    if len(samples_s) == 1:
        return round(samples_s[0] * 1000, 3)
    if q == 50:
        return round(statistics.median(samples_s) * 1000, 3)
    return round(statistics.quantiles(samples_s, n=100, method="inclusive")[q - 1] * 1000, 3)


def latency(name: str, samples_s: list[float]) -> dict[str, Any]:
    return {f"{name}_p50_ms": pct(samples_s, 50), f"{name}_p95_ms": pct(samples_s, 95),
            f"{name}_mean_ms": round(statistics.fmean(samples_s) * 1000, 3) if samples_s else None,
            f"{name}_n": len(samples_s)}


def dojo_command() -> list[str]:
    exe = Path(sys.executable).with_name("dojo")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("dojo")
    return [found] if found else [sys.executable, "-c", "from tooldojo.cli import main; main()"]


# ------------------------------------------------------------------ generation + validation
async def bench_synthesize(seed: Zoo, n: int, rng_seed: int, backend: str, sandboxes: int) -> tuple[dict[str, Any], Zoo]:
    """Grow the seed zoo by n evolved tools with toolzoo.evolve.synthesize (offline generator, no LLM).

    Generation and validation interleave (the generator learns output shapes from
    what validation saw), so each is timed on its own inside the loop: generate_s
    is time spent proposing candidates, validate_s time spent validating in
    sandboxes (the seed tools are validated first, like every candidate).
    """
    from toolzoo.evolve import synthesize
    from toolzoo.validate import Validator

    target = len(seed.tools) + n
    t0 = time.perf_counter()
    async with Validator(backend=backend, sandboxes=sandboxes, seed=rng_seed) as v:
        res = await synthesize(target, validator=v, seed=rng_seed, zoo=seed)
        used = v.backend_used
    wall = time.perf_counter() - t0
    s = res.stats
    return {
        "tools_generated": s.proposed,
        # Every distinct candidate that passed validation (the last batch may pass more than the n accepted).
        "tools_valid": s.validated - len(seed.tools) - s.failed_validation,
        "tools_accepted": s.evolved,
        "generate_tools_per_s": round(s.proposed / s.generate_s, 1) if s.generate_s > 0 else None,
        "validate_tools_per_s": round(s.validated / s.validate_s, 1) if s.validate_s > 0 else None,
        "tools_duplicate": s.duplicates,
        "tools_failed_validation": s.failed_validation,
        "tools_validated": s.validated,
        "seed_tools_valid": s.seed_tools,
        "generate_s": round(s.generate_s, 3),
        "validate_s": round(s.validate_s, 3),
        "synth_wall_s": round(wall, 2),
        "synth_exhausted": s.exhausted,
        "by_operator": dict(sorted(s.by_operator.items())),
        "validate_backend": used,
        "failed_reasons": _reasons(res.rejected),
    }, res.zoo


def _reasons(rejected: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rejected:
        if r.stage != "validation":
            continue
        key = (r.reason or "?").split(":")[0][:60]
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:8])


# ------------------------------------------------------------------ calls
async def bench_zoo_calls(backend: str, calls: int, warmup: int) -> dict[str, Any]:
    from sandboxes import SandboxConfig, open_sandbox
    from toolzoo.domains import load_domain
    from toolzoo.runtime import bundle

    domain = load_domain(CALL_DOMAIN)
    t0 = time.perf_counter()
    sb = await open_sandbox(SandboxConfig(backend=backend))  # type: ignore[arg-type]
    try:
        await sb.load_domain(bundle(domain))
        ready = time.perf_counter() - t0
        for _ in range(warmup):
            r = await sb.call_tool(CALL_TOOL, CALL_ARGS)
            if not r.ok:
                raise RuntimeError(f"{CALL_TOOL}({CALL_ARGS}) failed in the sandbox: {r.kind}: {r.message}")
        samples = []
        for _ in range(calls):
            s = time.perf_counter()
            await sb.call_tool(CALL_TOOL, CALL_ARGS)
            samples.append(time.perf_counter() - s)
        return {**latency("zoo_call", samples), "zoo_sandbox_backend": sb.backend,
                "zoo_sandbox_ready_ms": round(ready * 1000, 1)}
    finally:
        await sb.close()


async def bench_mcp_calls(backend: str, calls: int, warmup: int) -> dict[str, Any]:
    from toolzoo.mcp import McpClient
    from toolzoo.spec import McpSource

    source = McpSource(command=[*dojo_command(), "zoo", "serve-mcp", CALL_DOMAIN, "--stdio", "--backend", backend],
                       server_name=CALL_DOMAIN)
    t0 = time.perf_counter()
    async with McpClient(connect_timeout=120.0, call_timeout=30.0) as client:
        specs = {t.name: t for t in await client.list_tools(source)}
        ready = time.perf_counter() - t0
        if CALL_TOOL not in specs:
            raise RuntimeError(f"the MCP server did not list {CALL_TOOL} (got {sorted(specs)})")
        spec = specs[CALL_TOOL]
        for _ in range(warmup):
            r = await client.call(spec, CALL_ARGS)
            if not r.ok:
                raise RuntimeError(f"{CALL_TOOL}({CALL_ARGS}) failed over MCP: {r.kind}: {r.message}")
        samples = []
        for _ in range(calls):
            s = time.perf_counter()
            await client.call(spec, CALL_ARGS)
            samples.append(time.perf_counter() - s)
    return {**latency("mcp_call", samples), "mcp_tools_listed": len(specs),
            "mcp_server_ready_ms": round(ready * 1000, 1)}


# ------------------------------------------------------------------ main
def run(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from sandboxes.backends import resolve_backend
    from toolzoo.domains import seed_zoo

    backend, why = resolve_backend(args.backend)
    result["backend"] = backend
    quick = args.quick
    n = args.n if args.n is not None else COUNTS["generate"][quick]
    calls = args.calls if args.calls is not None else COUNTS["calls"][quick]
    warmup = COUNTS["warmup"][quick]
    console.print(f"[bold]tooldojo zoo bench[/] backend={backend} ({why}) mode={'quick' if quick else 'full'} "
                  f"generate={n} calls={calls}")
    phase = _common.phase_runner(result, console, spinner=True)

    seed = seed_zoo()
    result["seed_tools"] = len(seed.tools)
    out = phase("synthesize", lambda: anyio.run(bench_synthesize, seed, n, args.seed, backend, args.sandboxes),
                ("tools_generated", "tools_valid", "generate_tools_per_s", "validate_tools_per_s"))
    zoo = out[1] if out else seed
    result["tools_total"] = len(zoo.tools)
    result["categories"] = len({t.category for t in zoo.tools})
    result["domains"] = len({t.domain for t in zoo.tools})
    if args.embed:
        def stats() -> dict[str, Any]:
            from toolzoo.stats import zoo_stats

            d = zoo_stats(zoo).diversity
            return {"diversity_mean_distance": d.mean_distance, "diversity_ratio": d.ratio,
                    "diversity_nn_distance": d.nn_distance_mean, "near_duplicate_pairs": d.near_duplicate_pairs}

        phase("diversity", stats, ("diversity_mean_distance", "diversity_ratio"))
    phase("zoo_calls", lambda: anyio.run(bench_zoo_calls, backend, calls, warmup), ("zoo_call_p50_ms", "zoo_call_p95_ms"))
    phase("mcp_calls", lambda: anyio.run(bench_mcp_calls, backend, calls, warmup), ("mcp_call_p50_ms", "mcp_call_p95_ms"))


KEYS = ("tools_generated", "tools_valid", "generate_tools_per_s", "validate_tools_per_s", "categories", "domains",
        "mcp_call_p50_ms", "zoo_call_p50_ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", choices=["auto", "docker", "local"], default="auto")
    ap.add_argument("--quick", action="store_true", help="30 generated tools, no embeddings; under a minute")
    ap.add_argument("--n", type=int, default=None, metavar="N", help="tools to generate (default 200 full, 30 quick)")
    ap.add_argument("--calls", type=int, default=None, metavar="N", help="timed calls per call benchmark (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed")
    ap.add_argument("--sandboxes", type=int, default=4, help="sandboxes validating in parallel")
    ap.add_argument("--embed", action=argparse.BooleanOptionalAction, default=None,
                    help="also compute the embedding diversity of the final zoo (default: on unless --quick)")
    args = ap.parse_args()
    if args.embed is None:
        args.embed = not args.quick
    if (args.n is not None and args.n < 1) or (args.calls is not None and args.calls < 1):
        ap.error("--n and --calls must be >= 1")

    result: dict[str, Any] = {
        "backend": None, "quick": bool(args.quick),
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()},
    }
    t0 = time.perf_counter()
    rc = 0
    try:
        run(args, result)
    except KeyboardInterrupt:
        result["error"] = "interrupted"
        rc = 130
    except Exception as e:  # noqa: BLE001
        result["error"] = f"{type(e).__name__}: {e}"
        rc = 1
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    if result.get("errors"):
        rc = rc or 1
    _common.emit(result, ("backend", "quick", *KEYS))
    return rc


if __name__ == "__main__":
    sys.exit(main())
