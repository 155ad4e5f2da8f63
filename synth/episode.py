"""One episode: a user, an agent and the task's tools in a sandbox.

    traj = await run_episode(task, ScriptedAgent(task), ScriptedUser(), pool)
    trajs = await run_episodes(tasks, ScriptedAgent, lambda t: ScriptedUser(), pool, concurrency=16)

The loop (mini-swe-agent style): the user opens; the agent acts; every tool
call it makes runs in the sandbox and comes back as a `tool` message; a text
message goes to the user, whose reply may end the episode (###STOP###,
###TRANSFER###). Nothing the agent emits can crash the run: malformed calls are
answered with an error the agent can read. A dead sandbox ends only its own
episode ("sandbox_dead"), and the sandbox always goes back to the pool.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
from pydantic import BaseModel, Field

from sandboxes import SandboxDead, SandboxError, SandboxPool, ToolError
from synth.usersim import OUT_OF_SCOPE, STOP, TRANSFER, UserSimulator, key_phrase, user_only_info
from toolzoo.mcp_domain import pool_for
from toolzoo.runtime import ToolRuntime
from toolzoo.spec import Domain, Zoo

if TYPE_CHECKING:
    from synth.llm import LLMClient
    from synth.tasks import Task

Termination = Literal["user_stop", "transfer", "max_turns", "max_tool_calls", "max_tokens",
                      "agent_error", "user_error", "sandbox_dead", "setup_error"]


class BudgetExhausted(Exception):
    """Raised by an agent whose token budget (context or completion) is spent: the episode ends
    with ``max_tokens``, not ``agent_error``."""


# ------------------------------------------------------------------------- contracts
class EpisodeLimits(BaseModel):
    max_turns: int = Field(30, ge=1, description="agent calls (assistant messages) per episode")
    max_tool_calls: int = Field(50, ge=0, description="tool calls per episode")
    max_tokens: int = Field(32768, ge=1, description="conversation size in tokens: the agent's last prompt + completion "
                                                       "(estimated at 4 chars/token when the agent reports no usage)")


class ToolCallRecord(BaseModel):
    turn: int                       # index of the agent turn that made the call
    id: str
    name: str | None
    arguments: Any                  # parsed object, or the raw text when it was not valid JSON
    ok: bool
    output: Any = None
    error: dict[str, Any] | None = None   # {kind, message, code}
    malformed: bool = False
    state_hash: str                 # sandbox state digest after the call
    duration_s: float = 0.0


class StepTiming(BaseModel):
    kind: Literal["agent", "tool", "user"]
    seconds: float


class Timings(BaseModel):
    setup_s: float = 0.0            # acquire + load the seeded domain
    agent_s: float = 0.0
    tool_s: float = 0.0
    user_s: float = 0.0
    total_s: float = 0.0
    steps: list[StepTiming] = Field(default_factory=list)


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    agent_calls: int = 0
    last_context_tokens: int = 0


class EpisodeStats(BaseModel):
    agent_turns: int = 0
    user_turns: int = 0
    tool_calls: int = 0
    malformed_calls: int = 0
    tool_errors: int = 0            # well-formed calls the tool answered with an error
    user: dict[str, Any] = Field(default_factory=dict)


class Trajectory(BaseModel):
    task_id: str
    domain: str
    seed: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)   # OpenAI tool schemas the agent saw
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    initial_state_hash: str | None = None
    final_state: Any = None
    final_state_hash: str | None = None
    expected_state_hash: str | None = None                      # the task's final_state_hash
    termination: Termination = "agent_error"
    error: str | None = None
    timings: Timings = Field(default_factory=Timings)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    stats: EpisodeStats = Field(default_factory=EpisodeStats)

    @property
    def reached_expected_state(self) -> bool:
        return self.final_state_hash is not None and self.final_state_hash == self.expected_state_hash


# ---------------------------------------------------------------------------- agents
class Agent(Protocol):
    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The next OpenAI assistant message. An optional `usage` key is counted, then dropped."""
        ...


class CallableAgent:
    """Wrap `fn(messages, tools) -> assistant message`, sync or async."""

    def __init__(self, fn: Callable[[list[dict], list[dict]], dict | Awaitable[dict]]):
        self.fn = fn

    async def act(self, messages, tools):
        out = self.fn(messages, tools)
        return await out if inspect.isawaitable(out) else out


