"""The rule-based tool generator of toolzoo/evolve.py (`OfflineGenerator`): from each zoo tool it
derives new ones with the five operators (add_parameter, add_constraint, change_representation,
specialise, compose), chained up to MAX_DEPTH, each a new stdlib-only function that calls its
parents by name and carries the source of its evolved ancestors and of the helpers it uses."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import random
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolzoo.evolve_helpers import HELPERS, _evo_h_cents_to_decimal
from toolzoo.spec import ToolSpec, Zoo
from toolzoo.arguments import ISO_DATE, ArgSampler, Harvest, is_valid, singular
from toolzoo.validate import ValidationReport

OPERATORS = ("add_parameter", "add_constraint", "change_representation", "specialise", "compose")
MAX_DEPTH = 3
DEFAULT_REF_DATE = "2025-01-01"
RATES = {"USD": [1.0, 2], "EUR": [0.92, 2], "GBP": [0.79, 2], "JPY": [151.0, 0]}
UNITS = {"_kg": ["_lb", 2.20462], "_km": ["_mi", 0.621371], "_cm": ["_in", 0.393701], "_m": ["_ft", 3.28084],
         "_g": ["_oz", 0.035274], "_l": ["_gal", 0.264172], "_kmh": ["_mph", 0.621371], "_sqm": ["_sqft", 10.7639],
         "_celsius": ["_fahrenheit", None], "_c": ["_f", None]}
ID_LIKE = ("id", "key", "sku", "symbol", "code", "email", "path", "number", "slug", "handle")
DECIMAL_PATTERN = r"^-?\d+(\.\d{1,2})?$"


@dataclass
class Lineage:
    depth: int
    base: str
    notes: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    roots: frozenset[str] = frozenset()

    def description(self) -> str:
        return " ".join([self.base.strip()] + [s for _, s in self.notes]).strip()


@dataclass
class Recipe:
    operator: str
    build: Callable[[], ToolSpec | None]


def _ident(v: Any, limit: int = 24) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", str(v).lower()).strip("_")
    return s[:limit].strip("_") or "x"


def _walk(obj: Any, depth: int = 0) -> Iterator[tuple[Any, Any]]:
    if depth > 8:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from _walk(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj[:20]:
            yield from _walk(v, depth + 1)


def _has_cents(sample: Any) -> bool:
    return any(isinstance(k, str) and k.endswith("_cents") and len(k) > 6 and isinstance(v, int)
               and not isinstance(v, bool) for k, v in _walk(sample))


def _has_units(sample: Any) -> bool:
    return any(isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
               and any(k.endswith(s) and len(k) > len(s) for s in UNITS) for k, v in _walk(sample))


def _has_dates(sample: Any) -> bool:
    return any(isinstance(v, str) and ISO_DATE.match(v) for _, v in _walk(sample))


def _list_key(sample: Any) -> tuple[bool, str | None]:
    """(found, key) of the list in an output: key None for a top-level list."""
    if isinstance(sample, list):
        return True, None
    if isinstance(sample, dict):
        keys = [k for k, v in sample.items() if isinstance(v, list)]
        keys.sort(key=lambda k: (not (sample[k] and all(isinstance(i, dict) for i in sample[k])),))
        if keys:
            return True, keys[0]
    return False, None


def _shape_pattern(values: list[str]) -> str | None:
    """A regex all id-like `values` share: "O-1003", "O-1010" -> ^O-\\d+$."""
    vals = [v for v in values if isinstance(v, str)]
    if len(vals) < 2 or any(not v or len(v) > 40 or any(c.isspace() for c in v) for v in vals):
        return None
    runs = [re.findall(r"[A-Za-z]+|\d+|[^A-Za-z\d]", v) for v in vals]

    def cls(tok: str) -> str:
        return "a" if tok[0].isalpha() else "d" if tok[0].isdigit() else tok

    shapes = {tuple(cls(t) for t in r) for r in runs}
    if len(shapes) != 1:
        return None
    parts = []
    for i, c in enumerate(next(iter(shapes))):
        toks = {r[i] for r in runs}
        if c == "d":
            parts.append(r"\d+")
        elif c == "a":
            parts.append(re.escape(toks.pop()) if len(toks) == 1 else "[A-Za-z]+")
        else:
            parts.append(re.escape(c))
    if not any(c == "d" for c in next(iter(shapes))):
        return None  # words only: not an id
    return "^" + "".join(parts) + "$"


def _fmt(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


class OfflineGenerator:
    """Rule-based evolution. Candidates come breadth-first: domains round-robin, parents round-robin,
    each parent's recipes in an rng-shuffled order, so a cut at any n is diverse."""

    name = "offline"

    def __init__(self, *, max_depth: int = MAX_DEPTH, enum_subsets: int = 2, compose_partners: int = 3):
        self.max_depth = max_depth
        self.enum_subsets = enum_subsets
        self.compose_partners = compose_partners
        self.meta: dict[str, Lineage] = {}
        self.samples: dict[str, Any] = {}
        self.harvests: dict[str, Harvest] = {}
        self.ref_dates: dict[str, str] = {}
        self.used_names: set[str] = set()
        self._registered: set[str] = set()
        self._by_domain: dict[str, list[ToolSpec]] = {}
        self._queues: dict[str, deque[deque[Recipe]]] = {}

    # ------------------------------------------------------------- feedback
    def observe(self, report: ValidationReport) -> None:
        for d, state in report.states.items():
            if d not in self.harvests:
                from toolzoo.arguments import harvest

                h = harvest(state)
                self.harvests[d] = h
                today = [v for k in ("today", "current_date", "now", "date_today")
                         for v in h.by_key.get(k, []) if isinstance(v, str) and ISO_DATE.match(v)]
                self.ref_dates[d] = today[0] if today else DEFAULT_REF_DATE
        for r in report.results:
            if r.ok and r.samples and r.name not in self.samples:
                self.samples[r.name] = max(r.samples, key=lambda s: (
                    any(isinstance(v, list) and v for _, v in _walk(s)), len(json.dumps(s))))

    # -------------------------------------------------------------- lineage
    def lineage(self, t: ToolSpec, zoo: Zoo) -> Lineage:
        if t.name not in self.meta:
            by_name = {x.name: x for x in zoo.tools}
            parents = [self.lineage(by_name[p], zoo) for p in t.parents if p in by_name]
            depth = 1 + max((p.depth for p in parents), default=-1) if t.parents else 0
            roots = frozenset().union(*(p.roots for p in parents)) if parents else frozenset([t.name])
            self.meta[t.name] = Lineage(depth=depth, base=t.description, roots=roots)
        return self.meta[t.name]

    # -------------------------------------------------------------- propose
    def propose(self, zoo: Zoo, rng: random.Random) -> Iterator[ToolSpec]:
        self.used_names |= {t.name for t in zoo.tools}
        for d in sorted(zoo.domains, key=lambda d: d.name):
            for t in d.tools:
                if t.name not in self._registered:
                    self._register(t, zoo, rng)
        while any(self._queues.values()):
            for dname in sorted(self._queues):
                q = self._queues[dname]
                while q:
                    recipes = q.popleft()
                    if not recipes:
                        continue
                    recipe = recipes.popleft()
                    if recipes:
                        q.append(recipes)
                    spec = recipe.build()
                    if spec is not None:
                        yield spec
                        break

    def _register(self, t: ToolSpec, zoo: Zoo, rng: random.Random) -> None:
        self._registered.add(t.name)
        if t.provenance == "mcp" or not t.function:
            return
        lin = self.lineage(t, zoo)
        peers = self._by_domain.setdefault(t.domain, [])
        recipes: list[Recipe] = []
        if lin.depth < self.max_depth:
            recipes += self._add_parameter(t, lin)
            recipes += self._add_constraint(t, lin, rng)
            recipes += self._change_representation(t, lin)
            recipes += self._specialise(t, lin)
        if lin.depth <= 1 and self.max_depth >= 2:
            as_a = [(t, b, f) for b in peers for f in self._feeds(t, b, zoo)]
            as_b = [(a, t, f) for a in peers for f in self._feeds(a, t, zoo)]
            for pairs in (as_a, as_b):
                for a, b, f in rng.sample(pairs, min(len(pairs), self.compose_partners)):
                    recipes.append(Recipe("compose", functools_partial(self._compose, a, b, f, zoo)))
        peers.append(t)
        rng.shuffle(recipes)
        if recipes:
            self._queues.setdefault(t.domain, deque()).append(deque(recipes))

    # ------------------------------------------------------------- building
    def _name(self, hint: str) -> str:
        base = re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", hint.lower())).strip("_")
        if not base or not base[0].isalpha():
            base = "t_" + base
        if len(base) > 64:
            base = base[:55].rstrip("_") + "_" + hashlib.sha1(base.encode()).hexdigest()[:8]
        name, i = base, 2
        while name in self.used_names:
            suffix = f"_{i}"
            name = base[: 64 - len(suffix)] + suffix
            i += 1
        self.used_names.add(name)
        return name

    def _make(self, operator: str, parents: list[ToolSpec], hint: str, *, props: dict, required: list[str],
              lineage: Lineage, body: str, helpers: Iterable[str] = (), effect: str | None = None,
              errors: dict | None = None, returns: Any = "inherit") -> ToolSpec | None:
        first = parents[0]
        name = self._name(hint)
        fn = f"_evo_{name}"
        chunks: dict[str, str] = {}
        for p in parents:
            if p.implementation:
                chunks.update({k: v for k, v in _defs(p.implementation).items() if k not in chunks})
        for h in helpers:
            chunks.setdefault(h, inspect.getsource(HELPERS[h]).strip())
        doc = f'"""{operator} of {", ".join(p.name for p in parents)}: the {name} tool."""'
        lines = [f"def {fn}(state, **args):", f"    {doc}"] + ["    " + ln if ln else "" for ln in body.strip("\n").split("\n")]
        chunks[fn] = "\n".join(lines)
        params: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
        req = [r for r in required if r in props]
        if req:
            params["required"] = req
        if returns == "inherit":
            returns = first.returns
        spec = ToolSpec(
            name=name, description=lineage.description(), parameters=params, returns=returns,
            errors=dict(errors if errors is not None else first.errors),
            effect=effect or first.effect, category=first.category, domain=first.domain,  # type: ignore[arg-type]
            provenance="evolved", function=fn, implementation="\n\n\n".join(chunks.values()) + "\n",
            parents=[p.name for p in parents], operator=operator,
        )
        self.meta[name] = lineage
        return spec

    @staticmethod
    def _child(lin: Lineage, note: tuple[tuple[str, ...], str] | None = None, drop: str | None = None) -> Lineage:
        notes = [n for n in lin.notes if drop is None or drop not in n[0]]
        if note is not None:
            notes.append(note)
        return Lineage(depth=lin.depth + 1, base=lin.base, notes=notes, roots=lin.roots)

    def _sampler(self, t: ToolSpec) -> ArgSampler:
        return ArgSampler(self.harvests.get(t.domain, Harvest()))

    # ======================================================= add_parameter
    def _add_parameter(self, t: ToolSpec, lin: Lineage) -> list[Recipe]:
        props = t.parameters.get("properties", {})
        req = list(t.parameters.get("required", []))
        S = self.samples.get(t.name)
        P = t.function
        out: list[Recipe] = []

        def recipe(hint: str, new: dict, note: tuple[tuple[str, ...], str], body: str, helpers=(), returns="inherit"):
            def build() -> ToolSpec | None:
                return self._make("add_parameter", [t], hint, props={**props, **new}, required=req,
                                  lineage=self._child(lin, note), body=body, helpers=helpers, returns=returns)
            out.append(Recipe("add_parameter", build))

        found, key = _list_key(S)
        obj_returns = {"type": "object"} if isinstance(S, dict) else ("inherit" if S is None else None)
        get_items = f"out.get({key!r}) if isinstance(out, dict) else None" if key is not None else "out"
        what = key or "items"
        if found and "limit" not in props and "offset" not in props:
            limit = {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
                     "description": f"return at most this many {what} (default 10)"}
            offset = {"type": "integer", "minimum": 0, "default": 0, "description": f"skip this many {what} first"}
            for variant, new in (("paged", {"limit": limit, "offset": offset}), ("top", {"limit": limit})):
                body = "limit = args.pop('limit', 10)\n"
                body += "offset = args.pop('offset', 0)\n" if "offset" in new else "offset = 0\n"
                body += (f"out = {P}(state, **args)\nitems = {get_items}\n"
                         "if not isinstance(items, list):\n    return out\npage = items[offset:offset + limit]\n")
                if key is None:
                    body += "return page\n"
                else:
                    body += f"out = dict(out)\nout[{key!r}] = page\nout.setdefault('total_count', len(items))\n"
                    if "offset" in new:
                        body += "out['next_offset'] = offset + limit if offset + limit < len(items) else None\n"
                    body += "return out\n"
                text = (f"Returns at most `limit` {what} (default 10)" +
                        (", after skipping the first `offset`" if "offset" in new else "") +
                        ("." if key is None else "; `total_count` says how many there are in all."))
                recipe(f"{t.name}_{variant}", new, (("limit", "offset"), text), body,
                       returns={"type": "array"} if key is None else obj_returns)
        items = S.get(key) if isinstance(S, dict) and key is not None else S if isinstance(S, list) else None
        if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
            sortable = [k for k, v in items[0].items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
            if sortable and "sort_by" not in props and "descending" not in props:
                new = {"sort_by": {"type": "string", "enum": sortable, "description": f"sort the {what} by this field"},
                       "descending": {"type": "boolean", "default": False, "description": "largest first"}}
                body = (f"sort_by = args.pop('sort_by', None)\ndescending = args.pop('descending', False)\n"
                        f"out = {P}(state, **args)\nitems = {get_items}\n"
                        "if sort_by is None or not isinstance(items, list):\n    return out\n\n"
                        "def _key(row):\n    v = row.get(sort_by) if isinstance(row, dict) else None\n"
                        "    if v is None:\n        return (2, 0, '')\n"
                        "    if isinstance(v, (int, float)) and not isinstance(v, bool):\n        return (0, v, '')\n"
                        "    return (1, 0, str(v))\n\n"
                        "items = sorted(items, key=_key, reverse=bool(descending))\n"
                        + ("return items\n" if key is None else f"out = dict(out)\nout[{key!r}] = items\nreturn out\n"))
                recipe(f"{t.name}_sorted", new, (("sort_by", "descending"),
                       f"`sort_by` orders the {what} by one of their fields (`descending` for largest first)."), body)
            keys = list(items[0])
            if len(keys) >= 3 and "item_fields" not in props and key is not None:
                new = {"item_fields": {"type": "array", "items": {"type": "string", "enum": keys}, "minItems": 1,
                                       "uniqueItems": True, "description": f"keep only these fields of each of the {what}"}}
                body = (f"item_fields = args.pop('item_fields', None)\nout = {P}(state, **args)\n"
                        f"items = {get_items}\nif item_fields is None or not isinstance(items, list):\n    return out\n"
                        f"out = dict(out)\nout[{key!r}] = [{{k: r[k] for k in item_fields if k in r}} "
                        "if isinstance(r, dict) else r for r in items]\nreturn out\n")
                recipe(f"{t.name}_item_fields", new, (("item_fields",),
                       f"`item_fields` keeps only the named fields of each of the {what}."), body)
        if isinstance(S, dict) and len(S) >= 3 and "fields" not in props:
            keys = list(S)
            new = {"fields": {"type": "array", "items": {"type": "string", "enum": keys}, "minItems": 1,
                              "uniqueItems": True, "description": "return only these fields of the result"}}
            body = (f"fields = args.pop('fields', None)\nout = {P}(state, **args)\n"
                    "if fields is None or not isinstance(out, dict):\n    return out\n"
                    "return {k: out[k] for k in fields if k in out}\n")
            recipe(f"{t.name}_fields", new, (("fields",), "`fields` returns only the named fields of the result."),
                   body, returns={"type": "object"})
        if t.effect == "write" and "dry_run" not in props:
            new = {"dry_run": {"type": "boolean", "default": False,
                               "description": "check the request without changing anything"}}
            body = (f"import json\n\nif args.pop('dry_run', False):\n    scratch = json.loads(json.dumps(state))\n"
                    f"    return {{'dry_run': True, 'would_return': {P}(scratch, **args)}}\nreturn {P}(state, **args)\n")
            returns = {"type": "object"} if (t.returns or {}).get("type") == "object" else None
            recipe(f"{t.name}_with_dry_run", new, (("dry_run",),
                   "With `dry_run` true it applies every check and returns the would-be result as "
                   "{dry_run: true, would_return: ...} without changing anything."), body, returns=returns)
        if S is not None and _has_cents(S) and "currency" not in props:
            new = {"currency": {"type": "string", "enum": list(RATES), "default": "USD",
                                "description": "currency of the amounts in the result"}}
            body = (f"rates = {RATES!r}\ncurrency = args.pop('currency', 'USD')\nout = {P}(state, **args)\n"
                    "out = _evo_h_convert_cents(out, rates[currency][0], rates[currency][1])\n"
                    "if isinstance(out, dict) and 'currency' not in out:\n    out['currency'] = currency\nreturn out\n")
            rates = ", ".join(f"1 USD = {r[0]} {c}" for c, r in RATES.items() if c != "USD")
            recipe(f"{t.name}_in_currency", new, (("currency",),
                   f"Amounts come back as `<x>_amount` in `currency` ({rates}) instead of integer cents."),
                   body, helpers=["_evo_h_convert_cents"])
        if S is not None and _has_units(S) and "units" not in props:
            new = {"units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric",
                             "description": "unit system of the measurements in the result"}}
            body = (f"units = args.pop('units', 'metric')\nout = {P}(state, **args)\n"
                    f"return _evo_h_imperial(out, {UNITS!r}) if units == 'imperial' else out\n")
            recipe(f"{t.name}_with_units", new, (("units",),
                   "With `units` imperial, metric measurements come back converted (kg->lb, km->mi, "
                   "cm->in, celsius->fahrenheit) under renamed fields."), body, helpers=["_evo_h_imperial"])
        return out

    # ====================================================== add_constraint
    def _add_constraint(self, t: ToolSpec, lin: Lineage, rng: random.Random) -> list[Recipe]:
        props = t.parameters.get("properties", {})
        req = list(t.parameters.get("required", []))
        sampler = self._sampler(t)
        out: list[Recipe] = []

        def recipe(hint: str, p: str, schema: dict, text: str, required: list[str]) -> None:
            def build() -> ToolSpec | None:
                new_props = {**props, p: {**schema, "description": (schema.get("description", "") + f" ({text})").strip()}}
                return self._make("add_constraint", [t], hint, props=new_props, required=required,
                                  lineage=self._child(lin, ((p,), f"Constraint: {p} {text}.")),
                                  body=f"return {t.function}(state, **args)\n")
            out.append(Recipe("add_constraint", build))

        for p, s in props.items():
            if not isinstance(s, dict):
                continue
            types = s.get("type")
            if "enum" in s and len(s["enum"]) >= 2:
                vals = list(s["enum"])
                subsets: list[list[Any]] = []
                for _ in range(self.enum_subsets * 3):
                    if len(subsets) >= self.enum_subsets:
                        break
                    k = rng.randint(1, len(vals) - 1)
                    pick = set(rng.sample(range(len(vals)), k))
                    sub = [v for i, v in enumerate(vals) if i in pick]
                    if sub not in subsets:
                        subsets.append(sub)
                for sub in subsets:
                    schema = {k: v for k, v in s.items() if k != "default"}
                    schema["enum"] = sub
                    required = list(req)
                    if "default" in s and s["default"] in sub:
                        schema["default"] = s["default"]
                    elif p not in required:
                        required.append(p)  # the default is no longer allowed: the caller must choose
                    short = "_or_".join(_ident(v, 20) for v in sub)
                    hint = f"{t.name}_{short}" if len(sub) <= 2 else f"{t.name}_{p}_subset"
                    recipe(hint, p, schema, "must be one of " + ", ".join(_fmt(v) for v in sub), required)
            elif types == "string" and "pattern" not in s and "format" not in s:
                cands = [c for c in sampler.candidates(p, s) if isinstance(c, str)]
                pattern = _shape_pattern(cands)
                if pattern:
                    recipe(f"{t.name}_{p}_format", p, {**s, "pattern": pattern}, f"must match {pattern}", req)
                if "maxLength" not in s:
                    longest = max((len(c) for c in cands), default=40)
                    hi = max(32, 2 * longest)
                    schema = {**s, "maxLength": hi, "minLength": max(1, s.get("minLength", 1))}
                    recipe(f"{t.name}_{p}_length", p, schema, f"must be 1 to {hi} characters", req)
            elif types in ("integer", "number"):
                lo, hi = s.get("minimum"), s.get("maximum")
                nums = [c for c in sampler.candidates(p, s) if isinstance(c, (int, float)) and not isinstance(c, bool)]
                if lo is not None and hi is not None:
                    if hi - lo <= 10:
                        continue
                    new_hi = lo + (hi - lo) // 4 if types == "integer" else lo + (hi - lo) / 4
                    new_lo = lo
                else:
                    new_lo = lo if lo is not None else (0 if all(n >= 0 for n in nums) else min(nums))
                    new_hi = hi if hi is not None else (max(nums) * 5 if nums and max(nums) > 0 else new_lo + 1000)
                if types == "integer":
                    new_lo, new_hi = int(new_lo), int(new_hi)
                if new_hi <= new_lo:
                    continue
                schema = {k: v for k, v in s.items() if k not in ("exclusiveMinimum", "exclusiveMaximum")}
                schema.update(minimum=new_lo, maximum=new_hi)
                if "default" in schema and not (new_lo <= schema["default"] <= new_hi):
                    continue
                recipe(f"{t.name}_{p}_range", p, schema, f"must be between {new_lo} and {new_hi}", req)
            elif types == "array" and "maxItems" not in s:
                items = s.get("items") if isinstance(s.get("items"), dict) else {}
                schema = {**s, "minItems": max(1, s.get("minItems", 1)), "maxItems": 5}
                text = "takes 1 to 5 items"
                if items.get("type") in ("string", "integer") and not s.get("uniqueItems"):
                    schema["uniqueItems"] = True
                    text = "takes 1 to 5 distinct items"
                recipe(f"{t.name}_{p}_bounded", p, schema, text, req)
        return out

    # =============================================== change_representation
    def _change_representation(self, t: ToolSpec, lin: Lineage) -> list[Recipe]:
        props = t.parameters.get("properties", {})
        req = list(t.parameters.get("required", []))
        S = self.samples.get(t.name)
        P = t.function
        sampler = self._sampler(t)
        parent_params = json.dumps(t.parameters)
        out: list[Recipe] = []

        def rename(mapping: dict[str, tuple[str, dict]]) -> tuple[dict, list[str]]:
            new_props, new_req = {}, []
            for p, s in props.items():
                q, schema = mapping.get(p, (p, s))
                new_props[q] = schema
                if p in req:
                    new_req.append(q)
            return new_props, new_req

        def recipe(hint: str, note: tuple[tuple[str, ...], str], mapping: dict, body: str, helpers: list[str]):
            def build() -> ToolSpec | None:
                new_props, new_req = rename(mapping)
                return self._make("change_representation", [t], hint, props=new_props, required=new_req,
                                  lineage=self._child(lin, note), body=body, helpers=helpers,
                                  returns={"type": "object"} if isinstance(S, dict) else None)
            out.append(Recipe("change_representation", build))

        check = f"validate(json.loads({parent_params!r}), args)\n"
        # --- cents <-> decimal strings
        money = [p for p, s in props.items() if isinstance(s, dict) and s.get("type") == "integer"
                 and p.endswith("_cents") and len(p) > 6 and "enum" not in s]
        if money or (S is not None and _has_cents(S)):
            mapping, conv = {}, ""
            for p in money:
                q = p[:-6] if p[:-6] not in props else p[:-6] + "_decimal"
                ex = [c for c in sampler.candidates(p, props[p])
                      if isinstance(c, int) and not isinstance(c, bool) and is_valid(props[p], c)][:3]
                ex = ex or [v for v in (props[p].get("minimum"), props[p].get("maximum")) if isinstance(v, int)]
                bounds = "".join(f", {w} {_evo_h_cents_to_decimal({'x_cents': props[p][k]})['x']}"
                                 for k, w in (("minimum", "at least"), ("maximum", "at most"))
                                 if isinstance(props[p].get(k), int))
                schema = {"type": "string", "pattern": DECIMAL_PATTERN, "description": (
                    props[p].get("description", "") + f" (a decimal amount like \"29.99\"{bounds})").strip()}
                if ex:
                    schema["examples"] = ["%s%d.%02d" % ("-" if v < 0 else "", abs(v) // 100, abs(v) % 100) for v in ex]
                if "default" in props[p] and isinstance(props[p]["default"], int):
                    v = props[p]["default"]
                    schema["default"] = "%s%d.%02d" % ("-" if v < 0 else "", abs(v) // 100, abs(v) % 100)
                mapping[p] = (q, schema)
                conv += f"if {q!r} in args:\n    args[{p!r}] = _evo_h_decimal_to_cents(args.pop({q!r}))\n"
            body = "import json\n\n" + conv + (check if money else "") + f"out = {P}(state, **args)\n" + \
                ("return _evo_h_cents_to_decimal(out)\n" if S is not None and _has_cents(S) else "return out\n")
            recipe(f"{t.name}_decimal", (tuple(money), "Money goes in and comes out as decimal strings "
                   "(\"29.99\") instead of integer cents."), mapping, body,
                   ["_evo_h_decimal_to_cents", "_evo_h_cents_to_decimal"])
        # --- lists <-> comma-separated strings
        lists = []
        for p, s in props.items():
            items = s.get("items") if isinstance(s, dict) and isinstance(s.get("items"), dict) else None
            if s.get("type") == "array" and items is not None and items.get("type") == "string" \
                    and "pattern" not in items and "maxItems" not in s:
                lists.append(p)
        out_lists = [k for k, v in S.items() if isinstance(v, list) and v and all(isinstance(i, str) for i in v)] \
            if isinstance(S, dict) else []
        if lists or out_lists:
            mapping, conv = {}, ""
            for p in lists:
                s, items = props[p], props[p]["items"]
                schema: dict[str, Any] = {"type": "string",
                                          "description": (s.get("description", "") + " (comma-separated)").strip()}
                if "enum" in items:
                    alt = "|".join(re.escape(str(v)) for v in items["enum"])
                    schema["pattern"] = f"^({alt})(,({alt}))*$"
                elif s.get("minItems", 0) > 0 or p in req:
                    schema["minLength"] = 1
                ex = [c for c in sampler.candidates(singular(p), items) if isinstance(c, str) and "," not in c][:2]
                if ex:
                    schema["examples"] = [",".join(ex), ex[0]]
                mapping[p] = (p, schema)
                conv += f"if {p!r} in args:\n    args[{p!r}] = [s.strip() for s in args[{p!r}].split(',') if s.strip()]\n"
            body = "import json\n\n" + conv + (check if lists else "") + f"out = {P}(state, **args)\n"
            if out_lists:
                body += (f"if isinstance(out, dict):\n    out = dict(out)\n    for k in {out_lists!r}:\n"
                         "        v = out.get(k)\n        if isinstance(v, list) and all(isinstance(i, str) for i in v):\n"
                         "            out[k] = ','.join(v)\n")
            body += "return out\n"
            recipe(f"{t.name}_csv", (tuple(lists), "Lists are passed and returned as comma-separated strings."),
                   mapping, body, [])
        # --- ISO dates <-> day offsets
        ref = self.ref_dates.get(t.domain, DEFAULT_REF_DATE)
        dates = []
        for p, s in props.items():
            if not isinstance(s, dict) or s.get("type") != "string" or "enum" in s:
                continue
            cands = [c for c in sampler.candidates(p, s) if isinstance(c, str)]
            if (s.get("format") == "date" or (cands and all(ISO_DATE.match(c) for c in cands))) and cands:
                dates.append((p, cands))
        if dates or (S is not None and _has_dates(S)):
            import datetime

            mapping, conv = {}, ""
            for p, cands in dates:
                q = f"{p}_days" if f"{p}_days" not in props else f"{p}_day_offset"
                ex = []
                for c in cands[:4]:
                    try:
                        ex.append((datetime.date.fromisoformat(c) - datetime.date.fromisoformat(ref)).days)
                    except ValueError:
                        pass
                schema = {"type": "integer", "description": (props[p].get("description", "") +
                          f" (as days after {ref}; negative for before)").strip()}
                if ex:
                    schema["examples"] = ex
                mapping[p] = (q, schema)
                conv += f"if {q!r} in args:\n    args[{p!r}] = _evo_h_days_to_date(args.pop({q!r}), {ref!r})\n"
            body = "import json\n\n" + conv + (check if dates else "") + f"out = {P}(state, **args)\n"
            body += f"return _evo_h_dates_to_days(out, {ref!r})\n" if S is not None and _has_dates(S) else "return out\n"
            recipe(f"{t.name}_day_offsets", (tuple(p for p, _ in dates),
                   f"Dates go in and come out as day offsets from {ref} (a date field `d` becomes `d_days`)."),
                   mapping, body, ["_evo_h_days_to_date", "_evo_h_dates_to_days"])
        return out

    # ========================================================== specialise
    def _specialise(self, t: ToolSpec, lin: Lineage) -> list[Recipe]:
        props = t.parameters.get("properties", {})
        req = list(t.parameters.get("required", []))
        out: list[Recipe] = []
        for p, s in props.items():
            if not isinstance(s, dict):
                continue
            if "enum" in s and len(s["enum"]) >= 2:
                values = list(s["enum"])
            elif s.get("type") == "boolean":
                values = [True, False]
            else:
                continue
            for v in values:
                if isinstance(v, bool):
                    hint = f"{t.name}_{p}" if v else f"{t.name}_no_{p}"
                elif isinstance(v, str):
                    verb, _, rest = t.name.partition("_")
                    hint = (f"{verb}_{_ident(v)}_{rest}" if verb in ("list", "search", "find", "get", "show") and rest
                            else f"{t.name}_{_ident(v)}")
                else:
                    hint = f"{t.name}_{p}_{_ident(v)}"

                def build(p: str = p, v: Any = v, hint: str = hint) -> ToolSpec | None:
                    return self._make("specialise", [t], hint,
                                      props={k: x for k, x in props.items() if k != p},
                                      required=[r for r in req if r != p],
                                      lineage=self._child(lin, ((p,), f"Always with {p} = {json.dumps(v)}."), drop=p),
                                      body=f"args[{p!r}] = {v!r}\nreturn {t.function}(state, **args)\n")
                out.append(Recipe("specialise", build))
        return out

    # ============================================================= compose
    def _feeds(self, a: ToolSpec, b: ToolSpec, zoo: Zoo) -> list[tuple[str | None, str]]:
        """(list key or None, field) pairs where a's output field can feed b's required input."""
        if a.name == b.name or a.domain != b.domain:
            return []
        la, lb = self.lineage(a, zoo), self.lineage(b, zoo)
        if la.roots & lb.roots or (a.effect == "write" and b.effect == "write"):
            return []  # the same tool twice, or two writes (cancel then return) that rarely make sense together
        for t, lin in ((a, la), (b, lb)):  # compose seed tools, or a specialised one (list_pending_orders)
            if lin.depth > 1 or (lin.depth == 1 and t.operator != "specialise"):
                return []
        S = self.samples.get(a.name)
        if not isinstance(S, dict):
            return []
        props = b.parameters.get("properties", {})
        out = []
        for q in b.parameters.get("required", []):
            s = props.get(q)
            if not isinstance(s, dict) or "enum" in s or s.get("type") not in ("string", "integer"):
                continue
            if not q.lower().endswith(ID_LIKE):
                continue  # only identifiers are worth passing on (an order id, a sku, a path)
            if q in S and not isinstance(S[q], (dict, list)) and is_valid(s, S[q]):
                out.append((None, q))
                continue
            for k, v in S.items():
                if isinstance(v, list) and v and isinstance(v[0], dict) and q in v[0] and is_valid(s, v[0][q]):
                    out.append((k, q))
                    break
        return out

    def _compose(self, a: ToolSpec, b: ToolSpec, feed: tuple[str | None, str], zoo: Zoo) -> ToolSpec | None:
        key, q = feed
        la, lb = self.lineage(a, zoo), self.lineage(b, zoo)
        a_props = a.parameters.get("properties", {})
        b_props = {k: v for k, v in b.parameters.get("properties", {}).items() if k != q}
        rename = {k: (f"then_{k}" if k in a_props else k) for k in b_props}
        props = dict(a_props)
        props.update({rename[k]: v for k, v in b_props.items()})
        required = list(a.parameters.get("required", [])) + [rename[k] for k in b.parameters.get("required", []) if k != q]
        src = f"(the first of its {key})" if key else ""
        base = (f"Two steps in one call. First: {la.description()} Then, with the {q} it returned{(' ' + src) if src else ''}: "
                f"{lb.description()} Returns {{\"first\": <first result>, \"then\": <second result>}}.")
        pick = (f"items = first.get({key!r}) if isinstance(first, dict) else None\n"
                f"if not items:\n    raise ToolFailure('empty_result', 'the first step returned no {key} to continue with')\n"
                "src = items[0]\n") if key else "src = first\n"
        body = (f"a_args = {{k: args[k] for k in {sorted(a_props)!r} if k in args}}\n"
                f"b_args = {{name: args[k] for k, name in {dict((v, k) for k, v in rename.items())!r}.items() if k in args}}\n"
                f"first = {a.function}(state, **a_args)\n{pick}"
                f"if not isinstance(src, dict) or {q!r} not in src:\n"
                f"    raise ToolFailure('empty_result', 'the first step returned no {q}')\n"
                f"b_args[{q!r}] = src[{q!r}]\nthen = {b.function}(state, **b_args)\n"
                "return {'first': first, 'then': then}\n")
        lineage = Lineage(depth=max(la.depth, lb.depth) + 1, base=base, roots=la.roots | lb.roots)
        return self._make("compose", [a, b], f"{a.name}_then_{b.name}", props=props, required=required,
                          lineage=lineage, body=body, effect="write" if "write" in (a.effect, b.effect) else "read",
                          errors={**a.errors, **b.errors, "empty_result": "the first step returned nothing to pass on"},
                          returns={"type": "object", "properties": {"first": {}, "then": {}},
                                   "required": ["first", "then"]})


def functools_partial(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)


def _defs(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    out: dict[str, str] = {}
    for node in tree.body:
        seg = ast.get_source_segment(source, node) or ""
        name = getattr(node, "name", None) or f"_stmt_{len(out)}"
        out.setdefault(name, seg)
    return out
