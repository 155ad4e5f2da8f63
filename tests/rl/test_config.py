"""The training config: Dr. GRPO defaults, YAML + dotted overrides, errors that name the field
(raised before anything touches a model), and the mapping onto trl.GRPOConfig."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from rl.config import ConfigError, GRPOSection, TrainConfig, load_config, to_grpo_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_tiny.yaml"
TINY = ["model.tiny=true"]


def test_defaults_are_dr_grpo():
    g = GRPOSection()
    assert (g.loss_type, g.scale_rewards, g.beta) == ("dr_grpo", "none", 0.0)
    cfg = load_config(None, TINY)
    assert cfg.is_dr_grpo and cfg.grpo == g
    assert cfg.rollout.use_vllm is True and cfg.rollout.vllm_mode == "colocate" and cfg.rollout.user == "scripted"
    assert [c.name for c in cfg.reward.components] == ["world_state", "communication", "tool_validity", "reverify"]


def test_max_completion_length_default_is_logged_loudly(caplog):
    with caplog.at_level(logging.INFO, logger="tooldojo.rl"):
        cfg = load_config(None, TINY)
    assert not cfg.max_completion_length_explicit
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "max_completion_length" in r.getMessage()]
    assert warned and "normaliser" in warned[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tooldojo.rl"):
        cfg = load_config(None, [*TINY, "grpo.max_completion_length=300"])
    assert cfg.max_completion_length_explicit and cfg.grpo.max_completion_length == 300
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("max_completion_length=300" in r.getMessage() for r in caplog.records)


def test_example_config_loads():
    cfg = load_config(EXAMPLE)
    assert cfg.model.tiny and cfg.is_dr_grpo and cfg.max_completion_length_explicit
    assert cfg.grpo.num_generations == 8 and cfg.grpo.max_completion_length == 128 and cfg.rollout.use_vllm
    # round trip through YAML
    assert TrainConfig.model_validate(__import__("yaml").safe_load(cfg.to_yaml())) == cfg


def test_overrides_nested_lists_numbers_bools(tmp_path):
    cfg = load_config(EXAMPLE, [
        "grpo.learning_rate=3e-6",          # YAML 1.1 float
        "grpo.num_generations=8",
        "grpo.epsilon_high=0.28",
        "grpo.max_completion_length=1024",
        "rollout.use_vllm=true",
        "rollout.user=llm",
        "rollout.user_model=m",
        "rollout.user_base_url=http://127.0.0.1:8000/v1",
        "data.domains=[retail, airline]",
        "data.max_tasks=null",
        "model.tiny_params.layers=1",
        "reward.components.0.weight=0.5",   # list index
        "reward.gate=[]",
        "run.logging=[tensorboard]",
        "run.resume=true",
        "run.output_dir=/tmp/x y",
    ])
    assert cfg.grpo.learning_rate == 3e-6 and isinstance(cfg.grpo.learning_rate, float)
    assert cfg.grpo.num_generations == 8 and cfg.grpo.epsilon_high == 0.28 and cfg.grpo.max_completion_length == 1024
    assert cfg.rollout.use_vllm is True and cfg.rollout.vllm_mode == "colocate" and cfg.rollout.user == "llm"
    assert cfg.data.domains == ["retail", "airline"] and cfg.data.max_tasks is None
    assert cfg.model.tiny_params.layers == 1
    assert cfg.reward.components[0].weight == 0.5 and cfg.reward.gate == []
    assert cfg.run.logging == ["tensorboard"] and cfg.run.resume is True and cfg.run.output_dir == "/tmp/x y"
    # a string resume is a checkpoint path; later overrides win; sections are created as needed
    cfg = load_config(None, ["model.name_or_path=Qwen/Qwen2.5-0.5B-Instruct", "run.resume=ckpt/checkpoint-5",
                             "grpo.max_steps=3", "grpo.max_steps=4"])
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and not cfg.model.tiny
    assert cfg.run.resume == "ckpt/checkpoint-5" and cfg.grpo.max_steps == 4


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"])
def test_other_loss_types_are_reachable(loss_type):
    cfg = load_config(EXAMPLE, [f"grpo.loss_type={loss_type}", "grpo.scale_rewards=group"])
    assert cfg.grpo.loss_type == loss_type and cfg.grpo.scale_rewards == "group" and not cfg.is_dr_grpo


@pytest.mark.parametrize("override, field, reason", [
    ("grpo.losstype=grpo", "grpo.losstype", "unknown key"),
    ("nonsense.x=1", "nonsense", "unknown key"),
    ("reward.components.0.wieght=1", "reward.components.0.wieght", "unknown key"),
    ("grpo.beta=lots", "grpo.beta", "valid number"),
    ("grpo.num_generations=[4]", "grpo.num_generations", "valid integer"),
    ("rollout.use_vllm=maybe", "rollout.use_vllm", "valid boolean"),
    ("grpo.loss_type=ppo", "grpo.loss_type", "'dr_grpo'"),
    ("grpo.scale_rewards=std", "grpo.scale_rewards", "'none'"),
    ("grpo.num_generations=1", "grpo.num_generations", "greater than or equal to 2"),
    ("grpo.max_completion_length=0", "grpo.max_completion_length", "greater than 0"),
    ("grpo.beta=-0.1", "grpo.beta", "greater than or equal to 0"),
    ("rollout.vllm_mode=remote", "rollout.vllm_mode", "'colocate'"),
    ("rollout.user=llm", "rollout", "needs user_model and user_base_url"),
    ("rollout.user=human", "rollout.user", "'scripted'"),
    ("run.logging=[wandb]", "run.logging.0", "'trackio'"),
    ("model.tiny_params.hidden=100", "model.tiny_params", "head size"),
    ("reward.gate=[nope]", "reward", "gate names"),
    ("data.domains=[]", "data.domains", "empty domain list"),
    ("grpo.beta.x=1", "grpo.beta", "not a section"),
    ("reward.components.7.weight=1", "reward.components.7", "out of range"),
    ("grpo.beta", "grpo.beta", "key=value"),
    ("grpo.beta=[1,", "grpo.beta", "not valid YAML"),
])
def test_bad_overrides_name_the_field(override, field, reason):
    with pytest.raises(ConfigError) as ei:
        load_config(EXAMPLE, [override])
    e = ei.value
    assert any(f == field and reason in r for f, r in e.problems), e.problems
    assert f"{field}: " in str(e) and reason in str(e)


def test_unknown_key_lists_the_known_ones():
    with pytest.raises(ConfigError) as ei:
        load_config(EXAMPLE, ["grpo.kl_coef=0.1"])
    assert str(ei.value).startswith("grpo.kl_coef: unknown key")
    assert "beta" in str(ei.value) and "max_completion_length" in str(ei.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as ei:
        load_config(EXAMPLE, ["grpo.beta=x", "rollout.user=human", "run.bogus=1"])
    assert {f for f, _ in ei.value.problems} == {"grpo.beta", "rollout.user", "run.bogus"}


def test_model_source_must_be_exactly_one():
    with pytest.raises(ConfigError, match=r"^model: required"):
        load_config(None, [])
    with pytest.raises(ConfigError, match=r"^model: set name_or_path"):
        load_config(None, ["model.tiny=false"])
    with pytest.raises(ConfigError, match=r"^model: set either"):
        load_config(None, ["model.tiny=true", "model.name_or_path=x"])


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(tmp_path / "list.yaml")
    (tmp_path / "bad.yaml").write_text("grpo: {beta: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "typo.yaml").write_text("model: {tiny: true}\ngrpo:\n  los_type: grpo\n")
    with pytest.raises(ConfigError, match=r"^grpo.los_type: unknown key"):
        load_config(tmp_path / "typo.yaml")


def test_errors_come_before_any_model_is_touched(tmp_path):
    """load_config never imports torch/transformers/trl and never reads the model path; a bad key
    in a config whose model does not exist is reported as the bad key."""
    code = f"""
