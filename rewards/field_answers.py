"""Was an asked field told its value? The rule for expected outputs that know their field
(`synth.task_models.FieldValue`: "tell me the type and the room"). Outputs that name no field, and every
task imported from tau-bench, keep rewards.mentions's rule (tau-bench's COMMUNICATE check) unchanged.

A field-bound value passes only when the answer states it **for that field**:

- **Keyed forms are read per key**: `"type": "light"`, `'type': 'light'`, `type: light`, `type = light`,
  "the type is light" (also "its type is ..."), and so the keys of a JSON object. A key names a field when
  their words are equal or one ends with the other's ("device type" names `type`); case, `_`, `-` and spaces
  do not matter.
- **A keyed value that is none of the field's expected values fails the field**, whatever else the answer
  says: `"type": "lock", "name": "Porch light"` fails type `light`, and a hedge, `"type": "lock", "type":
  "light"`, fails it too. A list field (two expected order ids) may be keyed once per value.
- **A value said in prose counts only outside the mention of another value**: of another expected value,
  of a value the answer keys under another field, or of a value a tool result gave another field.
  "Porch light" says the name, not the type `light` and not the room `porch`; "It is a light on the
  porch" says both; `"name": "Main thermostat"` does not say the type `thermostat`.
- **The last word counts**: the answer is read in units, what was told between two tool results
  (rewards.mentions.told_between_reads) or one message; the last unit that says anything of a value decides
  it. A value corrected after a new read stands; one changed without new evidence is a hedge inside a unit.

Values are compared as rewards.mentions compares them (integers and ids exactly, tau-bench's lower-case,
comma-free match at word boundaries for other strings).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rewards.mentions import _NUM_IN_TEXT, _NUMERIC, _ID_LIKE, mentions, normalize, told_between_reads
from synth.task_models import FieldValue
from synth.task_values import output_pairs

Span = tuple[int, int]

# `"key": value` and `'key': value`; a value is a quoted string or runs to the next separator
_QUOTED_PAIR = re.compile(r'''(?P<q>["'])(?P<key>[^"'\\\n]{1,64})(?P=q)\s*:\s*'''
                          r'''(?P<value>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^,;{}\[\]"'\n]+)''')
_BARE_END = re.compile(r"[,;)}\]\n]|\.(?:\s|$)|\s+(?:and|but|while|whereas)\s+|$", re.I)


@dataclass(frozen=True)
class FieldCheck:
    """The verdict on one field-bound expected output: what the answer said for its field (`said`, None
    when it keyed nothing there) and whether that tells the expected value."""

    field: str
    expected: str
    said: str | None
    told: bool
    how: str  # "keyed", "prose", "wrong value", "hedge" or "not said"

    def line(self) -> str:
        """`type: said "lock", expected "light" ✗`, as the report shows it."""
        said = f'said "{self.said}"' if self.said is not None else ("said it in prose" if self.how == "prose"
                                                                      else "not said")
        return f'{self.field}: {said}, expected "{self.expected}" {"✓" if self.told else "✗"}'

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def key_words(key: str) -> tuple[str, ...]:
    return tuple(w for w in re.split(r"[\s_\-]+", key.strip().lower()) if w)


def names_field(key: str, field: str) -> bool:
    """Does an answer's key name the field? Same words, or one ends with the other's."""
    k, f = key_words(key), key_words(field)
    if not k or not f:
        return False
    n = min(len(k), len(f))
    return k[-n:] == f[-n:]


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        try:
            return str(json.loads('"' + v[1:-1].replace('"', '\\"') + '"')) if v[0] == "'" else str(json.loads(v))
        except ValueError:
            return v[1:-1]
    return v.rstrip(" .!?")


def _key_pattern(words: tuple[str, ...]) -> str:
    return r"[\s_\-]+".join(re.escape(w) for w in words)


def keyed(text: str, keys: Iterable[str]) -> list[tuple[str, str, Span]]:
    """(key, value, value span) for every keyed statement in `text`: quoted pairs for any key; `key: v`,
    `key = v` and "the key is v" for the keys given (a bare word before a colon is keyed only when it is one
    of them, so "Note: ..." is not a field)."""
    out: list[tuple[str, str, Span]] = []
    taken: list[Span] = []
    for m in _QUOTED_PAIR.finditer(text):
        out.append((m["key"], _unquote(m["value"]), m.span("value")))
        taken.append(m.span())
    for key in sorted({key_words(k) for k in keys if key_words(k)}, key=len, reverse=True):
        k = _key_pattern(key)
        pat = re.compile(rf"(?<![\w\"'])(?:{k}\s*[:=]\s*|(?:(?:the|its|their|your)\s+|\w+'s\s+){k}\s+(?:is|was)\s+)",
                         re.I)
        for m in pat.finditer(text):
            if any(a <= m.start() < b for a, b in taken):
                continue
            start = m.end()
            if start < len(text) and text[start] in "\"'":
                q = re.match(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', text[start:])
                end = start + (q.end() if q else 1)
            else:
                end = _BARE_END.search(text, start).start()  # type: ignore[union-attr]  ($ always matches)
            value = _unquote(text[start:end])
            if value:
                out.append((" ".join(key), value, (start, end)))
                taken.append((m.start(), end))
    return out


def spans(text: str, value: str, *, currency_cents: bool = True) -> list[Span]:
    """Where `text` mentions `value`, by rewards.mentions's rule."""
    e = value.strip()
    if not e:
        return []
    if _NUMERIC.match(e) and not _ID_LIKE.match(e):
        found = []
        for m in _NUM_IN_TEXT.finditer(text):
            if mentions(m.group(0), e, currency_cents=currency_cents):
                found.append(m.span())
        return found
    words = normalize(e).split()
    pat = r"(?<![a-z0-9])" + r"[\s,]+".join(map(re.escape, words)) + r"(?![a-z0-9])"
    return [m.span() for m in re.finditer(pat, text, re.I)]


