"""The shape of the house: no import circle among the project's modules, packages that import one
way, and modules of a size one can read (docs/architecture.md describes the layers).

What counts as an import (read with ``ast``, nothing is executed):

* every ``import`` and ``from ... import`` statement anywhere in a module: at the top, inside
  functions (lazy imports still make a reader double back), under ``if TYPE_CHECKING:`` and in
  ``try`` blocks alike;
* ``from pkg import name`` is an edge to the module ``pkg.name`` when that is a project module,
  else to ``pkg`` itself (its ``__init__``); ``import a.b.c`` is an edge to the deepest project
  module it names; relative imports are resolved against the importing package;
* importing ``pkg.sub`` does not count as importing ``pkg`` (Python runs ``pkg/__init__.py`` first,
  but a package that re-exports its submodules would otherwise be a circle with each of them);
* a bare ``import name`` that is no project package but names a module beside the importer is an
  edge to that sibling (a benchmark run as a script imports ``_common`` from its own folder);
* code inside strings (e.g. sources shipped into a sandbox) is not read.

Size: a module longer than ``MAX_LINES`` lines must say why in its top docstring, on a line that
starts with ``Long because:`` followed by the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tooldojo", "sandboxes", "toolzoo", "synth", "rewards", "rl", "evals", "k8s", "bench")
MAX_LINES = 700
REASON_MARK = "Long because:"

# Which packages each package may import (the one-way rule: sandboxes <- toolzoo <- synth <- rewards
# <- rl, evals; k8s renders and submits jobs from rl's config types and talks to clusters through
# sandboxes' client; the root CLI and the benches sit on top and nothing imports them; a bench may
# drive the real `dojo` CLI, as a user would).
_BELOW_RL = {"rewards", "synth", "toolzoo", "sandboxes"}
ALLOWED: dict[str, set[str]] = {
    "sandboxes": set(),
    "toolzoo": {"sandboxes"},
    "synth": {"toolzoo", "sandboxes"},
    "rewards": {"synth", "toolzoo", "sandboxes"},
    "rl": set(_BELOW_RL),
    "evals": set(_BELOW_RL),
    "k8s": {"rl"} | _BELOW_RL,
    "tooldojo": {"sandboxes", "toolzoo", "synth", "rewards", "rl", "evals", "k8s"},
    "bench": {"tooldojo", "sandboxes", "toolzoo", "synth", "rewards", "rl", "evals", "k8s"},
}


def project_modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the given top-level packages."""
    mods: dict[str, Path] = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = f
    return mods


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (see the module docstring for what counts)."""

    def deepest(name: str, importer: str = "") -> str | None:
        sibling = f"{importer.rpartition('.')[0]}.{name}"
        if importer and name.split(".")[0] not in tops and sibling in mods:
            return sibling
        while name:
            if name in mods:
                return name
            name = name.rpartition(".")[0]
        return None

    tops = {m.split(".")[0] for m in mods}

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [deepest(a.name, mod) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else deepest(base) for a in node.names]
            graph[mod].update(t for t in targets if t is not None and t != mod)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected group of two or more modules, as one circle
    through it (``a -> b -> ... -> a``) so the message names the imports to untie."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, set(g)) for g in groups]


def _circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """One path through a strongly connected group that comes back to where it started."""
    start = min(group)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth first from start, inside the group, until an edge leads back to it
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{sorted(group)} is not strongly connected")


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def size_violations(mods: dict[str, Path], max_lines: int = MAX_LINES) -> list[str]:
    bad = []
    for path in mods.values():
        n = len(path.read_text().splitlines())
        if n <= max_lines:
            continue
        reasons = [ln.strip()[len(REASON_MARK):].strip() for ln in _docstring(path).splitlines()
                   if ln.strip().startswith(REASON_MARK)]
        if not any(len(r) >= 20 for r in reasons):
            bad.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {n} lines "
                       f"and no '{REASON_MARK} <reason>' line in its top docstring")
    return bad


# ----------------------------------------------------------------------------- the project itself
MODULES = project_modules(ROOT, PACKAGES)
GRAPH = import_graph(MODULES)


def test_the_walk_sees_the_project():
    # a walk that finds nothing would pass every check below
    assert len(MODULES) > 100
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert "rl.generation" in GRAPH["rl.continuous"]
    assert "rl.continuous" in GRAPH["rl.rollout"]  # a lazy import, inside a method, counts
    assert "bench._common" in GRAPH["bench.train_step"]  # a script's sibling import


def test_no_import_cycles():
    cycles = find_cycles(GRAPH)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_packages_import_one_way():
    wrong = sorted(f"{m} imports {t}" for m, ts in GRAPH.items() for t in ts
                   if (a := m.split(".")[0]) != (b := t.split(".")[0]) and b not in ALLOWED[a])
    assert not wrong, "imports against the package layers:\n" + "\n".join(wrong)


def test_modules_are_short_or_say_why():
    bad = size_violations(MODULES)
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------- the checks can fail
def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return project_modules(root, ("pkg",))


def test_a_lazy_import_circle_is_found(tmp_path):
    mods = _write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import A\n",
        "pkg/a.py": "from pkg.b import B\n\nclass A: ...\n",
        "pkg/b.py": "class B:\n    def f(self):\n        from . import c\n        return c\n",
        "pkg/c.py": "def g():\n    import pkg.a as a\n    return a\n",
        "pkg/d.py": "import pkg\nfrom pkg import a\nimport e\n",  # no circle: nothing imports d
        "pkg/e.py": "import json\n",  # d's sibling, imported as a script's neighbour
    })
    graph = import_graph(mods)
    assert graph["pkg.b"] == {"pkg.c"} and graph["pkg.d"] == {"pkg", "pkg.a", "pkg.e"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_a_package_init_circle_is_found(tmp_path):
    # a submodule that imports a name from its own package's __init__, which imports the submodule
    mods = _write(tmp_path, {"pkg/__init__.py": "from pkg.a import A\nX = 1\n",
                             "pkg/a.py": "from pkg import X\nA = X\n"})
    assert find_cycles(import_graph(mods)) == [["pkg", "pkg.a", "pkg"]]


def test_no_circle_no_finding():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"]]


@pytest.mark.parametrize("doc, ok", [
    ('"""A module."""\n', False),
    ('"""A module.\n\nLong because: the parser and its tables read best together."""\n', True),
    ('"""A module.\n\nLong because: yes."""\n', False),  # a reason, not a token
    ('# Long because: a comment is not the docstring\n', False),
])
def test_a_long_module_needs_a_reason(tmp_path, doc, ok):
    mods = _write(tmp_path, {"pkg/__init__.py": "", "pkg/big.py": doc + "x = 1\n" * 30})
    assert (size_violations(mods, max_lines=20) == []) is ok
    assert size_violations(mods, max_lines=100) == []
