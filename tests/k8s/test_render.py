"""Rendering and strict validation of job manifests: golden files, the official schemas, the lint, bad configs."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from k8s.config import SubmitConfigError, load_submit_config, parse_submit_config
from k8s.render import render
from k8s.validate import trainjob_schema_from_models, trainjob_schema_path, validate, validate_all

import k8s_fixtures  # noqa: F401,E402  (skips without the k8s extra)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "k8s"
GOLDEN = Path(__file__).resolve().parent / "golden"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def rendered(example: str, **kw):
    cfg, base = load_submit_config(EXAMPLES / example)
    return render(cfg, base_dir=base, git_commit=COMMIT, **kw)


def submit_dict(**k8s) -> dict:
    return {"job": {"kind": "train", "name": "t", "config_file": str(ROOT / "examples/train_tiny.yaml")},
            "k8s": {"image": "img:1", **k8s}}


def render_dict(data: dict):
    return render(parse_submit_config(data), base_dir=ROOT, git_commit=COMMIT)


def normalised_yaml(r) -> str:
    """The manifests with the resolved job config (which follows rl.config's defaults and
    examples/train_tiny.yaml, both owned elsewhere) and its hash replaced by placeholders."""
    ms = copy.deepcopy(r.manifests)
    for m in ms:
        if m["kind"] == "ConfigMap":
            for key in ("config.yaml", "submit.yaml"):
                if key in m["data"]:
                    m["data"][key] = f"<{key}: checked in test_job_shape_multi_node and the CLI tests>"
    return yaml.safe_dump_all(ms, sort_keys=False, width=120).replace(r.config_hash, "<config-hash>").replace(
        r.config_hash[:12], "<config-hash-12>")


EXAMPLE_FILES = ["train_job.yaml", "train_trainjob.yaml", "synth_tasks.yaml", "train_fsdp2_job.yaml",
                 "train_fsdp2_trainjob.yaml"]


def shaped(accelerate_file: str, nodes: int, processes: int) -> dict:
    """An examples/accelerate/ file as a job renders it: num_machines and num_processes set to the job's shape."""
    return {**yaml.safe_load((ROOT / "examples/accelerate" / accelerate_file).read_text()), "num_machines": nodes,
            "num_processes": processes}


@pytest.mark.parametrize("example", EXAMPLE_FILES)
def test_golden(example):
    """The exact manifests for each example (TOOLDOJO_UPDATE_GOLDEN=1 rewrites them after a deliberate change)."""
    got = normalised_yaml(rendered(example))
    path = GOLDEN / example
    if os.environ.get("TOOLDOJO_UPDATE_GOLDEN") == "1":
        path.write_text(got)
    assert path.exists(), f"no golden file {path}; create it with TOOLDOJO_UPDATE_GOLDEN=1"
    assert got == path.read_text(), f"{example} renders differently; review and set TOOLDOJO_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("example", EXAMPLE_FILES)
@pytest.mark.parametrize("k8s_version", ["1.30", "1.37"])
def test_examples_validate_strictly(example, k8s_version):
    assert validate_all(rendered(example).manifests, k8s_version) == []


