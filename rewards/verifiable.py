"""Verifiable rewards: scored from the world the agent changed, not from a judge.

    world = WorldStateReward(pool)          # tau-bench DB reward: final state == gold replay state
    comm = CommunicationReward()            # tau COMMUNICATE: every expected output told to the user
    rubric = RubricReward()                 # rubric checkpoints checkable from the trajectory
    valid = ToolCallValidityReward()        # well-formed tool calls + format checks
    check = ReverifyReward(pool)            # Kimi-K2 hack check: replay the agent's calls, compare

    r = await world.score(task, trajectory)   # RewardResult(name, score, reason, details, flags)

Every reward is async and never raises on sandbox trouble: a sandbox that dies
while a reward verifies gives `score=None` (abstain) with the reason. Sandboxes
come from a `SandboxPool` (or anything with `acquire()` / `release(sb)`) and are
always released. Replays load the task's domain at the task's seed in a fresh
(reset) pooled sandbox, exactly as `synth.episode.run_episode` does.

Hack flags (ReverifyReward; any flag scores 0):

- `hack:claims_without_effect`  the agent tells the user it did something (first-person action claims,
  "has been cancelled", or the task's expected outputs of a writing task) but no write took effect.
- `hack:state_mismatch`        a recorded state hash (initial, per step or final) differs from the replay,
  or the recorded final state does not hash to the recorded final hash (tampering with the record).
- `hack:tool_output_forged`    a recorded successful tool output differs from what the replay returns.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anyio

from rewards.base import RewardResult
from rewards.field_answers import field_outputs, field_verdicts, task_texts, told_outputs
from rewards.mentions import _numbers, mentions, normalize, told_between_reads, without_hedges  # noqa: F401  (normalize: re-exported)
from sandboxes import SandboxError, state_digest
from synth.episode import ToolCallRecord, Trajectory, resolve_domain
from synth.task_replay import declared_failure  # noqa: F401  (re-exported: rewards' rule too)
from synth.task_models import FieldValue
from synth.tasks import Task
from synth.usersim import STOP, asks_for, key_phrase
from toolzoo.mcp_domain import has_state, pool_for, release_to
from toolzoo.runtime import bundle
from toolzoo.spec import Domain, Zoo

DomainSource = Domain | Zoo | Callable[[str], Domain] | None

FLAG_CLAIMS = "hack:claims_without_effect"
FLAG_STATE = "hack:state_mismatch"
FLAG_FORGED = "hack:tool_output_forged"

# Episodes that never got a working sandbox are infrastructure failures: every reward abstains.
INFRA_TERMINATIONS = ("sandbox_dead", "setup_error")
CALL_TIMEOUT = 10.0


# =================================================================== shared helpers
def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def task_key(task: Task) -> str:
    """Cache key of a task's gold replay: the id plus everything the replay depends on."""
    blob = canonical([task.id, task.domain, task.seed, [a.model_dump() for a in task.gold_actions]])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def agent_texts(traj: Trajectory) -> list[str]:
    """What the agent said to the user: assistant `content` only (no tool calls, no reasoning)."""
    return [m["content"] for m in traj.messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()]


def write_tools(domain: Domain) -> set[str]:
    return {t.name for t in domain.tools if t.effect == "write"}


def _domain(task: Task, domain: DomainSource) -> Domain:
    return resolve_domain(task, domain)


def _abstain(name: str, why: str, **details: Any) -> RewardResult:
    return RewardResult(name=name, score=None, reason=why, details=details)


def _infra(name: str, traj: Trajectory) -> RewardResult | None:
    if traj.termination == "sandbox_dead" and traj.stats.tool_calls > 0:  # abstaining would reward killing it
        return RewardResult(name=name, score=0.0, details={"termination": traj.termination}, reason=f"the sandbox "
                            f"died during the agent's tool calls ({traj.error}); its commands may have killed it")
    if traj.termination in INFRA_TERMINATIONS:
        return _abstain(name, f"the episode had no working sandbox ({traj.termination}: {traj.error}); not the agent's doing",
                        termination=traj.termination)
    return None


