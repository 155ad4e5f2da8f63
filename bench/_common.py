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
from collections.abc import Iterable
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
