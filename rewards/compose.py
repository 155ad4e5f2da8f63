"""Compose rewards, and hand any of them to TRL.

    config = RewardConfig.from_yaml("reward.yaml")          # or RewardConfig(components=[...]) / .default()
    reward = build_reward(config, pool=pool, llm_client=client)
    r = await reward.score(task, trajectory)                # RewardResult; details[name] = each component's result

    reward_fn = to_trl_reward(reward)                        # async (prompts, completions, **kwargs) -> list[float | None]
    GRPOTrainer(..., reward_funcs=[reward_fn])

A config in YAML:

    components:
      - {name: world_state, kind: world_state, weight: 0.6}
      - {name: communication, kind: communication, weight: 0.3, params: {partial: false}}
      - {name: tool_validity, kind: tool_validity, weight: 0.1}
      - {name: reverify, kind: reverify, weight: 0.0}      # weight 0: a gate only
    gate: [reverify]
    threshold: 1.0

The total is the weighted mean of the components that did not abstain (None when all abstain,
or when only zero-weight components scored). A gate component that scores 0 or raises a flag
zeroes the total; a gate that abstains makes the total abstain (`gate_abstain`), so an
unverified trajectory never gets a high reward. `threshold` marks acceptance
(`details['accepted']`, e.g. for the SFT filter): with threshold 1.0, every weighted component
must be perfect (APIGen-MT: state match AND output match).

Three rules no config can turn off (in this order; `details` records which one acted):

1. **A `hack:` flag from any component zeroes the total** (`details['hacked_by']`: the components
   that raised one), gate or not, weighted or not, even when that component abstained: a judge
   that sees the agent inject text into its prompt (`hack:judge_injection`) ends the episode at 0.
2. **A weighted verifiable component that abstains makes the total abstain**
   (`details['unverified']`): a task the world-state check cannot verify is never a pass for a
   do-nothing agent on the strength of the other components. Verifiable: every component but the
   LLM judges; a judge that abstains is left out of the mean as before (a gate that abstains
   follows `gate_abstain`).
3. **A judge never lifts a trajectory above its verifiable checks**: where verifiable components
   scored, the total is at most their weighted mean (the lowest of their scores when none of them
   is weighted) (`details['judge_capped']`). A judge can lower a reward, never raise one, so a
   fooled judge cannot pass a trajectory that fails the state, output or hack checks.

TRL contract of `to_trl_reward` (see its docstring): the trajectory of each completion is found
through `resolve(row, index)`, where `row` holds that sample's dataset columns plus `prompt`,
`completion`, `completion_ids` and, under `environment_factory`, its `environment`.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rewards.base import Reward, RewardResult
from synth.episode import ToolCallRecord, Trajectory
from synth.tasks import Task

log = logging.getLogger("tooldojo.rewards")

Kind = Literal["world_state", "communication", "rubric", "tool_validity", "turn_format", "reverify", "judge", "unit_tests",
               "answer"]
NEEDS_POOL = ("world_state", "reverify", "unit_tests")
RESERVED = ("weights", "gates_run", "pre_gate", "accepted", "gated_by", "hacked_by", "unverified", "judge_capped")


# ====================================================================== config
class RewardSpec(BaseModel):
    """One component: a reward of `kind`, built with `params`, weighted by `weight` (0: gate only)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: Kind
    weight: float = Field(1.0, ge=0.0)
    params: dict[str, Any] = Field(default_factory=dict)


class RewardConfig(BaseModel):
    """Plain data: load it from YAML / a dict, then `build_reward(config, pool=...)`."""

    model_config = ConfigDict(extra="forbid")

    components: list[RewardSpec]
    gate: list[str] = Field(default_factory=lambda: ["reverify"],
                            description="components that zero the total when they score 0 or raise a flag")
    gate_abstain: Literal["abstain", "zero", "ignore"] = Field(
        "abstain", description="what a gate that abstains does to the total")
    gate_min_score: float | None = Field(
        None, description="run the gates only when the other components' total is at least this (saves replays "
                          "of low-reward trajectories); None: always run them")
    threshold: float = Field(1.0, ge=0.0, le=1.0, description="total >= threshold: details['accepted']")
    name: str = "reward"

    @model_validator(mode="after")
    def _check(self) -> RewardConfig:
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise ValueError(f"component names must be unique: {names}")
        reserved = [n for n in names if n in RESERVED]
        if reserved:
            raise ValueError(f"component names {reserved} are reserved")
        missing = [g for g in self.gate if g not in names]
        if missing:
            raise ValueError(f"gate names {missing} are not components ({names})")
        return self

    @classmethod
    def default(cls) -> RewardConfig:
        """tau-style: world state and communication, tool-call hygiene, the hack check as a gate."""
        return cls(components=[
            RewardSpec(name="world_state", kind="world_state", weight=0.6),
            RewardSpec(name="communication", kind="communication", weight=0.3),
            RewardSpec(name="tool_validity", kind="tool_validity", weight=0.1),
            RewardSpec(name="reverify", kind="reverify", weight=0.0),
        ], gate=["reverify"])

    @classmethod
    def from_yaml(cls, source: str | Path) -> RewardConfig:
        """A path to a YAML/JSON file, or YAML text."""
        import yaml

        p = Path(source) if not isinstance(source, str) or "\n" not in source else None
        text = p.read_text() if p is not None and p.exists() else str(source)
        return cls.model_validate(yaml.safe_load(text))

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