def test_job_shape_multi_node():
    r = rendered("train_job.yaml")
    kinds = [m["kind"] for m in r.manifests]
    assert kinds == ["PersistentVolumeClaim", "ConfigMap", "Service", "Job"]
    job = r.workload
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == c["resources"]["requests"]["nvidia.com/gpu"] == "8"
    # the launch tests/rl/test_distributed.py runs, across 2 nodes x 8 GPUs
    assert c["command"] == ["accelerate", "launch", "--config_file", "/etc/tooldojo/accelerate.yaml",
                            "--num_processes", "16", "--num_machines", "2", "--machine_rank", "$(NODE_RANK)",
                            "--main_process_ip", "$(MASTER_ADDR)", "--main_process_port", "$(MASTER_PORT)",
                            "-m", "tooldojo", "train", "/etc/tooldojo/config.yaml"]
    # the same accelerate config file as the local launch, next to the job's config, shaped as the launch's flags
    assert yaml.safe_load(r.manifests[1]["data"]["accelerate.yaml"]) == shaped("ddp.yaml", 2, 16)
    assert {"name": "tooldojo-config", "mountPath": "/etc/tooldojo", "readOnly": True} in c["volumeMounts"]
    env = {e["name"]: e for e in c["env"]}
    assert env["MASTER_ADDR"]["value"] == "grpo-tiny-0.grpo-tiny"
    assert "job-completion-index" in env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}
    assert pod["subdomain"] == "grpo-tiny" and r.manifests[2]["spec"]["clusterIP"] == "None"
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in pod["volumes"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for m in r.manifests[1:]:
        assert m["metadata"]["labels"]["tooldojo.dev/config-hash"] == r.config_hash[:12]
        assert m["metadata"]["annotations"]["tooldojo.dev/git-commit"] == COMMIT
    config = yaml.safe_load(r.manifests[1]["data"]["config.yaml"])
    assert config["run"]["output_dir"] == "/checkpoints/grpo-tiny/runs/train-tiny"  # moved onto the PVC
    assert config["grpo"]["loss_type"] == "dr_grpo"  # the resolved config, defaults filled in


def test_command_per_shape():
    one = render_dict(submit_dict())
    assert one.command == ["dojo", "train", "/etc/tooldojo/config.yaml"]
    four = render_dict(submit_dict(gpus=4))
    assert four.command == ["accelerate", "launch", "--config_file", "/etc/tooldojo/accelerate.yaml",
                            "--num_processes", "4", "--main_process_port", "29500", "-m", "tooldojo", "train",
                            "/etc/tooldojo/config.yaml"]
    assert not [m for m in four.manifests if m["kind"] == "Service"]
    # no accelerate config named: DDP, examples/accelerate/ddp.yaml (1 machine, 4 processes)
    cm = next(m for m in four.manifests if m["kind"] == "ConfigMap")
    assert yaml.safe_load(cm["data"]["accelerate.yaml"]) == shaped("ddp.yaml", 1, 4)
    assert "accelerate.yaml" not in next(m for m in one.manifests if m["kind"] == "ConfigMap")["data"]
    ev = render_dict({"job": {"kind": "eval", "name": "e", "config": {"cases": []}, "args": ["--model", "m@http://x"]},
                      "k8s": {"image": "i"}})
    assert ev.command == ["dojo", "eval", "run", "/etc/tooldojo/config.yaml", "--model", "m@http://x"]


def test_trainjob_launch_is_wired_to_the_runtime():
    r = rendered("train_trainjob.yaml")
    trainer = r.workload["spec"]["trainer"]
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 8
    assert trainer["command"] == ["accelerate", "launch", "--config_file", "/etc/tooldojo/accelerate.yaml",
                                  "--num_processes", "16", "--num_machines", "2", "--machine_rank", "$(PET_NODE_RANK)",
                                  "--main_process_ip", "$(PET_MASTER_ADDR)", "--main_process_port",
                                  "$(PET_MASTER_PORT)", "-m", "tooldojo", "train", "/etc/tooldojo/config.yaml"]


def test_fsdp2_accelerate_config_travels_inline_for_resubmit(tmp_path):
    data = submit_dict(gpus=2, accelerate_config_file=str(ROOT / "examples/accelerate/fsdp2.yaml"))
    r = render_dict(data)
    cm = next(m for m in r.manifests if m["kind"] == "ConfigMap")
    acc = yaml.safe_load(cm["data"]["accelerate.yaml"])
    assert acc["distributed_type"] == "FSDP" and acc["fsdp_config"]["fsdp_version"] == 2
    record = yaml.safe_load(cm["data"]["submit.yaml"])
    assert record["k8s"]["accelerate_config"] == acc and "accelerate_config_file" not in record["k8s"]
    again = render(parse_submit_config(record), base_dir=tmp_path, git_commit=COMMIT)  # no file needed
    assert again.command == r.command and again.config_hash == r.config_hash


@pytest.mark.parametrize("k8s, message", [
    ({"gpus": 2, "accelerate_config_file": "missing.yaml"}, "k8s.accelerate_config_file: cannot read"),
    ({"gpus": 2, "accelerate_config": {"num_processes": 2}}, "distributed_type"),
    ({"gpus": 2, "accelerate_config": {"distributed_type": "MULTI_GPU", "mixed_precision": "no"},
      "accelerate_config_file": "x.yaml"}, "not both"),
])
def test_bad_accelerate_configs(k8s, message):
    with pytest.raises(SubmitConfigError, match=message):
        render_dict(submit_dict(**k8s))


def test_secrets_from_env_never_rendered():
    data = submit_dict(secrets_from_env=["WANDB_API_KEY"])
    r = render(parse_submit_config(data), base_dir=ROOT, git_commit=COMMIT, environ={"WANDB_API_KEY": "s3cr3t"})
    assert "s3cr3t" not in r.yaml() and r.secret_values == {"WANDB_API_KEY": "s3cr3t"}
    with pytest.raises(SubmitConfigError, match="WANDB_API_KEY is not set"):
        render(parse_submit_config(data), base_dir=ROOT, git_commit=COMMIT, environ={})


def test_config_hash_is_the_configs_not_the_names():
    a = render_dict(submit_dict())
    b = render(parse_submit_config(submit_dict()), base_dir=ROOT, git_commit=COMMIT, name="other")
    assert a.config_hash == b.config_hash
    data = submit_dict()
    data["job"] = {"kind": "train", "name": "t", "config": {**yaml.safe_load((ROOT / "examples/train_tiny.yaml").read_text())}}
    data["job"]["config"]["grpo"] = {**data["job"]["config"]["grpo"], "learning_rate": 0.5}
    assert render_dict(data).config_hash != a.config_hash


@pytest.mark.parametrize("data,message", [
    (submit_dict(gpu=8), "k8s.gpu: unknown key"),
    (submit_dict(memory="lots"), "k8s.memory: 'lots' is not a Kubernetes quantity"),
    (submit_dict(nodes=0), "k8s.nodes"),
    ({"job": {"kind": "synth", "args": ["tasks"]}, "k8s": {"image": "i", "nodes": 2}}, "runs on one node"),
    ({"job": {"kind": "synth", "args": ["tasks"]}, "k8s": {"image": "i", "kind": "trainjob"}}, "train jobs only"),
    ({"job": {"kind": "train"}, "k8s": {"image": "i"}}, "needs its config"),
    ({"job": {"kind": "train", "name": "Bad_Name", "config": {}}, "k8s": {"image": "i"}}, "DNS-1035"),
    (submit_dict(pvc={"name": "c", "create": True}), "needs a size"),
    ({"job": {"kind": "train", "config": {}}}, "k8s: required"),
])
def test_bad_submit_configs_name_the_field(data, message):
    with pytest.raises(SubmitConfigError, match=message):
        render_dict(data)


def test_bad_train_config_fails_before_rendering():
    data = {"job": {"kind": "train", "name": "t", "config": {"model": {"tiny": True}, "grpo": {"loss_type": "bogus"}}},
            "k8s": {"image": "i"}}
    with pytest.raises(SubmitConfigError, match="job.config.grpo.loss_type"):
        render_dict(data)


# ------------------------------------------------------------------ negatives
def _job() -> dict:
    return copy.deepcopy(rendered("train_job.yaml").workload)


def test_typo_is_rejected_by_the_official_schema():
    job = _job()
    job["spec"]["completionsMode"] = job["spec"].pop("completionMode")
    problems = validate(job)
    assert any("completionsMode" in p and "was unexpected" in p for p in problems)
    job = _job()
    job["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    assert any("volumeMount" in p for p in validate(job))
    job = _job()
    job["spec"]["parallelism"] = "two"
    assert any("spec.parallelism" in p for p in validate(job))


def test_gpu_requests_must_equal_limits():
    job = _job()
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
    svc = rendered("train_job.yaml").manifests[2]
    problems = validate_all([svc, job])
    assert any("request 4 != limit 8" in p for p in problems)


def test_gpu_pod_without_shm_is_rejected():
    job = _job()
    pod = job["spec"]["template"]["spec"]
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "dshm"]
    pod["containers"][0]["volumeMounts"] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] != "dshm"]
    problems = validate_all([rendered("train_job.yaml").manifests[2], job])
    assert any("/dev/shm" in p for p in problems)