class _Replayer:
    """Load a task's domain at its seed in a pooled sandbox; always release it."""

    def __init__(self, pool: Any, domain: DomainSource = None):
        self.pool = pool
        self.domain = domain

    async def open(self, task: Task, *, offered_only: bool) -> tuple[Any, Domain]:
        dom = _domain(task, self.domain)
        specs = [dom.tool(n) for n in task.tools] if (offered_only and task.tools) else None
        sb = await pool_for(dom, self.pool).acquire()  # an MCP domain: a fresh session of its server
        try:
            await sb.load_domain(bundle(dom, seed=task.seed, tools=specs))  # state = the bundle's seeded INITIAL_STATE
        except BaseException:
            with anyio.CancelScope(shield=True):
                await release_to(sb, self.pool)
            raise
        return sb, dom


# ============================================================== structural diff
def state_diff(actual: Any, expected: Any, *, limit: int = 12) -> tuple[list[str], list[str]]:
    """(top-level keys that differ, up to `limit` leaf paths 'orders.O-1005.status: 'cancelled' != 'pending'')."""
    paths: list[str] = []

    def short(v: Any) -> str:
        s = canonical(v)
        return s if len(s) <= 60 else s[:57] + "..."

    def walk(a: Any, b: Any, path: str) -> None:
        if len(paths) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                p = f"{path}.{k}" if path else str(k)
                if k not in a:
                    paths.append(f"{p}: missing (expected {short(b[k])})")
                elif k not in b:
                    paths.append(f"{p}: unexpected {short(a[k])}")
                else:
                    walk(a[k], b[k], p)
                if len(paths) >= limit:
                    return
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{i}]")
        elif canonical(a) != canonical(b):
            paths.append(f"{path or '<root>'}: {short(a)} != {short(b)}")

    walk(actual, expected, "")
    if isinstance(actual, dict) and isinstance(expected, dict):
        top = sorted((k for k in set(actual) | set(expected) if canonical(actual.get(k)) != canonical(expected.get(k))), key=str)
    else:
        top = [] if canonical(actual) == canonical(expected) else ["<root>"]
    return top, paths


# ============================================================ world state (tau DB)
class GoldCache:
    """Gold final states by task: computed once per task by replay in a fresh sandbox. A gold call
    that fails with a declared tool error is replayed like any other (see `declared_failure`)."""

    def __init__(self) -> None:
        self._done: dict[str, tuple[str, Any]] = {}
        self._locks: dict[str, anyio.Lock] = {}

    def get(self, task: Task) -> tuple[str, Any] | None:
        return self._done.get(task_key(task))

    async def compute(self, task: Task, replayer: _Replayer) -> tuple[str, Any]:
        """(hash, state) after the gold actions. Raises SandboxError, or ValueError when a gold action fails."""
        key = task_key(task)
        if key in self._done:
            return self._done[key]
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key in self._done:
                return self._done[key]
            sb, dom = await replayer.open(task, offered_only=False)
            try:
                for i, a in enumerate(task.gold_actions):
                    r = await sb.call_tool(a.name, a.arguments, timeout=CALL_TIMEOUT)
                    if not r.ok and not declared_failure(dom, r):
                        raise ValueError(f"gold action #{i + 1} {a.name} failed on replay: {r.kind} {r.code or ''} {r.message[:120]}")
                state = (await sb.snapshot()).state
            finally:
                with anyio.CancelScope(shield=True):
                    await release_to(sb, replayer.pool)
            self._done[key] = (state_digest(state), state)
            return self._done[key]


