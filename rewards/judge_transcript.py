"""What an LLM judge (rewards/judge.py) is shown, and how its evidence is checked: the trajectory
rendered as quoted JSON-lines data (every character that could leave the data block escaped),
injection-like text flagged, and evidence accepted only as a verbatim quote or a valid step
reference."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DATA_OPEN = "<transcript_data>"
DATA_CLOSE = "</transcript_data>"
DEFAULT_SEED = 1234
_MIN_QUOTE = 3  # characters (after normalising) a quote needs to count as evidence

# ------------------------------------------------------------------------ escaping the data
# Characters written as \uXXXX inside the data block: angle brackets and &, their look-alikes
# (fullwidth, small, CJK, mathematical, ornamental, single guillemets), C1 controls, every format
# character (zero-width, bidi controls, Unicode TAG characters U+E0000-U+E007F, ...), variation
# selectors, fillers that render as nothing, the line/paragraph separators, and lone surrogates
# (JSON leaves all of these raw; a lone surrogate cannot even be sent as UTF-8). Characters above
# U+FFFF are written as a JSON surrogate pair.
_LOOKALIKES = ("<>&\uff1c\uff1e\ufe64\ufe65\u2039\u203a\u3008\u3009\u27e8\u27e9\u2329\u232a\u276c\u276d\u29fc\u29fd"
               "\u02c2\u02c3\u1438\u1433\uff06\u276e\u276f\u2770\u2771\u300a\u300b\u27ea\u27eb\u2991\u2992\ufe3f\ufe40")
_INVISIBLE_RANGES = [
    (0x80, 0xA0),            # C1 controls
    (0xD800, 0xE000),        # surrogates: only ever lone in a str
    (0xFE00, 0xFE10),        # variation selectors
    (0x180B, 0x1810),        # Mongolian variation selectors and vowel separator
    (0xE0000, 0xE0080),      # TAG characters (invisible ASCII look-alikes)
    (0xE0100, 0xE01F0),      # variation selectors supplement
    (0x1D173, 0x1D17B),      # musical format controls
    (0x1BCA0, 0x1BCA4),      # shorthand format controls
]
_INVISIBLE = (
    {c for a, b in _INVISIBLE_RANGES for c in range(a, b)}
    | {c for c in range(0x10000) if unicodedata.category(chr(c)) in ("Cf", "Zl", "Zp")}  # zero-width, bidi, LS/PS
    | {0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0}  # combining grapheme joiner, Hangul fillers
)


def _json_escape(cp: int) -> str:
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


_ESCAPES = {cp: _json_escape(cp) for cp in {ord(c) for c in _LOOKALIKES} | _INVISIBLE}


def escape_data(json_text: str) -> str:
    """JSON text with every delimiter look-alike and invisible character as a ``\\uXXXX`` escape.
    Still valid JSON that decodes to the same value (these characters only occur inside strings)."""
    return json_text.translate(_ESCAPES)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _sha(obj: Any) -> str:
    blob = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" ...[{len(text) - limit} more characters]"


# ------------------------------------------------------------------------ the transcript
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+|previous\s+|prior\s+|above\s+|earlier\s+)*"
    r"(?:instructions?|rubric|criteria|rules|prompt|grading)"
    r"|\b(?:give|assign|award|output|return|set)\s+(?:this|it|me|the\s+agent|this\s+(?:episode|transcript))?\s*"
    r"(?:a\s+|the\s+)?(?:perfect\s+|maximum\s+)?(?:score|grade|rating)\s+(?:of\s+)?(?:1(?:\.0+)?|10/10|100\s*%|5/5)"
    r"|\b(?:and|then|please|must|should)\s+score\s+(?:it\s+|this\s+|me\s+)?1(?:\.0+)?\b"
    r"|\b(?:mark|consider)\s+(?:every|each|all)\s+(?:criterion|criteria)\s+(?:as\s+)?met"
    r"|\bfull\s+marks\b|\bnew\s+instructions\b|\byou\s+are\s+now\s+(?:a|the|in)\b"
    r"|\b(?:grader|judge|evaluator|grading)\s+(?:note|instruction|override|message)s?\b"
    r"|(?:^|\n)\s*\[?(?:system|developer)\]?\s*(?:prompt|message)?\s*:"
    r"|</?\s*(?:system|transcript\w*|instructions?|data)\s*>|\[/?(?:inst|system)\]|<\|im_(?:start|end)\|>",
    re.I,
)


def _injection_like(texts: list[str]) -> bool:
    """Does the text look like an attempt to instruct the judge? (Only flags; never changes a score.)"""
    text = unicodedata.normalize("NFKC", "\n".join(texts)).replace("\u2028", "\n").replace("\u2029", "\n")
    return bool(_INJECTION.search(text))


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(str(p.get("text") or p.get("content") or ""))
            else:
                parts.append(str(p))
        return "\n".join(x for x in parts if x)
    return json.dumps(content, ensure_ascii=False, default=str)


@dataclass
class Transcript:
    """A trajectory rendered as data: one escaped JSON line per message, plus what evidence may quote."""

    lines: list[str]
    steps: list[int]                       # the message index of each line
    search: dict[int, str] = field(default_factory=dict)   # step -> normalised searchable text
    injections: dict[int, str] = field(default_factory=dict)  # step -> role, where injection-like text is

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def block(self) -> str:
        return "\n".join([DATA_OPEN, *self.lines, DATA_CLOSE])

    def digest(self) -> str:
        return _sha("\n".join(self.lines))


def _json_strings(text: str, limit: int = 200) -> list[str]:
    """The strings inside ``text`` when it is a JSON object or array (tool results usually are),
    decoded: what the escaped form hides from a plain search."""
    t = text.strip()
    if not t or t[0] not in "{[":
        return []
    try:
        value = json.loads(t)
    except ValueError:
        return []
    out: list[str] = []
    stack = [value]
    while stack and len(out) < limit:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def _render_step(i: int, m: dict[str, Any], max_chars: int, label: str | None) -> tuple[dict[str, Any], list[str]]:
    role = str(m.get("role") or "unknown")
    step: dict[str, Any] = {}
    if label is not None:
        step["trajectory"] = label
    step["step"] = i
    step["role"] = role
    raw: list[str] = []
    if role == "tool" and m.get("name"):
        step["tool"] = str(m["name"])
        raw.append(step["tool"])
    text = _text(m.get("content"))
    if text:
        shown = _truncate(text, max_chars)
        step["content"] = shown
        raw.append(shown)
        raw.extend(_json_strings(shown))
    calls = []
    for c in m.get("tool_calls") or []:
        fn = (c.get("function") if isinstance(c, dict) else None) or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = _truncate(args, max_chars)
        if not isinstance(args, str) and len(json.dumps(args, ensure_ascii=False, default=str)) > max_chars:
            args = _truncate(json.dumps(args, ensure_ascii=False, default=str), max_chars)
        name = str(fn.get("name") or "")
        calls.append({"name": name, "arguments": args})
        raw.append(name)
        raw.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        raw.append(json.dumps(args, ensure_ascii=False, separators=(",", ":")) if not isinstance(args, str) else "")
    if calls:
        step["tool_calls"] = calls
    return step, raw


def render_transcript(messages: Sequence[dict[str, Any]], *, max_step_chars: int = 4000, label: str | None = None,
                      start: int = 0, max_chars: int | None = None) -> Transcript:
    """Messages ``start``.. of a conversation as quoted data. Each message is one line of JSON (its
    index in the conversation as ``step``), escaped with :func:`escape_data`; a step's text and each
    tool call's arguments are cut at ``max_step_chars`` (marked ``...[N more characters]``).
    ``max_chars``: the budget of the whole block's lines; see :func:`fit_budget`."""
    t = Transcript(lines=[], steps=[])
    for i in range(start, len(messages)):
        m = messages[i]
        if hasattr(m, "model_dump"):
            m = m.model_dump(exclude_none=True)
        m = dict(m) if isinstance(m, dict) else {"role": "unknown", "content": str(m)}
        step, raw = _render_step(i, m, max_step_chars, label)
        plain = json.dumps(step, ensure_ascii=False, default=str)
        line = escape_data(plain)
        t.lines.append(line)
        t.steps.append(i)
        t.search[i] = "\n".join(_norm(x) for x in [*raw, plain, line] if x)
        if _injection_like(raw):
            t.injections[i] = step["role"]
    return t if max_chars is None else fit_budget(t, max_chars)