# =================================================================== composite
def _error_result(name: str, e: BaseException) -> RewardResult:
    return RewardResult(name=name, score=None, reason=f"the reward raised {type(e).__name__}: {str(e)[:200]}",
                        flags=["error"], details={"error": f"{type(e).__name__}: {e}"})


async def _safe_score(name: str, reward: Reward, task: Task, traj: Trajectory) -> RewardResult:
    try:
        r = await reward.score(task, traj)
    except Exception as e:  # a component never takes the batch down; it abstains
        log.warning("reward %s raised on task %s: %s", name, getattr(task, "id", "?"), e)
        return _error_result(name, e)
    if not isinstance(r, RewardResult):
        return RewardResult(name=name, score=None, reason=f"the reward returned {type(r).__name__}, not a RewardResult",
                            flags=["error"])
    if r.score is not None and not (0.0 <= r.score <= 1.0):
        r = r.model_copy(update={"score": min(1.0, max(0.0, r.score))})
    return r


class CompositeReward:
    """A weighted mean of rewards, with gates. `rewards`: name -> (reward, weight)."""

    def __init__(self, rewards: Mapping[str, tuple[Reward, float]], gate: list[str] | tuple[str, ...] = ("reverify",), *,
                 name: str = "reward", threshold: float = 1.0,
                 gate_abstain: Literal["abstain", "zero", "ignore"] = "abstain", gate_min_score: float | None = None,
                 judges: Sequence[str] | None = None):
        """`judges`: the names of the LLM-judge components (rules 2 and 3 of the module docstring);
        None: the components whose reward has `is_judge` set (rewards.judge's judges do)."""
        self.rewards = dict(rewards)
        self.judges = set(judges) if judges is not None else {
            n for n, (r, _w) in self.rewards.items() if getattr(r, "is_judge", False)}
        self.gate = [g for g in gate if g in self.rewards]
        self.name = name
        self.threshold = threshold
        self.gate_abstain = gate_abstain
        self.gate_min_score = gate_min_score
        for n, (_r, w) in self.rewards.items():
            if n in RESERVED:
                raise ValueError(f"{n!r} is reserved in the composite's details; rename the component")
            if w < 0:
                raise ValueError(f"weight of {n} must be >= 0, got {w}")

    async def _run(self, names: list[str], task: Task, traj: Trajectory) -> dict[str, RewardResult]:
        out: dict[str, RewardResult] = {}

        async def one(n: str) -> None:
            out[n] = await _safe_score(n, self.rewards[n][0], task, traj)

        async with anyio.create_task_group() as tg:
            for n in names:
                tg.start_soon(one, n)
        return {n: out[n] for n in names}

    def _mean(self, results: Mapping[str, RewardResult]) -> tuple[float | None, float]:
        num = den = 0.0
        for n, r in results.items():
            w = self.rewards[n][1]
            if r.score is not None and w > 0:
                num += w * r.score
                den += w
        return (num / den if den > 0 else None), den

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        main = [n for n in self.rewards if n not in self.gate]
        results = await self._run(main, task, trajectory)
        pre, _ = self._mean(results)
        skip_gates = self.gate_min_score is not None and (pre is None or pre < self.gate_min_score)
        if not skip_gates:
            results.update(await self._run(self.gate, task, trajectory))
        results = {n: results[n] for n in self.rewards if n in results}
        total, den = self._mean(results)
        flags = sorted({f for r in results.values() for f in r.flags})
        details: dict[str, Any] = {n: r.model_dump() for n, r in results.items()}  # details[name]: its result
        details["weights"] = {n: w for n, (_r, w) in self.rewards.items()}
        details["gates_run"] = not skip_gates
        reason = self._explain(results, total)

        if not skip_gates:
            for g in self.gate:
                r = results[g]
                if r.score is None:
                    if self.gate_abstain == "abstain":
                        total, reason = None, f"gate {g} abstained: {r.reason}"
                        break
                    if self.gate_abstain == "zero":
                        total, reason = 0.0, f"gate {g} could not verify: {r.reason}"
                        break
                elif r.score <= 0.0 or r.flags:
                    total, reason = 0.0, f"gated by {g}: {r.reason}"
                    details["gated_by"] = g
                    break
        total, reason = self._rules(results, total, reason, details)
        details["pre_gate"] = pre
        details["accepted"] = total is not None and total >= self.threshold - 1e-12
        return RewardResult(name=self.name, score=total, reason=reason, details=details, flags=flags)

    def _rules(self, results: Mapping[str, RewardResult], total: float | None, reason: str,
               details: dict[str, Any]) -> tuple[float | None, str]:
        """The hack, unverified and judge-ceiling rules of the module docstring, in that order."""
        hacked = {n: [f for f in r.flags if f.startswith("hack:")] for n, r in results.items()}
        hacked = {n: f for n, f in hacked.items() if f}
        if hacked:
            details["hacked_by"] = sorted(hacked)
            if "gated_by" in details:
                return 0.0, reason
            n, flags = next(iter(hacked.items()))
            return 0.0, f"hack flag {', '.join(flags)} from {n}: {results[n].reason}"[:600]
        if total is None or details.get("gated_by"):
            return total, reason
        verifiable = {n: r for n, r in results.items() if n not in self.judges}
        unverified = [n for n, r in verifiable.items()
                      if r.score is None and self.rewards[n][1] > 0 and n not in self.gate]  # gates: gate_abstain
        if unverified:
            details["unverified"] = unverified
            n = unverified[0]
            return None, f"{n} could not verify the trajectory, so the total abstains: {results[n].reason}"[:600]
        scored = {n: r.score for n, r in verifiable.items() if r.score is not None}
        if not scored or not any(n in self.judges and r.score is not None for n, r in results.items()):
            return total, reason
        weighted = {n: (self.rewards[n][1], s) for n, s in scored.items() if self.rewards[n][1] > 0}
        cap = (sum(w * s for w, s in weighted.values()) / sum(w for w, _s in weighted.values()) if weighted
               else min(scored.values()))
        if total > cap + 1e-12:
            details["judge_capped"] = {"before": total, "cap": cap}
            return cap, (f"{reason}; capped at {cap:.2f}: a judge never lifts a trajectory above its verifiable "
                         "checks")[:700]
        return total, reason

    def _explain(self, results: Mapping[str, RewardResult], total: float | None) -> str:
        if total is None:
            return "every component abstained: " + "; ".join(f"{n}: {r.reason}" for n, r in results.items())[:400]
        weak = [(n, r) for n, r in results.items() if r.score is not None and r.score < 1.0 and self.rewards[n][1] > 0]
        if not weak:
            return f"all {sum(1 for r in results.values() if r.score is not None)} scoring components passed"
        return "; ".join(f"{n} {r.score:.2f}: {r.reason}" for n, r in weak)[:600]


