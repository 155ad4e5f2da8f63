"""Behaviour-rich priming traces: Gandhi et al. 2025's "cognitive behaviours" for tool-using agents.

The paper primes a base model by SFT on traces that show four habits (subgoal setting,
verification, backtracking, backward chaining) before RL, and compares that with controls:
no behaviours, an empty or a length-matched filler "chain of thought", and behaviour-rich
traces whose answer is wrong. This module makes those datasets for zoo tasks. Every trace is a
real episode (synth.episode.run_episode in a sandbox with the ScriptedUser), so each tool result
in it is what the tool really returned.

    trajs = generate_traces(tasks, "all", seed=0)                       # procedural, offline
    trajs = generate_traces(tasks, "all", mode="llm", llm=LLMClient(cfg)) # an endpoint as the agent

Procedural mode (`BehaviourAgent`) builds each trace from the task's gold actions. Its text is
short and templated on purpose (one sentence per behaviour, copying ids and values): the traces
prime ~1M-parameter models trained for minutes on a CPU, for which long prose is noise.

- subgoal setting: "Plan: 1) cancel order O-1000 2) update address C-103." before the first call,
  sometimes "Step 2: update address C-103." before a later one;
- backward chaining: "To update address C-103 I need customer id C-103; first cancel order O-1000.";
- verification: after a write, a read tool of the task that shows the written entity (when one
  can be called with the write's arguments or output), then "Check: O-1000 is cancelled, as asked.";
- backtracking: a read with a mistyped id (a read cannot change the state) whose error or
  unexpected answer is noticed, then "... wrong id. Back to O-1000." and the right call.

Which behaviours a trace shows is drawn per trace (per behaviour, with the condition's
probability) from a seeded rng, so traces differ in mix and in where the behaviours fall.
`incorrect` traces are behaviour-rich but wrong (the last write takes a different argument and
the reported outputs are wrong); generate_traces keeps only those whose world state or reported
outputs really are wrong, as the paper kept only incorrect samples. `no_backtracking` is `all` without
the mistyped reads, which a tiny policy copies as its own first call (issue 28).

LLM mode gives an OpenAI-compatible endpoint a system prompt that prescribes a behaviour mix
(after the paper's api_gen.py prompts); the saved trace keeps the episode's normal system prompt.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from synth.episode import SYSTEM_PROMPTS, LLMAgent, Trajectory
from synth.tasks import Action, Task, names_match
from synth.task_values import asked_fields, json_pair, output_pairs
from synth.usersim import contains_all, key_phrase, user_only_info
from toolzoo.spec import Domain, ToolSpec

if TYPE_CHECKING:
    from synth.llm import LLMClient

Behaviour = Literal["subgoal", "verification", "backtracking", "backward_chaining"]
BEHAVIOURS: tuple[Behaviour, ...] = get_args(Behaviour)
Condition = Literal["all", "none", "incorrect", "empty", "length_matched", "no_backtracking",
                    "subgoal", "verification", "backtracking", "backward_chaining"]
CONDITIONS: tuple[Condition, ...] = get_args(Condition)
CORRECT_CONDITIONS: tuple[Condition, ...] = tuple(c for c in CONDITIONS if c != "incorrect")
Mode = Literal["procedural", "llm"]

# Per-behaviour probability that a trace shows it (verification: per write; subgoal "step" markers: per step).
_RICH = {"subgoal": 0.9, "verification": 0.85, "backtracking": 0.6, "backward_chaining": 0.7}
CONDITION_MIX: dict[Condition, dict[Behaviour, float]] = {
    "all": dict(_RICH), "incorrect": dict(_RICH), "none": {}, "empty": {}, "length_matched": {},
    # all but the mistyped-id reads, which the policy copies as its own first call (reader_gpu.md section 27)
    "no_backtracking": {b: p for b, p in _RICH.items() if b != "backtracking"},
    **{b: {b: 1.0} for b in BEHAVIOURS},  # type: ignore[misc]
}
STEP_MARKER_P = 0.5
# How the final answer says the outputs: plain (`All done. lock, Porch light`), quoted as a JSON tool
# output writes them (`"lock"`: in prose 80% of values change token ids, bench/reader_tokens.py), keyed
# (`"type": "lock"`, the output's own pair: once the key is said the value is an induction copy), or keyed_plan
# (keyed, the plan ending `3) tell the "mode" and the "type"`; reader_gpu.md sections 23-24). Issue 28.
ANSWER_STYLES = ("plain", "quoted", "keyed", "keyed_plan")
AnswerStyle = Literal["plain", "quoted", "keyed", "keyed_plan"]
PLAIN_SENTENCE = "Sure, working on it."   # the `none` condition's one non-behavioural sentence
FILLER = "."                               # the `length_matched` condition's filler character

_ID_KEYS = ("id", "_key", "_code", "sku")
_ID_RE = re.compile(r"^[A-Za-z][\w\-]*\d[\w\-]*$")


def id_like(value: Any) -> bool:
    """An entity id such as O-1000 or WEB-3 (a letter first, a digit somewhere, no spaces)."""
    return isinstance(value, str) and len(value) <= 40 and bool(_ID_RE.match(value))


def mistype(value: str) -> str:
    """An id that almost certainly names nothing: its last digit run with "99" appended."""
    m = re.search(r"\d+(?!.*\d)", value)
    return value[: m.end()] + "99" + value[m.end():] if m else value + "99"


def phrase(a: Action, known: str | None = None) -> str:
    """'cancel order O-1000': the tool's name in words and the action's first id (or short value); with
    ``known`` (what the conversation has said so far), only a value said there: a plan made before a
    look-up must not name the id the look-up will return (that would teach recalling ids, not copying)."""
    words = a.name.replace("_", " ")
    vals = [v for v in a.arguments.values() if known is None or str(v) in known]
    ids = [v for v in vals if id_like(v)]
    short = [v for v in vals if isinstance(v, (str, int, float)) and not isinstance(v, bool) and len(str(v)) <= 24]
    what = ids[0] if ids else short[0] if short else None
    return f"{words} {what}" if what is not None else words


def _leaves(obj: Any, out: dict[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    """First scalar value per key anywhere in a JSON value."""
    out = {} if out is None else out
    if depth > 4:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)):
                _leaves(v, out, depth + 1)
            elif v is not None:
                out.setdefault(k, v)
    elif isinstance(obj, list):
        for v in obj[:20]:
            _leaves(v, out, depth + 1)
    return out


def _record_of(obj: Any, value: Any, depth: int = 0) -> dict[str, Any] | None:
    """The first dict in a JSON value that holds `value` as one of its own values."""
    if depth > 5:
        return None
    if isinstance(obj, dict):
        if value in obj.values():
            return obj
        items = obj.values()
    elif isinstance(obj, list):
        items = obj
    else:
        return None
    for v in items:
        if isinstance(v, (dict, list)) and (r := _record_of(v, value, depth + 1)) is not None:
            return r
    return None


def keyed_value(value: str, messages: Sequence[dict[str, Any]]) -> str:
    """`"key": "value"` as the latest tool output holding the value writes it; else the value quoted."""
    for m in reversed(messages):
        if m.get("role") != "tool":
            continue
        try:
            out = json.loads(m.get("content") or "")
        except ValueError:
            continue
        for k, v in output_pairs(out):
            if not isinstance(v, (dict, list)) and str(v) == value:
                return json_pair(k, v)
    return json.dumps(value, ensure_ascii=False)


def _tool_output(messages: list[dict[str, Any]]) -> tuple[bool, Any]:
    """(ok, parsed output) of the last tool message."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            text = m.get("content") or ""
            if text.startswith("Error"):
                return False, text
            try:
                return True, json.loads(text)
            except ValueError:
                return True, text
        if m.get("role") == "assistant":
            break
    return False, None


