"""`dojo train`: bad configs fail with one `error: field: reason` line, exit code 2 and no traceback,
before torch or transformers is imported; the happy path up to (and after) `rl.trainer.train`, with a
test double standing in for the trainer (the real end-to-end run has its own test)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import rl
from rl.cli import split_config_arg
from rl.config import ConfigError
from rl.run import write_metrics_jsonl
from tooldojo.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_tiny.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ================================================================ bad configs, in a fresh interpreter
_BAD_CASES_SCRIPT = textwrap.dedent("""
    import json, sys
    from typer.testing import CliRunner
    from tooldojo.cli import app

    cases = json.loads(sys.argv[1])
    out = {}
    for name, args in cases.items():
        r = CliRunner().invoke(app, ["train", *args])
        out[name] = {"code": r.exit_code, "stderr": r.stderr, "stdout": r.stdout,
                     "exception": repr(r.exception) if r.exception and not isinstance(r.exception, SystemExit) else None,
                     "heavy": [m for m in ("torch", "transformers", "trl", "vllm") if m in sys.modules]}
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "broken.yaml").write_text("model: [tiny\n")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    clobber = tmp / "clobber"
    (clobber / "checkpoint-1").mkdir(parents=True)
    ex = str(EXAMPLE)
    cases = {
        "unknown_key": ["--config", ex, "grpo.lr=1e-5"],
        "bad_type": [ex, "grpo.max_steps=abc"],
        "bad_override": [ex, "grpo.max_steps"],
        "missing_file": ["--config", str(tmp / "missing.yaml")],
        "broken_yaml": ["--config", str(tmp / "broken.yaml")],
        "not_a_mapping": [str(tmp / "list.yaml")],
        "two_configs": [ex, "--config", ex],
        "resume_nothing": [ex, f"run.output_dir={tmp / 'fresh'}", "run.resume=true"],
        "clobber": [ex, f"run.output_dir={clobber}"],
    }
    r = subprocess.run([sys.executable, "-c", _BAD_CASES_SCRIPT, json.dumps(cases)], cwd=tmp, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), tmp


