"""Host-side checks of what the LLM wrote (synth/evolve_llm.py), parsed and compiled, never run: seed
code and tool code import the standard library only, tool specs pass the ToolSpec model, each tool's
code is wrapped in a factory so its helpers stay private; and the probe tool that loads a seed in a
sandbox."""

from __future__ import annotations

import ast
import json
import re
import sys
import textwrap
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from toolzoo.runtime import strip_local_imports
from toolzoo.spec import NAME_RE, SpecError, ToolSpec


DOMAIN_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{2,47}$")
PROBE_PREFIX = "_dojo_probe_"
FACTORY_PREFIX = "_llm_make_"
MAX_STATE_BYTES = 200_000


def _non_stdlib(tree: ast.AST) -> list[str]:
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""] if node.level == 0 else ["." * node.level]
        else:
            continue
        bad += [m for m in mods if m.split(".")[0] not in sys.stdlib_module_names]
    return bad


def _top_names(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def source_defs(source: str) -> set[str]:
    try:
        return _top_names(ast.parse(source))
    except SyntaxError:
        return set()


def _clean_code(code: str) -> str:
    code = code.strip("\n")
    fence = re.match(r"^\s*```[a-zA-Z]*\n(.*?)\n?```\s*$", code, re.S)
    if fence:
        code = fence.group(1)
    return strip_local_imports(textwrap.dedent(code)).strip("\n") + "\n"


def check_seed_code(code: Any) -> tuple[str | None, str]:
    """(problem or None, cleaned source) of a `seed(rng)` module written by the LLM; nothing is executed."""
    if not isinstance(code, str) or not code.strip():
        return "the seed code is missing or not a string", ""
    src = _clean_code(code)
    try:
        tree = ast.parse(src)
        compile(tree, "<seed>", "exec")
    except SyntaxError as e:
        return f"the seed code does not compile: {e.msg} (line {e.lineno})", src
    bad = _non_stdlib(tree)
    if bad:
        return f"the seed code imports non-stdlib modules: {', '.join(sorted(set(bad)))}", src
    if not any(isinstance(n, ast.FunctionDef) and n.name == "seed" for n in tree.body):
        return "the seed code must define a top-level function `seed(rng)` returning the state dict", src
    return None, src


def wrap_implementation(name: str, code: str) -> str:
    """Put a tool's code in a factory so that its helpers stay private to it in a shared bundle."""
    body = textwrap.indent(code.rstrip("\n"), "    ")
    return (f"def {FACTORY_PREFIX}{name}():\n{body}\n    return {name}\n\n\n"
            f"{name} = {FACTORY_PREFIX}{name}()\n")


def _coerce_errors(v: Any) -> dict[str, str] | str:
    if v is None:
        return {}
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return '"errors" must be an object mapping error code -> meaning'
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return {x: x.replace("_", " ") for x in v}
    if isinstance(v, dict):
        return {str(k): (x if isinstance(x, str) else json.dumps(x)) for k, x in v.items()}
    return '"errors" must be an object mapping error code -> meaning'


def build_tool(raw: Any, *, domain: str, category: str, expect_name: str | None = None,
               reserved: Iterable[str] = ()) -> ToolSpec | str:
    """A ToolSpec from an LLM answer, or why not (a reason the LLM can act on). Nothing is executed."""
    if not isinstance(raw, dict):
        return f"the answer must be a JSON object with the tool's fields, got {type(raw).__name__}"
    name = raw.get("name", expect_name)
    if expect_name is not None and name != expect_name:
        name = expect_name  # the outline fixed the name; a repair may not rename the tool
    if not isinstance(name, str) or not NAME_RE.match(name) or name.startswith("_"):
        return f"tool name {name!r} must be a snake_case identifier (letters, digits, underscores)"
    if name in set(reserved):
        return f"the name {name!r} is already defined in the domain's source; pick another tool name"
    desc = raw.get("description")
    if not isinstance(desc, str) or not desc.strip():
        return '"description" must be a non-empty string'
    effect = raw.get("effect", "read")
    effect = effect.strip().lower() if isinstance(effect, str) else effect
    if effect not in ("read", "write"):
        return f'"effect" must be "read" or "write", got {effect!r}'
    params = raw.get("parameters", {"type": "object", "properties": {}})
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return '"parameters" must be a JSON Schema object, got a string that is not JSON'
    if not isinstance(params, dict):
        return f'"parameters" must be a JSON Schema object, got {type(params).__name__}'
    if "type" not in params and isinstance(params.get("properties"), dict):
        params = {"type": "object", **params}
    errors = _coerce_errors(raw.get("errors"))
    if isinstance(errors, str):
        return errors
    returns = raw.get("returns")
    if returns is not None and not isinstance(returns, dict):
        returns = None
    code = raw.get("code")
    if not isinstance(code, str) or not code.strip():
        return '"code" must be a string of Python source defining the tool function'
    src = _clean_code(code)
    try:
        tree = ast.parse(src)
        compile(tree, f"<tool {name}>", "exec")
    except SyntaxError as e:
        return f"implementation does not compile: {e.msg} (line {e.lineno})"
    bad = _non_stdlib(tree)
    if bad:
        return f"implementation imports non-stdlib modules: {', '.join(sorted(set(bad)))}"
    if name not in _top_names(tree):
        fns = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        return (f"the code must define a top-level function named {name!r} (it defines "
                f"{', '.join(fns) if fns else 'no function'})")
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is not None and not (fn.args.args or fn.args.posonlyargs):
        return f"{name} must take the state as its first argument: def {name}(state, ...)"
    try:
        return ToolSpec(name=name, description=desc.strip(), parameters=params, returns=returns, errors=errors,
                        effect=effect, category=category, domain=domain, provenance="llm", function=name,
                        implementation=wrap_implementation(name, src))
    except ValidationError as e:
        first = e.errors()[0]
        return f"invalid tool spec: {first['msg']}"[:400]
    except SpecError as e:
        return str(e)[:400]


def probe_tool(domain: str, category: str) -> ToolSpec:
    """A tool that checks a new domain's seed in the sandbox: a deterministic, JSON, bounded dict."""
    name = f"{PROBE_PREFIX}{domain}"[:64]
    code = (
        f"def {name}(state):\n"
        "    import json as _j, random as _r\n"
        "    if not isinstance(state, dict):\n"
        "        raise ValueError('seed(rng) must return a dict, got %s' % type(state).__name__)\n"
        "    again = _j.dumps(seed(_r.Random(SEED)), sort_keys=True, default=str)\n"
        "    if again != _j.dumps(state, sort_keys=True, default=str):\n"
        "        raise ValueError('seed(rng) is not deterministic: use only rng for randomness')\n"
        f"    if len(again) > {MAX_STATE_BYTES}:\n"
        f"        raise ValueError('the seeded state is %d bytes; keep it under {MAX_STATE_BYTES}' % len(again))\n"
        "    return {'tables': sorted(str(k) for k in state)}\n"
    )
    return ToolSpec(name=name, description="check the seeded state", category=category, domain=domain,
                    provenance="llm", function=name, implementation=code)


def snake_name(text: Any) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", str(text).strip().lower()).strip("_")
    return re.sub(r"_+", "_", s)