def _fill(spec: ToolSpec, args: dict[str, Any], output: Any) -> dict[str, Any] | None:
    """Arguments for `spec` (every required parameter) from a write's arguments, then its output."""
    required = list(spec.parameters.get("required") or [])
    if not required:
        return None
    leaves = _leaves(output) if output is not None else {}
    out = {}
    for p in required:
        got = next((v for k, v in args.items() if k == p), None)
        got = got if got is not None else next((v for k, v in args.items() if names_match(k, p) and id_like(v)), None)
        got = got if got is not None else next((v for k, v in leaves.items() if names_match(k, p) and id_like(v)), None)
        if got is None:
            return None
        out[p] = got
    return out


# ========================================================================== procedural
class BehaviourAgent:
    """Replays a task's gold actions with templated behaviour text (an synth.episode Agent).

    Decisions (which behaviours, where) are drawn at construction from `rng`; the text after a
    call is written from what the call really returned. `used` counts the behaviours the trace
    shows and `reasoning_chars` the length of its reasoning text (the length_matched control's
    target). `filler_chars` is that target for a `length_matched` agent.
    """

    def __init__(self, task: Task, domain: Domain, condition: Condition, rng: random.Random,
                 *, filler_chars: int = 0, answers: AnswerStyle = "plain"):
        if condition not in CONDITIONS:
            raise ValueError(f"unknown condition {condition!r}: use one of {', '.join(CONDITIONS)}")
        if answers not in ANSWER_STYLES:
            raise ValueError(f"unknown answer style {answers!r}: use {' or '.join(ANSWER_STYLES)}")
        self.answers = answers
        self.task, self.domain, self.condition, self.rng = task, domain, condition, rng
        self.used: Counter[str] = Counter()
        self.reasoning_chars = 0
        self.ask = list(user_only_info(task))
        self.tools = {n: domain.tool(n) for n in (task.tools or [t.name for t in domain.tools])}
        mix = CONDITION_MIX[condition]
        on = {b: rng.random() < p for b, p in mix.items()}
        self.actions = list(task.gold_actions)
        writes = [i for i, a in enumerate(self.actions) if self._effect(a.name) == "write"]
        self.wrong_outputs = condition == "incorrect"
        if condition == "incorrect" and writes:
            self.actions[writes[-1]] = self._mutate(self.actions[writes[-1]])
        self.moves: list[tuple[str, Any]] = [("gold", i) for i in range(len(self.actions))]
        if on.get("backtracking"):
            spots = [(i, b) for i in range(len(self.actions)) if (b := self._bogus(self.actions[i])) is not None]
            if spots:
                i, bogus = rng.choice(spots)
                self.moves.insert(self.moves.index(("gold", i)), ("bogus", (bogus, i)))
        p_verify = mix.get("verification", 0.0)
        for i in writes:
            if p_verify and rng.random() < p_verify:
                self.moves.insert(self.moves.index(("gold", i)) + 1, ("verify", i))
        self.plan = bool(on.get("subgoal"))
        self.backward = bool(on.get("backward_chaining"))
        self.markers = {i for i in range(1, len(self.actions)) if self.plan and rng.random() < STEP_MARKER_P}
        self.plan_first = rng.random() < 0.5
        self.last: tuple[str, Any] | None = None   # the last call, when the next message reacts to it
        self.started = False
        calls = [m for m in self.moves if m[0] == "gold"]
        self.filler = self._split(filler_chars, len(calls)) if condition == "length_matched" else []
        self.n_call = 0

    # -- helpers
    def _effect(self, name: str) -> str:
        spec = self.tools.get(name)
        if spec is None:
            try:
                spec = self.domain.tool(name)
            except KeyError:
                return "read"
        return spec.effect

    @staticmethod
    def _split(total: int, parts: int) -> list[int]:
        if parts <= 0:
            return []
        base, extra = divmod(max(0, total), parts)
        return [base + (1 if i < extra else 0) for i in range(parts)]

    def _reads(self) -> list[ToolSpec]:
        return [s for s in self.tools.values() if s.effect == "read"]

    def _bogus(self, a: Action) -> Action | None:
        """A read with a mistyped id standing in for `a` (a read cannot change the state)."""
        if self._effect(a.name) == "read":
            for k, v in a.arguments.items():
                if id_like(v):
                    return Action(name=a.name, arguments={**a.arguments, k: mistype(v)})
        for spec in self._reads():
            req = list(spec.parameters.get("required") or [])
            if len(req) != 1:
                continue
            for k, v in a.arguments.items():
                if id_like(v) and (k == req[0] or names_match(k, req[0])):
                    return Action(name=spec.name, arguments={req[0]: mistype(v)})
        return None

    def _mutate(self, a: Action) -> Action:
        """The write with one argument changed to a different (schema-valid where possible) value."""
        spec = self.tools.get(a.name)
        props = (spec.parameters.get("properties") or {}) if spec is not None else {}
        args = dict(a.arguments)
        for k, v in args.items():  # an enum: another of its values
            enum = [e for e in (props.get(k) or {}).get("enum") or [] if e != v]
            if enum:
                args[k] = self.rng.choice(enum)
                return Action(name=a.name, arguments=args)
        for k, v in args.items():  # a number: one more
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                args[k] = v + 1
                return Action(name=a.name, arguments=args)
        for k, v in args.items():  # a free-text value: a different one
            if isinstance(v, str) and not id_like(v) and len(v) >= 2:
                args[k] = v + " 2"
                return Action(name=a.name, arguments=args)
        for k, v in args.items():  # an id: another (likely missing) one
            if id_like(v):
                args[k] = mistype(v)
                return Action(name=a.name, arguments=args)
        return a

    def _goal(self) -> Action:
        writes = [a for a in self.actions if self._effect(a.name) == "write"]
        return (writes or self.actions)[-1]

    def _say(self, behaviour: str, text: str) -> str:
        self.used[behaviour] += 1
        return text

    def _opening(self, known: str) -> str:
        parts = []
        goal, first = self._goal(), self.actions[0]
        if self.backward:
            ids = [(k, v) for k, v in goal.arguments.items() if id_like(v)]
            need = " and ".join(f"{key_phrase(k)} {v}" if str(v) in known else f"the {key_phrase(k)}"
                                for k, v in ids[:2]) or "its details"
            tail = (f"first {phrase(first, known)}." if first is not goal else "I have them, so I start there.")
            parts.append(self._say("backward_chaining", f"To {phrase(goal, known)} I need {need}; {tail}"))
        if self.plan:
            todo = [phrase(a, known) for a in self.actions]
            if self.answers == "keyed_plan" and (asked := asked_fields(self.task.instruction)):
                todo.append("tell the " + " and the ".join(json.dumps(f) for f in asked))
            parts.append(self._say("subgoal", "Plan: " + " ".join(f"{i + 1}) {x}" for i, x in enumerate(todo)) + "."))
        if self.plan and self.backward and self.plan_first:
            parts.reverse()
        return " ".join(parts)

    def _recovery(self, bogus: Action, right: Action, messages: list[dict[str, Any]]) -> str:
        ok, _ = _tool_output(messages)
        wrong = next((v for v in bogus.arguments.values() if id_like(v)), "that id")
        good = next((v for v in right.arguments.values() if id_like(v)), None) or phrase(right)
        if ok:
            return self._say("backtracking", f"That is not {good}; {wrong} is the wrong record. Back to {good}.")
        return self._say("backtracking", f"Error: {wrong} was not found, so I mistyped it. Back to {good}.")

    def _check(self, write: Action, messages: list[dict[str, Any]], write_output: Any) -> str:
        ok, out = _tool_output(messages)
        ent = self._ent(write, write_output)
        rec = _record_of(out, ent) if ok and isinstance(out, (dict, list)) else None
        rec = rec if rec is not None else (out if ok and isinstance(out, dict) else {})
        blob = json.dumps(out, default=str) if ok else ""
        status = rec.get("status") if isinstance(rec.get("status"), str) else None
        values = [(k, v) for k, v in write.arguments.items() if isinstance(v, str) and not id_like(v)
                  and 2 <= len(v) <= 30 and not k.endswith(_ID_KEYS) and v in blob]
        if status and isinstance(write_output, dict) and "status" in write_output:
            text = f"Check: {ent} is {status} now, as asked."
        elif values:
            text = f"Check: {ent} has {key_phrase(values[0][0])} {values[0][1]}, as asked."
        elif status:
            text = f"Check: {ent} is {status}, as asked."
        else:
            text = f"Check: {ent} looks right, as asked."
        return self._say("verification", text)

    def _answer(self, messages: list[dict[str, Any]] = ()) -> str:
        outs = [str(o) for o in self.task.expected_outputs]
        if self.wrong_outputs:
            outs = [wrong_value(o, self.domain) for o in outs]
        if self.answers in ("keyed", "keyed_plan"):
            outs = [keyed_value(o, messages) for o in outs]
        elif self.answers == "quoted":  # as a JSON tool output writes them: the same token ids (issue 28)
            outs = [json.dumps(o) for o in outs]
        return f"All done. {', '.join(outs)}".strip() if outs else "All done."

    def _content(self, *parts: str) -> str | None:
        text = " ".join(p for p in parts if p).strip()
        if self.condition == "empty":
            return None
        if self.condition == "length_matched":
            n = self.filler[self.n_call - 1] if 0 < self.n_call <= len(self.filler) else 0
            self.reasoning_chars += n
            return FILLER * n or None
        if self.condition == "none":
            return PLAIN_SENTENCE if self.n_call == 1 else None
        self.reasoning_chars += len(text)
        return text or None

    def _call(self, a: Action, text: str | None) -> dict[str, Any]:
        return {"role": "assistant", "content": text, "tool_calls": [{
            "id": f"call_{self.n_call}", "type": "function",
            "function": {"name": a.name, "arguments": json.dumps(a.arguments)}}]}

    # -- the Agent protocol
    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if self.ask:
            wanted = " and ".join(key_phrase(k) for k in self.ask)
            self.ask = []
            return {"role": "assistant", "content": f"Sure, I can help. Could you please tell me your {wanted}?"}
        pre = []
        if self.last is not None:
            kind, arg = self.last
            if kind == "bogus":
                bogus, i = arg
                pre.append(self._recovery(bogus, self.actions[i], messages))
            elif kind == "verify":
                write, write_output = arg
                pre.append(self._check(write, messages, write_output))
            self.last = None
        said = "\n".join(m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str))
        opening = "" if self.started else self._opening(said)
        self.started = True
        while self.moves:
            kind, arg = self.moves.pop(0)
            if kind == "bogus":
                bogus, i = arg
                self.n_call += 1
                self.last = ("bogus", arg)
                right = next((v for v in self.actions[i].arguments.values() if id_like(v)), "")
                intent = f"First {bogus.name.replace('_', ' ')} {right}."
                return self._call(bogus, self._content(*pre, opening, intent))
            if kind == "verify":
                write = self.actions[arg]
                ok, write_output = _tool_output(messages)
                read = self._verify_read(write, write_output if ok else None)
                nxt = self.moves[0] if self.moves else None
                nxt_action = self.actions[nxt[1]] if nxt and nxt[0] == "gold" else None
                if read is None or (nxt_action is not None and nxt_action == read):
                    if read is None:  # no read tool shows it: check the write's own answer
                        pre.append(self._check(write, messages, write_output))
                    else:             # the next gold call is that read: check after it
                        self.moves[0] = ("gold_then_check", (nxt[1], write, write_output))
                    continue
                self.n_call += 1
                self.last = ("verify", (write, write_output))
                return self._call(read, self._content(*pre, opening, f"Now verify {self._ent(write, write_output)}."))
            if kind == "gold_then_check":
                i, write, write_output = arg
                self.n_call += 1
                self.last = ("verify", (write, write_output))
                return self._call(self.actions[i], self._content(*pre, opening,
                                                                 f"Now verify {self._ent(write, write_output)}."))
            self.n_call += 1
            return self._gold(arg, pre, opening)
        checks = " ".join(pre)
        self.reasoning_chars += len(checks)
        return {"role": "assistant", "content": f"{checks} {self._answer(messages)}".strip()}

    def _gold(self, i: int, pre: list[str], opening: str) -> dict[str, Any]:
        a = self.actions[i]
        marker = self._say("subgoal", f"Step {i + 1}: {phrase(a)}.") if i in self.markers and not opening else ""
        return self._call(a, self._content(*pre, opening, marker))

    @staticmethod
    def _ent(write: Action, write_output: Any = None) -> str:
        """The written entity: the write's first id, else the id its answer names (a created record)."""
        ids = [v for v in write.arguments.values() if id_like(v)]
        if isinstance(write_output, (dict, list)):
            ids += [v for k, v in _leaves(write_output).items() if id_like(v) and k.endswith(_ID_KEYS)]
        return ids[0] if ids else phrase(write)

    def _verify_read(self, write: Action, output: Any) -> Action | None:
        """A read tool of the task, callable from the write's arguments or output, that shows its entity."""
        best = None
        for spec in self._reads():
            args = _fill(spec, write.arguments, output)
            if args is None:
                continue
            score = (spec.name.startswith(("get_", "show_", "view_")), -len(args))
            if best is None or score > best[0]:
                best = (score, Action(name=spec.name, arguments=args))
        return best[1] if best else None