# ======================================================================= build
def build_component(spec: RewardSpec, *, pool: Any = None, llm_client: Any = None, domain: Any = None) -> Reward:
    """One component; ``domain`` (a Domain, a Zoo or a name -> Domain callable) goes to the components
    that read the task's domain (world_state, rubric, reverify)."""
    from rewards import verifiable as v

    p = dict(spec.params)
    if domain is not None and spec.kind in ("world_state", "rubric", "reverify"):
        p.setdefault("domain", domain)
    if spec.kind in NEEDS_POOL and pool is None:
        raise ValueError(f"component {spec.name} ({spec.kind}) needs a sandbox pool: build_reward(config, pool=...)")
    if spec.kind == "world_state":
        r: Any = v.WorldStateReward(pool, **p)
    elif spec.kind == "communication":
        r = v.CommunicationReward(**p)
    elif spec.kind == "rubric":
        r = v.RubricReward(**p)
    elif spec.kind == "tool_validity":
        r = v.ToolCallValidityReward(**p)
    elif spec.kind == "turn_format":
        r = v.TurnFormatReward(**p)
    elif spec.kind == "reverify":
        r = v.ReverifyReward(pool, **p)
    elif spec.kind == "judge":
        if llm_client is None:
            raise ValueError(f"component {spec.name} (judge) needs an LLM client: build_reward(config, llm_client=...)")
        from rewards.judge import RubricJudge

        r = RubricJudge(llm_client, **p)
    elif spec.kind == "unit_tests":
        from rewards.code import UnitTestReward

        r = UnitTestReward(pool, **p)
    elif spec.kind == "answer":
        from rewards.answer import AnswerReward

        r = AnswerReward(**p)
    else:  # pragma: no cover - Literal-checked
        raise ValueError(f"unknown reward kind {spec.kind!r}")
    return r


