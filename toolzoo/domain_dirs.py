"""Domains from anywhere: a domain folder outside the package, loaded by path.

A domain folder has the zoo layout (toolzoo/domains/README in `toolzoo.domains`'s docstring):

    my_domain/
        tools.py        @tool functions; the first parameter gets the world state, any name
        tools.json      (optional) OpenAI function schemas, each with "effect": read | write; then
                        tools.py defines a function of each tool's name, not @tool-marked
        data.py         seed(rng) -> the initial state          } one of these three
        data.json       the initial state as JSON               }
        data.jsonl      one row per line: {"table": T, "id": K, ...fields} (or no id: a list)
        policy.md       the rules the agent must follow (optional)
        __init__.py     CATEGORY, DESCRIPTION, FAILURE_MODES (optional)

`register(path)` makes the domains of a folder (the folder itself, or each domain folder in it)
known by name, so that every API that looks a domain up by a task's `domain` finds them; the
CLI's `--domain-dir` calls it, and `TOOLDOJO_DOMAIN_DIRS` (os.pathsep-separated) does the same
for child processes. The built-in domain names are reserved.

Nothing in a folder runs on the host: `load_folder` reads `__init__.py` and `tools.py` as syntax
trees (toolzoo.static_domain) and data files as JSON; `data.py`'s `seed()` and the tools run
only inside sandboxes, where the bundle (toolzoo.runtime) carries their source.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolzoo.spec import NAME_RE, Domain, FailureMode, SpecError, ToolSpec
from toolzoo.static_domain import function_names, has_seed, read_init, read_tools

ENV = "TOOLDOJO_DOMAIN_DIRS"
DATA_FILES = ("data.py", "data.json", "data.jsonl")
DEFAULT_CATEGORY = "custom"

_registered: dict[str, Path] = {}
BUILTIN = Path(__file__).parent / "domains"


def builtin_names() -> list[str]:
    """The seed zoo's domains (toolzoo/domains/<name>/); their names are reserved."""
    return sorted(p.name for p in BUILTIN.iterdir() if (p / "tools.py").exists())


def infer_schema(value: Any, depth: int = 0) -> dict[str, Any]:
    """A JSON Schema describing `value` (the shape of a seeded state)."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if value is None:
        return {"type": "null"}
    if isinstance(value, list):
        return {"type": "array", "items": infer_schema(value[0], depth + 1) if value else {}}
    if isinstance(value, dict):
        rows = list(value.values())
        if depth >= 1 and len(rows) >= 2 and all(isinstance(r, dict) and r.keys() == rows[0].keys() for r in rows):
            # A table keyed by id: describe one row.
            return {"type": "object", "additionalProperties": infer_schema(rows[0], depth + 1)}
        return {"type": "object", "properties": {k: infer_schema(v, depth + 1) for k, v in value.items()}}
    return {}


def initial_state(domain: Domain) -> Any:
    """The fixed initial state of a domain whose data is a file; None for seed(rng) domains."""
    if domain.data_file is None:
        return None
    # one parse per file version; the bundle ships it as JSON, so sharing it is safe
    return initial_state_of(Path(domain.data_file))


_DATA: dict[tuple[str, int], Any] = {}


def is_domain_folder(path: str | Path) -> bool:
    return (Path(path) / "tools.py").is_file() or (Path(path) / "mcp.json").is_file()


def looks_like_path(ref: str | os.PathLike[str]) -> bool:
    s = os.fspath(ref)
    return os.sep in s or "/" in s or s.startswith(".") or Path(s).is_dir() and is_domain_folder(s)


def folders_in(path: str | Path) -> list[Path]:
    """The domain folders at `path`: the folder itself if it is one, else its domain sub-folders."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise SpecError(f"domain dir {path}: no such directory")
    if is_domain_folder(p):
        return [p.resolve()]
    found = sorted(c.resolve() for c in p.iterdir() if c.is_dir() and is_domain_folder(c))
    if not found:
        raise SpecError(f"domain dir {path}: neither a domain folder (tools.py) nor a folder of them")
    return found


def register(path: str | Path) -> list[str]:
    """Make the domains at `path` known by name; returns their names."""
    builtin = set(builtin_names())
    names = []
    for folder in folders_in(path):
        name = folder.name
        if name in builtin:
            raise SpecError(f"domain folder {folder}: {name!r} is a built-in domain's name (reserved); rename the folder")
        if _registered.get(name, folder) != folder:
            raise SpecError(f"two domain folders are named {name!r}: {_registered[name]} and {folder}")
        _registered[name] = folder
        names.append(name)
    return names