class LLMAgent:
    """An agent served by an OpenAI-compatible endpoint; `sampling` goes to every chat call."""

    def __init__(self, client: LLMClient, **sampling: Any):
        self.client = client
        self.sampling = sampling

    async def act(self, messages, tools):
        r = await self.client.chat(messages, tools=tools or None, **self.sampling)
        msg = dict(r.message or {})
        msg["usage"] = {"prompt_tokens": r.usage.prompt_tokens, "completion_tokens": r.usage.completion_tokens}
        return msg


class ScriptedAgent:
    """Replays a task's gold actions, then tells the user the expected outputs.

    For needs_user_info tasks it first asks the user for the details held back.
    """

    def __init__(self, task: Task):
        self.task = task
        self.ask = list(user_only_info(task))
        self.next = 0

    async def act(self, messages, tools):
        if self.ask:
            wanted = " and ".join(key_phrase(k) for k in self.ask)
            self.ask = []
            return {"role": "assistant", "content": f"Sure, I can help. Could you please tell me your {wanted}?"}
        if self.next < len(self.task.gold_actions):
            a = self.task.gold_actions[self.next]
            self.next += 1
            return {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{self.next}", "type": "function",
                "function": {"name": a.name, "arguments": json.dumps(a.arguments)}}]}
        outputs = " ".join(str(o) for o in self.task.expected_outputs)
        return {"role": "assistant", "content": f"All done. {outputs}".strip()}


# ---------------------------------------------------------------------- the episode
def default_system_prompt(task: Task, domain: Domain) -> str:
    return ("You are a customer-service agent. Help the user with their request using the tools; "
            "follow the policy, ask the user for any information you need, and tell them the outcome.\n\n"
            f"<policy>\n{domain.policy}\n</policy>")


def brief_system_prompt(task: Task, domain: Domain) -> str:
    """One sentence instead of the policy: for tiny models, whose context and capacity the policy text
    would mostly spend (the tools' schemas still come with every prompt)."""
    return (f"You are the {domain.name.replace('_', ' ')} assistant. Use the tools to do what the user asks, "
            "then tell them the result.")


SYSTEM_PROMPTS: dict[str, Callable[[Task, Domain], str]] = {"policy": default_system_prompt,
                                                             "brief": brief_system_prompt}


def resolve_domain(task: Task, domain: Domain | Zoo | Callable[[str], Domain] | None) -> Domain:
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, Zoo):
        return domain.domain(task.domain)
    if callable(domain):
        return domain(task.domain)
    from toolzoo.domains import load_domain
    return load_domain(task.domain)


def _normalize_assistant(msg: Any) -> tuple[dict[str, Any], list[Any]]:
    """The assistant message in valid OpenAI form (every tool call an object with an id, a name and
    string arguments), plus the raw tool calls as the agent sent them, for checking."""
    if not isinstance(msg, dict):
        raise TypeError(f"agent returned {type(msg).__name__}, not an assistant message dict")
    content = msg.get("content")
    out: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else None}
    if isinstance(msg.get("reasoning_content"), str) and msg["reasoning_content"]:
        out["reasoning_content"] = msg["reasoning_content"]
    raw = msg.get("tool_calls") or []
    raw = raw if isinstance(raw, list) else [raw]
    calls = []
    for i, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = "" if args is None else json.dumps(args, default=str)
        calls.append({"id": (c.get("id") if isinstance(c, dict) and isinstance(c.get("id"), str) else None) or f"call_{i}",
                      "type": "function",
                      "function": {"name": fn.get("name") if isinstance(fn.get("name"), str) else "", "arguments": args}})
    if calls:
        out["tool_calls"] = calls
    return out, raw


