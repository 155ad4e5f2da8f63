"""Benchmark rewards: verifiable rewards in sandboxes, unit tests, and the LLM judge with and without its cache.

    python bench/rewards.py [--quick] [--backend auto|docker|local] [--base-url URL --model M]

Progress goes to stderr; the LAST line on stdout is one JSON object with every number. Phases:

* tasks: synth.tasks makes --tasks replay-validated tasks; ScriptedAgent + ScriptedUser run each once:
  the gold trajectories.
* verifiable: every verifiable reward of rewards.verifiable (WorldStateReward with a cold gold cache,
  CommunicationReward, RubricReward, ToolCallValidityReward, ReverifyReward: replays in fresh
  sandboxes) on every gold trajectory, --concurrency trajectories at a time on a warm pool.
  verifiable_rewards_per_s = trajectories fully scored (all five rewards) per second of the phase;
  reward_scores_per_s counts each reward's score separately (5x). A second pass with the warm gold
  cache gives verifiable_rewards_per_s_warm. Each reward alone: per_reward_s.
* unit_tests: rewards.code.UnitTestReward on --unit-tests runs of a passing solution, one fresh
  sandbox each: unit_tests_per_s.
* judge: rewards.judge.RubricJudge on a vLLM server (the tiny random model; its verdicts are mostly
  invalid, so most judgements abstain after a re-ask: what is timed is the full call path). One call
  per gold trajectory (system prompt dropped, shortest first: the tiny server's context is 2048
  tokens), after WARMUP untimed calls on other tasks. Fresh judge, empty on-disk cache:
  judge_calls_per_s = judge.score calls per second, --judge-concurrency in flight. Then the SAME calls again with a fresh judge on the same cache dir (LLMClient disk-cache
  hits, the judge's memo empty): judge_cache_hit_speedup = uncached time / cached time. And once more
  on the first judge (its in-memory memo; abstentions are not memoised): judge_memo_speedup.

Without --base-url the bench starts its own vLLM server on the tiny model, exactly like the tests'
`vllm_server` fixture (bench/synth.py's start_vllm), in its own process group, killed at the end.
A phase that fails records its error under "errors" and leaves its numbers null.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

import _common  # noqa: E402  (first: fixes sys.path)

ROOT = _common.ROOT

console = Console(stderr=True)

WARMUP = 2  # untimed judge calls before the timed passes
COUNTS = {  # (full, quick)
    "tasks": (40, 10),
    "judge_calls": (32, 8),
    "unit_tests": (32, 8),
}

UT_TESTS = '''
import unittest
from solution import add

class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(add(1, 2), 3)
    def test_b(self):
        self.assertEqual(add(-1, 1), 0)
'''


def _bench_synth():
    """bench/synth.py as a module (it knows how to start vLLM like the tests do)."""
    spec = importlib.util.spec_from_file_location("bench_synth", ROOT / "bench" / "synth.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["bench_synth"] = mod
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ phases
async def make_gold(n: int, seed: int, backend: str, sandboxes: int) -> tuple[dict[str, Any], list, list]:
    from sandboxes import SandboxConfig, SandboxPool
    from synth.episode import ScriptedAgent, run_episodes
    from synth.tasks import synthesize_tasks
    from synth.usersim import ScriptedUser

    t0 = time.perf_counter()
    result = await anyio.to_thread.run_sync(lambda: synthesize_tasks(n, seed=seed, backend=backend, sandboxes=sandboxes))
    tasks = result.tasks
    async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes, max_concurrency=2 * sandboxes) as pool:
        trajs = await run_episodes(tasks, ScriptedAgent, lambda t: ScriptedUser(), pool, concurrency=sandboxes,
                                   progress=False)
    return ({"tasks": {"kept": len(tasks), "gold_reached": sum(t.reached_expected_state for t in trajs),
                       "seconds": round(time.perf_counter() - t0, 2)}}, tasks, trajs)


async def bench_verifiable(tasks: list, trajs: list, backend: str, concurrency: int) -> dict[str, Any]:
    from rewards.verifiable import (
        CommunicationReward,
        ReverifyReward,
        RubricReward,
        ToolCallValidityReward,
        WorldStateReward,
    )
    from sandboxes import SandboxConfig, SandboxPool

    by_id = {t.id: t for t in tasks}
    pairs = [(by_id[t.task_id], t) for t in trajs]
    async with SandboxPool(SandboxConfig(backend=backend), size=concurrency, max_concurrency=2 * concurrency) as pool:
        def rewards() -> dict[str, Any]:
            return {"world_state": WorldStateReward(pool), "communication": CommunicationReward(),
                    "rubric": RubricReward(), "tool_validity": ToolCallValidityReward(),
                    "reverify": ReverifyReward(pool)}

        async def score_all(rs: dict[str, Any], names: list[str]) -> tuple[float, dict[str, int]]:
            limiter = anyio.Semaphore(concurrency)
            passed = dict.fromkeys(names, 0)

            async def one(task, traj) -> None:
                async with limiter:
                    for n in names:
                        r = await rs[n].score(task, traj)
                        passed[n] += r.score is not None and r.score >= 1.0

            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for task, traj in pairs:
                    tg.start_soon(one, task, traj)
            return time.perf_counter() - t0, passed

        rs = rewards()
        names = list(rs)
        cold, passed = await score_all(rs, names)
        warm, _ = await score_all(rs, names)  # the gold cache of WorldStateReward is warm now
        per: dict[str, float] = {}
        for n in names:
            per[n] = round((await score_all(rewards(), [n]))[0], 3)
    n = len(pairs)
    return {
        "verifiable_rewards_per_s": round(n / cold, 2) if cold > 0 else None,
        "verifiable_rewards_per_s_warm": round(n / warm, 2) if warm > 0 else None,
        "reward_scores_per_s": round(n * len(names) / cold, 2) if cold > 0 else None,
        "verifiable": {"trajectories": n, "rewards": names, "seconds_cold": round(cold, 3),
                       "seconds_warm": round(warm, 3), "per_reward_s": per,
                       "gold_pass_rate": {k: round(v / n, 3) if n else None for k, v in passed.items()},
                       "concurrency": concurrency},
    }


async def bench_unit_tests(n: int, backend: str, concurrency: int) -> dict[str, Any]:
    from rewards.code import UnitTestReward
    from sandboxes import SandboxConfig, SandboxPool
    from synth.episode import Trajectory
    from synth.tasks import Rubric, Task, UserScenario

    task = Task(id="bench-code", domain="file_manager", seed=0, instruction="write add", persona="dev",
                user_scenario=UserScenario(persona="dev", reason_for_call="code", task_instructions="add"),
                gold_actions=[], rubric=Rubric(), tools=[], difficulty="easy")
    traj = Trajectory(task_id="bench-code", domain="file_manager", messages=[
        {"role": "assistant", "content": "```python\ndef add(a, b):\n    return a + b\n```"}])
    async with SandboxPool(SandboxConfig(backend=backend), size=concurrency, max_concurrency=concurrency) as pool:
        reward = UnitTestReward(pool, tests=UT_TESTS)
        limiter = anyio.Semaphore(concurrency)
        scores: list[float | None] = []

        async def one() -> None:
            async with limiter:
                scores.append((await reward.score(task, traj)).score)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        wall = time.perf_counter() - t0
    return {"unit_tests_per_s": round(n / wall, 2) if wall > 0 else None,
            "unit_tests": {"runs": n, "seconds": round(wall, 3), "all_passed": all(s == 1.0 for s in scores)}}


async def bench_judge(tasks: list, trajs: list, base_url: str, model: str, n: int, concurrency: int,
                      max_tokens: int) -> dict[str, Any]:
    from rewards.judge import RubricJudge
    from synth.llm import LLMClient, LLMConfig

    by_id = {t.id: t for t in tasks}
    # The judge does not need the agent's system prompt (the domain policy), and the tiny model's
    # server has a 2048-token context: drop it, and time the shortest transcripts.
    pairs = [(by_id[t.task_id], t.model_copy(update={"messages": [m for m in t.messages if m.get("role") != "system"]}))
             for t in trajs]
    pairs.sort(key=lambda p: len(json.dumps(p[1].messages)))
    # one call per task: a repeated (task, trajectory) would hit the memo inside the "uncached" pass;
    # the first WARMUP pairs only warm the server up (engine, grammar compilation), untimed
    warm_pairs, pairs = pairs[:WARMUP], pairs[WARMUP:WARMUP + n]
    if not pairs:
        raise ValueError(f"need more than {WARMUP} gold trajectories for the judge phase")
    cache = Path(tempfile.mkdtemp(prefix="tooldojo-bench-judge-cache-"))

    def client() -> LLMClient:
        return LLMClient(LLMConfig(base_url=base_url, model=model, cache_dir=str(cache), max_concurrency=concurrency,
                                   timeout_s=120, max_retries=1))

    async def run(judge: RubricJudge, which: list | None = None) -> tuple[float, list]:
        limiter = anyio.Semaphore(concurrency)
        todo = pairs if which is None else which
        out: list = [None] * len(todo)

        async def one(i: int, task, traj) -> None:
            async with limiter:
                out[i] = await judge.score(task, traj)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i, (task, traj) in enumerate(todo):
                tg.start_soon(one, i, task, traj)
        return time.perf_counter() - t0, out

    try:
        c1 = client()
        try:
            if warm_pairs:
                await run(RubricJudge(c1, max_tokens=max_tokens), warm_pairs)
            j1 = RubricJudge(c1, max_tokens=max_tokens)
            uncached, res = await run(j1)
            requests_uncached = j1.stats["llm_requests"]
            memo, _ = await run(j1)
        finally:
            await c1.aclose()
        c2 = client()
        try:
            j2 = RubricJudge(c2, max_tokens=max_tokens)
            cached, res2 = await run(j2)
            disk_hits = c2.usage.cached if hasattr(c2, "usage") else None
        finally:
            await c2.aclose()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    calls = len(pairs)
    return {
        "judge_calls_per_s": round(calls / uncached, 3) if uncached > 0 else None,
        "judge_cache_hit_speedup": round(uncached / cached, 1) if cached > 0 else None,
        "judge_memo_speedup": round(uncached / memo, 1) if memo > 0 else None,
        "judge": {"calls": calls, "llm_requests": requests_uncached, "seconds_uncached": round(uncached, 3),
                  "seconds_disk_cached": round(cached, 4), "seconds_memo": round(memo, 4),
                  "disk_cache_hits": disk_hits,
                  "abstained": sum(r.score is None for r in res), "scored": sum(r.score is not None for r in res),
                  "abstain_reasons": sorted({r.reason[:120] for r in res if r.score is None})[:3],
                  "warmup_calls": len(warm_pairs),
                  "same_results_from_cache": [r.score for r in res] == [r.score for r in res2] or None,
                  "concurrency": concurrency, "max_tokens": max_tokens},
    }


# ------------------------------------------------------------------ driver
def run(args: argparse.Namespace, result: dict[str, Any], cleanup: list[Callable[[], None]]) -> None:
    from sandboxes.backends import resolve_backend

    backend, why = resolve_backend(args.backend)
    result["backend"] = backend
    console.print(f"[bold]tooldojo rewards bench[/] backend={backend} ({why}) mode={'quick' if args.quick else 'full'} "
                  f"tasks={args.tasks} judge_calls={args.judge_calls} unit_tests={args.unit_tests}")
    phase = _common.phase_runner(result, console)
    errors = result["errors"]

    out = phase("tasks", lambda: anyio.run(make_gold, args.tasks, args.seed, backend, args.sandboxes))
    tasks, trajs = (out[1], out[2]) if out else ([], [])
    if trajs:
        phase("verifiable", lambda: anyio.run(bench_verifiable, tasks, trajs, backend, args.concurrency),
              ("verifiable_rewards_per_s", "verifiable_rewards_per_s_warm"))
    else:
        errors.setdefault("tasks", "no gold trajectories")
    phase("unit_tests", lambda: anyio.run(bench_unit_tests, args.unit_tests, backend, args.concurrency),
          ("unit_tests_per_s",))
    if not trajs:
        return

    base_url, model = args.base_url, args.model
    if not base_url:
        bs = _bench_synth()

        def start() -> dict[str, Any]:
            nonlocal base_url, model
            with console.status("starting vLLM (tiny model)..."):
                server = bs.start_vllm(args.vllm_startup_s, Path(tempfile.mkdtemp(prefix="tooldojo-bench-rewards-")))
            cleanup.append(server.stop)
            base_url, model = server.base_url, server.model
            result["server"] = {"started_by_bench": True, "base_url": base_url, "model": model,
                                "log": str(server.log_path)}
            return {"vllm_startup_s": round(server.startup_s or 0.0, 1)}

        phase("vllm_start", start, ("vllm_startup_s",))
        if not base_url:
            return
    else:
        result["server"] = {"started_by_bench": False, "base_url": base_url, "model": model}
    phase("judge", lambda: anyio.run(bench_judge, tasks, trajs, base_url, model, args.judge_calls,
                                     args.judge_concurrency, args.judge_max_tokens),
          ("judge_calls_per_s", "judge_cache_hit_speedup", "judge_memo_speedup"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["auto", "docker", "local"], default="auto")
    ap.add_argument("--quick", action="store_true", help="fewer tasks and calls")
    ap.add_argument("--base-url", default=None, help="an already-running OpenAI-compatible server for the judge")
    ap.add_argument("--model", default="tiny", help="the model name served at --base-url (default tiny)")
    ap.add_argument("--tasks", type=int, default=None, metavar="N", help="gold trajectories (40 full, 10 quick)")
    ap.add_argument("--judge-calls", type=int, default=None, metavar="N", help="judge calls per pass (32 full, 8 quick); "
                                                                               f"at most one per task, after {WARMUP} warm-up tasks")
    ap.add_argument("--unit-tests", type=int, default=None, metavar="N", help="unit-test reward runs (32 full, 8 quick)")
    ap.add_argument("--sandboxes", type=int, default=4, help="sandboxes for task synthesis (default 4)")
    ap.add_argument("--concurrency", type=int, default=8, help="trajectories scored at once (default 8)")
    ap.add_argument("--judge-concurrency", type=int, default=8, help="judge calls in flight (default 8)")
    ap.add_argument("--judge-max-tokens", type=int, default=None, help="judge answer cap (default 128: the tiny model's server has a 2048-token context)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vllm-startup-s", type=float, default=600.0)
    args = ap.parse_args(argv)
    q = 1 if args.quick else 0
    args.tasks = args.tasks or COUNTS["tasks"][q]
    args.judge_calls = args.judge_calls or COUNTS["judge_calls"][q]
    args.unit_tests = args.unit_tests or COUNTS["unit_tests"][q]
    args.judge_max_tokens = args.judge_max_tokens or 128
    result: dict[str, Any] = {"quick": args.quick, "config": {
        "tasks": args.tasks, "judge_calls": args.judge_calls, "unit_tests": args.unit_tests,
        "concurrency": args.concurrency, "judge_concurrency": args.judge_concurrency,
        "judge_max_tokens": args.judge_max_tokens, "sandboxes": args.sandboxes},
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "verifiable_rewards_per_s": None, "judge_calls_per_s": None, "judge_cache_hit_speedup": None}
    cleanup: list[Callable[[], None]] = []
    t0 = time.perf_counter()
    try:
        run(args, result, cleanup)
    except KeyboardInterrupt:
        result.setdefault("errors", {})["interrupted"] = "KeyboardInterrupt"
    finally:
        for fn in reversed(cleanup):
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                console.print(f"[red]cleanup failed: {e}")
        result["total_s"] = round(time.perf_counter() - t0, 1)
    _common.emit(result, ("backend", "quick"))
    return 0 if not result.get("errors") else 1


if __name__ == "__main__":
    sys.exit(main())
