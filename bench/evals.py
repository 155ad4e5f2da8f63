"""Benchmark personal eval suites: a first run, an unchanged re-run from the cache, --only-failed.

    python bench/evals.py [--quick] [--backend auto|docker|local] [--base-url URL --model M] [--suite DIR]

Progress goes to stderr; the LAST line on stdout is one JSON object. Phases, in order, each on
the example suite (examples/evals/personal: code run in sandboxes, tool episodes scored with
rewards, reasoning, one rubric-judge case) against the tiny model, with the model as its own judge,
in a fresh history and response cache:

* first_run: every case once; every model call is a real request.
  first_run_s = wall time of evals.runner.run_suite (sandbox pool start included).
* cached_rerun: the same run again, nothing changed: every answer comes from the response cache
  (the sandboxed checks and episodes still run). cached_rerun_s; cache_speedup = first / cached.
  cached_rerun_server_requests must be 0: requests are counted by the vLLM server itself
  (/metrics vllm:request_success_total), not by the client.
* only_failed: --only-failed after that: only_failed_cases = the cases that did not pass and were
  re-run (from the cache as well).

Without --base-url the bench builds the tiny model (rl.tiny) and starts its own vLLM server with
the flags of the tests' `vllm_server` fixture, stopped on exit. A phase that fails records its
error under "errors"; the JSON line is printed anyway.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

from rich.console import Console  # noqa: E402

console = Console(stderr=True, highlight=False)
KEYS = ("cases", "first_run_s", "cached_rerun_s", "cache_speedup", "only_failed_cases")


def server_requests(base_url: str) -> float | None:
    """vllm:request_success_total (all finish reasons) at the server, or None if it has no /metrics."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return None
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total{"))


def run(args: argparse.Namespace, result: dict[str, Any], workdir: Path) -> None:
    from evals.models import EndpointModel
    from evals.runner import RunOptions, run_suite_sync
    from evals.suite import load_suite

    server = None
    base_url, model_name = args.base_url, args.model
    if base_url is None:
        from rl.tiny import build_tiny_model
        from synth.vllm_server import start_vllm_server

        console.print("starting vLLM on the tiny model ...")
        server = start_vllm_server(build_tiny_model(), log_path=workdir / "vllm-server.log",
                                   deadline_s=args.vllm_startup_s)
        base_url, model_name = server.base_url, server.model
        result["server"] = {"started_by_bench": True, "startup_s": round(server.startup_s or 0, 1)}
    else:
        result["server"] = {"started_by_bench": False, "base_url": base_url}
    try:
        suite = load_suite(args.suite)
        result["cases"] = len(suite.dataset.cases)
        result["suite_version"] = suite.version
        hist = workdir / "history"

        def phase(name: str, **kw: Any) -> Any:
            model = EndpointModel("tiny", base_url, model_name)
            judge = EndpointModel("judge", base_url, model_name)
            opts = RunOptions(history_dir=hist, backend=args.backend, concurrency=args.concurrency,
                              max_tokens=args.max_tokens, max_turns=args.max_turns, judge=judge, progress=False, **kw)
            n0 = server_requests(base_url)
            t0 = time.perf_counter()
            records = run_suite_sync(suite, [model], opts)
            dt = time.perf_counter() - t0
            n1 = server_requests(base_url)
            rec = records[0] if records else None
            result[f"{name}_s"] = round(dt, 3)
            result[f"{name}_server_requests"] = None if n0 is None or n1 is None else int(n1 - n0)
            if rec is not None:
                result[f"{name}_model_requests"] = rec.usage.get("requests")
                result[f"{name}_cached"] = rec.usage.get("cached")
                result["backend"] = rec.options.get("backend", args.backend)
            console.print(f"{name}: {dt:.2f} s, {result[f'{name}_server_requests']} requests at the server"
                          + (f", {rec.summary.cases} cases, pass rate {100 * rec.summary.pass_rate:.1f}%" if rec else ""))
            return rec

        first = phase("first_run")
        result["pass_rate"] = round(first.summary.pass_rate, 4)
        result["case_errors"] = first.summary.errors
        phase("cached_rerun")
        result["cache_speedup"] = round(result["first_run_s"] / max(result["cached_rerun_s"], 1e-9), 2)
        rerun = phase("only_failed", only_failed=True)
        result["only_failed_cases"] = rerun.summary.cases if rerun else 0
    finally:
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["auto", "docker", "local"], default="auto")
    ap.add_argument("--quick", action="store_true", help="shorter answers and episodes")
    ap.add_argument("--base-url", default=None, help="an already-running OpenAI-compatible server (default: start one)")
    ap.add_argument("--model", default="tiny", help="the model name served at --base-url (default tiny)")
    ap.add_argument("--suite", default=str(_common.ROOT / "examples" / "evals" / "personal"))
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=None, help="completion tokens per call (128 full, 32 quick)")
    ap.add_argument("--max-turns", type=int, default=None, help="agent turns per tool episode (4 full, 2 quick)")
    ap.add_argument("--vllm-startup-s", type=float, default=600.0)
    args = ap.parse_args(argv)
    args.max_tokens = args.max_tokens or (32 if args.quick else 128)
    args.max_turns = args.max_turns or (2 if args.quick else 4)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result: dict[str, Any] = {"backend": args.backend, "quick": args.quick, "errors": {},
                              "config": {"concurrency": args.concurrency, "max_tokens": args.max_tokens,
                                         "max_turns": args.max_turns, "suite": args.suite}}
    for k in KEYS:
        result.setdefault(k, None)
    with tempfile.TemporaryDirectory(prefix="bench-evals-") as tmp:
        try:
            run(args, result, Path(tmp))
        except Exception as e:  # noqa: BLE001 - report what was measured, and why the rest was not
            result["errors"]["run"] = f"{type(e).__name__}: {e}"
            console.print(traceback.format_exc())
    _common.emit(result, ("backend", "quick", *KEYS))
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