def wrong_value(value: str, domain: Domain | None = None) -> str:
    """A plausible but wrong stand-in for an expected output: numbers +1, the last digit run of an id or
    date bumped, an enum word swapped for another value of the same enum, else "unknown"."""
    v = value.strip()
    if re.fullmatch(r"[-+]?\d+", v):
        return str(int(v) + 1)
    if re.fullmatch(r"[-+]?\d*\.\d+", v):
        return f"{float(v) + 1:g}"
    m = re.search(r"\d+(?!.*\d)", v)
    if m:
        d = m.group(0)
        return v[: m.start()] + str(int(d) + 1).zfill(len(d)) + v[m.end():]
    if domain is not None:
        for t in domain.tools:
            for schema in (t.parameters.get("properties") or {}).values():
                enum = [e for e in schema.get("enum") or [] if isinstance(e, str)] if isinstance(schema, dict) else []
                if v in enum and len(enum) > 1:
                    return next(e for e in enum if e != v)
    return "unknown"


# ================================================================================ LLM
# Adapted from the paper's api_gen.py system prompts (all_strategies, only_backtracking, ...,
# negative_control), rewritten for tool use. The endpoint sees the episode's system prompt plus one of these.
_DEFS = {
    "subgoal": "subgoal setting: before acting, state a short numbered plan of the calls you will make",
    "verification": "verification: after every change, call a read tool on the changed record and say whether "
                    "it now matches what the user asked",
    "backtracking": "backtracking: when a tool returns an error or an unexpected answer, say what went wrong, "
                    "then fix the call",
    "backward_chaining": "backward chaining: start from what the final change needs (\"to do X I need Y\") and "
                         "work back to the first call",
}
PRESCRIPTIONS: dict[str, str] = {
    "all_strategies": "Think out loud in one short sentence before each tool call, using all of these habits:\n- "
                      + "\n- ".join(_DEFS.values()),
    "all_but_backtracking": "Think out loud in one short sentence before each tool call, using these habits:\n- "
                            + "\n- ".join(v for k, v in _DEFS.items() if k != "backtracking"),
    "only_backtracking": "Think out loud in one short sentence before each tool call. Use backtracking only: "
                         + _DEFS["backtracking"] + ". Do not plan, verify or reason backward.",
    "backtracking_verification": "Think out loud in one short sentence before each tool call, using "
                                 + _DEFS["backtracking"] + "; and " + _DEFS["verification"] + ".",
    "backtracking_backward": "Think out loud in one short sentence before each tool call, using "
                             + _DEFS["backtracking"] + "; and " + _DEFS["backward_chaining"] + ".",
    "backtracking_subgoal": "Think out loud in one short sentence before each tool call, using "
                            + _DEFS["backtracking"] + "; and " + _DEFS["subgoal"] + ".",
    "only_subgoal": "Before your first tool call, " + _DEFS["subgoal"].split(": ", 1)[1]
                    + ". Do not verify, backtrack or reason backward.",
    "only_verification": "Use " + _DEFS["verification"] + ". Do not plan, backtrack or reason backward.",
    "only_backward": "Use " + _DEFS["backward_chaining"] + ". Do not plan, verify or backtrack.",
    "negative_control": "DIRECTLY make the tool calls that solve the request. Do not plan, do not check your "
                        "work, do not reconsider, and do not explain: no text before a tool call.",
}
LLM_PRESCRIPTION: dict[Condition, str] = {
    "all": "all_strategies", "incorrect": "all_strategies", "empty": "all_strategies",
    "length_matched": "all_strategies", "no_backtracking": "all_but_backtracking", "none": "negative_control",
    "subgoal": "only_subgoal", "verification": "only_verification", "backtracking": "only_backtracking", "backward_chaining": "only_backward",
}


