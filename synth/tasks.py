"""Verifiable tool-use tasks, APIGen-MT style: blueprint = instruction + gold actions + expected outputs.

    result = synthesize_tasks(200, seed=0, backend="auto")     # sandboxed, replay-validated
    export_tasks(result, "tasks_out")                         # tasks.jsonl, hf/, tasks.parquet, summary.json
    tasks = load_tasks("tasks_out")

How a task is made (everything deterministic in `seed` and the task's index):

1. Per (domain, domain seed) a *context*: the seeded state, a harvest of its values
   (toolzoo.arguments.harvest), and a tool dependency graph. The graph is learned by
   calling every tool in a sandbox on the seeded state with sampled arguments: an
   output field of tool A feeds an input parameter of tool B when their names match
   (`customer_id` -> `customer_id`, `from_customer_id`, `customer_ids`) or when A's
   values for that field are values B's parameter takes in the seeded state.
2. A tool subset of the domain is sampled (the agent's tools: gold tools + distractors);
   a backward walk over the graph inside the subset gives a plan of 1-5 tools ending
   (usually) in a write, sometimes with a second write goal.
3. The plan runs in a sandbox at the seeded state. Arguments that an earlier action's
   output can supply are taken from that output (the dependency is real); the rest are
   drawn from the seeded state. A failing call is redrawn; a write that changes nothing
   is redrawn; a plan that cannot run is resampled.
4. Expected outputs (strings the agent must tell the user, tau-bench style) come from
   the results: a new id, an amount, a new status, or the answer of a final read.
5. Instruction, persona and the user-simulator scenario come from templates. The
   instruction names every fact the agent needs, except that `needs_user_info` tasks
   hold some facts back in `user_scenario.known_info` only. A value picked out of a
   list is described by a field that singles out its row ("the order whose status is
   pending"), so the agent has to look it up. An optional LLM can rewrite the
   instruction and persona; any error falls back to the template.
6. Gold replay: each task runs twice more, each time in a fresh sandbox freshly loaded at
   the seeded state; every action must succeed, both final-state hashes must agree with
   each other and with the generation run, and every expected output must appear in the
   gold results. The hash is `final_state_hash`. Tasks that fail are dropped, with a reason.

Where each step lives: the contracts in synth/task_models.py, value naming and matching in
synth/task_values.py, steps 1-2 in synth/task_graph.py, 3-4 in synth/task_gold.py, 5 in
synth/task_writing.py, 6 in synth/task_replay.py; this module drives them (`TaskSynthesizer`) and
exports the result. Every public name of those modules is importable from here.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from sandboxes.cli_files import read_jsonl
from synth.task_gold import (CALL_TRIES, Binding, PlanFailed, Step, bindings_of, describe, draw_args, origin,
                             pick_outputs, prune_steps, run_plan)
from synth.task_graph import DomainContext, TaskArgSampler, build_context, build_graph, plan_tools, _weighted
from synth.task_models import (CALL_TIMEOUT, TIERS, Action, Difficulty, DroppedTask, FieldValue, JsonLLM, Rubric,
                               Task, TaskStats, TaskSynthesis, UserScenario, output_json)
from synth.task_replay import ReplayResult, check_task, replay_task, replay_tasks, validate_tasks
from synth.task_values import fmt, humanize, id_like, names_match
from synth.task_writing import (ASK, FIRST_NAMES, FRAMES, IDENTITY_WORDS, INTROS, OPENERS, ROLES, STYLES, THEN, Draft,
                                goal_phrase, llm_rewrite, make_rubric, reference, write_task)
from toolzoo.mcp_domain import pool_for
from toolzoo.spec import Domain

__all__ = [  # with the names of the step modules, so `from synth.tasks import X` keeps working
    "Action", "ASK", "ATTEMPTS_PER_DOMAIN", "Binding", "bindings_of", "build_context", "build_graph",
    "CALL_TIMEOUT", "CALL_TRIES", "check_domains", "check_task", "describe", "Difficulty", "difficulty_of",
    "DOMAIN_SEEDS", "DomainContext", "Draft", "draw_args", "DroppedTask", "export_tasks", "FieldValue", "FIRST_NAMES",
    "fmt",
    "FRAMES", "goal_phrase", "has_write_or_output", "humanize", "id_like", "IDENTITY_WORDS", "INTROS", "JsonLLM",
    "LENGTH_WEIGHTS", "llm_rewrite", "load_tasks", "make_rubric", "MAX_ATTEMPTS", "names_match", "OPENERS",
    "origin", "pick_outputs", "plan_tools", "PlanFailed", "prune_steps", "reference", "replay_task",
    "replay_tasks", "ReplayResult", "ROLES", "Rubric", "run_plan", "Step", "STYLES", "synthesize_tasks",
    "system_prompt", "Task", "task_row", "TaskArgSampler", "TaskStats", "TaskSynthesis", "TaskSynthesizer", "THEN",
    "TIERS", "UserScenario", "validate_tasks", "write_task",
]

LENGTH_WEIGHTS = {1: 0.15, 2: 0.25, 3: 0.25, 4: 0.2, 5: 0.15}
DOMAIN_SEEDS = 4
MAX_ATTEMPTS = 40          # per task index, across domains
ATTEMPTS_PER_DOMAIN = 12   # then the index moves on to another domain


def has_write_or_output(steps: list[Step], outputs: list[tuple[str, str, int]]) -> bool:
    return any(st.tool.effect == "write" for st in steps) or bool(outputs)


def difficulty_of(n_actions: int, needs_user_info: bool) -> Difficulty:
    tier = 0 if n_actions <= 1 else 1 if n_actions <= 3 else 2
    return TIERS[min(2, tier + (1 if needs_user_info else 0))]


def check_domains(domains: Sequence[str] | None) -> list[str]:
    """The named domains (built-in, registered with --domain-dir, or folder paths); default the built-ins."""
    from toolzoo.domain_dirs import looks_like_path
    from toolzoo.domains import domain_names, known_domains, load_domain

    if domains:
        domains = [load_domain(d).name if looks_like_path(d) else d for d in domains]
    known = known_domains()
    names = list(dict.fromkeys(domains)) if domains else domain_names()
    bad = [d for d in names if d not in known]
    if bad:
        raise ValueError(f"unknown domain(s) {', '.join(bad)}; known: {', '.join(known)}")
    if not names:
        raise ValueError("no domains to make tasks in")
    return names


def _task_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"tooldojo-tasks:{seed}:{index}")


class TaskSynthesizer:
    """Makes and validates tasks on a SandboxPool; reuse one across calls.

        async with SandboxPool(SandboxConfig(), size=4) as pool:
            result = await TaskSynthesizer(pool, seed=0).run(100)
    """

    def __init__(self, pool: Any, *, seed: int = 0, domains: Sequence[str] | None = None,
                 domain_seeds: int = DOMAIN_SEEDS, llm: JsonLLM | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 lengths: dict[int, float] | None = None, user_info_rate: float = 0.35,
                 quote_values: bool = False, quote_fields: bool = False):
        from toolzoo.domains import load_domain

        lengths = dict(LENGTH_WEIGHTS if lengths is None else lengths)
        if not lengths or any(k < 1 for k in lengths) or any(w < 0 for w in lengths.values()) \
                or not sum(lengths.values()):
            raise ValueError(f"lengths must weigh plan lengths >= 1 with non-negative weights, got {lengths}")
        if not 0.0 <= user_info_rate <= 1.0:
            raise ValueError(f"user_info_rate must be in [0, 1], got {user_info_rate}")
        self.lengths = lengths
        self.user_info_rate = user_info_rate
        self.quote_values = quote_values
        self.quote_fields = quote_fields

        names = check_domains(domains)
        self.pool = pool
        self.seed = seed
        self.domains = {n: load_domain(n) for n in names}
        self.names = names
        self.domain_seeds = max(1, domain_seeds)
        self.llm = llm
        self.progress = progress
        self.stats = TaskStats()
        self._contexts: dict[tuple[str, int], DomainContext] = {}
        self._locks: dict[tuple[str, int], anyio.Lock] = {}
        self._gen_fail: Counter[str] = Counter()

    async def context(self, name: str, seed: int) -> DomainContext:
        key = (name, seed)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._contexts:
                async with pool_for(self.domains[name], self.pool).sandbox() as sb:
                    self._contexts[key] = await build_context(sb, self.domains[name], seed)
        return self._contexts[key]

    # ------------------------------------------------------------ one task
    async def make(self, index: int) -> Task | DroppedTask:
        from toolzoo.runtime import bundle

        rng = _task_rng(self.seed, index)
        reason = "no attempt"
        # Domains in turn (a seeded order per round), so every domain gets its share.
        order = list(self.names)
        random.Random(f"tooldojo-domains:{self.seed}:{index // len(order)}").shuffle(order)
        name = order[index % len(order)]
        for attempt in range(MAX_ATTEMPTS):
            if attempt and attempt % ATTEMPTS_PER_DOMAIN == 0:
                name = rng.choice(self.names)
            dseed = rng.randrange(self.domain_seeds)
            ctx = await self.context(name, dseed)
            self.stats.attempts += 1
            tools = [t.name for t in ctx.domain.tools]
            k = rng.randint(min(len(tools), 4), len(tools))
            subset = sorted(rng.sample(tools, k), key=tools.index)
            length = _weighted(rng, list(self.lengths.items()))
            plan = plan_tools(ctx, subset, rng, length)
            if not plan:
                reason = "no plan in the tool subset"
                self._gen_fail[reason] += 1
                continue
            try:
                async with pool_for(ctx.domain, self.pool).sandbox() as sb:
                    await sb.load_domain(bundle(ctx.domain, seed=dseed))
                    steps = await run_plan(sb, ctx, plan, rng)
                    final_digest = (await sb.snapshot()).digest
            except PlanFailed as e:
                reason = f"action failed: {str(e).split(': ', 1)[-1]}"
                self._gen_fail[reason] += 1
                continue
            while True:
                steps = prune_steps(steps)
                outputs = pick_outputs(steps, ctx, rng)
                if steps[-1].tool.effect == "read" and not any(j == len(steps) - 1 for _k, _v, j in outputs):
                    steps = steps[:-1]  # a final read with nothing to report adds nothing
                    if steps:
                        continue
                break
            if not steps:
                reason = "read-only task with nothing to report"
                self._gen_fail[reason] += 1
                continue
            can_hold = any(isinstance(v, str) and len(v) >= 2 for st in steps for v in st.root.values())
            needs = can_hold and rng.random() < self.user_info_rate
            state = rng.getstate()
            draft = write_task(steps, outputs, rng, needs, self.quote_values, self.quote_fields)
            if needs and (not draft.withheld or any(w in draft.instruction for w in draft.withheld)):
                needs = False  # what would be held back shows anyway (e.g. "WEB" in "WEB-1")
                rng.setstate(state)
                draft = write_task(steps, outputs, rng, needs, self.quote_values, self.quote_fields)
            echoed = [o for o in outputs if o[1] in draft.body]
            if echoed:  # an expected output the instruction already says (e.g. in a row description)
                outputs = [o for o in outputs if o not in echoed]
                if not has_write_or_output(steps, outputs):
                    reason = "the only output to report is in the instruction"
                    self._gen_fail[reason] += 1
                    continue
                rng.setstate(state)
                draft = write_task(steps, outputs, rng, needs, self.quote_values, self.quote_fields)
            instruction, persona, provenance = draft.instruction, draft.persona, "template"
            if self.llm is not None:
                try:
                    instruction, persona = await llm_rewrite(self.llm, draft, ctx.domain)
                    provenance = "llm"
                    self.stats.llm_rewrites += 1
                except Exception:  # noqa: BLE001 - any LLM trouble falls back to the template
                    self.stats.llm_errors += 1
            scenario = draft.scenario.model_copy(update={"persona": persona})
            gold = [st.tool.name for st in steps]
            return Task(
                id=f"t{self.seed}-{index:05d}-{name}", domain=name, seed=dseed, instruction=instruction,
                persona=persona, user_scenario=scenario,
                gold_actions=[Action(name=st.tool.name, arguments=st.args) for st in steps],
                expected_outputs=[FieldValue(v, k) for k, v, _j in outputs], rubric=make_rubric(steps, outputs, draft.withheld),
                tools=[t for t in tools if t in subset or t in gold], difficulty=difficulty_of(len(steps), needs),
                needs_user_info=needs, final_state_hash=final_digest, provenance=provenance,  # type: ignore[arg-type]
            )
        return DroppedTask(id=f"t{self.seed}-{index:05d}", domain=name, stage="generate",
                           reason=f"no valid task in {MAX_ATTEMPTS} attempts (last: {reason})")

    # -------------------------------------------------------------- batch
    async def _map(self, items: list[Any], fn: Callable[[Any], Any], phase: str) -> list[Any]:
        results: list[Any] = [None] * len(items)
        queue = list(range(len(items)))[::-1]
        done = 0
        total = len(items)

        async def worker() -> None:
            nonlocal done
            while queue:
                i = queue.pop()
                results[i] = await fn(items[i])
                done += 1
                if self.progress is not None:
                    self.progress(phase, done, total)

        async with anyio.create_task_group() as tg:
            for _ in range(max(1, min(self.pool.max_concurrency, len(items)))):
                tg.start_soon(worker)
        return results

    async def run(self, n: int, *, rounds: int = 3) -> TaskSynthesis:
        start = time.perf_counter()
        self.stats = TaskStats(requested=n, backend=getattr(self.pool, "backend", None))
        self._gen_fail = Counter()
        kept: list[Task] = []
        dropped: list[DroppedTask] = []
        replay_fail: Counter[str] = Counter()
        next_index = 0
        for _round in range(rounds):
            want = n - len(kept)
            if want <= 0:
                break
            extra = 0 if _round == 0 else max(2, math.ceil(want * 0.2))
            indices = list(range(next_index, next_index + want + extra))
            next_index += len(indices)
            made = await self._map(indices, self.make, "generate")
            fresh = [t for t in made if isinstance(t, Task)]
            dropped += [t for t in made if isinstance(t, DroppedTask)]
            checked = await self._map(fresh, lambda t: check_task(t, self.pool, self.domains[t.domain]), "replay")
            self.stats.replayed += len(fresh)
            for task, (ok, why) in zip(fresh, checked, strict=True):
                if ok:
                    kept.append(task)
                else:
                    replay_fail[why.split(":")[0]] += 1
                    dropped.append(DroppedTask(id=task.id, domain=task.domain, stage="replay", reason=why))
        kept = sorted(kept, key=lambda t: t.id)[:n]
        s = self.stats
        s.kept = len(kept)
        s.generation_failures = dict(sorted(self._gen_fail.items(), key=lambda kv: -kv[1]))
        s.replay_failures = dict(replay_fail)
        s.per_domain = dict(sorted(Counter(t.domain for t in kept).items()))
        s.per_difficulty = {d: sum(t.difficulty == d for t in kept) for d in TIERS}
        s.per_length = dict(sorted(Counter(str(len(t.gold_actions)) for t in kept).items()))
        s.needs_user_info = sum(t.needs_user_info for t in kept)
        s.seconds = time.perf_counter() - start
        return TaskSynthesis(tasks=kept, dropped=dropped, stats=s)


def synthesize_tasks(n: int, *, seed: int = 0, domains: Sequence[str] | None = None, backend: str = "auto",
                     sandboxes: int = 4, domain_seeds: int = DOMAIN_SEEDS, llm: JsonLLM | None = None,
                     progress: Callable[[str, int, int], None] | None = None,
                     lengths: dict[int, float] | None = None, user_info_rate: float = 0.35,
                     quote_values: bool = False, quote_fields: bool = False) -> TaskSynthesis:
    """Make n replay-validated tasks (fewer only if generation keeps failing; see result.dropped).

    ``lengths`` weighs how many gold actions a task plans (default ``LENGTH_WEIGHTS``; pruning can
    make it shorter); ``user_info_rate`` is the share of tasks that hold details back for the user;
    ``quote_values`` writes the request's string values in double quotes (``device id: "LT-3"``),
    ``quote_fields`` the fields to report by their output keys (``tell me the "name" and the "type"``)."""
    from sandboxes import SandboxConfig, SandboxPool

    if n < 1:
        raise ValueError("n must be at least 1")
    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    check_domains(domains)

    async def go() -> TaskSynthesis:
        async with SandboxPool(SandboxConfig(backend=backend), size=sandboxes) as pool:  # type: ignore[arg-type]
            synth = TaskSynthesizer(pool, seed=seed, domains=domains, domain_seeds=domain_seeds, llm=llm,
                                    progress=progress, lengths=lengths, user_info_rate=user_info_rate,
                                    quote_values=quote_values, quote_fields=quote_fields)
            return await synth.run(n)

    return anyio.run(go)


def system_prompt(domain: Domain) -> str:
    return domain.policy


def task_row(task: Task, domain: Domain | None = None) -> dict[str, Any]:
    """The dataset row of a task; `domain` is the task's domain (by default looked up by name)."""
    from toolzoo.domains import resolve_domain

    domain = resolve_domain(task.domain, domain)
    tools = [domain.tool(n).to_openai() for n in task.tools]
    return {
        "id": task.id, "domain": task.domain, "seed": task.seed,
        "prompt": [{"role": "system", "content": system_prompt(domain)}, {"role": "user", "content": task.instruction}],
        "tools": json.dumps(tools, ensure_ascii=False),
        "instruction": task.instruction, "persona": task.persona,
        "user_scenario": task.user_scenario.model_dump_json(),
        "gold_actions": json.dumps([a.model_dump() for a in task.gold_actions], ensure_ascii=False),
        "expected_outputs": json.dumps([output_json(o) for o in task.expected_outputs], ensure_ascii=False),
        "rubric": task.rubric.model_dump_json(),
        "tool_names": json.dumps(task.tools),
        "difficulty": task.difficulty, "needs_user_info": task.needs_user_info,
        "final_state_hash": task.final_state_hash, "provenance": task.provenance,
    }


