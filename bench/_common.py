"""What every benchmark here shares: a clean import path and the one-JSON-line report.

The benchmarks are named after the packages they measure (bench/sandboxes.py,
bench/synth.py, ...), so when one runs as a script its own folder must leave
sys.path, or `import sandboxes` would find the benchmark instead of the library.
Import this module first.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != HERE]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def emit(result: dict[str, Any], head: Iterable[str] = ("backend", "quick")) -> None:
    """Print the result as ONE JSON line, the keys in `head` first (missing ones as null)."""
    head = list(head)
    ordered = {k: result.get(k) for k in head}
    ordered.update({k: v for k, v in result.items() if k not in ordered})
    print(json.dumps(ordered, separators=(", ", ": ")), flush=True)


def phase_runner(result: dict[str, Any], console: Any, *, spinner: bool = False) -> Callable[..., Any]:
    """``phase(name, fn, shown=())``: run one timed phase of a benchmark. Its seconds go to
    ``result["phase_s"][name]``; a dict it returns (or the first item of a returned tuple) is merged
    into ``result`` and the ``shown`` keys printed; an exception is recorded in
    ``result["errors"][name]`` and the phase returns None, so the other phases still run."""
    phase_s: dict[str, float] = result.setdefault("phase_s", {})
    errors: dict[str, str] = result.setdefault("errors", {})

    def phase(name: str, fn: Callable[[], Any], shown: tuple[str, ...] = ()) -> Any:
        t0 = time.perf_counter()
        try:
            if spinner:
                with console.status(f"{name}..."):
                    out = fn()
            else:
                out = fn()
            res = out[0] if isinstance(out, tuple) else out
            if isinstance(res, dict):
                result.update(res)
                console.print(f"[green]✓[/] {name}: {({k: res.get(k) for k in shown})}")
            else:
                console.print(f"[green]✓[/] {name}")
            return out
        except Exception as e:  # noqa: BLE001 - recorded; the benchmark goes on with its other phases
            errors[name] = f"{type(e).__name__}: {e}"[:2000]
            console.print(f"[red]✗ {name}: {type(e).__name__}: {e}")
            return None
        finally:
            phase_s[name] = round(time.perf_counter() - t0, 2)

    return phase