import json, sys
from rl.config import ConfigError, load_config
out = {{}}
try:
    load_config({str(EXAMPLE)!r}, ["model.tiny=false", "model.name_or_path={tmp_path}/no-such-model",
                                  "grpo.loss_type=ppo"])
except ConfigError as e:
    out["error"] = str(e)
cfg = load_config({str(EXAMPLE)!r}, ["model.tiny=false", "model.name_or_path={tmp_path}/no-such-model"])
out["path"] = cfg.model.name_or_path
out["heavy"] = sorted(m for m in ("torch", "transformers", "trl", "vllm") if m in sys.modules)
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["error"].startswith("grpo.loss_type: ")
    assert out["path"].endswith("no-such-model")
    assert out["heavy"] == []
    assert not (tmp_path / "no-such-model").exists()


# ---------------------------------------------------------------- to_grpo_config
trl = pytest.importorskip("trl")


def test_to_grpo_config_defaults_are_dr_grpo(tmp_path):
    import torch

    cfg = load_config(None, [*TINY, f"run.output_dir={tmp_path}"])
    args = to_grpo_config(cfg)
    assert isinstance(args, trl.GRPOConfig)
    assert (args.loss_type, args.scale_rewards, args.beta) == ("dr_grpo", "none", 0.0)
    assert args.max_completion_length == cfg.grpo.max_completion_length
    assert args.num_generations == 8 and args.learning_rate == 1e-6 and args.epsilon == 0.2
    assert args.output_dir == str(tmp_path) and args.seed == 0 and args.report_to == []
    # vLLM where it is installed; transformers generation (with a warning) where it is not
    from rl.config import vllm_available

    assert args.use_vllm is vllm_available() and args.vllm_mode == "colocate"
    if torch.cuda.is_available():
        assert not args.use_cpu
    else:
        assert args.use_cpu and not args.bf16 and not args.fp16