def build_reward(config: RewardConfig | Mapping[str, Any] | str | Path | None = None, *, pool: Any = None,
                 llm_client: Any = None, domain: Any = None, domain_dir: str | Path | None = None) -> CompositeReward:
    """A CompositeReward from a config (RewardConfig, dict, YAML path/text; None: the default).

    An out-of-tree domain is found from ``domain`` (a ``Domain``, a ``Zoo`` or a name -> Domain callable)
    or ``domain_dir`` (a domain folder, or a folder of them, as ``--domain-dir`` takes), besides
    ``$TOOLDOJO_DOMAIN_DIRS``.
    """
    if domain_dir is not None:
        from toolzoo.domain_dirs import register

        register(domain_dir)  # a SpecError names the folder when it holds no domain
    if config is None:
        config = RewardConfig.default()
    elif isinstance(config, (str, Path)):
        config = RewardConfig.from_yaml(config)
    elif not isinstance(config, RewardConfig):
        config = RewardConfig.model_validate(config)
    rewards = {spec.name: (build_component(spec, pool=pool, llm_client=llm_client, domain=domain), spec.weight)
               for spec in config.components}
    return CompositeReward(rewards, gate=config.gate, name=config.name, threshold=config.threshold,
                           gate_abstain=config.gate_abstain, gate_min_score=config.gate_min_score,
                           judges=[c.name for c in config.components if c.kind == "judge"])


# ========================================================================= TRL
Resolved = tuple[Task, Trajectory] | None
Resolver = Callable[[dict[str, Any], int], Resolved | Awaitable[Resolved]]


def _as_model(value: Any, model: type[BaseModel]) -> Any:
    if value is None or isinstance(value, model):
        return value
    if isinstance(value, (str, bytes)):
        return model.model_validate_json(value)
    if isinstance(value, Mapping):
        return model.model_validate(dict(value))
    raise TypeError(f"cannot read a {model.__name__} from {type(value).__name__}")


