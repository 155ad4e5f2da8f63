# ruff: noqa: F811  (the fake_manual fixture is redefined as an argument)
"""Issue 32 #6: the measured launch on Kubernetes, 2 nodes x 2 GPUs (examples/k8s/train_fsdp2_job.yaml,
train_fsdp2_trainjob.yaml): the accelerate config that was measured (examples/accelerate/fsdp2.yaml, or
ddp.yaml) shaped to 2 machines and 4 processes, and `k8s.generation_memory_cap` rendered as the `dojo
train` override `rollout.generation_memory_cap=<x>`. Golden files and strict validation for both
examples are in test_render.py (test_golden, test_examples_validate_strictly)."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import pytest
import yaml

from k8s.config import SubmitConfigError, load_submit_config, parse_submit_config
from k8s.render import render
from k8s.validate import TRAINER_VERSIONS, validate_all

import k8s_fixtures  # noqa: F401,E402  (skips without the k8s extra)
from k8s_fixtures import fake_manual  # noqa: F401,E402  (fixture)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "k8s"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CAP = "rollout.generation_memory_cap"


def rendered(example: str, **kw):
    cfg, base = load_submit_config(EXAMPLES / example)
    return render(cfg, base_dir=base, git_commit=COMMIT, **kw)


def submit_dict(job: dict | None = None, **k8s) -> dict:
    return {"job": {"kind": "train", "name": "t", "config_file": str(ROOT / "examples/train_tiny.yaml"), **(job or {})},
            "k8s": {"image": "img:1", **k8s}}


def render_dict(data: dict, **kw):
    return render(parse_submit_config(data), base_dir=ROOT, git_commit=COMMIT, **kw)


def config_map(r) -> dict:
    return next(m for m in r.manifests if m["kind"] == "ConfigMap")["data"]


def container_command(r) -> list[str]:
    w = r.workload
    if w["kind"] == "TrainJob":
        return w["spec"]["trainer"]["command"]
    return w["spec"]["template"]["spec"]["containers"][0]["command"]


def measured(accelerate_file: str) -> dict:
    return yaml.safe_load((ROOT / "examples/accelerate" / accelerate_file).read_text())


@pytest.mark.parametrize("example,workload", [("train_fsdp2_job.yaml", "Job"),
                                              ("train_fsdp2_trainjob.yaml", "TrainJob")])
def test_the_2x2_fsdp2_examples_render_the_measured_launch_with_the_cap(example, workload):
    r = rendered(example)
    assert r.workload["kind"] == workload
    acc = yaml.safe_load(config_map(r)["accelerate.yaml"])
    assert acc["num_machines"] == 2 and acc["num_processes"] == 4
    assert acc["distributed_type"] == "FSDP" and acc["fsdp_config"]["fsdp_version"] == 2
    # everything else exactly as measured (bench/train_multi.py launches examples/accelerate/fsdp2.yaml)
    rest = {k: v for k, v in acc.items() if k not in ("num_machines", "num_processes")}
    assert rest == {k: v for k, v in measured("fsdp2.yaml").items() if k not in ("num_machines", "num_processes")}
    assert list(acc) == list(measured("fsdp2.yaml"))  # the file's order, for a reader of the ConfigMap
    # 2 nodes x 2 GPUs: the launch's flags say the same as the config
    cmd = container_command(r)
    assert cmd[:6] == ["accelerate", "launch", "--config_file", "/etc/tooldojo/accelerate.yaml", "--num_processes", "4"]
    assert cmd[cmd.index("--num_machines") + 1] == "2"
    # the cap: an override right after the config, before job.args
    assert cmd[cmd.index("train"):] == ["train", "/etc/tooldojo/config.yaml", f"{CAP}=0.2", "rollout.use_vllm=false"]
    assert r.command == cmd and config_map(r)["command"] == shlex.join(cmd)
    assert r.workload["metadata"]["annotations"]["tooldojo.dev/command"] == shlex.join(cmd)
    # the setting is in the record resubmit reads
    record = yaml.safe_load(config_map(r)["submit.yaml"])
    assert record["k8s"]["generation_memory_cap"] == 0.2 and record["k8s"]["accelerate_config"] == acc
    assert not [w for w in r.warnings if "generation_memory_cap" in w]
    if workload == "TrainJob":
        t = r.workload["spec"]["trainer"]
        assert t["numNodes"] == 2 and t["numProcPerNode"] == 2
        assert t["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "2"
    else:
        assert r.workload["spec"]["completions"] == r.workload["spec"]["parallelism"] == 2
        res = r.workload["spec"]["template"]["spec"]["containers"][0]["resources"]
        assert res["limits"]["nvidia.com/gpu"] == res["requests"]["nvidia.com/gpu"] == "2"


@pytest.mark.parametrize("release", TRAINER_VERSIONS)
def test_the_fsdp2_trainjob_validates_in_every_trainer_release(release):
    r = rendered("train_fsdp2_trainjob.yaml", trainer_version=release)
    for k8s_version in ("1.30", "1.37"):
        assert validate_all(r.manifests, k8s_version, trainer_version=release) == []
    assert f"{CAP}=0.2" in r.workload["spec"]["trainer"]["command"]


@pytest.mark.parametrize("kind", ["job", "trainjob"])
@pytest.mark.parametrize("accelerate_file,distributed_type", [("ddp.yaml", "MULTI_GPU"), ("fsdp2.yaml", "FSDP")])
def test_2x2_with_either_measured_config_and_the_cap(kind, accelerate_file, distributed_type):
    r = render_dict(submit_dict(kind=kind, nodes=2, gpus=2, generation_memory_cap=0.35,
                                accelerate_config_file=str(ROOT / "examples/accelerate" / accelerate_file)))
    assert validate_all(r.manifests, "1.33") == []
    acc = yaml.safe_load(config_map(r)["accelerate.yaml"])
    assert acc == {**measured(accelerate_file), "num_machines": 2, "num_processes": 4}
    assert acc["distributed_type"] == distributed_type
    assert container_command(r)[-2:] == ["/etc/tooldojo/config.yaml", f"{CAP}=0.35"]


def test_resubmit_renders_the_cap_again_without_the_files(tmp_path):
    r = rendered("train_fsdp2_trainjob.yaml")
    record = yaml.safe_load(config_map(r)["submit.yaml"])
    again = render(parse_submit_config(record), base_dir=tmp_path, git_commit=COMMIT)  # no file needed
    assert again.command == r.command and again.config_hash == r.config_hash
    assert config_map(again)["accelerate.yaml"] == config_map(r)["accelerate.yaml"]
    # a new shape on resubmit reshapes the inline accelerate config
    record["k8s"]["nodes"] = 4
    bigger = render(parse_submit_config(record), base_dir=tmp_path, git_commit=COMMIT)
    acc = yaml.safe_load(config_map(bigger)["accelerate.yaml"])
    assert acc["num_machines"] == 4 and acc["num_processes"] == 8


def test_the_cap_is_in_the_config_hash_and_unset_renders_no_override():
    plain = render_dict(submit_dict(gpus=2))
    assert not [a for a in plain.command if a.startswith(CAP)]
    assert "generation_memory_cap" not in yaml.safe_load(config_map(plain)["submit.yaml"])["k8s"]
    hashes = {render_dict(submit_dict(gpus=2, generation_memory_cap=c)).config_hash for c in (0.2, 0.3)}
    assert len(hashes | {plain.config_hash}) == 3
    one = render_dict(submit_dict(generation_memory_cap=1))  # one process: plain `dojo train`
    assert one.command == ["dojo", "train", "/etc/tooldojo/config.yaml", f"{CAP}=1.0"]


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, math.nan, math.inf, True, "lots", "0.3", [0.3]])
def test_a_bad_cap_is_one_line_naming_the_field(value):
    with pytest.raises(SubmitConfigError) as e:
        parse_submit_config(submit_dict(generation_memory_cap=value))
    msg = str(e.value)
    assert msg.startswith("k8s.generation_memory_cap: ") and "is not a share of free GPU memory in (0, 1]" in msg
    assert "\n" not in msg


def test_the_cap_is_a_train_jobs_setting_and_set_once():
    with pytest.raises(SubmitConfigError, match="k8s.generation_memory_cap is a train job's setting"):
        parse_submit_config({"job": {"kind": "synth", "args": ["tasks"]}, "k8s": {"image": "i",
                                                                                  "generation_memory_cap": 0.3}})
    with pytest.raises(SubmitConfigError, match="set the same thing; keep one"):
        parse_submit_config(submit_dict(job={"args": [f"{CAP}=0.4"]}, generation_memory_cap=0.3))
    # without the setting, job.args may still carry the override
    r = render_dict(submit_dict(job={"args": [f"{CAP}=0.4"]}))
    assert r.command[-1] == f"{CAP}=0.4"


def test_warnings_where_the_cap_does_not_size_the_cache():
    # examples/train_tiny.yaml generates with vLLM where the image has it: the cap is transformers'
    r = render_dict(submit_dict(gpus=2, generation_memory_cap=0.3))
    (w,) = [w for w in r.warnings if "generation_memory_cap" in w]
    assert "rollout.use_vllm true" in w and "rollout.vllm_gpu_memory_utilization (0.3)" in w
    # job.args' overrides count
    r = render_dict(submit_dict(job={"args": ["rollout.use_vllm=false"]}, gpus=2, generation_memory_cap=0.3))
    assert not [w for w in r.warnings if "generation_memory_cap" in w]
    r = render_dict(submit_dict(job={"args": ["rollout.use_vllm=false",
                                              "rollout.hf_continuous_batching={max_memory_percent: 0.6}"]},
                                gpus=2, generation_memory_cap=0.3))
    (w,) = [w for w in r.warnings if "generation_memory_cap" in w]
    assert "max_memory_percent, which wins over it" in w
    assert not [w for w in render_dict(submit_dict(gpus=2)).warnings if "generation_memory_cap" in w]


def test_the_rendered_override_loads_in_rl_config(tmp_path):
    """What the pod runs, `dojo train /etc/tooldojo/config.yaml rollout.generation_memory_cap=0.2 ...`,
    loaded by rl.config as `dojo train` loads it (needs item 1's field in rl.config)."""
    from rl.cli import split_config_arg
    from rl.config import RolloutConfig, load_config

    if "generation_memory_cap" not in RolloutConfig.model_fields:
        pytest.skip("rl.config has no rollout.generation_memory_cap yet (issue 32 item 1)")
    r = rendered("train_fsdp2_job.yaml")
    (tmp_path / "config.yaml").write_text(config_map(r)["config.yaml"])
    args = r.command[r.command.index("train") + 1:]
    path, overrides = split_config_arg(None, [str(tmp_path / "config.yaml") if a == "/etc/tooldojo/config.yaml" else a
                                              for a in args])
    cfg = load_config(path, overrides)
    assert cfg.rollout.generation_memory_cap == 0.2 and cfg.rollout.use_vllm is False


def test_submit_and_resubmit_on_the_fake_cluster_keep_the_cap(fake_manual, tmp_path):
    """`dojo submit` of the FSDP2 TrainJob to the fake API server, then `dojo jobs resubmit --dry-run`
    from the record it left: the same launch, cap included, without the example's files."""
    from typer.testing import CliRunner

    from tooldojo.cli import app

    def dojo(*args: str):
        return CliRunner().invoke(app, list(args), catch_exceptions=False)

    fake_manual.install_trainer()
    kc = ["--kubeconfig", str(fake_manual.write_kubeconfig(tmp_path / "kubeconfig", namespace="tooldojo"))]
    r = dojo("submit", str(EXAMPLES / "train_fsdp2_trainjob.yaml"), *kc)
    assert r.exit_code == 0, r.output
    assert "generation memory cap" in r.stdout and "0.2 of free GPU memory" in r.stdout
    cmd = fake_manual.get("TrainJob", "grpo-fsdp2-tj", "tooldojo")["spec"]["trainer"]["command"]
    assert f"{CAP}=0.2" in cmd and cmd[cmd.index("--num_processes") + 1] == "4"
    r = dojo("jobs", "resubmit", "grpo-fsdp2-tj", "--dry-run", *kc)
    assert r.exit_code == 0, r.output
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    (tj,) = [d for d in docs if d["kind"] == "TrainJob"]
    assert tj["spec"]["trainer"]["command"] == cmd
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    acc = yaml.safe_load(cm["data"]["accelerate.yaml"])
    assert acc["num_machines"] == 2 and acc["num_processes"] == 4 and acc["distributed_type"] == "FSDP"
