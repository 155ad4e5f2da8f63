"""Arguments for zoo tools: what a domain's seeded state holds (harvest) and schema-driven argument
sampling (ArgSampler), valid and deliberately invalid. Validation, evolution and task synthesis draw
their calls from here."""

from __future__ import annotations

import functools
import json
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# ========================================================== state harvesting
def singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 3:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 1:
        return word[:-1]
    return word


@dataclass
class Harvest:
    """Values found in a seeded state, by the key they sit under: where real ids come from."""

    by_key: dict[str, list[Any]] = field(default_factory=dict)
    strings: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)

    def add(self, key: str | None, value: Any) -> None:
        if key is None or isinstance(value, (dict, list)):
            return
        for k in dict.fromkeys((key, singular(key))):
            bucket = self.by_key.setdefault(k, [])
            if value not in bucket and len(bucket) < 64:
                bucket.append(value)
        if isinstance(value, str):
            if len(self.strings) < 2000 and value not in self.strings:
                self.strings.append(value)
            if ISO_DATE.match(value) and value not in self.dates:
                self.dates.append(value)


def _is_table(d: dict) -> bool:
    if not d or not all(isinstance(v, dict) for v in d.values()):
        return False
    keys = list(d)
    return all(any(c.isdigit() for c in str(k)) for k in keys) or (
        len(keys) >= 3 and all(v.keys() == d[keys[0]].keys() for v in d.values()))


def harvest(state: Any) -> Harvest:
    h = Harvest()

    def walk(obj: Any, key: str | None, depth: int) -> None:
        if depth > 12:
            return
        if isinstance(obj, dict):
            if key is not None and _is_table(obj):
                for k in obj:
                    h.add(f"{singular(key)}_id", k)
                    h.add(key, k)
                    h.add("id", k)
            for k, v in obj.items():
                walk(v, str(k), depth + 1)
        elif isinstance(obj, list):
            for v in obj[:200]:
                walk(v, key, depth + 1)
        else:
            h.add(key, obj)

    walk(state, None, 0)
    return h


# ============================================================ argument draws
@functools.lru_cache(maxsize=8192)
def schema_validator(schema_json: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_json))