class PrescribedAgent(LLMAgent):
    """An endpoint agent whose system prompt, as the endpoint sees it, ends with a behaviour prescription.
    The episode records its own messages, so the saved trace keeps the normal system prompt."""

    def __init__(self, client: LLMClient, prescription: str, **sampling: Any):
        super().__init__(client, **sampling)
        self.prescription = PRESCRIPTIONS.get(prescription, prescription)

    async def act(self, messages, tools):
        msgs = [dict(m) for m in messages]
        if msgs and msgs[0].get("role") == "system":
            msgs[0]["content"] = f"{msgs[0].get('content') or ''}\n\n{self.prescription}".strip()
        else:
            msgs.insert(0, {"role": "system", "content": self.prescription})
        return await super().act(msgs, tools)


def reasoning_chars(traj: Trajectory) -> int:
    """Characters of text the agent wrote before its tool calls (the reasoning of a tool-use trace)."""
    return sum(len(m.get("content") or "") for m in traj.messages if m.get("role") == "assistant" and m.get("tool_calls"))


def strip_reasoning(traj: Trajectory, filler_chars: int | None = None) -> Trajectory:
    """The trace with the text before each tool call removed (`empty`) or replaced by filler of the same
    total length (`length_matched`). The calls and their real results are unchanged."""
    out = traj.model_copy(deep=True)
    msgs = [m for m in out.messages if m.get("role") == "assistant" and m.get("tool_calls")]
    sizes = (BehaviourAgent._split(filler_chars, len(msgs)) if filler_chars is not None else [0] * len(msgs))
    for m, n in zip(msgs, sizes, strict=True):
        m["content"] = FILLER * n or None
    return out


