"""Does a text communicate an expected value? The matching rule of the communication reward
(tau-bench's COMMUNICATE check) and of the claims check, on its own because it is pure text.

    mentions("Tracking number 286422338956", "286422338956")   # True
    mentions("Tracking number 286422338956", "286422338955")   # False: integers and ids match exactly

**Integers and ids match exactly**: an expected value without a fractional part ('15896',
'286422338956', '12,000') matches a number in the text of exactly that value ('12000.00' says 12000;
'112000' and '12001' do not), however many digits it has (compared as decimals, never as floats).
An expected integer written with a leading zero ('0042') is an id: it must appear digit for digit.
**A tolerance applies only to non-integer quantities** ('19.99'): a relative `rel_tol` (1e-9), never
more than half a unit in the expected value's last written digit, so it absorbs float noise in the
text ('19.990000000001') and nothing a person would call a different amount. With `currency_cents`,
an integer amount also matches a currency amount exactly 100x smaller ('$120.00' says 12000 cents).
Other strings: tau-bench v1's lower-case match with commas stripped, at word boundaries ('H-1' is
not in 'H-10', 'IL' is not in 'Illinois').

**A hedge says nothing** (`without_hedges`): a message that gives one key two different values, one of them
not expected (`"room": "kitchen", "room": "porch"`), has told neither, so those pairs are taken out before
matching. Without it, an answer that lists every frequent value of a field meets the check
(bench/results/reader_gpu.md section 30: after Dr. GRPO, one seed's held-out read_report success is 29.6% with
hedges counted and 18.5% without). The communication reward takes everything told between two tool results as
one text (`told_between_reads`), so a value guessed a turn at a time is a hedge too (section 36).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_NUMERIC = re.compile(r"^[-+]?\d[\d,]*(?:\.\d+)?$")
_NUM_IN_TEXT = re.compile(r"(?<![\w.\-/])([$€£]\s?)?(\d[\d,]*(?:\.\d+)?)(?!\d)(?!-\d)(?:\s*(dollars?|usd|eur|euros?|gbp|pounds?)\b)?")
_ID_LIKE = re.compile(r"^[-+]?0\d")  # a leading zero: an identifier, not a quantity


def normalize(text: str) -> str:
    """tau-bench v1's normalisation: lower case, commas stripped; whitespace collapsed."""
    return " ".join(text.lower().replace(",", "").split())


def _numbers(text: str) -> list[tuple[Decimal, bool]]:
    """(value, has a currency marker) for every number in the text; '1,999' -> 1999, '$19.99' -> 19.99 (currency)."""
    out = []
    for m in _NUM_IN_TEXT.finditer(text.lower()):
        try:
            out.append((Decimal(m.group(2).replace(",", "")), bool(m.group(1) or m.group(3))))
        except InvalidOperation:
            continue
    return out


def mentions(text: str, expected: str, *, rel_tol: float = 1e-9, currency_cents: bool = True,
             numbers: list[tuple[Decimal, bool]] | None = None) -> bool:
    """Does `text` communicate `expected`? See the module docstring for the rule."""
    e = expected.strip()
    if not e:
        return True
    if _NUMERIC.match(e) and not _ID_LIKE.match(e):
        x = Decimal(e.replace(",", ""))
        integer = x == x.to_integral_value()
        # half a unit in the last written digit of the expected value bounds the tolerance
        tol = min(Decimal(repr(rel_tol)) * max(Decimal(1), abs(x)), Decimal(5).scaleb(x.as_tuple().exponent - 1))
        for y, money in (numbers if numbers is not None else _numbers(text)):
            if y == x or (not integer and abs(x - y) <= tol):
                return True
            if currency_cents and money and integer and y * 100 == x:
                return True
        return False
    n, t = normalize(e), normalize(text)
    return re.search(r"(?<![a-z0-9])" + re.escape(n) + r"(?![a-z0-9])", t) is not None


_PAIR = re.compile(r'"(?P<key>[^"\\\n]+)"\s*:\s*(?P<value>"(?:[^"\\\n]|\\.)*"|[^,;{}\[\]"\n]+)')


def without_hedges(text: str, expected: list[str]) -> tuple[str, list[str]]:
    """``text`` without its ``"key": value`` pairs for each key it gives two or more different values of
    which one tells none of ``expected`` (a list answer, `"scene_id": "SC-1", "scene_id": "SC-2"` when both
    are expected, is not a hedge), and those keys. Each message is one text: a correction in a later message
    (backtracking) is not a hedge."""
    pairs = list(_PAIR.finditer(text))
    values: dict[str, set[str]] = {}
    for m in pairs:
        values.setdefault(m["key"], set()).add(m["value"].strip().strip('"'))
    hedged = [k for k, vs in values.items() if len({normalize(v) for v in vs}) > 1
              and not all(any(mentions(v, e) for e in expected) for v in vs)]
    if not hedged:
        return text, []
    out, last = [], 0
    for m in pairs:
        if m["key"] in hedged:
            out.append(text[last:m.start()])
            last = m.end()
    return "".join(out) + text[last:], hedged


def told_between_reads(messages: list[dict[str, Any]]) -> list[str]:
    """What the agent told the user, one text per stretch between two tool results: the unit of a hedge when
    a value may be changed only on new evidence. The scripted user answers "please go ahead" until every
    expected output has been told, so without this an agent can guess a value a message at a time until the
    user stops (bench/results/reader_gpu.md section 36); a value changed after a new tool result is a
    correction and stays."""
    out: list[list[str]] = [[]]
    for m in messages:
        if m.get("role") == "tool" and out[-1]:
            out.append([])
        elif m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip():
            out[-1].append(m["content"])
    return ["\n".join(part) for part in out if part]
