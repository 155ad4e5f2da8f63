"""The run directory and its records (rl.run): config.yaml and run.json, checkpoints and resume,
metrics.jsonl, the reward-curve PNG, the logging backends and the trainer callbacks."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rl import run as rlrun
from rl.config import ConfigError, load_config
from rl.run import (
    configure_logging,
    find_checkpoint,
    git_state,
    plot_reward_curve,
    prepare_run_dir,
    read_metrics_jsonl,
    report_to,
    reward_points,
    trainer_kwargs,
    write_metrics_jsonl,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_tiny.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cfg(run_dir: Path, *extra: str):
    overrides = [f"run.output_dir={run_dir}", "grpo.max_steps=3", *extra]
    return load_config(EXAMPLE, overrides), overrides


def _checkpoint(run_dir: Path, n: int, *, complete: bool = True) -> Path:
    p = run_dir / f"checkpoint-{n}"
    p.mkdir(parents=True)
    if complete:
        (p / "trainer_state.json").write_text(json.dumps({"global_step": n}))
    return p


def _history(n: int = 12) -> list[dict]:
    h = []
    for step in range(1, n + 1):
        h.append({"loss": 0.1 / step, "reward": 0.1 + 0.05 * step, "reward_std": 0.2,
                  "rewards/world_state/mean": 0.05 * step, "rewards/world_state/std": 0.1,
                  "rewards/communication/mean": 0.5, "step_time": 1.5, "step": step,
                  "frac_reward_zero_std": 1.0 - 0.05 * step, "entropy": 0.3, "completions/mean_length": 40.0 + step})
    h.append({"train_runtime": 12.0, "train_loss": 0.05, "step": n})  # the trainer's closing entry: no reward
    return h


# ================================================================ run dir
def test_prepare_run_dir_writes_the_resolved_config_and_run_json(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLDOJO_TEST_SECRET", "hunter2-not-for-run-json")
    cfg, overrides = _cfg(tmp_path / "run", "run.seed=7")
    run_dir = prepare_run_dir(cfg, config_path=EXAMPLE, overrides=overrides)
    assert run_dir == (tmp_path / "run").resolve() and run_dir.is_dir()

    assert load_config(run_dir / "config.yaml") == cfg  # round-trips to an equal TrainConfig

    text = (run_dir / "run.json").read_text()
    assert "hunter2" not in text
    record = json.loads(text)
    assert record["overrides"] == overrides
    assert record["config_path"] == str(EXAMPLE)
    assert record["seeds"] == {"run.seed": 7, "model.tiny_params.seed": 0}
    assert record["status"] == "running" and record["end_time"] is None and record["resumes"] == []
    assert record["start_time"].endswith("+00:00")
    assert record["python"].count(".") == 2 and record["platform"] and record["hostname"]
    versions = record["versions"]
    for pkg in ("tooldojo", "torch", "transformers", "trl", "vllm", "accelerate", "datasets", "pydantic"):
        assert pkg in versions
    assert versions["pydantic"] and versions["tooldojo"]

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert record["git_commit"] == head.stdout.strip()
    assert isinstance(record["git_dirty"], bool)


def test_git_state_outside_a_checkout(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}


def test_refuses_to_clobber_a_run_with_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    _checkpoint(run_dir, 4)
    cfg, overrides = _cfg(run_dir)
    with pytest.raises(ConfigError) as e:
        prepare_run_dir(cfg, config_path=None, overrides=overrides)
    assert e.value.field == "run.resume"
    assert "run.resume=true" in e.value.reason and "run.output_dir" in e.value.reason
    assert not (run_dir / "config.yaml").exists() and not (run_dir / "run.json").exists()  # refused: wrote nothing


def test_resume_appends_to_run_json_and_trims_metrics(tmp_path):
    run_dir = tmp_path / "run"
    cfg, overrides = _cfg(run_dir)
    prepare_run_dir(cfg, config_path=EXAMPLE, overrides=overrides)
    first = json.loads((run_dir / "run.json").read_text())
    write_metrics_jsonl([{"reward": 0.1, "step": s} for s in (1, 2, 3, 4, 5)], run_dir / "metrics.jsonl")
    _checkpoint(run_dir, 3)

    cfg2, overrides2 = _cfg(run_dir, "run.resume=true", "grpo.max_steps=6")
    assert prepare_run_dir(cfg2, config_path=EXAMPLE, overrides=overrides2) == run_dir.resolve()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["start_time"] == first["start_time"] and record["overrides"] == first["overrides"]
    (resume,) = record["resumes"]
    assert resume["checkpoint"] == str((run_dir / "checkpoint-3").resolve()) and resume["checkpoint_step"] == 3
    assert resume["overrides"] == overrides2 and resume["config_changed"] is True
    assert load_config(run_dir / "config.yaml") == cfg2          # the config now in force
    assert load_config(run_dir / resume["previous_config"]) == cfg  # the one it replaced is kept
    assert [e["step"] for e in read_metrics_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]
    assert resume["metrics_lines_dropped"] == 2


def test_a_fresh_run_moves_leftovers_of_a_run_without_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    cfg, overrides = _cfg(run_dir)
    prepare_run_dir(cfg, config_path=None, overrides=overrides)
    write_metrics_jsonl([{"reward": 0.1, "step": 1}], run_dir / "metrics.jsonl")
    prepare_run_dir(cfg, config_path=None, overrides=overrides)
    assert (run_dir / "previous-1" / "run.json").is_file() and (run_dir / "previous-1" / "metrics.jsonl").is_file()
    assert not (run_dir / "metrics.jsonl").exists() and (run_dir / "run.json").is_file()


# ================================================================ checkpoints
def test_find_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert find_checkpoint(run_dir, False) is None
    with pytest.raises(ConfigError) as e:
        find_checkpoint(run_dir, True)
    assert e.value.field == "run.resume" and "no checkpoint" in e.value.reason

    for n in (2, 9, 10):
        _checkpoint(run_dir, n)
    (run_dir / "checkpoint-x").mkdir()            # not checkpoint-N
    (run_dir / "checkpoint-99").write_text("")    # not a folder
    assert find_checkpoint(run_dir, True) == str(run_dir / "checkpoint-10")  # by N, not by name

    _checkpoint(run_dir, 11, complete=False)      # an interrupted save: the last complete one wins
    assert find_checkpoint(run_dir, True) == str(run_dir / "checkpoint-10")

    assert find_checkpoint(run_dir, str(run_dir / "checkpoint-2")) == str((run_dir / "checkpoint-2").resolve())
    with pytest.raises(ConfigError) as e:
        find_checkpoint(run_dir, str(run_dir / "checkpoint-3"))
    assert e.value.field == "run.resume" and "does not exist" in e.value.reason


def test_resume_without_a_checkpoint_is_a_config_error(tmp_path):
    cfg, overrides = _cfg(tmp_path / "run", "run.resume=true")
    with pytest.raises(ConfigError) as e:
        prepare_run_dir(cfg, config_path=None, overrides=overrides)
    assert e.value.field == "run.resume"
    assert not (tmp_path / "run").exists()


# ================================================================ metrics and the curve
def test_reward_curve_png(tmp_path):
    out = plot_reward_curve(_history(), tmp_path / "curve.png", title="tiny")
    assert out == tmp_path / "curve.png"
    data = out.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1000
    from PIL import Image

    with Image.open(out) as im:
        im.verify()
    with Image.open(out) as im:
        w, h = im.size
    assert w > 0 and h > w * 0.6  # two panels (TRL's diagnostics present): taller than one

    plain = plot_reward_curve([{"reward": 1.0, "step": 1}, {"reward": float("nan"), "step": 2}],
                              tmp_path / "plain.png")
    assert plain is not None and plain.read_bytes()[:8] == PNG_MAGIC


def test_reward_curve_second_panel_shows_groups_with_variance_entropy_and_length():
    """Issue 23 #5: the second panel is not the reward again but what says whether a step could teach."""
    from rl.metrics import diagnostic_points

    d = diagnostic_points(_history(4))
    assert d["share of groups with reward variance"] == [(s, pytest.approx(0.05 * s)) for s in range(1, 5)]
    assert d["entropy (nats/token)"][0] == (1, 0.3) and d["episode length (tokens)"][-1] == (4, 44.0)
    assert diagnostic_points([{"reward": 1.0, "rewards/x/mean": 1.0, "step": 1}]) == {}