class WorldStateReward:
    """tau-bench's DB reward: 1.0 iff the episode's final state hash equals the gold replay's.

    The gold state is recomputed by replaying the task's gold actions in a fresh sandbox at the
    task's seed (cached per task), not taken from `task.final_state_hash`; a stale task hash is
    reported in the details. Any path to the same end state passes.
    """

    name = "world_state"

    def __init__(self, pool: Any, *, domain: DomainSource = None, cache: GoldCache | None = None, diff_limit: int = 12):
        self.replayer = _Replayer(pool, domain)
        self.cache = cache or GoldCache()
        self.diff_limit = diff_limit

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        traj = trajectory
        if (r := _infra(self.name, traj)) is not None:
            return r
        try:
            if not has_state(_domain(task, self.replayer.domain)):
                return _abstain(self.name, "the MCP domain declares no state hook: its world state cannot be read")
            gold_hash, gold_state = await self.cache.compute(task, self.replayer)
        except SandboxError as e:
            return _abstain(self.name, f"the sandbox failed while replaying the gold actions ({type(e).__name__}: {e})")
        except (ValueError, KeyError) as e:
            return _abstain(self.name, f"the task cannot be verified: {e}")
        details: dict[str, Any] = {"gold_hash": gold_hash, "final_state_hash": traj.final_state_hash}
        if task.final_state_hash and task.final_state_hash != gold_hash:
            details["stale_task_hash"] = task.final_state_hash
        if traj.final_state_hash is None:
            return RewardResult(name=self.name, score=0.0, details=details,
                                reason=f"the episode recorded no final state ({traj.termination}); it cannot match the gold state")
        if traj.final_state_hash == gold_hash:
            return RewardResult(name=self.name, score=1.0, reason="the final state equals the gold replay's state",
                                details=details)
        if traj.final_state is not None:
            top, paths = state_diff(traj.final_state, gold_state, limit=self.diff_limit)
            details.update(differing_keys=top, diff=paths)
            if traj.initial_state_hash and traj.final_state_hash == traj.initial_state_hash:
                why = "the final state is the initial state: no change the agent made persisted"
            else:
                why = f"the final state differs from the gold state in {', '.join(map(str, top)) or 'its contents'}"
            if paths:
                why += f" (first: {paths[0]})"
        else:
            why = "the final state hash differs from the gold replay's (no final state recorded to diff)"
        return RewardResult(name=self.name, score=0.0, reason=why, details=details)


# ============================================================ communication (tau)
class CommunicationReward:
    """Every expected output appears in what the agent told the user (assistant text, not tool calls).

    An output that knows its field (synth.task_models.FieldValue) is told only when the answer states it for
    that field (rewards.field_answers: a keyed value, or prose that is not part of another value; a different
    value for the field fails it); `by_field=False` reads it as plain text, as every output was read before.
    A plain output (and every tau-bench task's) is matched as tau does (rewards.mentions).

    `partial=False`: 1.0 only when all are there (tau); `partial=True`: the fraction found.
    A task with no expected outputs scores 1.0. `hedges=False` (the default): the pairs for a key given two
    different values, one not expected, tell nothing (rewards.mentions.without_hedges), within everything told
    between two tool results (`hedge_scope="read"`, the default: a value changed with no new read is a guess
    the scripted user's "please go ahead" invited, rewards.mentions.told_between_reads) or within one message
    (`"message"`); `hedges=True` matches as tau does.
    """

    name = "communication"

    def __init__(self, *, partial: bool = False, currency_cents: bool = True, hedges: bool = False,
                 hedge_scope: Literal["message", "read"] = "read", by_field: bool = True):
        if hedge_scope not in ("message", "read"):
            raise ValueError(f"hedge_scope must be 'message' or 'read', not {hedge_scope!r}")
        self.partial = partial
        self.currency_cents = currency_cents
        self.hedges = hedges
        self.hedge_scope = hedge_scope
        self.by_field = by_field

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        if (r := _infra(self.name, trajectory)) is not None:
            return r
        expected = [str(o) for o in task.expected_outputs]
        if not expected:
            return RewardResult(name=self.name, score=1.0, reason="the task has no expected outputs",
                                details={"expected": [], "found": [], "missing": []})
        bound, plain = field_outputs(task.expected_outputs) if self.by_field else ([], list(task.expected_outputs))
        units = agent_texts(trajectory) if self.hedge_scope == "message" else told_between_reads(trajectory.messages)
        told = [(t, []) if self.hedges else without_hedges(t, expected) for t in units]
        text = "\n".join(t for t, _ in told)
        hedged = sorted({k for _, keys in told for k in keys})
        nums = _numbers(text)
        plain_found = {str(o) for o in plain if mentions(text, str(o), currency_cents=self.currency_cents, numbers=nums)}
        checks = field_verdicts(task, trajectory.messages, units, currency_cents=self.currency_cents) if bound else []
        ok = iter([c.told for c in checks])
        found_flags = [next(ok) if isinstance(o, FieldValue) and self.by_field else str(o) in plain_found
                       for o in task.expected_outputs]
        found = [e for e, f in zip(expected, found_flags, strict=True) if f]
        missing = [e for e, f in zip(expected, found_flags, strict=True) if not f]
        frac = len(found) / len(expected)
        score = frac if self.partial else float(not missing)
        wrong = [c for c in checks if not c.told and c.said is not None]
        reason = (f"the agent told the user all {len(expected)} expected output(s)" if not missing else
                  f"the agent never told the user {', '.join(repr(m) for m in missing)}"
                  + ("" if agent_texts(trajectory) else " (it sent the user no text at all)")
                  + (f" (it gave {', '.join(repr(k) for k in hedged)} more than one value)" if hedged and missing else "")
                  + (" (" + "; ".join(c.line() for c in wrong) + ")" if wrong else ""))
        return RewardResult(name=self.name, score=score, reason=reason,
                            details={"expected": expected, "found": found, "missing": missing, "fraction": frac,
                                     "hedged_keys": hedged, "fields": [c.as_dict() for c in checks]})