def _parse_call(call: Any, allowed: set[str]) -> tuple[str | None, Any, str | None]:
    """(name, arguments, error) of one tool call; `error` says what is malformed."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return None, None, "a tool call needs a `function` object with `name` and `arguments`"
    name, raw = fn.get("name"), fn.get("arguments")
    if not isinstance(name, str) or not name.strip():
        return None, raw, "the tool call has no function name"
    if raw is None or raw == "":
        args: Any = {}
    elif isinstance(raw, str):
        try:
            args = json.loads(raw)
        except ValueError as e:
            return name, raw, f"arguments of {name} are not valid JSON ({e}); send a JSON object"
        except RecursionError:
            return name, raw[:200], f"arguments of {name} are nested too deeply; send a flatter JSON object"
    else:
        args = raw
    if not isinstance(args, dict):
        return name, args, f"arguments of {name} must be a JSON object, got {type(args).__name__}"
    if name not in allowed:
        return name, args, f"unknown tool {name!r}; available tools: {', '.join(sorted(allowed))}"
    return name, args, None


async def _call_tool(rt: ToolRuntime, raw_call: Any, call_id: str, allowed: set[str], state_hash: str,
                     timeout: float) -> tuple[ToolCallRecord, str]:
    """Run one tool call: (its record, the `tool` message's content). Raises only SandboxDead."""
    name, args, problem = _parse_call(raw_call, allowed)
    rec = ToolCallRecord(turn=0, id=call_id, name=name, arguments=args, ok=False, state_hash=state_hash)
    if problem is not None:
        rec.malformed, rec.error = True, {"kind": "malformed_call", "message": problem, "code": None}
        return rec, f"Error (malformed_call): {problem}"
    try:
        res = await rt.call(name, args, timeout=timeout)
    except SandboxDead:
        raise
    except SandboxError as e:  # e.g. arguments over the request cap
        res = ToolError(name=name, kind="invalid_arguments", message=str(e))
    if not res.ok:  # a failed call leaves the state as it was (the tool server works on a copy)
        rec.error = {"kind": res.kind, "message": res.message, "code": res.code}
        rec.malformed = res.kind in ("invalid_arguments", "unknown_tool")
        return rec, f"Error ({res.kind}{', ' + res.code if res.code else ''}): {res.message}"
    rec.ok, rec.output = True, res.output
    rec.state_hash = await rt.sandbox.digest()
    return rec, json.dumps(res.output, ensure_ascii=False, default=str)


def _estimate_tokens(messages: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, default=str)) // 4


async def run_episode(
    task: Task,
    agent: Agent,
    user: UserSimulator,
    pool: SandboxPool,
    *,
    domain: Domain | Zoo | Callable[[str], Domain] | None = None,
    limits: EpisodeLimits | None = None,
    system_prompt: str | Callable[[Task, Domain], str] | None = default_system_prompt,
    tool_timeout: float = 10.0,
) -> Trajectory:
    limits = limits or EpisodeLimits()
    traj = Trajectory(task_id=task.id, domain=task.domain, seed=task.seed,
                      expected_state_hash=getattr(task, "final_state_hash", None))
    tm, st, usage, msgs = traj.timings, traj.stats, traj.usage, traj.messages
    user_before = _stats(user)
    start = time.perf_counter()

    def step(kind: str, since: float) -> None:
        dt = time.perf_counter() - since
        tm.steps.append(StepTiming(kind=kind, seconds=dt))
        setattr(tm, f"{kind}_s", getattr(tm, f"{kind}_s") + dt)

    sb = None
    try:
        try:
            dom = resolve_domain(task, domain)
            specs = [dom.tool(n) for n in task.tools] if task.tools else list(dom.tools)
            pool = pool_for(dom, pool)  # an MCP domain: a session of its own server per episode
            sb = await pool.acquire()
            rt = ToolRuntime(sb, dom, tools=specs, seed=task.seed)
            await rt.load()
            state_hash = await sb.digest()
        except (SandboxError, KeyError, ValueError) as e:
            traj.termination = "sandbox_dead" if isinstance(e, SandboxDead) else "setup_error"
            traj.error = f"{type(e).__name__}: {e}"
            return traj
        traj.initial_state_hash = state_hash
        traj.tools = rt.openai_tools()
        allowed = {t.name for t in rt.specs()}
        tm.setup_s = time.perf_counter() - start
        prompt = system_prompt(task, dom) if callable(system_prompt) else system_prompt
        if prompt:
            msgs.append({"role": "system", "content": prompt})

        reason: Termination | None = None
        t = time.perf_counter()
        try:
            msgs.append({"role": "user", "content": await user.first_message(task)})
            st.user_turns += 1
        except Exception as e:
            reason, traj.error = "user_error", f"{type(e).__name__}: {e}"
        step("user", t)

        while reason is None:
            if st.agent_turns >= limits.max_turns:
                reason = "max_turns"
                break
            t = time.perf_counter()
            try:
                raw = await agent.act(list(msgs), traj.tools)
                used = raw.pop("usage", None) if isinstance(raw, dict) else None
                msg, raw_calls = _normalize_assistant(raw)
            except Exception as e:
                step("agent", t)
                # A prompt that outgrew the model's context is the token limit, not an agent failure.
                reason = "max_tokens" if _context_overflow(e) else "agent_error"
                traj.error = f"{type(e).__name__}: {e}"
                break
            step("agent", t)
            msgs.append(msg)
            st.agent_turns += 1
            if used:
                usage.agent_calls += 1
                usage.prompt_tokens += int(used.get("prompt_tokens") or 0)
                usage.completion_tokens += int(used.get("completion_tokens") or 0)
                usage.last_context_tokens = int(used.get("prompt_tokens") or 0) + int(used.get("completion_tokens") or 0)
            else:
                usage.last_context_tokens = _estimate_tokens(msgs)

            calls = msg.get("tool_calls") or []
            for call, raw_call in zip(calls, raw_calls, strict=True):
                call_id = call["id"]
                if st.tool_calls >= limits.max_tool_calls:
                    reason = "max_tool_calls"
                    msgs.append({"role": "tool", "tool_call_id": call_id, "name": call["function"]["name"],
                                 "content": "Error: not executed, the episode's tool-call budget is spent."})
                    continue
                st.tool_calls += 1
                t = time.perf_counter()
                rec, content = await _call_tool(rt, raw_call, call_id, allowed, state_hash, tool_timeout)
                rec.turn, rec.duration_s = st.agent_turns - 1, time.perf_counter() - t
                state_hash = rec.state_hash
                st.malformed_calls += rec.malformed
                st.tool_errors += not rec.ok and not rec.malformed
                traj.tool_calls.append(rec)
                msgs.append({"role": "tool", "tool_call_id": call_id, "name": rec.name or "", "content": content})
                step("tool", t)
            if reason is None and usage.last_context_tokens >= limits.max_tokens:
                reason = "max_tokens"
            if reason is not None or calls:
                continue

            t = time.perf_counter()
            try:
                text = await user.reply(task, list(msgs))
            except Exception as e:
                step("user", t)
                reason, traj.error = "user_error", f"{type(e).__name__}: {e}"
                break
            step("user", t)
            msgs.append({"role": "user", "content": text})
            st.user_turns += 1
            if STOP in text or OUT_OF_SCOPE in text:
                reason = "user_stop"
            elif TRANSFER in text:
                reason = "transfer"
        traj.termination = reason
        snap = await sb.snapshot()
        traj.final_state, traj.final_state_hash = snap.state, snap.digest
    except SandboxDead as e:
        traj.termination, traj.error = "sandbox_dead", f"{type(e).__name__}: {e}"
    finally:
        if sb is not None:
            await pool.release(sb)  # shielded inside; a dead sandbox is replaced
        tm.total_s = time.perf_counter() - start
        st.user = _delta(user_before, _stats(user))
    return traj