# ============================================================================ driving
def is_wrong(task: Task, traj: Trajectory) -> bool:
    """Wrong by the verifiable rewards' standards: not the gold state, or an expected output never told."""
    texts = [m["content"] for m in traj.messages
             if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()]
    return not traj.reached_expected_state or not contains_all("\n".join(texts), task.expected_outputs)


def task_rng(seed: int, task: Task) -> random.Random:
    return random.Random(f"{seed}:{task.id}")


class TraceSet:
    """Trajectories of one condition, with what each shows (procedural: from the agent's own count)."""

    def __init__(self, condition: Condition, mode: Mode):
        self.condition, self.mode = condition, mode
        self.trajectories: list[Trajectory] = []
        self.used: list[dict[str, int]] = []       # procedural: behaviours each trace shows
        self.reasoning: list[int] = []             # procedural: characters of reasoning text per trace
        self.dropped_not_wrong = 0
        self.narrowed: dict[str, int] | None = None  # narrow_reads: look-up reads narrowed, or why not

    def summary(self) -> dict[str, Any]:
        t = self.trajectories
        ends = Counter(x.termination for x in t)
        return {
            "condition": self.condition, "mode": self.mode, "trajectories": len(t),
            "reached_expected_state": sum(x.reached_expected_state for x in t),
            "terminations": dict(ends), "dropped_not_wrong": self.dropped_not_wrong,
            "behaviours": {b: sum(u.get(b, 0) for u in self.used) for b in BEHAVIOURS} if self.used else None,
            "traces_with": {b: sum(1 for u in self.used if u.get(b)) for b in BEHAVIOURS} if self.used else None,
            "reasoning_chars": sum(self.reasoning) if self.reasoning else sum(reasoning_chars(x) for x in t),
            **({"narrowed": self.narrowed} if self.narrowed is not None else {}),
        }