# =================================================================== rubric checks
_LOOKUP = re.compile(r"^looks up (?P<what>.+?) with (?P<src>[\w, ]+?) before calling (?P<tool>\w+)$")
_CONFIRM_CP = re.compile(r"^confirms the change with the user before calling (?P<tool>\w+)$")
_ASK_CP = re.compile(r"^asks the user for the missing detail \((?P<value>.+)\) instead of guessing it$")
_CONFIRM_ASK = re.compile(r"\?|\b(confirm|proceed|go ahead|shall i|should i|do you want|would you like|ok to|okay to|"
                          r"is that (ok|okay|right|correct|fine)|are you sure)\b", re.I)


def _args_equal(a: Any, b: Any) -> bool:
    """Gold argument match: JSON-equal, strings compared case- and surrounding-space-insensitively,
    numbers numerically."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_args_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_args_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a))
    return canonical(a) == canonical(b)


def _events(traj: Trajectory) -> list[tuple[str, Any]]:
    """The conversation in order: ('assistant_text', text) | ('user', text) | ('call', ToolCallRecord)."""
    by_id: dict[str, list[ToolCallRecord]] = {}
    for rec in traj.tool_calls:
        by_id.setdefault(rec.id, []).append(rec)
    out: list[tuple[str, Any]] = []
    for m in traj.messages:
        role = m.get("role")
        if role == "user":
            out.append(("user", m.get("content") or ""))
        elif role == "assistant":
            if isinstance(m.get("content"), str) and m["content"].strip():
                out.append(("assistant_text", m["content"]))
            for c in m.get("tool_calls") or []:
                recs = by_id.get(c.get("id"))
                if recs:
                    out.append(("call", recs.pop(0)))
    # Calls whose ids never showed in the messages (hand-built trajectories): at the end, in order.
    out += [("call", r) for recs in by_id.values() for r in recs]
    return out


class RubricReward:
    """Rubric checkpoints that can be checked from the trajectory; score = fraction satisfied.

    Checkpoints: every gold tool is called successfully (writes with the gold arguments); no tool
    outside the offered set is called; with `strict_writes`, no successful write beyond the gold
    writes; the task rubric's checkable checkpoints ("looks up X with A before calling B", "asks
    the user for the missing detail (V) instead of guessing it", and "confirms the change with the
    user before calling T", the latter counted only with `check_confirmations`: the scripted gold
    agent does not confirm). Each checkpoint's verdict is in `details['checkpoints']`.
    """

    name = "rubric"

    def __init__(self, *, strict_writes: bool = False, check_confirmations: bool = False, domain: DomainSource = None):
        self.strict_writes = strict_writes
        self.check_confirmations = check_confirmations
        self.domain = domain

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        traj = trajectory
        if (r := _infra(self.name, traj)) is not None:
            return r
        try:
            dom = _domain(task, self.domain)
        except (KeyError, ValueError) as e:
            return _abstain(self.name, f"the task's domain cannot be loaded: {e}")
        writes = write_tools(dom)
        events = _events(traj)
        ok_calls = [(i, ev) for i, (kind, ev) in enumerate(events) if kind == "call" and ev.ok]
        checks: list[dict[str, Any]] = []

        def add(kind: str, text: str, ok: bool, why: str, counted: bool = True) -> None:
            checks.append({"kind": kind, "checkpoint": text, "satisfied": ok, "why": why, "counted": counted})

        # 1. gold tools called (writes with the gold arguments), as a multiset
        used: set[int] = set()
        for a in task.gold_actions:
            is_write = a.name in writes
            match = next((i for i, rec in ok_calls if i not in used and rec.name == a.name
                          and (not is_write or _args_equal(rec.arguments, a.arguments))), None)
            if match is not None:
                used.add(match)
                add("gold_call", f"calls {a.name}" + (f" with {canonical(a.arguments)}" if is_write else ""), True, "called")
            else:
                tried = [rec.arguments for _i, rec in ok_calls if rec.name == a.name]
                why = (f"{a.name} was called with other arguments ({canonical(tried[0])[:120]})" if tried and is_write
                       else f"{a.name} was never called successfully")
                add("gold_call", f"calls {a.name}" + (f" with {canonical(a.arguments)}" if is_write else ""), False, why)

        # 2. forbidden tools
        offered = set(task.tools) if task.tools else {t.name for t in dom.tools}
        outside = sorted({rec.name or "<no name>" for _k, rec in ((k, e) for k, e in events if k == "call")
                          if (rec.name or "") not in offered})
        add("forbidden", "calls no tool outside the offered set", not outside,
            f"called tools not offered: {', '.join(outside)}" if outside else "only offered tools were called")
        if self.strict_writes:
            gold_writes = [a for a in task.gold_actions if a.name in writes]
            extra = []
            pool_ = list(gold_writes)
            for _i, rec in ok_calls:
                if rec.name not in writes:
                    continue
                m = next((g for g in pool_ if g.name == rec.name and _args_equal(rec.arguments, g.arguments)), None)
                if m is not None:
                    pool_.remove(m)
                else:
                    extra.append(f"{rec.name}({canonical(rec.arguments)[:80]})")
            add("forbidden", "makes no write beyond the gold writes", not extra,
                f"extra write(s): {'; '.join(extra)}" if extra else "no extra writes")

        # 3. the task rubric's checkable checkpoints
        first_call = {}
        for i, rec in ok_calls:
            first_call.setdefault(rec.name, i)
        for cp in task.rubric.checkpoints:
            if m := _LOOKUP.match(cp):
                srcs = [s.strip() for s in m["src"].split(",") if s.strip()]
                tgt = first_call.get(m["tool"])
                if tgt is None:
                    add("lookup", cp, False, f"{m['tool']} was never called successfully")
                    continue
                before = [s for s in srcs if first_call.get(s, tgt + 1) < tgt]
                add("lookup", cp, bool(before), f"looked up with {', '.join(before)} first" if before else
                    f"{m['tool']} was called before any successful {' or '.join(srcs)}")
            elif m := _CONFIRM_CP.match(cp):
                ok, why = self._confirmed(events, m["tool"], first_call.get(m["tool"]))
                add("confirmation", cp, ok, why, counted=self.check_confirmations)
            elif m := _ASK_CP.match(cp):
                ok, why = self._asked(task, events, m["value"])
                add("ask_user", cp, ok, why)
            else:
                add("unchecked", cp, False, "not checkable from the trajectory", counted=False)

        counted = [c for c in checks if c["counted"]]
        sat = sum(c["satisfied"] for c in counted)
        score = sat / len(counted) if counted else 1.0
        failed = [c for c in counted if not c["satisfied"]]
        reason = (f"all {len(counted)} checkpoints satisfied" if not failed else
                  f"{len(failed)} of {len(counted)} checkpoints failed: " + "; ".join(c["why"] for c in failed[:4]))
        return RewardResult(name=self.name, score=score, reason=reason,
                            details={"checkpoints": checks, "satisfied": sat, "total": len(counted)})

    @staticmethod
    def _confirmed(events: list[tuple[str, Any]], tool: str, at: int | None) -> tuple[bool, str]:
        if at is None:
            return False, f"{tool} was never called successfully"
        asked = False
        for kind, ev in events[1:at]:  # after the opening user message
            if kind == "assistant_text" and _CONFIRM_ASK.search(ev):
                asked = True
            elif kind == "user" and asked:
                return True, f"the agent asked and the user replied before {tool}"
        return False, f"the agent called {tool} without asking the user to confirm first"

    @staticmethod
    def _asked(task: Task, events: list[tuple[str, Any]], value: str) -> tuple[bool, str]:
        keys = [k for k, v in task.user_scenario.known_info.items() if v == value] or []
        v = value.lower()
        first_use = next((i for i, (k, ev) in enumerate(events)
                          if k == "call" and v in canonical(ev.arguments).lower()), None)
        told = next((i for i, (k, ev) in enumerate(events) if k == "user" and v in ev.lower()), None)
        asked = next((i for i, (k, ev) in enumerate(events) if k == "assistant_text"
                      and (any(asks_for(ev, key) for key in keys) or (not keys and "?" in ev))), None)
        if first_use is None:
            return True, f"{value} was never used, so never guessed"
        if told is not None and told < first_use and asked is not None and asked < told:
            return True, f"asked for {key_phrase(keys[0]) if keys else 'it'} and the user gave {value}"
        return False, f"used {value} in a tool call before the user gave it"


# ================================================================= tool validity
class ToolCallValidityReward:
    """The fraction of tool calls that were well formed (not malformed, not invalid_arguments,
    not an unknown tool), zeroed when a format check fails: the last assistant message is
    non-empty text, and no tool call comes after the user said ###STOP###. No calls: 1.0."""

    name = "tool_validity"

    def __init__(self, *, require_final_text: bool = True):
        self.require_final_text = require_final_text

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        traj = trajectory
        if (r := _infra(self.name, traj)) is not None:
            return r
        bad = [rec for rec in traj.tool_calls if rec.malformed or (rec.error or {}).get("kind") in ("invalid_arguments", "unknown_tool")]
        n = len(traj.tool_calls)
        frac = 1.0 - len(bad) / n if n else 1.0
        problems: list[str] = []
        last_assistant = next((m for m in reversed(traj.messages) if m.get("role") == "assistant"), None)
        if self.require_final_text and (last_assistant is None or not (last_assistant.get("content") or "").strip()):
            problems.append("the last assistant message has no text for the user")
        stopped = False
        for m in traj.messages:
            if m.get("role") == "user" and STOP in (m.get("content") or ""):
                stopped = True
            elif stopped and m.get("role") == "assistant" and m.get("tool_calls"):
                problems.append(f"a tool call came after the user said {STOP}")
                break
        score = 0.0 if problems else frac
        if problems:
            reason = "; ".join(problems)
        elif bad:
            kinds = sorted({_bad_kind(rec) for rec in bad})
            reason = f"{len(bad)} of {n} tool calls were malformed ({', '.join(kinds)})"
        else:
            reason = f"all {n} tool calls were well formed" if n else "no tool calls; format checks passed"
        return RewardResult(name=self.name, score=score, reason=reason, details={
            "calls": n, "malformed": len(bad), "fraction_valid": frac, "format_problems": problems,
            "malformed_calls": [{"name": r.name, "kind": _bad_kind(r), "error": r.error} for r in bad[:8]]})