def test_without_vllm_generation_falls_back_with_a_warning(tmp_path, monkeypatch, caplog):
    import rl.config as rc

    monkeypatch.setattr(rc, "vllm_available", lambda: False)
    cfg = load_config(None, [*TINY, f"run.output_dir={tmp_path}"])
    with caplog.at_level(logging.WARNING, logger="tooldojo.rl"):
        args = to_grpo_config(cfg)
    assert args.use_vllm is False
    assert any("vLLM is not installed" in r.getMessage() for r in caplog.records)
    cfg = load_config(None, [*TINY, f"run.output_dir={tmp_path}", "rollout.use_vllm=false"])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tooldojo.rl"):
        assert to_grpo_config(cfg).use_vllm is False
    assert not any("vLLM is not installed" in r.getMessage() for r in caplog.records)


def test_to_grpo_config_maps_fields(tmp_path):
    cfg = load_config(EXAMPLE, [
        f"run.output_dir={tmp_path}", "grpo.loss_type=grpo", "grpo.scale_rewards=group", "grpo.beta=0.04",
        "grpo.learning_rate=2e-6", "grpo.max_steps=7", "grpo.temperature=0.7", "grpo.epsilon_high=0.28",
        "grpo.gradient_accumulation_steps=2", "run.seed=3", "run.save_steps=5", "run.logging=[tensorboard]",
    ])
    args = to_grpo_config(cfg, logging_steps=2)
    assert (args.loss_type, args.scale_rewards, args.beta) == ("grpo", "group", 0.04)
    assert args.learning_rate == 2e-6 and args.max_steps == 7 and args.temperature == 0.7
    assert args.epsilon_high == 0.28 and args.gradient_accumulation_steps == 2 and args.steps_per_generation == 2
    assert args.seed == 3 and args.save_steps == 5 and args.report_to == ["tensorboard"] and args.logging_steps == 2
    assert args.max_completion_length == 128 and args.num_generations == 8 and args.gradient_checkpointing is False


def test_to_grpo_config_turns_trl_rejections_into_config_errors(tmp_path):
    cfg = load_config(EXAMPLE, [f"run.output_dir={tmp_path}"])
    bad = cfg.model_copy(update={"grpo": cfg.grpo.model_copy(update={"num_generations": 3})})
    with pytest.raises(ConfigError, match="divisible by num_generations"):
        to_grpo_config(bad)


def test_load_config_checks_whole_groups_before_trl(tmp_path):
    """Issue 22: TRL's whole-group rule fails in load_config, before a run dir or a task exists."""
    with pytest.raises(ConfigError, match="must hold whole groups of num_generations") as e:
        load_config(EXAMPLE, [f"run.output_dir={tmp_path}", "grpo.num_generations=3"])
    assert e.value.field == "grpo.num_generations"


def test_tiny_head_sizes_match_rl_tiny():
    from rl import config, tiny

    assert config._VLLM_CPU_HEAD_SIZES == tiny._VLLM_CPU_HEAD_SIZES


def test_data_families_trains_on_those_families_only(tmp_path: Path) -> None:
    """Issue 28: `data.families` keeps the training tasks of the named families (synth.task_families.family_of),
    so Dr. GRPO's groups go to the families that still fail; none left or an empty list is a clear error."""
    from synth.task_families import family_of, synthesize_family_tasks
    from synth.tasks import TaskSynthesis, export_tasks, synthesize_tasks
    from rl.trainer import load_train_tasks
    from tests.conftest import backend_status

    ok, why = backend_status("local")
    if not ok:
        pytest.skip(f"local backend unavailable: {why}")
    kw = dict(seed=2, domains=["home_devices"], backend="local", sandboxes=2)
    made = synthesize_family_tasks({"read_report": 3, "ask_user": 2}, **kw)
    singles = synthesize_tasks(4, lengths={1: 1.0}, user_info_rate=0.0, **kw).tasks
    tasks = [*made["read_report"], *made["ask_user"], *singles]
    export_tasks(TaskSynthesis(tasks=tasks), tmp_path / "tasks")
    base = [f"data.tasks={tmp_path / 'tasks'}", "model.name_or_path=tiny"]
    assert len(load_train_tasks(load_config(None, base), tmp_path)) == len(tasks)
    kept = load_train_tasks(load_config(None, [*base, "data.families=[read_report, ask_user]"]), tmp_path)
    assert sorted(t.id for t in kept) == sorted(t.id for t in [*made["read_report"], *made["ask_user"]])
    assert {family_of(t) for t in kept} == {"read_report", "ask_user"}
    with pytest.raises(ConfigError, match="no training task is of the families"):
        load_train_tasks(load_config(None, [*base, "data.families=[lookup_act]"]), tmp_path)
    with pytest.raises(ConfigError, match="empty family list"):
        load_config(None, [*base, "data.families=[]"])