async def agenerate_traces(
    tasks: Sequence[Task],
    condition: Condition,
    *,
    mode: Mode = "procedural",
    backend: str = "auto",
    system_prompt: str = "brief",
    seed: int = 0,
    concurrency: int = 8,
    llm: LLMClient | None = None,
    progress: bool | Callable[[int, int], None] = False,
    pool: Any = None,
    answers: AnswerStyle = "plain",
    narrow_reads: bool = False,
) -> TraceSet:
    """Run one episode per task in the condition; `pool` (a SandboxPool) is made from `backend` if not given.
    `answers`: how procedural traces say the task's outputs (see ANSWER_STYLES). `narrow_reads`: a look-up
    task's listing read takes the filters the user's words say (synth.narrow_reads); counts in `out.narrowed`."""
    from sandboxes import SandboxConfig, SandboxPool
    from synth.episode import resolve_domain, run_episodes
    from synth.usersim import ScriptedUser

    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}: use one of {', '.join(CONDITIONS)}")
    if mode not in ("procedural", "llm"):
        raise ValueError(f"unknown mode {mode!r}: use procedural or llm")
    if system_prompt not in SYSTEM_PROMPTS:
        raise ValueError(f"unknown system prompt {system_prompt!r}: use {' or '.join(SYSTEM_PROMPTS)}")
    if mode == "llm" and llm is None:
        raise ValueError("mode llm needs an LLM client (--base-url and --model)")
    out = TraceSet(condition, mode)
    if not tasks:
        return out
    size = max(1, min(concurrency, len(tasks)))

    async def run(pool: Any) -> None:
        nonlocal tasks
        if narrow_reads:
            from synth.narrow_reads import anarrow_lookups

            tasks, out.narrowed = await anarrow_lookups(tasks, pool)

        def episodes(factory):
            # Procedural agents say everything once: a user who leaves right after the answer keeps a wrong
            # (incorrect) answer from being repeated until the user's turn limit.
            users = (lambda t: ScriptedUser()) if mode == "llm" else \
                (lambda t: ScriptedUser(max_turns=1 + bool(user_only_info(t))))
            return run_episodes(list(tasks), factory, users, pool, concurrency=size,
                                progress=progress, system_prompt=SYSTEM_PROMPTS[system_prompt])

        if mode == "llm":
            trajs = await episodes(lambda t: PrescribedAgent(llm, LLM_PRESCRIPTION[condition]))
            if condition == "empty":
                trajs = [strip_reasoning(t) for t in trajs]
            elif condition == "length_matched":
                trajs = [strip_reasoning(t, reasoning_chars(t)) for t in trajs]
            out.trajectories = trajs
        else:
            agents: dict[str, BehaviourAgent] = {}
            targets: dict[str, int] = {}
            if condition == "length_matched":  # the `all` trace of the same task and seed sets the length
                full: dict[str, BehaviourAgent] = {}

                def all_agent(t: Task) -> BehaviourAgent:
                    full[t.id] = BehaviourAgent(t, resolve_domain(t, None), "all", task_rng(seed, t), answers=answers)
                    return full[t.id]

                await episodes(all_agent)
                targets = {k: a.reasoning_chars for k, a in full.items()}

            def agent(t: Task) -> BehaviourAgent:
                agents[t.id] = BehaviourAgent(t, resolve_domain(t, None), condition, task_rng(seed, t),
                                              filler_chars=targets.get(t.id, 0), answers=answers)
                return agents[t.id]

            out.trajectories = await episodes(agent)
            out.used = [dict(agents[t.task_id].used) for t in out.trajectories]
            out.reasoning = [agents[t.task_id].reasoning_chars for t in out.trajectories]
        if condition == "incorrect":  # keep only what really is wrong (the paper's incorrect-only set)
            by_id = {t.id: t for t in tasks}
            keep = [i for i, t in enumerate(out.trajectories) if is_wrong(by_id[t.task_id], t)]
            out.dropped_not_wrong = len(out.trajectories) - len(keep)
            out.trajectories = [out.trajectories[i] for i in keep]
            out.used = [out.used[i] for i in keep] if out.used else []
            out.reasoning = [out.reasoning[i] for i in keep] if out.reasoning else []

    if pool is not None:
        await run(pool)
    else:
        async with SandboxPool(SandboxConfig(backend=backend), size=size, max_concurrency=size) as p:
            await run(p)
    return out


def generate_traces(
    tasks: Sequence[Task], condition: Condition, *, mode: Mode = "procedural", backend: str = "auto",
    system_prompt: str = "brief", seed: int = 0, concurrency: int = 8, llm: LLMClient | None = None,
    progress: bool | Callable[[int, int], None] = False, answers: AnswerStyle = "plain", narrow_reads: bool = False,
) -> list[Trajectory]:
    """Priming traces of `condition` for `tasks`, one real episode each (sync; see agenerate_traces)."""
    import anyio

    async def go() -> TraceSet:
        return await agenerate_traces(tasks, condition, mode=mode, backend=backend, system_prompt=system_prompt,
                                      seed=seed, concurrency=concurrency, llm=llm, progress=progress,
                                      answers=answers, narrow_reads=narrow_reads)

    return anyio.run(go).trajectories