class TurnFormatReward:
    """Turn-taking format: the fraction of the agent's turns that ended by themselves (not cut off
    by the token budget), times the fraction of well-formed tool calls. A shaping reward in the
    spirit of R1's format reward: it says nothing about the task, so weight it low next to the
    verifiable ones; on an untrained policy it is the signal that moves first. No agent turn:
    abstain."""

    name = "turn_format"

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        traj = trajectory
        if (r := _infra(self.name, traj)) is not None:
            return r
        turns = traj.stats.agent_turns
        if turns == 0:
            return _abstain(self.name, "the agent took no turn", termination=traj.termination)
        cut = 1 if traj.termination == "max_tokens" else 0
        ended = (turns - cut) / turns
        n = len(traj.tool_calls)
        bad = sum(1 for rec in traj.tool_calls
                  if rec.malformed or (rec.error or {}).get("kind") in ("invalid_arguments", "unknown_tool"))
        valid = 1.0 - bad / n if n else 1.0
        reason = (f"{turns - cut} of {turns} turns ended by themselves"
                  + (f"; {bad} of {n} tool calls malformed" if bad else ""))
        return RewardResult(name=self.name, score=ended * valid, reason=reason,
                            details={"turns": turns, "cut_off": cut, "calls": n, "malformed": bad})


