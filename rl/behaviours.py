"""How often trajectories show the four cognitive behaviours (Gandhi et al. 2025): verification,
backtracking, subgoal setting and backward chaining.

The paper's claim is about behaviours, not answers: a model that shows them (or is primed to) improves
under RL, one that does not stays flat. So a run has to show them, before SFT, after SFT and after RL:

    report = behaviour_report("runs/demo", HeuristicCounter())   # every trajectories.jsonl / episodes/*.jsonl
    report = behaviour_report("out/trajectories.jsonl", LLMCounter(client))

`HeuristicCounter` counts offline, from the trace's structure as well as its phrases, so it also works on
traces that synth.behaviours did not write (a tool error followed by a changed call is backtracking, a
re-read of a just-written record with words around it is verification). `LLMCounter` is the paper's
measurement: one prompt per behaviour asking an LLM for the count in `<count>N</count>`; an answer it
cannot parse, or a failed request, is recorded as not counted (None), never as 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from pydantic import BaseModel, Field

from synth.behaviours import BEHAVIOURS, Behaviour

if TYPE_CHECKING:
    from synth.llm import LLMClient


class TraceCount(BaseModel):
    """One trajectory's counts; None where the counter could not tell (with the reason in `errors`)."""

    counts: dict[str, int | None]
    errors: dict[str, str] = Field(default_factory=dict)


class BehaviourCounter(Protocol):
    name: str

    async def count(self, messages: list[dict[str, Any]]) -> TraceCount: ...


# ========================================================================= heuristic
_READ_VERBS = ("get", "list", "find", "search", "show", "view", "read", "lookup", "look", "check", "query", "fetch",
               "describe", "count", "browse", "inspect", "status")
_SENT = re.compile(r"(?<=[.!?;])\s+|\n+")
_PLAN_LIST = re.compile(r"\bplan\b\s*[:\-]|\b(my|the|a) plan\b|\bsteps?\s*:|\bsubgoals?\b|(?:^|\s)1[.)]\s.+\s2[.)]\s",
                        re.I | re.S)
_PLAN_SEQ = re.compile(r"\bfirst\b[^.;]*\b(then|next|after that|finally)\b", re.I | re.S)
_STEP = re.compile(r"^\s*(step \d+\b|next( step)?\s*[:,])", re.I)
_CHECK_SAID = re.compile(r"\bcheck(ed)?\s*:|\b((i|we) (have )?checked|checked (that|it)|verif(y|ied|ies|ying|ication)"
                         r"|double[- ]check|confirm(s|ed)? (that|it)|make sure|let me check)\b", re.I)
# weak: words that only say a check when the sentence names an entity of this conversation
_CHECK_WEAK = re.compile(r"\b(matches|as asked|as expected|as requested|looks (right|correct|good)|is correct)\b", re.I)
_CHECK = re.compile(f"{_CHECK_SAID.pattern}|{_CHECK_WEAK.pattern}", re.I)
_ID = re.compile(r"(?<![\w\-])[A-Za-z][\w\-]*\d[\w\-]*(?![\w\-])")
_AVAILABLE = re.compile(r"available tools?:\s*([\w, ]+)|\bsee ([a-z]\w+)", re.I)
_RECHECK = re.compile(r"\b(again|once more|re-?check|re-?read|see (if|whether)|went through)\b", re.I)
_CORRECT = re.compile(r"\b(wrong|mistake|mistyped|typo|my bad|oops|let me (try|retry)|try again|retry|back to|go back"
                      r"|that('s| is) not|not the right|incorrect|instead|fix (it|that|the call))\b", re.I)
_BACKWARD = re.compile(r"\bto\b(?:[^.;]|\.(?=\S)){2,80}?\b(i|we) (first )?(need|must|have to|require)\b|\bwhich (needs|requires)\b"
                       r"|\bwork(ing)? backwards?\b|\bbefore (i|we) can\b|\bin order to\b"
                       r"|\b(requires|needs) [^.;]{1,60}\bfirst\b|\bstart(ing)? from the goal\b", re.I)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(text or "") if s.strip() and not s.strip().endswith("?")]


