"""Bring an OpenAI-function environment (tau-bench, tau2-bench and many in-house ones) into the zoo.

Such an environment has tool classes, each with a schema method (`get_info()` returning an
OpenAI function schema) and `invoke(data, **kwargs)` over a database loaded from a data file.
`import_environment` reads the user's own checkout without importing it (the classes' source is
copied; the schema is read from `get_info`'s returned literal) and writes a domain folder:

    OUT/NAME/tools.py     the tool classes, plus one function per tool calling its `invoke`
    OUT/NAME/tools.json   the schemas, each with its effect
    OUT/NAME/data.json    the database
    OUT/NAME/policy.md    the policy (the environment's wiki/rules file), if given

which then loads like any domain folder (`load_domain(path)`, `--domain-dir`). Imports of the
environment's own package are dropped in the copy and the names they brought in become empty
base classes (`class Tool: pass`); tool code may use the standard library only, as in every
sandbox. A returned string starting with `error_prefix` becomes a tool failure (code
`tool_error`), and a returned JSON string is decoded, so outputs are data like the zoo's.
Effects: `effects` names them; otherwise a tool whose name starts with a read verb (get, find,
list, search, lookup, calculate, think, check, read, show, count) is a read, and any other a write.
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolzoo.domain_dirs import read_data_file
from toolzoo.spec import NAME_RE, SpecError

READ_VERBS = ("get", "find", "list", "search", "lookup", "calculate", "think", "check", "read", "show", "count")

_CALLER = '''

# ---- tooldojo: one function per tool, calling the environment's invoke(data, **kwargs)
import json as _tooldojo_json


def _tooldojo_invoke(cls, data, kwargs, error_prefix):
    out = cls.invoke(data, **kwargs)
    if isinstance(out, str):
        if error_prefix and out.startswith(error_prefix):
            raise ToolFailure("tool_error", out)
        if out[:1] in ("{{", "["):
            try:
                return _tooldojo_json.loads(out)
            except ValueError:
                pass
    return out
'''


def _py_files(tools: Path) -> list[Path]:
    if tools.is_file():
        return [tools]
    if not tools.is_dir():
        raise SpecError(f"{tools}: no such file or directory")
    return sorted(p for p in tools.rglob("*.py") if p.name != "__init__.py")


def _tool_classes(path: Path) -> tuple[list[str], list[str], list[tuple[str, str, dict[str, Any]]]]:
    """(stdlib import lines, names imported from elsewhere, [(class, source, schema)]) of one file."""
    source = path.read_text()
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise SpecError(f"{path}: {e.msg} (line {e.lineno})") from None
    imports, foreign, classes = [], [], []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            stdlib = (isinstance(node, ast.Import) or node.level == 0) and all(
                m.split(".")[0] in sys.stdlib_module_names for m in mods)
            if stdlib and not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                imports.append(ast.get_source_segment(source, node) or "")
            elif isinstance(node, ast.ImportFrom):
                foreign += [a.asname or a.name for a in node.names if a.name != "*"]
        elif isinstance(node, ast.ClassDef):
            methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
            if "invoke" in methods and "get_info" in methods:
                classes.append((node.name, ast.get_source_segment(source, node) or "",
                                _schema_of(methods["get_info"], path, node.name)))
    return imports, foreign, classes


def _schema_of(fn: ast.FunctionDef, path: Path, cls: str) -> dict[str, Any]:
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1:
        raise SpecError(f"{path}: {cls}.get_info must return one schema literal")
    try:
        schema = ast.literal_eval(returns[0].value)
    except ValueError:
        raise SpecError(f"{path}: {cls}.get_info does not return a literal dict (the adapter reads it "
                        "without running your code)") from None
    if not isinstance(schema, dict) or "name" not in schema.get("function", schema):
        raise SpecError(f"{path}: {cls}.get_info must return an OpenAI function schema with a name")
    return schema


def effect_of(name: str, effects: Mapping[str, str]) -> str:
    if name in effects:
        if effects[name] not in ("read", "write"):
            raise SpecError(f"effect of {name}: {effects[name]!r} is not read or write")
        return effects[name]
    return "read" if name.split("_")[0].lower() in READ_VERBS else "write"


def import_environment(tools: str | Path, data: str | Path, *, name: str, out: str | Path,
                       policy: str | Path | None = None, effects: Mapping[str, str] | None = None,
                       error_prefix: str = "Error", category: str = "custom", overwrite: bool = False) -> Path:
    """Write a domain folder OUT/NAME from tool classes (a .py file or a folder of them) and a data
    file (JSON, JSONL, or a folder of <table>.json files); returns the folder."""
    if not NAME_RE.match(name):
        raise SpecError(f"domain name {name!r} must be an identifier")
    effects = dict(effects or {})
    imports: list[str] = []
    foreign: list[str] = []
    classes: list[tuple[str, str, dict[str, Any]]] = []
    for f in _py_files(Path(tools).expanduser()):
        i, fo, c = _tool_classes(f)
        imports += i
        foreign += fo
        classes += c
    if not classes:
        raise SpecError(f"{tools}: no tool classes (a class with get_info() and invoke(data, **kwargs))")
    schemas, callers, seen = [], [], set()
    for cls, _src, schema in classes:
        fn = schema.get("function", schema)
        tool = fn["name"]
        if not NAME_RE.match(tool) or tool in seen:
            raise SpecError(f"tool class {cls}: name {tool!r} is not a valid, unique function name")
        seen.add(tool)
        schemas.append({"type": "function", "function": fn, "effect": effect_of(tool, effects)})
        callers.append(f"\n\ndef {tool}(data, /, **kwargs):\n    return _tooldojo_invoke({cls}, data, kwargs, "
                       f"{error_prefix!r})\n")
    unknown = sorted(set(effects) - seen)
    if unknown:
        raise SpecError(f"effects name unknown tools: {', '.join(unknown)}")
    defined = {c for c, _, _ in classes}
    stubs = [f"class {n}:\n    pass\n" for n in dict.fromkeys(foreign) if n not in defined]
    source = "\n".join(dict.fromkeys(imports)) + "\n\n" + "\n\n".join(stubs) + "\n\n" + \
        "\n\n\n".join(src for _, src, _ in classes) + _CALLER.format() + "".join(callers)
    try:
        compile(source, "tools.py", "exec")
    except SyntaxError as e:
        raise SpecError(f"the copied tool classes do not compile: {e.msg} (line {e.lineno})") from None

    folder = Path(out).expanduser() / name
    if folder.exists():
        if not overwrite:
            raise SpecError(f"{folder} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "tools.py").write_text(source)
    (folder / "tools.json").write_text(json.dumps(schemas, indent=1))
    (folder / "data.json").write_text(json.dumps(_database(Path(data).expanduser())))
    (folder / "__init__.py").write_text(f'"""Imported from {Path(tools).name} (OpenAI-function environment)."""\n'
                                        f"CATEGORY = {category!r}\n")
    if policy is not None:
        (folder / "policy.md").write_text(Path(policy).expanduser().read_text())
    return folder


def _database(data: Path) -> Any:
    if data.is_dir():  # tau-bench style: one JSON file per table
        tables = sorted(data.glob("*.json"))
        if not tables:
            raise SpecError(f"{data}: no <table>.json files")
        return {t.stem: read_data_file(t) for t in tables}
    if not data.is_file():
        raise SpecError(f"{data}: no such data file")
    return read_data_file(data)