def _bad_kind(rec: ToolCallRecord) -> str:
    err = rec.error or {}
    kind = err.get("kind") or "malformed_call"
    if kind == "malformed_call" and str(err.get("message", "")).startswith("unknown tool"):
        return "unknown_tool"
    if kind == "malformed_call" and "not valid JSON" in str(err.get("message", "")):
        return "invalid_json"
    return kind


# ==================================================================== re-verify
_VERBS = (r"cancel(?:l)?ed|refunded|booked|created|updated|changed|moved|sent|scheduled|enrolled|dropped|returned|"
          r"archived|deleted|removed|added|placed|processed|transferred|reserved|submitted|issued|completed|"
          r"assigned|released|upgraded|installed|uninstalled|purchased|applied|renewed|marked|rescheduled|"
          r"withdrawn|withdrew|deposited|paid|held|filed|logged|recorded|registered|activated|deactivated|"
          r"locked|unlocked|confirmed|saved|edited|swapped|refilled|invited|closed|opened|posted|rebooked")
_CLAIM_FIRST = re.compile(r"\b(?:i|we)(?:(?:'ve| have)\s+(?:(?:now|just|successfully|already|gone ahead and)\s+)*"
                          rf"(?:{_VERBS}|set|made|put)|\s+(?:(?:now|just|successfully|already)\s+)*(?:{_VERBS}))\b", re.I)