def test_multi_node_job_needs_its_headless_service():
    problems = validate_all([_job()])
    assert any("headless Service" in p for p in problems)


def test_trainjob_unknown_field_and_missing_shm():
    tj = copy.deepcopy(rendered("train_trainjob.yaml").workload)
    tj["spec"]["trainr"] = tj["spec"].pop("trainer")  # the typed models would silently drop this; the schema does not
    assert any("trainr" in p for p in validate(tj))
    tj = copy.deepcopy(rendered("train_trainjob.yaml").workload)
    tj["spec"]["trainer"]["numNodes"] = "two"
    assert any("numNodes" in p for p in validate(tj))
    tj = copy.deepcopy(rendered("train_trainjob.yaml").workload)
    patch = tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    patch["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = []
    assert any("/dev/shm" in p for p in validate_all([tj]))


def test_sandbox_crd_typos_are_rejected():
    from sandboxes import kubernetes_backend as kb
    from sandboxes.models import KubernetesOptions, SandboxConfig

    opts = KubernetesOptions()
    claim = kb.sandbox_claim(opts, "c", "pool")
    claim["spec"]["warmpoolRef"] = claim["spec"].pop("warmPoolRef")
    assert any("warmPoolRef" in p and "required" in p for p in validate(claim))
    tmpl = kb.sandbox_template(SandboxConfig(), opts, "img", "t")
    tmpl["spec"]["podTemplate"]["spec"]["containers"][0]["securityContxt"] = {}
    assert any("securityContxt" in p for p in validate(tmpl))
    pool = kb.sandbox_warm_pool(opts, "p", "t")
    pool["spec"]["replicas"] = -1
    assert any("replicas" in p for p in validate(pool))


def test_vendored_trainjob_schema_matches_the_installed_models():
    vendored = json.loads(trainjob_schema_path(version("kubeflow-trainer-api")).read_text())
    if f"kubeflow-trainer-api {version('kubeflow-trainer-api')}" not in vendored["description"]:
        pytest.skip("a different kubeflow-trainer-api is installed than the schema was generated from")
    assert trainjob_schema_from_models() == vendored, "run `python -m k8s.validate --regenerate`"


# ---------------------------------------------------------------- admin manifests
def _admin_docs() -> list[dict]:
    docs = []
    for f in sorted((ROOT / "k8s/manifests").rglob("*.yaml")):
        if f.name != "kustomization.yaml":
            docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


def test_admin_manifests_validate_strictly():
    docs = _admin_docs()
    assert {d["kind"] for d in docs} >= {"Namespace", "Role", "RoleBinding", "ServiceAccount", "NetworkPolicy",
                                         "RuntimeClass"}
    for d in docs:
        assert validate(d, "1.30") == [] and validate(d, "1.37") == []


def test_kustomizations_list_files_that_exist():
    for k in (ROOT / "k8s/manifests").rglob("kustomization.yaml"):
        for res in yaml.safe_load(k.read_text()).get("resources") or []:
            assert (k.parent / res).exists(), f"{k}: {res}"


def test_kustomize_builds_offline():
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(["kubectl", "kustomize", str(ROOT / "k8s/manifests")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    built = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len(built) == len([d for d in _admin_docs() if d["kind"] != "RuntimeClass"])
    for d in built:
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "tooldojo"
        assert validate(d) == []


def test_sandbox_rbac_grants_what_the_backend_uses():
    role = next(d for d in _admin_docs() if d["kind"] == "Role" and d["metadata"]["name"] == "tooldojo-sandbox-controller")
    grants = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
              for v in rule["verbs"]}
    needed = {("", "pods", v) for v in ("create", "delete", "get", "list", "watch")} | {
        ("", "pods/exec", "create"), ("", "pods/exec", "get"), ("", "configmaps", "create"), ("", "events", "list"),
        ("networking.k8s.io", "networkpolicies", "create"),
        ("extensions.agents.x-k8s.io", "sandboxclaims", "create"), ("extensions.agents.x-k8s.io", "sandboxclaims", "watch"),
        ("extensions.agents.x-k8s.io", "sandboxclaims", "delete"), ("agents.x-k8s.io", "sandboxes", "get"),
        ("extensions.agents.x-k8s.io", "sandboxtemplates", "create"),
        ("extensions.agents.x-k8s.io", "sandboxwarmpools", "create")}
    assert needed <= grants, needed - grants
