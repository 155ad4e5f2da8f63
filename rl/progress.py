"""Progress of a long stage, on the terminal (a rich console on stderr), never in a result.

    with StageProgress(console) as bars:
        evaluate_policy(..., progress=lambda done, total: bars("held-out evaluation: grpo", done, total))

On a terminal every key is a rich bar (done / total, elapsed time) of one live display; the trainer's
step bar joins it (``train(..., progress=bars.progress)``: rich allows one live display per console,
and the held-out curve and evaluation run inside training). Elsewhere (a log file, captured output in
tests and CI) a plain line when a key starts, at each quarter and when it is done.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["StageProgress"]


class StageProgress:
    def __init__(self, console: Any, *, unit: str = "episodes"):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console, self.unit = console, unit
        self.live = bool(console.is_terminal) and not console.is_dumb_terminal
        # the live display, on a terminal; None elsewhere
        self.progress: Any = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console) if self.live else None
        self._bars: dict[str, Any] = {}
        self._seen: dict[str, tuple[int, int]] = {}  # key -> (total, last quarter printed)
        self._lock = threading.Lock()

    def __enter__(self) -> StageProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, key: str, done: int, total: int) -> None:
        """``done`` of ``total`` under ``key`` (a new key is a new bar; a new total starts it over)."""
        with self._lock:
            if self.progress is not None:
                if key not in self._bars:
                    self._bars[key] = self.progress.add_task(key, total=total)
                self.progress.update(self._bars[key], completed=done, total=total)
                return
            quarter = 4 * done // total if total > 0 else 4
            last_total, last = self._seen.get(key, (None, -1))
            if last_total != total or quarter < last:
                last = -1
            if quarter > last:
                self._seen[key] = (total, quarter)
                self.console.print(f"{key}: {done}/{total}" + (f" {self.unit}" if self.unit else ""),
                                   highlight=False, markup=False, soft_wrap=True)

    def tracker(self, key: str):
        """A (done, total) callback for ``key``."""
        return lambda done, total: self(key, done, total)