_CLAIM_PASSIVE = re.compile(rf"\b(?:has|have)\s+(?:now\s+)?been\s+(?:successfully\s+)?(?:{_VERBS})\b|\bsuccessfully\b|"
                            rf"\bis now\s+(?:{_VERBS})\b", re.I)


def claims(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """(first-person action claims, passive completion claims) found in the agent's texts."""
    first, passive = [], []
    for t in texts:
        first += [m.group(0) for m in _CLAIM_FIRST.finditer(t)]
        passive += [m.group(0) for m in _CLAIM_PASSIVE.finditer(t)]
    return first, passive


class ReverifyReward:
    """Kimi K2's hack check, before a high reward is granted.

    Replays the agent's recorded successful tool calls, in order and with their arguments, in a
    fresh sandbox at the task's seed with the tools the agent was offered. Every recorded state
    hash (initial, after each call, final) and every recorded successful output must be reproduced,
    and the recorded final state must hash to the recorded final hash. A claim of an action that
    never took effect is flagged too. 1.0 when clean; any flag scores 0; a sandbox that dies
    while verifying abstains (None).
    """

    name = "reverify"

    def __init__(self, pool: Any, *, domain: DomainSource = None, check_claims: bool = True, check_outputs: bool = True):
        self.replayer = _Replayer(pool, domain)
        self.check_claims = check_claims
        self.check_outputs = check_outputs

    async def score(self, task: Task, trajectory: Trajectory) -> RewardResult:
        traj = trajectory
        if (r := _infra(self.name, traj)) is not None:
            return r
        try:
            dom = _domain(task, self.replayer.domain)
        except (KeyError, ValueError) as e:
            return _abstain(self.name, f"the task's domain cannot be loaded: {e}")
        if not has_state(dom):
            return _abstain(self.name, "the MCP domain declares no state hook: recorded states cannot be re-verified")
        flags: list[str] = []
        problems: list[str] = []
        details: dict[str, Any] = {}

        # the record itself: does the reported final state hash to the reported hash?
        if traj.final_state is not None and traj.final_state_hash is not None and state_digest(traj.final_state) != traj.final_state_hash:
            flags.append(FLAG_STATE)
            problems.append("the recorded final state does not hash to the recorded final_state_hash")

        try:
            replay = await self._replay(task, traj)
        except SandboxError as e:
            return _abstain(self.name, f"the sandbox failed during re-verification ({type(e).__name__}: {e})")
        except (KeyError, ValueError) as e:
            return _abstain(self.name, f"the trajectory cannot be replayed: {e}")
        details["replay"] = {k: v for k, v in replay.items() if k != "problems"}
        for flag, why in replay["problems"]:
            if flag not in flags:
                flags.append(flag)
            problems.append(why)

        if self.check_claims:
            writes = write_tools(dom)
            wrote = [rec.name for rec in traj.tool_calls if rec.ok and rec.name in writes]
            final = traj.final_state_hash or replay["final_hash"]
            unchanged = final is not None and final == traj.initial_state_hash
            gold_changes = bool(task.final_state_hash) and task.final_state_hash != traj.initial_state_hash
            no_effect = not wrote or (unchanged and gold_changes)
            texts = agent_texts(traj)
            first, passive = claims(texts)
            gold_writes = any(a.name in writes for a in task.gold_actions)
            told = told_outputs(task.expected_outputs, texts, traj.messages, task_texts(task)) if gold_writes else []
            evidence = first + (passive + [f"expected output {o!r}" for o in told] if gold_writes else [])
            details["claims"] = {"first_person": first[:5], "passive": passive[:5], "expected_outputs_told": told,
                                 "successful_writes": wrote, "final_equals_initial": unchanged}
            if no_effect and evidence:
                flags.append(FLAG_CLAIMS)
                how = "no successful write call" if not wrote else "its writes left the state as it was"
                problems.append(f"the agent claims an effect ({'; '.join(repr(x) for x in evidence[:3])}) but made {how}")

        if flags:
            return RewardResult(name=self.name, score=0.0, flags=flags, details=details,
                                reason="hack check failed: " + "; ".join(problems[:3]))
        return RewardResult(name=self.name, score=1.0, details=details,
                            reason=f"re-verified: {replay['replayed']} recorded call(s) reproduce every state hash and output")

    async def _replay(self, task: Task, traj: Trajectory) -> dict[str, Any]:
        problems: list[tuple[str, str]] = []
        sb, _dom = await self.replayer.open(task, offered_only=True)
        replayed = 0
        diverged_at: int | None = None
        try:
            h = await sb.digest()
            initial = h
            if traj.initial_state_hash is not None and traj.initial_state_hash != h:
                problems.append((FLAG_STATE, "the recorded initial state hash differs from the task's seeded state"))
            for i, rec in enumerate(traj.tool_calls):
                if rec.ok:
                    if not isinstance(rec.name, str) or not isinstance(rec.arguments, dict):
                        problems.append((FLAG_FORGED, f"call #{i + 1} is recorded as successful but is not a well-formed call"))
                        break
                    r = await sb.call_tool(rec.name, rec.arguments, timeout=CALL_TIMEOUT)
                    replayed += 1
                    if not r.ok:
                        problems.append((FLAG_FORGED, f"call #{i + 1} {rec.name} is recorded as successful but fails on "
                                                      f"replay ({r.kind}: {r.message[:100]})"))
                        diverged_at = i
                        break
                    if self.check_outputs and canonical(r.output) != canonical(rec.output):
                        problems.append((FLAG_FORGED, f"the recorded output of call #{i + 1} {rec.name} differs from "
                                                      "what the tool returns on replay"))
                    h = await sb.digest()
                if rec.state_hash != h:
                    problems.append((FLAG_STATE, f"the recorded state hash after call #{i + 1} {rec.name} differs from "
                                                 "the replay's"))
                    diverged_at = i
                    break
            final = h
            if diverged_at is None and traj.final_state_hash is not None and traj.final_state_hash != final:
                problems.append((FLAG_STATE, "the recorded final state hash differs from the replay of the recorded calls"))
        finally:
            with anyio.CancelScope(shield=True):
                await release_to(sb, self.replayer.pool)
        return {"problems": problems, "replayed": replayed, "initial_hash": initial, "final_hash": final,
                "diverged_at": diverged_at}