def registered() -> dict[str, Path]:
    """Registered domain folders by name, those of $TOOLDOJO_DOMAIN_DIRS included."""
    for entry in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        try:
            register(entry)
        except SpecError as e:  # a stale variable must say where the folder came from
            raise SpecError(f"${ENV}: {e} (fix or unset the variable)") from None
    return dict(_registered)


def export_env() -> None:
    """Pass the registered folders to child processes (training ranks, served domains)."""
    dirs = [str(p) for p in _registered.values()]
    old = [d for d in os.environ.get(ENV, "").split(os.pathsep) if d]
    os.environ[ENV] = os.pathsep.join(dict.fromkeys(old + dirs))


# ------------------------------------------------------------------- data
def _utf8(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#x} at offset {e.start})") from None


def read_data_file(path: Path) -> Any:
    """The initial state from data.json or data.jsonl; a bad line names its file and line."""
    if path.suffix == ".json":
        text = _utf8(path)
        try:
            return json.loads(text)
        except ValueError as e:
            raise SpecError(f"{path}: not JSON: {e}") from None
        except RecursionError:
            raise SpecError(f"{path}: nested too deeply to load") from None
    state: dict[str, Any] = {}
    for n, line in enumerate(_utf8(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise SpecError(f"{path}:{n}: not JSON: {e}") from None
        except RecursionError:
            raise SpecError(f"{path}:{n}: nested too deeply to load") from None
        if not isinstance(row, dict) or not isinstance(row.get("table"), str):
            raise SpecError(f"{path}:{n}: each line must be an object with a \"table\" name")
        table = row.pop("table")
        if "id" in row:
            key = str(row.pop("id"))
            state.setdefault(table, {})
            if not isinstance(state[table], dict):
                raise SpecError(f"{path}:{n}: table {table!r} mixes rows with and without an id")
            state[table][key] = row
        else:
            state.setdefault(table, [])
            if not isinstance(state[table], list):
                raise SpecError(f"{path}:{n}: table {table!r} mixes rows with and without an id")
            state[table].append(row)
    return state


# ----------------------------------------------------------------- loading
def _json_specs(folder: Path, name: str, category: str) -> list[ToolSpec]:
    """Tools declared as OpenAI function schemas (tools.json), implemented by tools.py's functions."""
    from pydantic import ValidationError

    from sandboxes.cli_files import validation_reason

    f = folder / "tools.json"
    try:
        entries = json.loads(f.read_text())
    except ValueError as e:
        raise SpecError(f"{f}: not JSON: {e}") from None
    if not isinstance(entries, list):
        raise SpecError(f"{f}: must be a list of OpenAI function schemas")
    defined = function_names(folder / "tools.py")
    specs = []
    for i, entry in enumerate(entries):
        try:
            fn_name = entry.get("function", entry)["name"]
            spec = ToolSpec.from_openai(entry, domain=name, category=category, function=fn_name,
                                        effect=entry.get("effect", "write"), errors=entry.get("errors") or {})
        except ValidationError as e:
            raise SpecError(f"{f}: tool #{i + 1}: {validation_reason(e)}") from None
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise SpecError(f"{f}: tool #{i + 1}: {e}") from None
        if fn_name not in defined:
            raise SpecError(f"{f}: tool {fn_name!r} has no function of that name in tools.py")
        specs.append(spec)
    return specs


def _mcp_folder(folder: Path, name: str) -> Domain:
    """An MCP domain (toolzoo.mcp_domain): tools on an MCP server, optional state hooks."""
    from pydantic import ValidationError

    f = folder / "mcp.json"
    try:
        raw = json.loads(f.read_text())
        tools = [ToolSpec.model_validate({**t, "domain": name}) for t in raw.get("tools", [])]
        policy = folder / "policy.md"
        return Domain(name=name, category=raw.get("category", "mcp"), description=raw.get("description") or name,
                      policy=policy.read_text().strip() if policy.exists() else "", source="",
                      tools=tools, mcp_state=raw.get("state"))
    except (ValueError, ValidationError, AttributeError, TypeError) as e:
        raise SpecError(f"{f}: {' '.join(str(e).split())[:300] or type(e).__name__}") from None


def load_folder(folder: str | Path) -> Domain:
    """A Domain from a domain folder (see the module docstring)."""
    folder = Path(folder).expanduser().resolve()
    if not is_domain_folder(folder):
        raise SpecError(f"{folder}: not a domain folder (no tools.py or mcp.json)")
    name = folder.name
    if not NAME_RE.match(name):
        raise SpecError(f"{folder}: the folder name {name!r} must be a valid identifier (it is the domain's name)")
    if (folder / "mcp.json").is_file():
        return _mcp_folder(folder, name)
    data_files = [folder / f for f in DATA_FILES if (folder / f).is_file()]
    if len(data_files) != 1:
        raise SpecError(f"{folder}: needs exactly one of {', '.join(DATA_FILES)}"
                        + (f"; found {', '.join(p.name for p in data_files)}" if data_files else ""))
    init, docstring = read_init(folder)
    category = init.get("CATEGORY", DEFAULT_CATEGORY)
    description = init.get("DESCRIPTION") or docstring or f"the {name} domain"
    for key, value in (("CATEGORY", category), ("DESCRIPTION", description)):
        if not isinstance(value, str):
            raise SpecError(f"{folder / '__init__.py'}:{init['_lines'][key]}: {key} must be a string")
    if (folder / "tools.json").is_file():
        specs = _json_specs(folder, name, category)
    else:
        specs = read_tools(folder, domain=name, category=category)
    data = data_files[0]
    source = (folder / "tools.py").read_text()
    data_file = None
    if data.name == "data.py":
        if not has_seed(data):
            raise SpecError(f"{data}: needs seed(rng) -> the initial state")
        # seed() is the user's code: it runs in the sandbox (the bundle's footer), so the state's
        # shape is not known here and the schema stays empty.
        state_schema: dict[str, Any] = {}
        source = data.read_text() + "\n\n" + source
    else:
        try:
            state_schema = infer_schema(initial_state_of(data))
        except RecursionError:
            raise SpecError(f"{data}: nested too deeply to load") from None
        data_file = str(data)
    policy = folder / "policy.md"
    return Domain(
        name=name, category=category, description=description,
        policy=policy.read_text().strip() if policy.exists() else "",
        source=source, state_schema=state_schema, tools=specs,
        failure_modes=_failure_modes(init, folder / "__init__.py"),
        data_file=data_file,
    )


def initial_state_of(path: Path) -> Any:
    """A data file's state (cached like `initial_state`)."""
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _DATA:
        _DATA.clear()
        _DATA[key] = read_data_file(path)
    return _DATA[key]


def _failure_modes(init: dict[str, Any], where: Path) -> list[FailureMode]:
    from pydantic import ValidationError

    from sandboxes.cli_files import validation_reason

    modes = init.get("FAILURE_MODES", [])
    line = init["_lines"].get("FAILURE_MODES")
    if not isinstance(modes, list | tuple):
        raise SpecError(f"{where}:{line}: FAILURE_MODES must be a list of {{'kind': ..., 'tools': [...]}} dicts")
    out = []
    for i, m in enumerate(modes):
        if not isinstance(m, dict):
            raise SpecError(f"{where}:{line}: FAILURE_MODES[{i}] is {m!r}, not a dict like "
                            "{'kind': 'timeout', 'tools': ['*']}")
        try:
            out.append(FailureMode.model_validate(m))
        except ValidationError as e:
            raise SpecError(f"{where}:{line}: FAILURE_MODES[{i}]: {validation_reason(e)}") from None
    return out


def write_atomically(out: Path, name: str, files: Mapping[str, str], *, overwrite: bool,
                      check: Any = None) -> Path:
    """OUT/NAME holding `files`, written under a temporary name, checked with `check(folder)`, renamed in."""
    import tempfile

    folder = out / name
    if folder.exists() and not overwrite:
        raise SpecError(f"{folder} exists; pass --overwrite to replace it")
    made = [p for p in (out, *out.absolute().parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.importing-", dir=out))
    try:
        (staging / name).mkdir()
        for fname, text in files.items():
            (staging / name / fname).write_text(text, encoding="utf-8")
        if check is not None:
            check(staging / name)
        if folder.exists():
            os.replace(folder, staging / ".old")
        os.replace(staging / name, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for p in made:  # folders this import created, innermost first
            try:
                p.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return folder


# --------------------------------------------------------------------- CLI
HELP = "a domain folder, or a folder of them, to load (repeatable); its domains are then known by name"


def use(dirs: list[str] | None) -> list[str]:
    """`--domain-dir` of every command: register each folder, pass them on to child processes."""
    names: list[str] = []
    for d in dirs or ():
        names += register(d)
    if names:
        export_env()
    return names