TRUNCATED = "truncated"  # the key of the marker line that stands for the steps left out


def fit_budget(t: Transcript, max_chars: int, head_share: float = 0.25) -> Transcript:
    """The transcript within ``max_chars`` characters of lines: the first steps (up to
    ``head_share`` of the budget) and the last ones (the rest), with one marker line in between,
    ``{"truncated": true, "omitted_steps": "12-388", "omitted_characters": N, "note": ...}``, that
    says what was left out. Omitted steps cannot be cited as evidence (the judge never saw them)."""
    size = sum(len(ln) + 1 for ln in t.lines)
    if size <= max_chars:
        return t
    n = len(t.lines)
    marker_room = 200
    room = max(0, max_chars - marker_room)
    head, used = 0, 0
    while head < n and used + len(t.lines[head]) + 1 <= room * head_share:
        used += len(t.lines[head]) + 1
        head += 1
    tail = n
    while tail > head and used + len(t.lines[tail - 1]) + 1 <= room:
        used += len(t.lines[tail - 1]) + 1
        tail -= 1
    gone = t.steps[head:tail]
    omitted = sum(len(ln) + 1 for ln in t.lines[head:tail])
    marker = escape_data(json.dumps({TRUNCATED: True, "omitted_steps": f"{gone[0]}-{gone[-1]}" if gone else "",
                                     "omitted_characters": omitted,
                                     "note": f"{len(gone)} steps left out to keep the prompt within its budget of "
                                             f"{max_chars} characters"}))
    keep = t.steps[:head] + t.steps[tail:]
    return Transcript(lines=[*t.lines[:head], marker, *t.lines[tail:]], steps=keep,
                      search={i: t.search[i] for i in keep}, injections=dict(t.injections))


