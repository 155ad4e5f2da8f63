"""The hand-written seed zoo: one folder per domain, laid out like a tau2-bench domain.

    toolzoo/domains/<domain>/
        __init__.py   CATEGORY, DESCRIPTION, FAILURE_MODES
        data.py       seed(rng) -> the initial state (deterministic in the rng)
        tools.py      @tool functions over that state
        policy.md     the rules the agent must follow in this domain

data.py and tools.py use the standard library and toolzoo.dsl only: they run
inside sandboxes, where they share one namespace (give module-level helpers a
per-domain prefix) and where `from __future__` imports are dropped.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import random
from pathlib import Path

from toolzoo.categories import BY_NAME, CATEGORIES
from toolzoo.domain_dirs import builtin_names, infer_schema  # noqa: F401  (infer_schema: re-exported)
from toolzoo.introspect import spec_from_function
from toolzoo.spec import Domain, FailureMode, SpecError, Zoo

HERE = Path(__file__).parent


def domain_names() -> list[str]:
    return builtin_names()


def known_domains() -> list[str]:
    """Built-in domains plus those registered from domain folders (`toolzoo.domain_dirs`)."""
    from toolzoo.domain_dirs import registered

    return sorted({*domain_names(), *registered()})


def load_domain(ref: str | os.PathLike[str]) -> Domain:
    """A domain by name (built-in or registered with `--domain-dir`) or by the path of its folder.

    A folder loaded by path is registered under its name (`toolzoo.domain_dirs.register`).
    """
    from toolzoo.domain_dirs import looks_like_path, register, registered

    if looks_like_path(ref):
        register(ref)  # later look-ups by the domain's name (a task's `domain`) find it too
        return _load_folder(str(Path(ref).expanduser().resolve()))
    name = os.fspath(ref)
    folder = registered().get(name)
    if folder is not None:
        return _load_folder(str(folder))
    return _load_builtin(name)


def resolve_domain(name: str, domain: Domain | None = None) -> Domain:
    """`domain` when given (it must be the named one), else the named domain loaded."""
    if domain is None:
        return load_domain(name)
    if domain.name != name:
        raise SpecError(f"the task is of domain {name!r} but domain {domain.name!r} was given")
    return domain


@functools.lru_cache(maxsize=None)
def _load_folder(folder: str) -> Domain:
    from toolzoo.domain_dirs import load_folder

    return load_folder(folder)


@functools.lru_cache(maxsize=None)
def _load_builtin(name: str) -> Domain:
    folder = HERE / name
    if not (folder / "tools.py").exists():
        raise SpecError(f"no domain {name!r}; known: {', '.join(known_domains())} "
                        "(load a domain folder by its path or with --domain-dir)")
    pkg = importlib.import_module(f"toolzoo.domains.{name}")
    tools_mod = importlib.import_module(f"toolzoo.domains.{name}.tools")
    data_mod = importlib.import_module(f"toolzoo.domains.{name}.data")
    if pkg.CATEGORY not in BY_NAME:
        raise SpecError(f"domain {name}: unknown category {pkg.CATEGORY!r}")
    fns = [v for v in vars(tools_mod).values()
           if inspect.isfunction(v) and hasattr(v, "__tool__") and v.__module__ == tools_mod.__name__]
    fns.sort(key=lambda f: f.__code__.co_firstlineno)
    specs = [spec_from_function(f, domain=name, category=pkg.CATEGORY) for f in fns]
    state = data_mod.seed(random.Random(0))
    return Domain(
        name=name, category=pkg.CATEGORY, description=pkg.DESCRIPTION,
        policy=(folder / "policy.md").read_text().strip(),
        source=(folder / "data.py").read_text() + "\n\n" + (folder / "tools.py").read_text(),
        state_schema=infer_schema(state), tools=specs,
        failure_modes=[FailureMode(**m) for m in getattr(pkg, "FAILURE_MODES", [])],
    )


def seed_zoo() -> Zoo:
    zoo = Zoo(categories=list(CATEGORIES), domains=[load_domain(n) for n in domain_names()])
    zoo.check_names()
    return zoo


def domains_at(where: str | os.PathLike[str]) -> list[Domain] | None:
    """The domains a zoo argument names when it is a domain folder, a folder of them, or a registered
    domain's name; None when it is something else (a saved zoo, `seed`)."""
    from toolzoo.domain_dirs import folders_in, is_domain_folder, registered

    p = Path(where).expanduser()
    if p.is_dir() and not (p / "zoo.json").exists() and (is_domain_folder(p) or any(
            is_domain_folder(c) for c in p.iterdir() if c.is_dir())):
        return [load_domain(f) for f in folders_in(p)]
    if os.fspath(where) in registered():
        return [load_domain(os.fspath(where))]
    return None