def trajectory_from_messages(task: Task, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> Trajectory:
    """A text-only Trajectory from a TRL conversation (prompt + completion messages): messages and tool
    calls, no sandbox state. World-state rewards score such a trajectory 0 (no final state);
    run the episode in a sandbox (an environment) to score the world."""
    msgs = [dict(m) for m in messages]
    results = {m.get("tool_call_id"): m for m in msgs if m.get("role") == "tool"}
    recs: list[ToolCallRecord] = []
    turn = -1
    for m in msgs:
        if m.get("role") != "assistant":
            continue
        turn += 1
        for i, c in enumerate(m.get("tool_calls") or []):
            fn = (c or {}).get("function") or {}
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    pass
            cid = (c or {}).get("id") or f"call_{turn}_{i}"
            res = results.get(cid)
            content = (res or {}).get("content")
            failed = res is None or (isinstance(content, str) and content.startswith("Error"))
            malformed = not isinstance(args, dict) or not fn.get("name") or (task.tools and fn.get("name") not in task.tools)
            out: Any = content
            if isinstance(content, str) and not failed:
                try:
                    out = json.loads(content)
                except ValueError:
                    pass
            recs.append(ToolCallRecord(turn=turn, id=cid, name=fn.get("name"), arguments=args, ok=not failed and not malformed,
                                       output=None if failed else out, malformed=bool(malformed), state_hash="",
                                       error={"kind": "malformed_call" if malformed else "tool_failure", "message": str(content)[:200],
                                              "code": None} if (failed or malformed) else None))
    return Trajectory(task_id=task.id, domain=task.domain, seed=task.seed, messages=msgs, tools=list(tools or []),
                      tool_calls=recs, expected_state_hash=task.final_state_hash or None, termination="user_stop")


def default_resolve(row: dict[str, Any], index: int) -> Resolved:
    """Find (task, trajectory) for one TRL sample, in this order:

    1. `row['environment']` (environment_factory) with attributes `task` and `trajectory` (a Trajectory,
       or a zero-argument method returning one): the sandboxed episode the rollout ran.
    2. `row['task']` and `row['trajectory']` columns (Task / Trajectory objects, dicts or JSON strings).
    3. `row['task']` alone: a text-only trajectory from `prompt` + `completion` messages
       (`trajectory_from_messages`); no world state.
    Anything else: None (that sample's reward abstains).
    """
    env = row.get("environment")
    if env is not None and hasattr(env, "task") and hasattr(env, "trajectory"):
        traj = env.trajectory() if callable(env.trajectory) else env.trajectory
        return _as_model(env.task, Task), _as_model(traj, Trajectory)
    task = _as_model(row.get("task"), Task)
    if task is None:
        return None
    if row.get("trajectory") is not None:
        return task, _as_model(row["trajectory"], Trajectory)
    prompt, completion = row.get("prompt"), row.get("completion")
    if isinstance(completion, list):
        msgs = (list(prompt) if isinstance(prompt, list) else []) + list(completion)
        return task, trajectory_from_messages(task, msgs, row.get("tools"))
    return None


def to_trl_reward(reward: Reward, *, resolve: Resolver | None = None, name: str | None = None,
                  concurrency: int = 32, log_reasons: bool = True) -> Callable[..., Awaitable[list[float | None]]]:
    """Expose any Reward as a TRL reward function (an `async def`, so TRL runs it on its event loop,
    concurrently with the other async reward functions).

    Contract: `await fn(prompts=..., completions=..., completion_ids=..., **kwargs) -> list[float | None]`,
    one value per completion, in order; None = abstain (TRL turns it into NaN and leaves it out).
    For sample i, `resolve(row, i)` (sync or async) returns `(task, trajectory)` or None, where `row`
    holds the i-th element of every per-sample kwarg (dataset columns such as `task` / `trajectory`,
    `environments` -> `environment`) plus `prompt`, `completion` and `completion_ids`; scalar kwargs
    (`trainer_state`, `log_extra`, `log_metric`) are left out. The default is `default_resolve`.
    A resolver or reward error makes that sample abstain; the batch always gets its list.
    With `log_reasons`, each sample's reason goes to TRL's completions table
    (`log_extra('<name>_reason', ...)`) and the rate of hack flags to `log_metric('<name>/hack_rate', ...)`.

    Note: sandbox-backed rewards must use a pool entered on the loop that awaits this function
    (TRL's daemon reward loop); enter the pool there, e.g. with
    `asyncio.run_coroutine_threadsafe(pool.__aenter__(), trainer.async_loop)`.
    """
    resolver = resolve or default_resolve
    fname = name or getattr(reward, "name", None) or type(reward).__name__

    async def reward_fn(prompts: list[Any], completions: list[Any], completion_ids: list[Any] | None = None,
                        **kwargs: Any) -> list[float | None]:
        n = len(completions)
        envs = kwargs.pop("environments", None)
        log_extra, log_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        per_sample = {k: v for k, v in kwargs.items()
                      if isinstance(v, (list, tuple)) and len(v) == n and k not in ("trainer_state", "log_extra", "log_metric")}
        results: list[RewardResult | None] = [None] * n
        limiter = anyio.Semaphore(max(1, concurrency))

        async def one(i: int) -> None:
            row = {k: v[i] for k, v in per_sample.items()}
            row["prompt"] = prompts[i] if prompts is not None and i < len(prompts) else None
            row["completion"] = completions[i]
            row["completion_ids"] = completion_ids[i] if completion_ids is not None and i < len(completion_ids) else None
            if envs is not None and i < len(envs):
                row["environment"] = envs[i]
            async with limiter:
                try:
                    got = resolver(row, i)
                    if inspect.isawaitable(got):
                        got = await got
                except Exception as e:
                    results[i] = RewardResult(name=fname, score=None, reason=f"resolve failed: {type(e).__name__}: {e}")
                    return
                if got is None:
                    results[i] = RewardResult(name=fname, score=None, reason="no task/trajectory for this completion")
                    return
                task, traj = got
                results[i] = await _safe_score(fname, reward, task, traj)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        scores = [r.score if r is not None else None for r in results]
        if log_reasons:
            try:
                if callable(log_extra):
                    log_extra(f"{fname}_reason", [r.reason if r is not None else "" for r in results])
                if callable(log_metric) and n:
                    log_metric(f"{fname}/hack_rate", sum(any(f.startswith("hack:") for f in (r.flags if r else [])) for r in results) / n)
            except Exception as e:  # logging must never fail the step
                log.debug("TRL logging failed: %s", e)
        return scores

    reward_fn.__name__ = fname
    reward_fn.__qualname__ = fname
    reward_fn.__doc__ = f"TRL reward function for {fname} (tooldojo rewards.compose.to_trl_reward)."
    reward_fn.reward = reward  # type: ignore[attr-defined]
    return reward_fn