def test_reward_curve_none_without_rewards(tmp_path):
    assert plot_reward_curve([], tmp_path / "a.png") is None
    assert plot_reward_curve([{"loss": 1.0, "step": 1}, {"reward": float("nan"), "step": 2}], tmp_path / "b.png") is None
    assert not (tmp_path / "a.png").exists() and not (tmp_path / "b.png").exists()


def test_reward_points():
    pts = reward_points(_history(3))
    assert pts == [(1, pytest.approx(0.15), 0.2), (2, pytest.approx(0.2), 0.2), (3, pytest.approx(0.25), 0.2)]


def test_metrics_jsonl_round_trip(tmp_path):
    history = [*_history(2), {"reward": float("nan"), "loss": float("inf"), "step": 3, "note": "x"}]
    path = write_metrics_jsonl(history, tmp_path / "metrics.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == len(history)
    parsed = [json.loads(line) for line in lines]  # strict JSON: no NaN / Infinity
    assert parsed[0] == history[0]
    assert parsed[-1] == {"reward": None, "loss": None, "step": 3, "note": "x"}
    assert read_metrics_jsonl(path) == parsed
    assert read_metrics_jsonl(tmp_path / "missing.jsonl") == []


# ================================================================ logging backends
def test_report_to_names_and_missing_backends(tmp_path, monkeypatch):
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[]")
    assert report_to(cfg) == []
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[trackio, tensorboard, trackio]")
    monkeypatch.setattr(rlrun, "_importable", lambda m: True)
    assert report_to(cfg) == ["trackio", "tensorboard"]

    monkeypatch.setattr(rlrun, "_importable", lambda m: False)
    with pytest.raises(ConfigError) as e:
        report_to(cfg)
    assert [f for f, _ in e.value.problems] == ["run.logging", "run.logging", "run.logging"]
    msg = str(e.value)
    assert "run.logging: trackio is not installed: pip install trackio" in msg
    assert "run.logging: tensorboard is not installed: pip install tensorboard" in msg

    # tensorboardX alone is enough for transformers' TensorBoardCallback
    monkeypatch.setattr(rlrun, "_importable", lambda m: m == "tensorboardX")
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[tensorboard]")
    assert report_to(cfg) == ["tensorboard"]


def test_report_to_with_the_installed_backends(tmp_path):
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[trackio, tensorboard]")
    import importlib.util

    missing = [m for m in ("trackio", "tensorboard") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"not installed: {missing} (the track extra)")
    assert report_to(cfg) == ["trackio", "tensorboard"]


def test_configure_logging_keeps_everything_under_the_run_dir(tmp_path, monkeypatch):
    for var in ("TRACKIO_DIR", "TENSORBOARD_LOGGING_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRACKIO_SPACE_ID", "someone/space")
    monkeypatch.setenv("TRACKIO_SERVER_URL", "https://example.invalid")
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[trackio, tensorboard]")
    run_dir = tmp_path / "run"
    dirs = configure_logging(cfg, run_dir)
    assert dirs == {"trackio": str(run_dir / "trackio"), "tensorboard": str(run_dir / "tensorboard")}
    assert os.environ["TRACKIO_DIR"] == dirs["trackio"] and Path(dirs["trackio"]).is_dir()
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == dirs["tensorboard"]
    assert "TRACKIO_SPACE_ID" not in os.environ and "TRACKIO_SERVER_URL" not in os.environ

    cfg, _ = _cfg(tmp_path / "other", "run.logging=[]")
    assert configure_logging(cfg, tmp_path / "other") == {}


def test_trainer_kwargs_are_accepted_by_grpo_config(tmp_path, monkeypatch):
    from rl.config import to_grpo_config

    monkeypatch.setattr(rlrun, "_importable", lambda m: True)
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[tensorboard]")
    run_dir = tmp_path / "run"
    kw = trainer_kwargs(cfg, run_dir)
    assert kw["output_dir"] == str(run_dir) and kw["run_name"] == "run" and kw["report_to"] == ["tensorboard"]
    args = to_grpo_config(cfg, **kw)
    assert args.output_dir == str(run_dir) and args.report_to == ["tensorboard"] and args.disable_tqdm
    assert args.trackio_space_id is None and args.trackio_static_space_id is False
    cfg, _ = _cfg(tmp_path / "run", "run.logging=[]")
    assert trainer_kwargs(cfg, run_dir)["report_to"] == "none"


# ================================================================ callbacks
def _state(step: int, max_steps: int = 12, history: list | None = None):
    return SimpleNamespace(is_world_process_zero=True, global_step=step, max_steps=max_steps,
                           log_history=history or [])


def test_run_record_callback(tmp_path):
    cfg, overrides = _cfg(tmp_path / "run")
    run_dir = prepare_run_dir(cfg, config_path=None, overrides=overrides)
    cb = rlrun.RunRecordCallback(run_dir)
    from transformers import TrainerCallback

    assert isinstance(cb, TrainerCallback)
    history = _history(6)
    for entry in history:
        logs = {k: v for k, v in entry.items() if k != "step"}  # the trainer passes logs without "step"
        cb.on_log(None, _state(entry["step"]), None, logs=logs)
    assert read_metrics_jsonl(run_dir / "metrics.jsonl") == history
    cb.on_train_end(SimpleNamespace(run_name="tiny"), _state(6, history=history), None)
    assert (run_dir / "reward_curve.png").read_bytes()[:8] == PNG_MAGIC
    record = json.loads((run_dir / "run.json").read_text())
    assert record["final_step"] == 6 and record["end_time"] and record["status"] == "finished"


@pytest.mark.parametrize("terminal", [False, True])
def test_rich_progress_callback(terminal):
    from rich.console import Console

    buf = io.StringIO()
    cb = rlrun.RichProgressCallback(console=Console(file=buf, force_terminal=terminal, width=120))
    cb.on_train_begin(None, _state(0), None)
    for step in (1, 2):
        cb.on_step_begin(None, _state(step - 1), None)
        cb.on_step_end(None, _state(step), None)
        cb.on_log(None, _state(step), None, logs={"reward": 0.25 * step, "loss": 0.5, "step_time": 2.0})
    cb.on_log(None, _state(2), None, logs={"train_runtime": 3.0})  # nothing to show: ignored
    cb.on_train_end(None, _state(2), None)
    cb.close()  # twice is fine
    out = buf.getvalue()
    assert "reward 0.500" in out and "loss 0.5000" in out and "step 2.0s" in out
    if not terminal:
        assert out.splitlines() == ["step 1/12: reward 0.250, loss 0.5000, step 2.0s",
                                    "step 2/12: reward 0.500, loss 0.5000, step 2.0s"]
    else:
        assert "2/12" in out


def test_attach_callbacks_replaces_the_tqdm_bar(tmp_path):
    from transformers import PrinterCallback, ProgressCallback

    class FakeTrainer:  # test double: just the callback API of transformers.Trainer
        def __init__(self):
            self.args = SimpleNamespace(run_name="tiny")
            self.callbacks = [ProgressCallback()]

        def add_callback(self, cb):
            self.callbacks.append(cb)

        def remove_callback(self, cls):
            self.callbacks = [c for c in self.callbacks if not isinstance(c, cls)]

    trainer = FakeTrainer()
    added = rlrun.attach_callbacks(trainer, tmp_path)
    kinds = [type(c).__name__ for c in trainer.callbacks]
    assert kinds == ["RunRecordCallback", "RichProgressCallback"] and len(added) == 2
    assert not any(isinstance(c, (ProgressCallback, PrinterCallback)) for c in trainer.callbacks)
    assert type(added[0]).__module__ == "rl.run" and type(added[0]).__qualname__ == "RunRecordCallback"


def test_importing_rl_run_stays_light():
    code = ("import sys, rl.run; heavy = [m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules]; "
            "print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


_BACKENDS_SCRIPT = """
import json, sys, threading
from types import SimpleNamespace
from rl.config import load_config, to_grpo_config
from rl.run import configure_logging, prepare_run_dir, report_to, trainer_kwargs

overrides = [f"run.output_dir={sys.argv[1]}", "run.logging=[trackio, tensorboard]"]
cfg = load_config(sys.argv[2], overrides)
report_to(cfg)
run_dir = prepare_run_dir(cfg, config_path=None, overrides=overrides)
configure_logging(cfg, run_dir)                       # before trackio is first imported
args = to_grpo_config(cfg, **trainer_kwargs(cfg, run_dir))
from transformers.integrations import TensorBoardCallback, TrackioCallback

state = SimpleNamespace(is_world_process_zero=True, global_step=0, is_hyper_param_search=False, max_steps=2)
callbacks = [TrackioCallback(), TensorBoardCallback()]
for cb in callbacks:
    cb.on_train_begin(args, state, None, model=None)
for step in (1, 2):
    state.global_step = step
    for cb in callbacks:
        cb.on_log(args, state, None, logs={"reward": 0.1 * step, "loss": 0.5})
import psutil
listening = [c.laddr for c in psutil.Process().net_connections() if c.status == psutil.CONN_LISTEN]
for cb in callbacks:
    cb.on_train_end(args, state, None, model=None)
files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
print(json.dumps({"files": files, "listening": listening,
                  "threads": [t.name for t in threading.enumerate() if not t.daemon]}))
"""


def test_trackio_and_tensorboard_write_only_under_the_run_dir(tmp_path):
    """transformers' own Trackio / TensorBoard callbacks, set up as the trainer sets them up
    (configure_logging + trainer_kwargs): files under run_dir, no Space, no server."""
    import importlib.util

    missing = [m for m in ("trackio", "tensorboard", "psutil") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"not installed: {missing} (the track extra)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKIO_", "TENSORBOARD_"))}
    env["HF_HOME"] = str(tmp_path / "hf_home")  # anything written outside the run dir would land here
    run_dir = tmp_path / "run"
    r = subprocess.run([sys.executable, "-c", _BACKENDS_SCRIPT, str(run_dir), str(EXAMPLE)], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["listening"] == [] and out["threads"] == ["MainThread"]
    assert "trackio/tooldojo.db" in out["files"]
    assert any(f.startswith("tensorboard/events.out.tfevents.") for f in out["files"])
    assert not (tmp_path / "hf_home" / "trackio").exists()