EXPECTED = {
    # case: (field named in the one error line, a phrase of the reason)
    "unknown_key": ("grpo.lr", "unknown key"),
    "bad_type": ("grpo.max_steps", "valid integer"),
    "bad_override": ("grpo.max_steps", "dotted.key=value"),
    "missing_file": ("config", "missing.yaml"),
    "broken_yaml": ("config", "not valid YAML"),
    "not_a_mapping": ("config", "mapping"),
    "two_configs": ("--config", "two configs"),
    "resume_nothing": ("run.resume", "no checkpoint"),
    "clobber": ("run.resume", "already holds checkpoints"),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_bad_config_is_one_line_exit_2_no_traceback_no_torch(bad_runs, case):
    runs, _ = bad_runs
    r = runs[case]
    field, phrase = EXPECTED[case]
    assert r["code"] == 2, r
    assert r["exception"] is None
    assert "Traceback" not in r["stderr"] + r["stdout"]
    errors = [line for line in r["stderr"].splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r["stderr"]
    assert errors[0].startswith(f"error: {field}: ") and phrase in errors[0], errors[0]
    assert r["heavy"] == [], f"imported before the config was checked: {r['heavy']}"
    assert r["stdout"] == ""


def test_refused_runs_write_nothing(bad_runs):
    _, tmp = bad_runs
    assert not (tmp / "fresh").exists()
    assert sorted(p.name for p in (tmp / "clobber").iterdir()) == ["checkpoint-1"]


def test_bad_config_through_the_real_entry_point(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from tooldojo.cli import main; main()", "train", "--config",
                        str(EXAMPLE), "grpo.lr=1e-5", "rollout.bogus=1"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert [e.split(":")[1].strip() for e in errors] == ["grpo.lr", "rollout.bogus"]  # one line per problem


def test_split_config_arg():
    assert split_config_arg(None, ["a.yaml", "x=1"]) == ("a.yaml", ["x=1"])
    assert split_config_arg(None, ["A.YML"]) == ("A.YML", [])
    assert split_config_arg("c.yaml", ["x=1"]) == ("c.yaml", ["x=1"])
    assert split_config_arg(None, ["run.output_dir=x.yaml"]) == (None, ["run.output_dir=x.yaml"])
    assert split_config_arg(None, []) == (None, [])
    with pytest.raises(ConfigError) as e:
        split_config_arg("c.yaml", ["a.yaml"])
    assert e.value.field == "--config"


# ================================================================ happy path with a trainer test double
class FakeTrainerModule(types.ModuleType):
    """TEST DOUBLE for rl.trainer: records the call, logs a few reward entries to metrics.jsonl
    (as rl.run.RunRecordCallback would), optionally leaves a checkpoint, returns a result."""

    def __init__(self, *, fail: BaseException | None = None, checkpoint_at: int | None = None,
                 write_metrics: bool = True):
        super().__init__("rl.trainer")
        self.calls: list[dict] = []
        self.fail = fail
        self.checkpoint_at = checkpoint_at
        self.write_metrics = write_metrics

    def train(self, cfg, *, run_dir, resume_from=None):
        self.calls.append({"cfg": cfg, "run_dir": run_dir, "resume_from": resume_from})
        if self.fail is not None:
            raise self.fail
        steps = cfg.grpo.max_steps
        history = [{"loss": 0.1, "reward": 0.1 * s, "reward_std": 0.05, "step": s} for s in range(1, steps + 1)]
        if self.write_metrics:
            write_metrics_jsonl(history, Path(run_dir) / "metrics.jsonl")
        if self.checkpoint_at:
            ck = Path(run_dir) / f"checkpoint-{self.checkpoint_at}"
            ck.mkdir()
            (ck / "trainer_state.json").write_text(json.dumps({"global_step": self.checkpoint_at}))
        return SimpleNamespace(final_reward_mean=0.1 * steps, steps=steps, run_dir=Path(run_dir),
                               metrics={"train_runtime": 1.5}, log_history=history)


@pytest.fixture
def fake_trainer(monkeypatch):
    def install(**kw) -> FakeTrainerModule:
        fake = FakeTrainerModule(**kw)
        monkeypatch.setitem(sys.modules, "rl.trainer", fake)
        monkeypatch.setattr(rl, "trainer", fake, raising=False)
        return fake

    return install


def _invoke(*args: str):
    return CliRunner().invoke(app, ["train", *args])


def test_train_happy_path(tmp_path, fake_trainer):
    fake = fake_trainer()
    run_dir = tmp_path / "run"
    r = _invoke(str(EXAMPLE), f"run.output_dir={run_dir}", "grpo.max_steps=4")
    assert r.exit_code == 0, r.stderr + r.stdout
    (call,) = fake.calls
    assert call["run_dir"] == run_dir.resolve() and call["resume_from"] is None
    assert call["cfg"].grpo.max_steps == 4

    summary = json.loads(r.stdout.strip().splitlines()[-1])  # the last stdout line is the JSON summary
    assert summary["steps"] == 4 and summary["run_dir"] == str(run_dir.resolve())
    assert summary["first_reward_mean"] == pytest.approx(0.1)
    assert summary["final_reward_mean"] == pytest.approx(0.4)
    assert summary["metrics"] == {"train_runtime": 1.5} and summary["resumed_from"] is None
    curve = Path(summary["reward_curve"])
    assert curve == run_dir.resolve() / "reward_curve.png" and curve.read_bytes()[:8] == PNG_MAGIC
    assert "first reward mean" in r.stdout and "reward curve" in r.stdout  # the table

    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "finished" and record["final_step"] == 4 and record["end_time"]
    assert record["final_reward_mean"] == pytest.approx(0.4) and record["reward_curve"] == "reward_curve.png"
    assert (run_dir / "config.yaml").is_file()


def test_summary_from_the_result_alone(tmp_path, fake_trainer):
    fake_trainer(write_metrics=False)  # no metrics.jsonl: first reward and the curve come from result.log_history
    r = _invoke(str(EXAMPLE), f"run.output_dir={tmp_path / 'run'}", "grpo.max_steps=3")
    assert r.exit_code == 0, r.stderr + r.stdout
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["first_reward_mean"] == pytest.approx(0.1) and summary["final_reward_mean"] == pytest.approx(0.3)
    assert Path(summary["reward_curve"]).read_bytes()[:8] == PNG_MAGIC


def test_train_refuses_then_resumes(tmp_path, fake_trainer):
    fake_trainer(checkpoint_at=2)
    run_dir = tmp_path / "run"
    base = ["--config", str(EXAMPLE), f"run.output_dir={run_dir}", "grpo.max_steps=2"]
    assert _invoke(*base).exit_code == 0

    r = _invoke(*base)
    assert r.exit_code == 2 and "error: run.resume: " in r.stderr and "Traceback" not in r.stderr

    fake = fake_trainer()
    r = _invoke(*base, "run.resume=true", "grpo.max_steps=3")
    assert r.exit_code == 0, r.stderr + r.stdout
    ck = str((run_dir / "checkpoint-2").resolve())
    assert fake.calls[0]["resume_from"] == ck
    assert json.loads(r.stdout.strip().splitlines()[-1])["resumed_from"] == ck
    record = json.loads((run_dir / "run.json").read_text())
    assert [x["checkpoint"] for x in record["resumes"]] == [ck]
    assert record["status"] == "finished" and record["final_step"] == 3


def test_a_failing_trainer_is_one_line_and_recorded(tmp_path, fake_trainer):
    fake_trainer(fail=ValueError("the tasks folder runs/tasks holds no tasks"))
    run_dir = tmp_path / "run"
    r = _invoke(str(EXAMPLE), f"run.output_dir={run_dir}")
    assert r.exit_code == 1
    assert "error: the tasks folder runs/tasks holds no tasks" in r.stderr and "Traceback" not in r.stderr
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and "holds no tasks" in record["error"] and record["end_time"]


def test_a_config_error_from_the_trainer_exits_2(tmp_path, fake_trainer):
    fake_trainer(fail=ConfigError("TRL rejected the config: nope", field="grpo.num_generations"))
    r = _invoke(str(EXAMPLE), f"run.output_dir={tmp_path / 'run'}")
    assert r.exit_code == 2 and "error: grpo.num_generations: TRL rejected the config: nope" in r.stderr


def test_missing_logging_backend_fails_before_the_run_dir(tmp_path, fake_trainer, monkeypatch):
    import rl.run

    fake = fake_trainer()
    monkeypatch.setattr(rl.run, "_importable", lambda m: False)
    r = _invoke(str(EXAMPLE), f"run.output_dir={tmp_path / 'run'}", "run.logging=[tensorboard]")
    assert r.exit_code == 2
    assert "error: run.logging: tensorboard is not installed: pip install tensorboard" in r.stderr
    assert not (tmp_path / "run").exists() and fake.calls == []
