"""Read a domain folder's metadata without running any of its code (issue 30).

A domain folder is the user's code. The host must learn its tools' names, schemas and effects
(to show them to the model, to validate arguments, to plan tasks), but running `__init__.py`,
`tools.py` or `data.py` in the `dojo` process would give that code the host's files, uid and
environment before any sandbox exists. So this module reads the files' syntax trees only:

- `__init__.py`: its docstring and literal `CATEGORY`, `DESCRIPTION`, `FAILURE_MODES` assignments;
- `tools.py`: each top-level function decorated `@tool` or `@tool(...)` with literal arguments,
  its docstring, parameters, literal defaults and annotations. Annotations are rebuilt from a
  closed vocabulary (str, int, float, bool, dict, list, Any, None, Literal, Optional, Union,
  Annotated with literal metadata, `X | Y`, quoted annotations, and type aliases assigned at the
  top of tools.py), then turned into JSON Schema by the same code as for built-in domains
  (`toolzoo.introspect`);
- `data.py`: only that it defines `seed`; `seed(rng)` itself runs in the sandbox (the bundle's
  footer), never here.

Anything outside that vocabulary is a `SpecError` naming the file and line.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sandboxes.cli_files import validation_reason
from toolzoo.introspect import SchemaOf, spec_from_signature, type_schema, union_schema
from toolzoo.spec import SpecError, ToolSpec

INIT_NAMES = ("CATEGORY", "DESCRIPTION", "FAILURE_MODES")
_MAX_ALIAS_DEPTH = 20
_NAMES: dict[str, Any] = {
    "str": str, "int": int, "float": float, "bool": bool, "dict": dict, "list": list, "None": None,
    "Any": Any, "Dict": dict, "List": list,
}
_GENERICS = ("Literal", "Optional", "Union", "Annotated", "List", "Dict", "list", "dict")


def _parse(path: Path) -> ast.Module:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#x} at offset {e.start})") from None
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise SpecError(f"{path}:{e.lineno}: {e.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise SpecError(f"{path}: too deeply nested to read") from None


def _literal(node: ast.AST, path: Path, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise SpecError(f"{path}:{node.lineno}: {what} must be a literal (the file is read, not run)") from None


def read_init(folder: Path) -> tuple[dict[str, Any], str | None]:
    """({CATEGORY/DESCRIPTION/FAILURE_MODES: value, "_lines": {name: line}}, docstring) of __init__.py."""
    init = folder / "__init__.py"
    if not init.is_file():
        return {"_lines": {}}, None
    tree = _parse(init)
    found: dict[str, Any] = {"_lines": {}}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in INIT_NAMES:
            found[target.id] = _literal(value, init, target.id)
            found["_lines"][target.id] = node.lineno
    return found, ast.get_docstring(tree)


def has_seed(data_py: Path) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "seed"
               for n in _parse(data_py).body)


def function_names(tools_py: Path) -> set[str]:
    return {n.name for n in _parse(tools_py).body if isinstance(n, ast.FunctionDef)}


# ------------------------------------------------------------------ tools.py
def _tool_decorator(fn: ast.FunctionDef) -> ast.expr | None:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == "tool") or (
                isinstance(target, ast.Attribute) and target.attr == "tool"):
            return d
    return None


def _meta(dec: ast.expr, path: Path, where: str, ann: _Annotations) -> dict[str, Any]:
    """@tool's metadata as toolzoo.dsl.tool records it; a bare `@tool` is a read with no errors."""
    meta: dict[str, Any] = {"effect": "read", "errors": {}, "returns": None}
    if isinstance(dec, ast.Call):
        names = ("effect", "errors", "returns")
        if len(dec.args) > len(names):
            raise SpecError(f"{path}:{dec.lineno}: {where}: @tool takes effect, errors, returns")
        for name, arg in zip(names, dec.args, strict=False):
            meta[name] = ann.value(arg, f"{where}: @tool's {name}")
        for kw in dec.keywords:
            if kw.arg not in names:
                raise SpecError(f"{path}:{dec.lineno}: {where}: @tool has no argument {kw.arg!r}")
            meta[kw.arg] = ann.value(kw.value, f"{where}: @tool's {kw.arg}")
    if meta["effect"] not in ("read", "write"):
        raise SpecError(f"{path}:{dec.lineno}: {where}: effect must be 'read' or 'write', not {meta['effect']!r}")
    if not isinstance(meta["errors"] or {}, dict):
        raise SpecError(f"{path}:{dec.lineno}: {where}: errors must be a dict of code -> meaning")
    meta["errors"] = dict(meta["errors"] or {})
    return meta


