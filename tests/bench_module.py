"""A bench/ script imported as a module by the tests of it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` as the module ``bench_<name>``. bench/ is on sys.path while it loads (for its sibling
    _common, which takes bench/ off sys.path only when first imported) and off it afterwards: bench/rewards.py
    would shadow the rewards package for every later test."""
    bench = str(BENCH)
    sys.path.insert(0, bench)
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        while bench in sys.path:
            sys.path.remove(bench)
    return mod