def _says(pattern: re.Pattern[str], text: str) -> bool:
    """A statement (not a question) of the text matches."""
    return any(pattern.search(x) for x in _sentences(text))


class _Known:
    """What the conversation itself names: the ids the user and the tools said, and the tools that exist (called
    without an unknown-tool error, or named by a tool error: "available tools: ...", "see list_x"). Words
    about entities or tools the conversation never names (a base model's garbled or other-domain text) are not
    about this task."""

    def __init__(self, messages: Sequence[dict[str, Any]], steps: Sequence[_Step]):
        said = " ".join(str(m.get("content") or "") for m in messages if m.get("role") in ("user", "tool"))
        self.ids = {x.rstrip(".-") for x in _ID.findall(said)}
        self.tools: set[str] = set()
        for s in steps:
            for c in s.calls:
                out = c["output"] if isinstance(c["output"], str) else ""
                if c["name"] and not (c["error"] and "unknown tool" in out.lower()):
                    self.tools.add(c["name"])
                for m in _AVAILABLE.finditer(out if c["error"] else ""):
                    self.tools |= {t.strip() for t in (m.group(1) or m.group(2) or "").split(",") if t.strip()}

    def named_ids(self, text: str) -> set[str]:
        return {x.rstrip(".-") for x in _ID.findall(text or "")}

    def relevant(self, text: str) -> bool:
        """The text names an id the conversation said or, in words or as is, a tool that exists."""
        low = (text or "").lower()
        return bool(self.named_ids(text) & self.ids) or any(
            t.lower() in low or t.replace("_", " ").lower() in low for t in self.tools if len(t) > 2)

    def stray(self, text: str) -> bool:
        """The text names ids and none of them is one the conversation said (an echoed template)."""
        named = self.named_ids(text)
        return bool(named) and not named & self.ids


def _is_read(name: str) -> bool:
    return (name or "").lower().split("_", 1)[0] in _READ_VERBS