def _features() -> Any:
    from datasets import Features, List, Value

    s = Value("string")
    return Features({
        "id": s, "domain": s, "seed": Value("int64"),
        "prompt": List({"role": s, "content": s}), "tools": s, "instruction": s, "persona": s,
        "user_scenario": s, "gold_actions": s, "expected_outputs": s, "rubric": s, "tool_names": s,
        "difficulty": s, "needs_user_info": Value("bool"), "final_state_hash": s, "provenance": s,
    })


def export_tasks(result: TaskSynthesis | Sequence[Task], out_dir: str | Path) -> Path:
    """tasks.jsonl, hf/ (save_to_disk), tasks.parquet, dropped.jsonl and summary.json under out_dir."""
    import datasets

    tasks = result.tasks if isinstance(result, TaskSynthesis) else list(result)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "tasks.jsonl", "w") as f:
        for t in tasks:
            f.write(t.model_dump_json() + "\n")
    rows = [task_row(t) for t in tasks]
    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds = datasets.Dataset.from_list(rows, features=_features())
        ds.save_to_disk(str(out / "hf"))
        ds.to_parquet(str(out / "tasks.parquet"))
    finally:
        if was:
            datasets.enable_progress_bars()
    if isinstance(result, TaskSynthesis):
        with open(out / "dropped.jsonl", "w") as f:
            for d in result.dropped:
                f.write(d.model_dump_json() + "\n")
        (out / "summary.json").write_text(json.dumps(result.stats.summary(), indent=1))
    return out


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a tasks.jsonl file or a directory holding one."""
    p = Path(path)
    f = p / "tasks.jsonl" if p.is_dir() else p
    if not f.exists():
        raise FileNotFoundError(f"no tasks at {path}: expected {f} (written by `dojo synth tasks`)")
    return read_jsonl(f, Task.model_validate_json, "tasks")
