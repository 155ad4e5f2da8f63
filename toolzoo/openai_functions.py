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
        raise SpecError(f"--tools {tools}: no such file or folder")
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


DEFAULT_MAX_DATA_MB = 8  # a sandbox's request cap (sandboxes Limits.max_request_bytes): the state ships in one request


def import_environment(tools: str | Path, data: str | Path, *, name: str, out: str | Path,
                       policy: str | Path | None = None, effects: Mapping[str, str] | None = None,
                       error_prefix: str = "Error", category: str = "custom", overwrite: bool = False,
                       max_data_mb: float = DEFAULT_MAX_DATA_MB) -> Path:
    """Write a domain folder OUT/NAME from tool classes (a .py file or a folder of them) and a data
    file (JSON, JSONL, or a folder of <table>.json files); returns the folder.

    Everything is read and checked first; the folder is then written under a temporary name next to
    OUT/NAME, loaded back as a domain, and renamed into place, so a failure leaves nothing behind."""
    from pydantic import ValidationError

    from sandboxes.cli_files import validation_reason
    from toolzoo.domain_dirs import builtin_names, load_folder, write_atomically
    from toolzoo.spec import ToolSpec

    if not NAME_RE.match(name):
        raise SpecError(f"--name {name!r}: a domain name must be an identifier (letters, digits, _)")
    if name in builtin_names():
        raise SpecError(f"--name {name!r} is a built-in domain's name (reserved); choose another")
    effects = dict(effects or {})
    imports: list[str] = []
    foreign: list[str] = []
    classes: list[tuple[str, str, dict[str, Any], Path]] = []
    for f in _py_files(Path(tools).expanduser()):
        i, fo, c = _tool_classes(f)
        imports += i
        foreign += fo
        classes += [(*x, f) for x in c]
    if not classes:
        raise SpecError(f"{tools}: no tool classes (a class with get_info() and invoke(data, **kwargs))")
    schemas, callers, seen = [], [], set()
    errors = {"tool_error": f"the environment answered with a message starting {error_prefix!r}"} if error_prefix else {}
    for cls, _src, schema, where in classes:
        fn = schema.get("function", schema)
        tool = fn["name"]
        if not isinstance(tool, str) or not NAME_RE.match(tool) or tool in seen:
            raise SpecError(f"{where}: tool class {cls}: name {tool!r} is not a valid, unique function name")
        seen.add(tool)
        entry = {"type": "function", "function": fn, "effect": effect_of(tool, effects), "errors": errors}
        try:
            ToolSpec.from_openai(entry, domain=name, category=category, function=tool, effect=entry["effect"],
                                 errors=errors)
        except ValidationError as e:
            raise SpecError(f"{where}: tool class {cls} ({tool}): {validation_reason(e)}") from None
        except SpecError as e:
            raise SpecError(f"{where}: tool class {cls}: {e}") from None
        schemas.append(entry)
        callers.append(f"\n\ndef {tool}(data, /, **kwargs):\n    return _tooldojo_invoke({cls}, data, kwargs, "
                       f"{error_prefix!r})\n")
    unknown = sorted(set(effects) - seen)
    if unknown:
        raise SpecError(f"--read/--write name unknown tools: {', '.join(unknown)}")
    defined = {c for c, _, _, _ in classes}
    stubs = [f"class {n}:\n    pass\n" for n in dict.fromkeys(foreign) if n not in defined]
    source = "\n".join(dict.fromkeys(imports)) + "\n\n" + "\n\n".join(stubs) + "\n\n" + \
        "\n\n\n".join(src for _, src, _, _ in classes) + _CALLER.format() + "".join(callers)
    try:
        compile(source, "tools.py", "exec")
    except SyntaxError as e:
        raise SpecError(f"the copied tool classes do not compile: {e.msg} (line {e.lineno})") from None
    policy_text = None
    if policy is not None:
        try:
            policy_text = Path(policy).expanduser().read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SpecError(f"--policy {policy}: no such file") from None
        except (UnicodeDecodeError, IsADirectoryError) as e:
            raise SpecError(f"--policy {policy}: not a UTF-8 text file ({type(e).__name__})") from None
    database = json.dumps(_database(Path(data).expanduser()))
    size_mb = len(database.encode()) / (1 << 20)
    if size_mb > max_data_mb:
        raise SpecError(f"--data {data}: the database is {size_mb:.1f} MB as JSON, over the {max_data_mb:g} MB "
                        "limit: every sandbox receives the whole state in one request, capped at 8 MiB by "
                        "default (sandboxes Limits.max_request_bytes); raise that cap for your sandboxes and "
                        "pass --max-data-mb to import it anyway")
    # Generated Python only holds names checked against NAME_RE and strings written through repr().
    init = (f"{'Imported from ' + Path(tools).name + ' (an OpenAI-function environment).'!r}\n"
            f"CATEGORY = {category!r}\n")
    files = {"tools.py": source, "tools.json": json.dumps(schemas, indent=1), "data.json": database,
             "__init__.py": init, **({"policy.md": policy_text} if policy_text is not None else {})}
    return write_atomically(Path(out).expanduser(), name, files, overwrite=overwrite, check=load_folder)


def _database(data: Path) -> Any:
    if data.is_dir():  # tau-bench style: one JSON file per table
        tables = sorted(data.glob("*.json"))
        if not tables:
            raise SpecError(f"--data {data}: no <table>.json files in the folder")
        return {t.stem: read_data_file(t) for t in tables}
    if not data.is_file():
        raise SpecError(f"--data {data}: no such file or folder")
    return read_data_file(data)