def _stats(user: Any) -> dict[str, Any]:
    s = getattr(user, "stats", None)
    return s.model_dump() if isinstance(s, BaseModel) else {}


def _delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: v - before.get(k, 0) if isinstance(v, (int, float)) else v for k, v in after.items()}


async def run_episodes(
    tasks: Sequence[Task],
    agent_factory: Callable[[Task], Agent],
    user_factory: Callable[[Task], UserSimulator],
    pool: SandboxPool,
    *,
    concurrency: int = 8,
    progress: bool | Callable[[int, int], None] = True,
    **episode_kw: Any,
) -> list[Trajectory]:
    """Run every task once, `concurrency` at a time; trajectories come back in task order. `progress`:
    a rich bar on stderr (True), none (False), or a callback hearing (done, total) instead of the bar."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out: list[Trajectory | None] = [None] * len(tasks)
    limiter = anyio.Semaphore(max(1, concurrency))
    bar = Progress(TextColumn("[bold]episodes[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[ends]}"), console=Console(stderr=True),
                   disable=callable(progress) or not progress)
    tell = progress if callable(progress) else None

    with bar:
        pid = bar.add_task("episodes", total=len(tasks), ends="")
        ends: dict[str, int] = {}

        async def one(i: int, task: Task) -> None:
            async with limiter:
                out[i] = traj = await run_episode(task, agent_factory(task), user_factory(task), pool, **episode_kw)
            ends[traj.termination] = ends.get(traj.termination, 0) + 1
            bar.update(pid, advance=1, ends=" ".join(f"{k}={v}" for k, v in sorted(ends.items())))
            if tell is not None:
                tell(sum(ends.values()), len(tasks))

        async with anyio.create_task_group() as tg:
            for i, task in enumerate(tasks):
                tg.start_soon(one, i, task)
    return [t for t in out if t is not None]


_OVERFLOW = ("maximum context length", "context length", "max_model_len", "too many tokens", "prompt is too long")


def _context_overflow(e: Exception) -> bool:
    from synth.llm import LLMRequestError

    if isinstance(e, BudgetExhausted):
        return True
    return isinstance(e, LLMRequestError) and any(m in str(e).lower() for m in _OVERFLOW)