class _Annotations:
    """Rebuild annotation objects from a closed vocabulary; aliases are tools.py's top-level assignments."""

    def __init__(self, tree: ast.Module, path: Path):
        self.path = path
        self.aliases: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.aliases[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.aliases[node.target.id] = node.value

    def value(self, node: ast.expr, what: str, depth: int = 0) -> Any:
        """A literal, where names may stand for literals assigned at the top of tools.py."""
        if depth > _MAX_ALIAS_DEPTH:
            raise SpecError(f"{self.path}:{node.lineno}: {what} must be a literal (the file is read, not run)")
        if isinstance(node, ast.Name) and node.id in self.aliases:
            return self.value(self.aliases[node.id], what, depth + 1)
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {self.value(k, what, depth + 1): self.value(v, what, depth + 1)  # type: ignore[arg-type]
                    for k, v in zip(node.keys, node.values, strict=True)}
        if isinstance(node, ast.List | ast.Tuple):
            items = [self.value(e, what, depth + 1) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        return _literal(node, self.path, what)

    def fail(self, node: ast.AST, where: str) -> SpecError:
        text = ast.unparse(node) if isinstance(node, ast.expr) else "?"
        return SpecError(f"{self.path}:{getattr(node, 'lineno', '?')}: {where}: cannot read the annotation "
                         f"{text!r} without running the file; use str, int, float, bool, list[...], dict, "
                         "Literal[...], X | None, Annotated[X, {...}] or an alias of them assigned in tools.py")

    def _flat(self, node: ast.expr) -> list[ast.expr]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return [*self._flat(node.left), *self._flat(node.right)]
        return [node]

    def _union(self, items: list[ast.expr], where: str, depth: int) -> Any:
        """Options in order, duplicates and None dropped as typing.Union drops them."""
        built = [self.build(i, where, depth + 1) for i in items]
        options: list[Any] = []
        for b in built:
            if b is not None and b is not type(None) and not any(b is o or b == o for o in options):
                options.append(b)
        return SchemaOf(union_schema([type_schema(o, where) for o in options], any(b is None or b is type(None) for b in built)))

    def _name(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("typing", "t"):
            return node.attr
        return None

    def build(self, node: ast.expr, where: str, depth: int = 0) -> Any:
        if depth > _MAX_ALIAS_DEPTH:
            raise self.fail(node, where)
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
            try:
                inner = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                raise self.fail(node, where) from None
            ast.copy_location(inner, node)
            for child in ast.walk(inner):
                ast.copy_location(child, node)
            return self.build(inner, where, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union([*self._flat(node.left), *self._flat(node.right)], where, depth)
        name = self._name(node)
        if name is not None:
            if name in _NAMES:
                return _NAMES[name]
            if isinstance(node, ast.Name) and name in self.aliases:
                return self.build(self.aliases[name], where, depth + 1)
            raise self.fail(node, where)
        if isinstance(node, ast.Subscript):
            head = self._name(node.value)
            if head not in _GENERICS:
                raise self.fail(node, where)
            items = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Literal":
                values = tuple(self.value(i, f"{where}: a Literal value") for i in items)
                return typing.Literal[values]  # type: ignore[valid-type]
            if head == "Annotated":
                base = self.build(items[0], where, depth + 1)
                extras = [self.value(i, f"{where}: Annotated metadata") for i in items[1:]]
                if not extras:
                    raise self.fail(node, where)
                return typing.Annotated[(base, *extras)]  # type: ignore[valid-type]
            if head == "Optional" and len(items) == 1:
                return self._union([items[0], ast.Constant(None)], where, depth)
            if head == "Union":
                return self._union(items, where, depth)
            args = tuple(self.build(i, where, depth + 1) for i in items)
            if head in ("list", "List") and len(args) == 1:
                return list[args[0]]  # type: ignore[valid-type]
            if head in ("dict", "Dict") and len(args) == 2:
                return dict[args[0], args[1]]  # type: ignore[valid-type]
        raise self.fail(node, where)


def read_tools(folder: Path, *, domain: str, category: str) -> list[ToolSpec]:
    """The @tool functions of tools.py as ToolSpecs, in file order, read from the syntax tree."""
    path = folder / "tools.py"
    tree = _parse(path)
    ann = _Annotations(tree, path)
    specs = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        dec = _tool_decorator(fn)
        if dec is None:
            continue
        where = f"{domain}.{fn.name}"
        if isinstance(fn, ast.AsyncFunctionDef):
            raise SpecError(f"{path}:{fn.lineno}: {where}: a tool is a plain function, not async")
        a = fn.args
        if a.vararg or a.kwarg:
            raise SpecError(f"{path}:{fn.lineno}: {where}: *args/**kwargs are not allowed in tools")
        positional = [*a.posonlyargs, *a.args]
        if not positional:
            raise SpecError(f"{path}:{fn.lineno}: {where}: the first parameter must take the world state "
                            "(e.g. `state` or `data`)")
        if a.posonlyargs[1:]:
            raise SpecError(f"{path}:{fn.lineno}: {where}: only the state parameter may be positional-only")
        defaults: dict[str, Any] = {}
        pos_defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults):], a.defaults,
                                strict=True))
        kw_defaults = {p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None}
        for name, node in {**pos_defaults, **kw_defaults}.items():
            defaults[name] = ann.value(node, f"{where}: the default of {name}")
        params = []
        for p in [*positional[1:], *a.kwonlyargs]:
            hint = ann.build(p.annotation, f"{where}({p.arg})") if p.annotation is not None else _MISSING
            params.append((p.arg, hint, defaults.get(p.arg, _MISSING)))
        meta = _meta(dec, path, where, ann)
        returns = _MISSING
        if fn.returns is not None and meta["returns"] is None:
            returns = ann.build(fn.returns, f"{where} return")
        try:
            specs.append(spec_from_signature(
                fn.name, ast.get_docstring(fn, clean=False) or "", params, meta, returns,
                domain=domain, category=category, missing=_MISSING))
        except SpecError as e:
            raise SpecError(f"{path}:{fn.lineno}: {e}") from None
        except ValidationError as e:
            raise SpecError(f"{path}:{fn.lineno}: {where}: {validation_reason(e)}") from None
    if not specs:
        raise SpecError(f"{path}: no @tool functions")
    return specs


_MISSING: Any = object()
