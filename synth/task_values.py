"""How task synthesis names, matches and writes values: does an output field feed a parameter
(`names_match`), does a value look like an id (`id_like`), a field or value in words
(`humanize`, `fmt`), a field with its value as a JSON tool output writes the pair (`json_pair`), and the
fields a request asks for by name (`asked_fields`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from toolzoo.arguments import singular


_ID_SUFFIXES = ("_id", "_ids", "sku", "_key", "_code", "_number")


def _norm(s: str) -> str:
    return singular(s.lower())


def names_match(key: str, param: str) -> bool:
    """Does an output field named `key` look like the value of parameter `param`?"""
    k, p = _norm(key), _norm(param)
    if k == p:
        return True
    if p.endswith("_ids") and _norm(p[:-1]) == k:
        return True
    short, long_ = (k, p) if len(k) < len(p) else (p, k)
    return len(short) >= 3 and short != "id" and long_.endswith("_" + short)


def id_like(key: str, value: Any) -> bool:
    if not isinstance(value, str) or not value or len(value) > 80:
        return False
    return key.lower().endswith(_ID_SUFFIXES) or key.lower() in ("id", "sku", "path", "name") or (
        any(c.isdigit() for c in value) and " " not in value)


def humanize(name: str) -> str:
    words = name.replace("_", " ").strip()
    for unit in ("cents", "kg", "kb", "kw", "kwh", "pct", "minutes", "hours", "weeks", "days"):
        if words.endswith(" " + unit) and words != unit:
            label = {"pct": "percent", "kb": "KB", "kg": "kg", "kw": "kW", "kwh": "kWh"}.get(unit, unit)
            head = words[: -len(unit) - 1]
            if " " not in head and head.endswith("ed"):
                head += " amount"
            return f"{head} (in {label})"
    return words


def fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def json_pair(key: str, value: Any) -> str:
    """`"key": value` exactly as json.dumps writes the pair inside a tool output (the same tokens)."""
    return json.dumps({key: value}, ensure_ascii=False)[1:-1]


_ASKED_FIELD = re.compile(r'\bthe "([a-z_]+)"')


def asked_fields(instruction: str) -> list[str]:
    """The output keys a request asks for by name, in its order (`tell me the "name" and the "type"`: the
    request quotes them with quote_fields); [] when it names none."""
    return list(dict.fromkeys(_ASKED_FIELD.findall(instruction)))


def output_pairs(obj: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of a parsed JSON tool output, nested records included, depth first in the output's
    order (a value that is a record or a list comes before its own pairs)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from output_pairs(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from output_pairs(v)