def _values(obj: Any, depth: int = 0) -> set[str]:
    """Identifier-like strings in a JSON value (the entities a call names or an answer returns)."""
    out: set[str] = set()
    if depth > 4:
        return out
    if isinstance(obj, dict):
        for v in obj.values():
            out |= _values(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj[:50]:
            out |= _values(v, depth + 1)
    elif isinstance(obj, str) and 2 <= len(obj) <= 40 and any(c.isdigit() for c in obj) and " " not in obj:
        out.add(obj)
    return out


def _json(text: Any) -> Any:
    if isinstance(text, (dict, list)):
        return text
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


class _Step:
    """One assistant message with the results of its calls."""

    def __init__(self, text: str):
        self.text = text
        self.calls: list[dict[str, Any]] = []   # {name, args, error: bool, output}


def _steps(messages: Sequence[dict[str, Any]]) -> list[_Step]:
    steps: list[_Step] = []
    by_id: dict[str, dict[str, Any]] = {}
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            s = _Step(m.get("content") if isinstance(m.get("content"), str) else "")
            for i, c in enumerate(m.get("tool_calls") or []):
                if not isinstance(c, dict):
                    continue
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                call = {"name": fn.get("name") or "", "args": _json(fn.get("arguments")) or fn.get("arguments"),
                        "error": False, "output": None}
                s.calls.append(call)
                by_id[str(c.get("id") or f"#{len(steps)}-{i}")] = call
            steps.append(s)
        elif role == "tool":
            call = by_id.get(str(m.get("tool_call_id") or ""))
            if call is None and steps and steps[-1].calls:  # unmatched id: the last unanswered call
                call = next((c for c in steps[-1].calls if c["output"] is None and not c["error"]), None)
            if call is not None:
                content = m.get("content") or ""
                call["error"] = isinstance(content, str) and content.lstrip().lower().startswith("error")
                call["output"] = content if call["error"] else _json(content)
    return steps


class HeuristicCounter:
    """Offline counts from structure and phrases.

    - subgoal: a message with an explicit plan (``Plan:``, a numbered list, "first ... then ...") and
      each later step marker ("Step 2: ...");
    - verification: a read of the entity the last write named or returned, with words before or after it
      (one event), and every other message that states a check ("Check: ...", "verified", "as asked");
    - backtracking: a tool error followed by a changed call or a correction (one event), and every other
      correction ("wrong", "mistyped", "back to", "that is not ...");
    - backward chaining: sentences reasoning from the goal to what it needs ("to X I need Y",
      "which requires", "working backward").
    """

    name = "heuristic"

    async def count(self, messages: list[dict[str, Any]]) -> TraceCount:
        return TraceCount(counts=dict(self.counts(messages)))

    def counts(self, messages: Sequence[dict[str, Any]]) -> dict[Behaviour, int]:
        steps = _steps(messages)
        known = _Known(messages, steps)
        out: dict[Behaviour, int] = dict.fromkeys(BEHAVIOURS, 0)
        texts = [s.text or "" for s in steps]
        used_v: set[int] = set()
        used_b: set[int] = set()
        written: set[str] = set()
        for i, s in enumerate(steps):
            # verification: a re-read of what the last write touched, with words around it
            for c in s.calls:
                if not c["error"] and written and _is_read(c["name"]) and _values(c["args"]) & written:
                    # words saying so: a check phrase with the read, or a check / the entity right after it
                    near = [j for j in (i, i + 1) if j < len(steps) and j not in used_v and (
                        _says(_CHECK, texts[j]) or (j == i and _says(_RECHECK, texts[j]))
                        or (j > i and any(v in texts[j] for v in written)))]
                    if near:
                        out["verification"] += 1
                        used_v.update(near)
                        written = set()
                        break
            for c in s.calls:
                if not c["error"] and not _is_read(c["name"]):
                    written = _values(c["args"]) | _values(c["output"])
            # backtracking: an error, then a repaired call (the same tool with other arguments, or a tool the
            # error named) or a correction about this conversation; another, unrelated call is flailing
            if any(c["error"] for c in s.calls) and i + 1 < len(steps):
                nxt = steps[i + 1]
                failed = [(c["name"], json.dumps(c["args"], sort_keys=True, default=str)) for c in s.calls if c["error"]]
                hinted = {m.group(2) or t.strip() for c in s.calls if c["error"] and isinstance(c["output"], str)
                          for m in _AVAILABLE.finditer(c["output"]) for t in (m.group(1) or "").split(",") or [""]}
                repaired = any((c["name"], json.dumps(c["args"], sort_keys=True, default=str)) not in failed
                               and (c["name"] in {n for n, _ in failed} or c["name"] in hinted) for c in nxt.calls)
                if repaired or self._corrects(texts[i + 1], known):
                    out["backtracking"] += 1
                    used_b.add(i + 1)
        checking = False  # the last message announced a check and made only reads: this one completes it
        for i, text in enumerate(texts):
            sents = _sentences(text)
            listed = _PLAN_LIST.search(text)
            if _PLAN_SEQ.search(text) or (listed and known.relevant(text[listed.start():])):
                out["subgoal"] += 1
            out["subgoal"] += sum(1 for x in sents if _STEP.search(x))
            said = i not in used_v and any(_CHECK_SAID.search(x) or (_CHECK_WEAK.search(x) and known.relevant(x))
                                           for x in sents)
            if said and not checking:
                out["verification"] += 1
            checking = said and not checking and bool(steps[i].calls) and all(_is_read(c["name"]) for c in steps[i].calls)
            if i not in used_b and self._corrects(text, known):
                out["backtracking"] += 1
            out["backward_chaining"] += sum(1 for x in sents if _BACKWARD.search(x))
        return out

    @staticmethod
    def _corrects(text: str, known: _Known) -> bool:
        """A sentence says a correction ("wrong", "mistyped", "back to") and names no id the conversation never
        said (an echoed "G-10399 was not found, so I mistyped it" after no such call is not one)."""
        return any(_CORRECT.search(x) and not known.stray(x) for x in _sentences(text))


# =============================================================================== LLM
# After the paper's behavioral_evals prompts: the trace, a definition with examples, a count in <count></count>.
_LLM_DEFS: dict[str, str] = {
    "verification": (
        "answer-verification steps: the agent checks an intermediate result against the goal, e.g. it reads a "
        "record back after changing it and says whether it matches (\"Check: O-1000 is cancelled, as asked.\", "
        "\"Let me confirm the address was updated.\")"),
    "backtracking": (
        "backtracking: the agent realises a call or an approach was wrong (an error or an unexpected answer) "
        "and explicitly goes back to try something different (\"That id was not found, I mistyped it; back to "
        "O-1000.\", \"That is the wrong order, let me look up the right one.\")"),
    "subgoal": (
        "subgoal setting: the agent breaks the request into intermediate steps before carrying them out "
        "(\"Plan: 1) find the customer 2) cancel the order\", \"First I'll look up the member, then renew the "
        "loan.\", \"Step 2: update the address.\")"),
    "backward_chaining": (
        "backward chaining: the agent starts from the goal and reasons back to what it needs first (\"To "
        "cancel the order I need its id, so first I list the customer's orders.\", \"The refund requires the "
        "order to be cancelled first.\")"),
}

PROMPT = """Here is the transcript of an AI agent that uses tools to help a user. Lines start with the speaker: \
USER, AGENT (what the agent wrote, then any tool calls it made), TOOL (what a tool returned).

<transcript>
{transcript}
</transcript>

Count the distinct instances of {definition} in the AGENT's lines only. Instances from the user or \
the tools do not count; an agent that only calls tools without any of this counts 0.

Think briefly, then give the count between <count> and </count>, for example <count>2</count>. If there \
are none, answer <count>0</count>."""

_COUNT = re.compile(r"<count>\s*(\d{1,4})\s*</count>", re.I)


def render_transcript(messages: Sequence[dict[str, Any]], *, max_chars: int = 12000, tool_chars: int = 300) -> str:
    """The trace as plain lines (the system prompt left out); long tool answers cut, the middle of a long
    trace cut."""
    lines = []
    for m in messages:
        role = m.get("role")
        if role == "user":
            lines.append(f"USER: {m.get('content') or ''}")
        elif role == "assistant":
            calls = [f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                     for c in m.get("tool_calls") or [] if isinstance(c, dict)]
            text = (m.get("content") or "").strip()
            lines.append("AGENT: " + " ".join(x for x in [text, *(f"[call {c}]" for c in calls)] if x))
        elif role == "tool":
            out = str(m.get("content") or "")
            lines.append(f"TOOL: {out[:tool_chars]}{' ...' if len(out) > tool_chars else ''}")
    text = "\n".join(lines)
    if len(text) > max_chars:
        half = max_chars // 2
        text = text[:half] + "\n[... middle of the transcript left out ...]\n" + text[-half:]
    return text


def parse_count(text: str | None) -> int | None:
    """The last `<count>N</count>` of an answer, or None when there is none."""
    found = _COUNT.findall(text or "")
    return int(found[-1]) if found else None


class LLMCounter:
    """The paper's measurement: one request per behaviour to an OpenAI-compatible endpoint."""

    name = "llm"

    def __init__(self, client: LLMClient, *, max_tokens: int = 256, max_chars: int = 12000):
        self.client = client
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.stats = {"calls": 0, "failed": 0}   # failed: requests that raised (unreachable, refused, ...)
        self.last_error: str | None = None

    def prompt(self, behaviour: Behaviour, messages: Sequence[dict[str, Any]]) -> str:
        return PROMPT.format(transcript=render_transcript(messages, max_chars=self.max_chars),
                             definition=_LLM_DEFS[behaviour])

    async def count(self, messages: list[dict[str, Any]]) -> TraceCount:
        from synth.llm import LLMError

        out = TraceCount(counts=dict.fromkeys(BEHAVIOURS))

        async def one(b: Behaviour) -> None:
            self.stats["calls"] += 1
            try:
                r = await self.client.chat([{"role": "user", "content": self.prompt(b, messages)}],
                                           temperature=0.0, max_tokens=self.max_tokens)
            except LLMError as e:
                self.stats["failed"] += 1
                out.errors[b] = self.last_error = f"{type(e).__name__}: {e}"
                return
            n = parse_count(r.text)
            out.counts[b] = n
            if n is None:
                out.errors[b] = f"unparsed answer: {r.text[:200]!r}"

        async with anyio.create_task_group() as tg:
            for b in BEHAVIOURS:
                tg.start_soon(one, b)
        return out


# ============================================================================ reports
class BehaviourStat(BaseModel):
    mean: float | None = Field(description="mean count per counted trajectory (None: none counted)")
    frac: float | None = Field(description="fraction of counted trajectories with at least one instance")
    counted: int = 0
    uncounted: int = Field(0, description="trajectories the counter could not count (unparsed answer, error)")


class GroupReport(BaseModel):
    group: str = Field(description="path of the group's folder relative to the source ('.' for the source)")
    files: list[str]
    n: int
    behaviours: dict[str, BehaviourStat]


class BehaviourReport(BaseModel):
    source: str
    counter: str
    groups: list[GroupReport]


def find_groups(source: str | Path) -> dict[str, list[Path]]:
    """Trajectory files by group: a .jsonl file is one group; a folder's groups are the parents of every
    `**/trajectories.jsonl` and `**/episodes/*.jsonl` below it (relative paths, '.' for the folder)."""
    p = Path(source)
    if not p.exists():
        raise FileNotFoundError(f"no such file or folder: {p}")
    if p.is_file():
        return {".": [p]}
    files = sorted(set(p.rglob("trajectories.jsonl")) | {f for f in p.rglob("*.jsonl") if f.parent.name == "episodes"})
    if not files:
        raise ValueError(f"{p} holds no trajectories.jsonl and no episodes/*.jsonl")
    groups: dict[str, list[Path]] = {}
    for f in files:
        rel = f.parent.relative_to(p).as_posix()
        groups.setdefault(rel or ".", []).append(f)
    return dict(sorted(groups.items()))


def read_messages(path: Path) -> list[list[dict[str, Any]]]:
    """The `messages` of every line (a synth.episode.Trajectory or a row that carries one's fields)."""
    from sandboxes.cli_files import read_jsonl

    def messages(line: str) -> list[dict[str, Any]]:
        row = json.loads(line)
        if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
            raise ValueError("not a trajectory (no messages list)")
        return row["messages"]

    return read_jsonl(path, messages, "trajectories", allow_empty=True)


def summarize(counts: Sequence[TraceCount]) -> dict[str, BehaviourStat]:
    stats = {}
    for b in BEHAVIOURS:
        got = [c.counts.get(b) for c in counts]
        ok = [x for x in got if x is not None]
        stats[b] = BehaviourStat(mean=sum(ok) / len(ok) if ok else None,
                                 frac=sum(1 for x in ok if x > 0) / len(ok) if ok else None,
                                 counted=len(ok), uncounted=len(got) - len(ok))
    return stats


async def abehaviour_report(source: str | Path, counter: BehaviourCounter, *, concurrency: int = 8) -> BehaviourReport:
    groups = find_groups(source)
    traces = {g: [m for f in files for m in read_messages(f)] for g, files in groups.items()}
    if not any(traces.values()):
        raise ValueError(f"no trajectories in {source}: every file found is empty")
    limiter = anyio.Semaphore(max(1, concurrency))
    rows = []
    for g, files in groups.items():
        counts: list[TraceCount | None] = [None] * len(traces[g])

        async def one(i: int, msgs: list[dict[str, Any]], counts: list[TraceCount | None] = counts) -> None:
            async with limiter:
                counts[i] = await counter.count(msgs)

        async with anyio.create_task_group() as tg:
            for i, msgs in enumerate(traces[g]):
                tg.start_soon(one, i, msgs)
        done = [c for c in counts if c is not None]
        rows.append(GroupReport(group=g, files=[str(f) for f in files], n=len(done), behaviours=summarize(done)))
    return BehaviourReport(source=str(source), counter=counter.name, groups=rows)


def behaviour_report(source: str | Path, counter: BehaviourCounter | None = None, *,
                     concurrency: int = 8) -> BehaviourReport:
    """Per group of `source` (a write_trajectories folder, a .jsonl of trajectories or a run directory) and
    behaviour: the mean count per trajectory and the fraction of trajectories with at least one."""
    counter = counter or HeuristicCounter()
    return anyio.run(lambda: abehaviour_report(source, counter, concurrency=concurrency))