def _inside(span: Span, others: Iterable[Span]) -> bool:
    return any(a <= span[0] and span[1] <= b and (a, b) != span for a, b in others)


def tool_values(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(key, value) of every scalar in the trajectory's JSON tool results."""
    out: list[tuple[str, str]] = []
    for m in messages:
        if m.get("role") != "tool":
            continue
        try:
            parsed = json.loads(m.get("content") or "")
        except (ValueError, TypeError):
            continue
        for k, v in output_pairs(parsed):
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
                out.append((str(k), str(v)))
    return out


_SENTENCE = re.compile(r"[^.!?;\n]+(?:[.!?;](?!\w)|\n|$)")


def _records(node: Any) -> Iterable[list[str]]:
    """The ids and names of every JSON object in a tool result (each object's own, not its children's)."""
    if isinstance(node, dict):
        own = [str(v) for k, v in node.items() if (names_field(str(k), "id") or names_field(str(k), "name"))
               and isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip()]
        if own:
            yield own
        for v in node.values():
            yield from _records(v)
    elif isinstance(node, list):
        for v in node:
            yield from _records(v)


def records_named(messages: Sequence[dict[str, Any]], task_texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the ids and names of the records the task names, those of the records it does not), over every JSON
    object the episode's tools returned: a record is the task's when `task_texts` (its instruction and gold
    calls' argument values) mention its id or its name."""
    mine: list[str] = []
    foreign: list[str] = []
    for m in messages:
        if m.get("role") != "tool":
            continue
        try:
            parsed = json.loads(m.get("content") or "")
        except (ValueError, TypeError):
            continue
        for rec in _records(parsed):
            named = any(spans(t, v) for v in rec for t in task_texts)
            (mine if named else foreign).extend(rec)
    mine = list(dict.fromkeys(mine))
    return mine, [v for v in dict.fromkeys(foreign) if v not in mine]


def _about_others(text: str, mine: Sequence[str], foreign: Sequence[str]) -> list[Span]:
    """The sentences of `text` that name a record the task does not and none it does."""
    out = []
    for m in _SENTENCE.finditer(text):
        s = m.group(0)
        if any(spans(s, v) for v in foreign) and not any(spans(s, v) for v in mine):
            out.append(m.span())
    return out


def _unit_verdicts(text: str, outputs: Sequence[FieldValue], others: Sequence[tuple[str, str]],
                   currency_cents: bool, records: tuple[Sequence[str], Sequence[str]] = ((), ())
                   ) -> list[FieldCheck | None]:
    fields = {o.field for o in outputs}
    stated = keyed(text, fields | {k for k, _ in others})
    # where every other value is mentioned: the values prose may not borrow from
    value_spans = {str(o): spans(text, str(o), currency_cents=currency_cents) for o in outputs}
    verdicts: list[FieldCheck | None] = []
    for o in outputs:
        e, f = str(o), o.field
        wanted = [str(x) for x in outputs if x.field == f]
        said = [v for k, v, _ in stated if names_field(k, f)]
        wrong = [v for v in said if not any(mentions(v, w, currency_cents=currency_cents) for w in wanted)]
        if wrong:
            how = "hedge" if any(mentions(v, e, currency_cents=currency_cents) for v in said) else "wrong value"
            verdicts.append(FieldCheck(f, e, wrong[0], False, how))
            continue
        right = [v for v in said if mentions(v, e, currency_cents=currency_cents)]
        if right:
            verdicts.append(FieldCheck(f, e, right[0], True, "keyed"))
            continue
        blocked = [s for x, ss in value_spans.items() if normalize(x) != normalize(e) for s in ss]
        blocked += [s for k, v, s in stated if not names_field(k, f)]
        blocked += [s for k, v in others if not names_field(k, f) and normalize(v) != normalize(e)
                    for s in spans(text, v, currency_cents=currency_cents)]
        elsewhere = _about_others(text, *records)
        free = [s for s in value_spans[e] if not _inside(s, blocked)
                and not any(a <= s[0] and s[1] <= b for a, b in elsewhere)]
        verdicts.append(FieldCheck(f, e, None, True, "prose") if free else None)
    return verdicts


def check_fields(units: Sequence[str], outputs: Sequence[FieldValue], *,
                 tool_results: Sequence[tuple[str, str]] = (),
                 records: tuple[Sequence[str], Sequence[str]] = ((), ()),
                 currency_cents: bool = True) -> list[FieldCheck]:
    """One verdict per output, in order, over what the agent told in `units` (oldest first); the last unit
    that says anything of an output decides it. `tool_results` are the (key, value) pairs the episode's tools
    returned (`tool_values`); `records` the ids and names of the task's own records and of the others
    (`records_named`), without which prose about another record is not told apart."""
    final: list[FieldCheck | None] = [None] * len(outputs)
    for text in units:
        for i, v in enumerate(_unit_verdicts(text, outputs, tool_results, currency_cents, records)):
            if v is not None:
                final[i] = v
    return [v if v is not None else FieldCheck(o.field, str(o), None, False, "not said")
            for o, v in zip(outputs, final, strict=True)]


def field_outputs(outputs: Sequence[str]) -> tuple[list[FieldValue], list[str]]:
    """(field-bound outputs, plain outputs)."""
    return ([o for o in outputs if isinstance(o, FieldValue)], [o for o in outputs if not isinstance(o, FieldValue)])


def task_texts(task: Any) -> list[str]:
    """What names a task's own records: its instruction, its gold calls' scalar argument values and its
    expected outputs (an asked id is the id of a record the task is about)."""
    return [task.instruction] + [str(v) for a in task.gold_actions for v in a.arguments.values()
                                 if isinstance(v, (str, int)) and not isinstance(v, bool)] + \
        [str(o) for o in task.expected_outputs]


def told_outputs(outputs: Sequence[str], texts: Sequence[str], messages: Sequence[dict[str, Any]] = (),
                 named_by: Sequence[str] = ()) -> list[str]:
    """The expected outputs told in any of `texts` (what the agent said to the user), each by its rule: a
    field-bound one for its field (`check_fields`, tool results from `messages`, the task's records named
    by `named_by`), a plain one anywhere (rewards.mentions). The claims check counts these."""
    bound, _plain = field_outputs(outputs)
    checks = iter(check_fields(texts, bound, tool_results=tool_values(messages),
                               records=records_named(messages, named_by)) if bound else [])
    joined = "\n".join(texts)
    return [str(o) for o in outputs if (next(checks).told if isinstance(o, FieldValue) else mentions(joined, str(o)))]


def field_verdicts(task: Any, messages: Sequence[dict[str, Any]], units: Sequence[str] | None = None, *,
                   currency_cents: bool = True) -> list[FieldCheck]:
    """The verdict on each field-bound expected output of `task` (a synth Task) in an episode's `messages`:
    what CommunicationReward decides, and what the report's episode view shows. `units` default to what was
    told between two tool results (rewards.mentions.told_between_reads)."""
    bound, _plain = field_outputs(task.expected_outputs)
    if not bound:
        return []
    msgs = list(messages)
    return check_fields(told_between_reads(msgs) if units is None else units, bound,
                        tool_results=tool_values(msgs),
                        records=records_named(msgs, task_texts(task)),
                        currency_cents=currency_cents)
