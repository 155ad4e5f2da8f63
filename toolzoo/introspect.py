"""Turn a DSL tool function into a ToolSpec: JSON Schema from type hints, text from the docstring."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

from toolzoo.spec import SpecError, ToolSpec

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def type_schema(tp: Any, where: str) -> dict[str, Any]:
    """JSON Schema of a Python annotation: scalars, list[X], dict, Literal[...], X | None, Annotated[X, {...}].

    Put `| None` inside Annotated (`Annotated[int | None, {"minimum": 0}]`): on Python 3.11 a
    Union containing an Annotated with dict metadata fails to hash at import time.
    """
    if isinstance(tp, type) and tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    origin = get_origin(tp)
    if origin is typing.Annotated:
        base, *extras = get_args(tp)
        schema = type_schema(base, where)
        for extra in extras:
            if isinstance(extra, dict):
                schema.update(extra)
        return schema
    if origin is Literal:
        values = list(get_args(tp))
        kinds = {type(v) for v in values}
        schema: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and next(iter(kinds)) in _SCALARS:
            schema["type"] = _SCALARS[next(iter(kinds))]
        return schema
    if origin in (list, typing.List):  # noqa: UP006
        (item,) = get_args(tp) or (Any,)
        return {"type": "array", "items": {} if item is Any else type_schema(item, where)}
    if origin in (dict, typing.Dict):  # noqa: UP006
        return {"type": "object"}
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        return union_schema([type_schema(o, where) for o in options], len(options) < len(get_args(tp)))
    if isinstance(tp, SchemaOf):
        return dict(tp.schema)
    if tp is Any:
        return {}
    raise SpecError(f"{where}: unsupported annotation {tp!r}; use str, int, float, bool, list[...], dict, Literal or | None")


class SchemaOf:
    """An annotation already turned into JSON Schema (toolzoo.static_domain builds unions this way: on
    Python 3.11 a typing.Union of an Annotated with dict metadata cannot even be constructed)."""

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema


def union_schema(options: list[dict[str, Any]], nullable: bool) -> dict[str, Any]:
    """JSON Schema of `A | B | ...` (and `| None` when `nullable`) from the options' schemas."""
    if len(options) == 1:
        inner = options[0]
        if nullable and isinstance(inner.get("type"), str):
            inner["type"] = [inner["type"], "null"]
        elif nullable:
            inner = {"anyOf": [inner, {"type": "null"}]}
        return inner
    return {"anyOf": options + ([{"type": "null"}] if nullable else [])}


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {arg: text}) from a Google-style docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    desc, args, current, in_args = [], {}, None, False
    for line in lines:
        if re.match(r"^(Args|Arguments|Parameters):\s*$", line.strip()):
            in_args = True
            continue
        if in_args and re.match(r"^(Returns|Raises|Errors|Example|Examples):\s*$", line.strip()):
            in_args = False
            continue
        if in_args:
            m = re.match(r"^\s*(\w+)\s*(\([^)]*\))?:\s*(.*)$", line)
            if m and line.startswith(" ") and not line.startswith("        "):
                current = m.group(1)
                args[current] = m.group(3).strip()
            elif current and line.strip():
                args[current] += " " + line.strip()
        elif not args:
            desc.append(line)
    return "\n".join(desc).strip(), args


def spec_from_function(fn: Any, *, domain: str, category: str, provenance: str = "seed") -> ToolSpec:
    meta = getattr(fn, "__tool__", None)
    if meta is None:
        raise SpecError(f"{fn.__name__} is not marked with @tool")
    where = f"{domain}.{fn.__name__}"
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise SpecError(f"{where}: the first parameter must take the world state (e.g. `state` or `data`)")
    hints = typing.get_type_hints(fn, include_extras=True)
    for p in params[1:]:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise SpecError(f"{where}: *args/**kwargs are not allowed in tools")
    missing = inspect.Parameter.empty
    returns = hints["return"] if "return" in hints and hints["return"] is not None else missing
    return spec_from_signature(fn.__name__, fn.__doc__ or "", [(p.name, hints.get(p.name, missing), p.default)
                                                              for p in params[1:]],
                               meta, returns, domain=domain, category=category, provenance=provenance,
                               missing=missing)


def spec_from_signature(name: str, doc: str, params: list[tuple[str, Any, Any]], meta: dict[str, Any],
                        return_hint: Any, *, domain: str, category: str, provenance: str = "seed",
                        missing: Any = inspect.Parameter.empty) -> ToolSpec:
    """A ToolSpec from a tool's parts: [(argument, annotation or `missing`, default or `missing`)] after the
    state parameter, @tool's metadata and the return annotation. Shared by live functions (built-in
    domains) and functions read from source without running it (toolzoo.static_domain)."""
    where = f"{domain}.{name}"
    description, arg_docs = parse_docstring(doc)
    if not description:
        raise SpecError(f"{where}: needs a docstring describing what it does")
    props: dict[str, Any] = {}
    required = []
    for pname, hint, default in params:
        if hint is missing:
            raise SpecError(f"{where}: parameter {pname} needs a type annotation")
        schema = type_schema(hint, f"{where}({pname})")
        if pname not in arg_docs:
            raise SpecError(f"{where}: parameter {pname} is not described under Args:")
        schema["description"] = arg_docs[pname]
        if default is missing:
            required.append(pname)
        else:
            schema["default"] = default
        props[pname] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        parameters["required"] = required
    returns = meta.get("returns")
    if returns is None and return_hint is not missing and return_hint is not None:
        returns = type_schema(return_hint, f"{where} return")
    return ToolSpec(
        name=name, description=description, parameters=parameters, returns=returns,
        errors=meta.get("errors", {}), effect=meta["effect"], category=category, domain=domain,
        provenance=provenance, function=name,  # type: ignore[arg-type]
    )
