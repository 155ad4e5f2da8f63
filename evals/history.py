"""Run history: every run kept per (suite version, model), to report on, compare with and re-run.

    HISTORY/<suite>/<suite version>/<model label>/<run id>/run.json     RunRecord (summary, per-case results)
                                                          /report.json  the pydantic-evals EvaluationReport

HISTORY is ``--history`` or ``$TOOLDOJO_EVALS_DIR``, default ``runs/evals``. A run id is
``YYYYmmdd-HHMMSS-<model>-<4 hex>``; commands take a run id, a unique prefix of one, or a run's
folder. The *current view* of a model on a suite is its latest full run with the ``--only-failed``
runs made after it laid over it, case by case (what ``--only-failed`` and ``dojo eval report`` use).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evals.context import EvalError
from evals.models import slug
from evals.results import CaseResult, RunRecord, summarize
from sandboxes.cli_files import validation_reason

__all__ = ["current_view", "default_history_dir", "find_run", "list_runs", "load_report", "new_run_id", "save_run"]


def default_history_dir() -> Path:
    return Path(os.environ.get("TOOLDOJO_EVALS_DIR") or "runs/evals")


def new_run_id(label: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug(label)}-{secrets.token_hex(2)}"


def run_dir(history: Path, record: RunRecord) -> Path:
    return history / slug(record.suite) / record.suite_version / slug(record.label) / record.run_id


def save_run(history: Path, record: RunRecord, report: Any) -> Path:
    """Write run.json and report.json (atomically each); returns the run's folder."""
    from pydantic_evals.reporting import EvaluationReportAdapter

    d = run_dir(history, record)
    d.mkdir(parents=True, exist_ok=True)
    for name, data in (("report.json", EvaluationReportAdapter.dump_json(report, indent=1, fallback=str)),
                       ("run.json", record.model_dump_json(indent=1).encode())):
        tmp = d / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, d / name)
    return d


def list_runs(history: Path, suite: str | None = None, *,
              broken: list[tuple[Path, str]] | None = None) -> list[tuple[RunRecord, Path]]:
    """Every run in the history (of ``suite``, by name), oldest first; a run.json that does not load is
    left out, and (file, reason) appended to `broken` when given."""
    base = history / slug(suite) if suite else history
    if not base.is_dir():
        return []
    pattern = "*/*/*/run.json" if suite else "*/*/*/*/run.json"
    out = []
    for f in base.glob(pattern):
        try:
            out.append((RunRecord.model_validate_json(f.read_text()), f.parent))
        except (OSError, ValueError) as e:  # run.json is replaced atomically: damaged, or another version
            if broken is not None:
                broken.append((f, validation_reason(e) if isinstance(e, ValidationError) else str(e)))
    out.sort(key=lambda x: (x[0].started_at, x[0].run_id))
    return out


def find_run(history: Path, ref: str) -> tuple[RunRecord, Path]:
    """A run by id, unique id prefix, or path (its folder or run.json)."""
    p = Path(ref).expanduser()
    if p.exists():
        f = p / "run.json" if p.is_dir() else p
        if not f.is_file():
            raise EvalError(f"{ref} is not a run (no run.json)")
        return RunRecord.model_validate_json(f.read_text()), f.parent
    runs = list_runs(history)
    hits = [(r, d) for r, d in runs if r.run_id == ref] or [(r, d) for r, d in runs if r.run_id.startswith(ref)]
    if not hits:
        raise EvalError(f"no run {ref!r} in {history} (`dojo eval runs` lists them)")
    if len(hits) > 1:
        raise EvalError(f"{ref!r} matches {len(hits)} runs ({', '.join(r.run_id for r, _ in hits[:4])}...): give more of the id")
    return hits[0]


def load_report(run_path: Path) -> Any:
    from pydantic_evals.reporting import EvaluationReportAdapter

    return EvaluationReportAdapter.validate_json((run_path / "report.json").read_bytes())


def current_view(history: Path, suite: str, label: str, *, version: str | None = None) -> RunRecord | None:
    """The model's latest full run of the suite with later --only-failed runs laid over it (None if
    it never ran). ``version``: only runs of that suite version."""
    runs = [r for r, _ in list_runs(history, suite) if r.label == label and (version is None or r.suite_version == version)]
    full = [i for i, r in enumerate(runs) if not r.only_failed]
    if not full:
        return None
    base = runs[full[-1]]
    cases: dict[str, CaseResult] = {c.name: c for c in base.cases}
    later = runs[full[-1] + 1:]
    for r in later:
        for c in r.cases:
            if c.name in cases:
                cases[c.name] = c
    view = base.model_copy(deep=True)
    view.cases = list(cases.values())
    view.summary = summarize(view.cases)
    if later:
        view.finished_at = later[-1].finished_at
        view.options = {**view.options, "overlaid_runs": [r.run_id for r in later]}
    return view