# ------------------------------------------------------------------------ evidence
_STEP_REF = re.compile(
    r"\bsteps?\s*(?:#|no\.?|number)?\s*(\d+)((?:\s*(?:-|–|to|and|or|,)\s*(?:step\s*)?\d+)*)|\[(\d+)\]|#(\d+)", re.I)
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|`([^`]+)`|«([^»]+)»')
_PREFIX = re.compile(r"^\s*(?:\(?\s*(?:steps?\s*(?:#|no\.?)?\s*\d+(?:\s*(?:-|–|to|and|or|,)\s*\d+)*|\[\d+\]|#\d+)\s*\)?\s*[:,.\-–—]*\s*)+",
                     re.I)


def _step_refs(evidence: str) -> list[int]:
    """Step numbers cited outside quotes: "step 3", "steps 2-4", "steps 2 and 5", "[3]", "#3"."""
    bare = _QUOTED.sub(" ", evidence)
    refs: list[int] = []
    for m in _STEP_REF.finditer(bare):
        if m.group(1) is None:
            refs.append(int(m.group(3) or m.group(4)))
            continue
        prev = int(m.group(1))
        refs.append(prev)
        for sep, num in re.findall(r"(-|–|to|and|or|,)\s*(?:step\s*)?(\d+)", m.group(2) or "", re.I):
            n = int(num)
            if sep.lower() in ("-", "–", "to") and 0 <= n - prev <= 200:
                refs.extend(range(prev + 1, n + 1))
            else:
                refs.append(n)
            prev = n
    return refs


def check_evidence(evidence: Any, search: dict[int, str], *, quote_required: bool = True) -> str | None:
    """None if ``evidence`` is grounded in the steps of ``search`` (step -> normalised text), else
    what is wrong. Grounded: non-empty, every step it cites exists, and (``quote_required``) it
    cites at least one step and either the whole evidence (after the leading step reference) or
    every quoted part of it occurs verbatim in the cited steps. A bare step reference ("step 3")
    is not evidence that a criterion was met: it points at a step but shows nothing in it."""
    if not isinstance(evidence, str) or not evidence.strip():
        return "gives no evidence"
    refs = _step_refs(evidence)
    bad = sorted({r for r in refs if r not in search})
    if bad:
        have = f"{min(search)}-{max(search)}" if search else "none"
        return f"cites step {bad[0]}, which is not in the transcript (steps {have})"
    if not quote_required:
        return None
    if not refs:
        return "cites no step: give the step number and a quote copied verbatim from that step"
    scope = [search[r] for r in dict.fromkeys(refs)]

    def found(q: str) -> bool:
        q = _norm(q)
        return len(q) >= _MIN_QUOTE and any(q in s for s in scope)

    rest = _PREFIX.sub("", evidence.strip(), count=1).strip()
    whole = rest.strip(" \"'“”`«»")
    if whole and found(whole):
        return None
    quotes = [next(g for g in m.groups() if g is not None) for m in _QUOTED.finditer(rest)]
    quotes = [q for q in quotes if len(_norm(q)) >= _MIN_QUOTE]
    if quotes:
        missing = [q for q in quotes if not found(q)]
        if not missing:
            return None
        where = f"step {refs[0]}" if len(set(refs)) == 1 else "the cited steps"
        return f"quotes {_truncate(json.dumps(missing[0], ensure_ascii=False), 80)}, which is not in {where}"
    where = f"step {refs[0]}" if len(set(refs)) == 1 else "the cited steps"
    return f"quotes nothing found in {where}: a step reference alone is not evidence"