def is_valid(schema: Any, value: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    return schema_validator(json.dumps(schema, sort_keys=True)).is_valid(value)


_QUOTED = re.compile(r"\"([^\"]{1,80})\"|'([^']{1,80})'")
_FALLBACK_STRINGS = [
    ("email", "someone@example.com"), ("date", "2025-01-15"), ("address", "12 Harbour Rd, Lisbon"),
    ("phone", "+1-555-0100"), ("url", "https://example.com/x"), ("name", "Alex Doe"), ("code", "ABC123"),
    ("currency", "USD"), ("city", "Lisbon"), ("country", "PT"), ("reason", "customer request"),
    ("note", "as discussed with the customer"), ("message", "hello"), ("query", "lamp"), ("time", "10:00"),
]


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    if t is None:
        if "enum" in schema:
            return sorted({_json_type(v) for v in schema["enum"]})
        if "properties" in schema:
            return ["object"]
        if "items" in schema:
            return ["array"]
        return []
    return t if isinstance(t, list) else [t]


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


class ArgSampler:
    """Draws arguments for a tool from its schema and the domain's seeded state (deterministic in rng)."""

    def __init__(self, h: Harvest | None = None):
        self.h = h or Harvest()

    # ------------------------------------------------------------ candidates
    def candidates(self, pname: str, schema: dict) -> list[Any]:
        h = self.h
        out: list[Any] = list(schema.get("examples") or [])
        for m in _QUOTED.finditer(str(schema.get("description", ""))):
            out.append(m.group(1) or m.group(2))
        names = [pname, singular(pname)]
        if pname.endswith("_ids"):
            names.append(pname[:-1])
        for n in names:
            out += h.by_key.get(n, [])
        if len(out) < 2:
            for key in sorted(h.by_key):
                if key != pname and (key.endswith("_" + pname) or pname.endswith("_" + key)):
                    out += h.by_key[key][:16]
        if any(w in pname for w in ("date", "day")) or schema.get("format") == "date":
            out += h.dates[:16]
        uniq: dict[str, Any] = {}
        for v in out:
            uniq.setdefault(json.dumps(v, sort_keys=True), v)
        return list(uniq.values())

    # ---------------------------------------------------------------- values
    def value(self, pname: str, schema: dict, rng: random.Random, *, real: bool = True, depth: int = 0) -> Any:
        """A value valid under `schema`, or raise LookupError."""
        if not isinstance(schema, dict) or depth > 6:
            return "x"
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            opts = [v for v in schema["enum"] if is_valid({k: v2 for k, v2 in schema.items() if k != "enum"}, v)]
            if not opts:
                raise LookupError(f"{pname}: no enum value fits the schema")
            return rng.choice(opts)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [o for o in schema[key] if isinstance(o, dict) and o.get("type") != "null"] or schema[key]
                return self.value(pname, rng.choice(options), rng, real=real, depth=depth + 1)
        types = [t for t in _types(schema) if t != "null"] or (["null"] if _types(schema) else ["string"])
        typ = types[0] if len(types) == 1 else rng.choice(types)
        cands = [c for c in self.candidates(pname, schema) if is_valid(schema, c)] if real else []
        if typ == "boolean":
            return rng.random() < 0.5
        if typ == "null":
            return None
        if typ in ("integer", "number"):
            nums = [c for c in cands if isinstance(c, (int, float)) and not isinstance(c, bool)]
            if nums and rng.random() < 0.8:
                return rng.choice(nums)
            return self._number(pname, schema, rng, typ)
        if typ == "string":
            strs = [c for c in cands if isinstance(c, str)]
            if strs:
                return rng.choice(strs)
            return self._string(pname, schema, rng, real)
        if typ == "array":
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            lo = schema.get("minItems", 1)
            hi = min(schema.get("maxItems", max(lo, 2)), max(lo, 2))
            k = rng.randint(lo, hi) if hi >= lo else lo
            vals: list[Any] = []
            for _ in range(k * 4):
                if len(vals) >= k:
                    break
                v = self.value(singular(pname), items, rng, real=real, depth=depth + 1)
                if schema.get("uniqueItems") and v in vals:
                    continue
                vals.append(v)
            return vals
        if typ == "object":
            props = schema.get("properties") or {}
            return {k: self.value(k, s, rng, real=real, depth=depth + 1)
                    for k, s in props.items() if k in schema.get("required", [])}
        return "x"

    def _number(self, pname: str, schema: dict, rng: random.Random, typ: str) -> Any:
        lo = schema.get("minimum", schema.get("exclusiveMinimum", None))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", None))
        if lo is None:
            lo = 0 if any(w in pname for w in ("offset", "skip", "page")) else 1
            lo = min(lo, hi) if hi is not None else lo
        if hi is None:
            hi = lo + 10
        if "exclusiveMinimum" in schema:
            lo = lo + (1 if typ == "integer" else 0.01)
        if "exclusiveMaximum" in schema:
            hi = hi - (1 if typ == "integer" else 0.01)
        if typ == "integer":
            lo, hi = math.ceil(lo), math.floor(hi)
            if hi < lo:
                raise LookupError(f"{pname}: empty integer range")
            return rng.randint(lo, min(hi, lo + 20))
        return round(rng.uniform(lo, min(hi, lo + 20)), 2)

    def _string(self, pname: str, schema: dict, rng: random.Random, real: bool) -> str:
        if "pattern" in schema:
            pool = [s for s in self.h.strings if is_valid(schema, s)]
            if pool:
                return rng.choice(pool)
        base = next((v for w, v in _FALLBACK_STRINGS if w in pname.lower()), None)
        if base is None or not real:
            base = f"zz-{pname[:12]}-{rng.randint(100, 999)}"
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", None)
        if len(base) < lo:
            base = base + "x" * (lo - len(base))
        if hi is not None and len(base) > hi:
            base = base[:hi]
        if not is_valid(schema, base):
            raise LookupError(f"{pname}: cannot draw a string for {json.dumps(schema)[:80]}")
        return base

    # ----------------------------------------------------------------- calls
    def valid_calls(self, params: dict, rng: random.Random, n: int = 6) -> list[dict]:
        """Up to n schema-valid argument sets: required only, everything, random subsets, one unknown-id."""
        props = params.get("properties") or {}
        required = [p for p in params.get("required", []) if p in props]
        optional = [p for p in props if p not in required]
        plans: list[tuple[list[str], bool]] = [(required, True), (required + optional, True)]
        for _ in range(max(0, n - 3)):
            plans.append((required + [p for p in optional if rng.random() < 0.5], True))
        plans.append((required + [p for p in optional if rng.random() < 0.5], False))
        out, seen = [], set()
        for names, real in plans[:n]:
            for _attempt in range(3):
                try:
                    args = {p: self.value(p, props[p], rng, real=real or props[p].get("type") != "string")
                            for p in names}
                except LookupError:
                    continue
                if is_valid(params, args):
                    key = json.dumps(args, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        out.append(args)
                    break
        return out

    def invalid_calls(self, params: dict, rng: random.Random, base: dict | None) -> list[tuple[str, dict]]:
        """(what is wrong, arguments) pairs that the tool's validator must refuse."""
        props = params.get("properties") or {}
        required = [p for p in params.get("required", []) if p in props]
        if base is None:
            return []
        out: list[tuple[str, dict]] = []

        def add(what: str, args: dict) -> None:
            if not is_valid(params, args) and all(json.dumps(args, sort_keys=True) != json.dumps(a, sort_keys=True)
                                                  for _, a in out):
                out.append((what, args))

        if required:
            p = rng.choice(required)
            add(f"missing required {p!r}", {k: v for k, v in base.items() if k != p})
        typed = [p for p in props if _types(props[p])]
        if typed:
            p = rng.choice(typed)
            allowed = set(_types(props[p]))
            for wrong in (12345, "zz-wrong-type", True, ["zz"], {"zz": 1}, 1.5):
                t = _json_type(wrong)
                if t in allowed or (t == "integer" and "number" in allowed):
                    continue
                add(f"wrong type for {p!r}", {**base, p: wrong})
                break
        enums = [p for p in props if "enum" in props[p]]
        if enums:
            p = rng.choice(enums)
            wrong = "zz_not_an_option" if all(isinstance(v, str) for v in props[p]["enum"]) else 987654321
            add(f"{p!r} outside its enum", {**base, p: wrong})
        constrained = []
        for p, s in props.items():
            if not isinstance(s, dict):
                continue
            if "pattern" in s:
                constrained.append((p, "!! zz !!", "pattern"))
            if "maxLength" in s:
                constrained.append((p, "z" * (s["maxLength"] + 1), "maxLength"))
            if s.get("minLength", 0) > 0:
                constrained.append((p, "", "minLength"))
            for kw, delta in (("minimum", -1), ("exclusiveMinimum", 0), ("maximum", 1), ("exclusiveMaximum", 0)):
                if isinstance(s.get(kw), (int, float)):
                    constrained.append((p, s[kw] + delta, kw))
            if "maxItems" in s and p in base and isinstance(base[p], list) and base[p]:
                constrained.append((p, (base[p] * (s["maxItems"] + 1))[: s["maxItems"] + 1], "maxItems"))
            if s.get("minItems", 0) > 0:
                constrained.append((p, [], "minItems"))
        if constrained:
            p, v, kw = rng.choice(constrained)
            add(f"{p!r} violates {kw}", {**base, p: v})
        if params.get("additionalProperties") is False:
            add("unknown argument 'zz_unknown'", {**base, "zz_unknown": 1})
        return out
