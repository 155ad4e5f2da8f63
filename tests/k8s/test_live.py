"""Against a REAL cluster: marked `k8s`, skipped unless TOOLDOJO_K8S_LIVE=1. CI here never runs them.

    TOOLDOJO_K8S_LIVE=1 TOOLDOJO_K8S_IMAGE=registry/python-with-nothing:3.12 \\
    TOOLDOJO_K8S_JOB_IMAGE=registry/tooldojo:TAG KUBECONFIG=~/.kube/config \\
        .venv/bin/python -m pytest tests/k8s/test_live.py tests/test_conformance.py tests/test_reward_hacking.py

(apply k8s/manifests first). The same variable adds the kubernetes backend to the sandbox
conformance suite (tests/test_conformance.py) and the reward-hacking suite (tests/test_reward_hacking.py;
a namespace enforcing Pod Security `restricted` also needs TOOLDOJO_K8S_POD_SECURITY=restricted).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from k8s.client import K8sClient
from k8s.config import load_submit_config, parse_submit_config
from k8s.render import render
from sandboxes import SandboxConfig, open_sandbox
from sandboxes import kubernetes_backend as kb
from sandboxes.models import KubernetesOptions

pytestmark = [pytest.mark.k8s,
              pytest.mark.skipif(os.environ.get("TOOLDOJO_K8S_LIVE") != "1",
                                 reason="live-cluster test: set TOOLDOJO_K8S_LIVE=1 and a kubeconfig")]
import k8s_fixtures  # noqa: F401,E402  (skips without the k8s extra)

ROOT = Path(__file__).resolve().parents[2]
JOBS_NS = os.environ.get("TOOLDOJO_K8S_JOBS_NAMESPACE", "tooldojo")


def client() -> K8sClient:
    return K8sClient.connect(kubeconfig=os.environ.get("TOOLDOJO_K8S_KUBECONFIG"),
                             context=os.environ.get("TOOLDOJO_K8S_CONTEXT"))


async def test_live_sandbox_is_a_hardened_pod():
    opts = KubernetesOptions.from_env()
    async with await open_sandbox(SandboxConfig(backend="kubernetes", kubernetes=opts, start_timeout_s=180)) as sb:
        r = await sb.exec("id -u; cat /proc/1/cmdline | tr '\\0' ' '", timeout=10)
        assert r.stdout.splitlines()[0] == "65534" and kb.INIT_MARKER in r.stdout
        assert (await sb.call_tool("counter_incr", {"name": "live"})).output["value"] == 1
        pod = client().get("Pod", sb.pod_name, opts.namespace)
        assert pod["spec"]["automountServiceAccountToken"] is False
    assert client().get("NetworkPolicy", kb.NETWORK_POLICY, opts.namespace)["spec"]["policyTypes"] == ["Ingress",
                                                                                                       "Egress"]


@pytest.mark.parametrize("example", ["train_job.yaml", "train_trainjob.yaml", "synth_tasks.yaml",
                                     "train_fsdp2_job.yaml", "train_fsdp2_trainjob.yaml"])
def test_live_examples_pass_server_side_dry_run(example):
    from k8s.jobs import server_dry_run

    c = client()
    cfg, base = load_submit_config(ROOT / "examples/k8s" / example)
    if cfg.k8s.kind == "trainjob" and not c.serves("TrainJob"):
        pytest.skip("Kubeflow Trainer is not installed in this cluster")
    cfg = cfg.model_copy(update={"k8s": cfg.k8s.model_copy(update={"namespace": JOBS_NS})})
    r = render(cfg, base_dir=base, git_commit="live-test", environ={"WANDB_API_KEY": "x"})
    assert len(server_dry_run(c, r)) == len(r.manifests)


def test_live_job_runs_to_completion():
    from k8s import jobs

    image = os.environ.get("TOOLDOJO_K8S_JOB_IMAGE")
    if not image:
        pytest.skip("set TOOLDOJO_K8S_JOB_IMAGE to an image with tooldojo installed")
    c = client()
    cfg = parse_submit_config({"job": {"kind": "synth", "name": "tooldojo-live-help", "command": ["--help"]},
                               "k8s": {"image": image, "namespace": JOBS_NS}})
    r = render(cfg, base_dir=ROOT, git_commit="live-test")
    jobs.submit(c, r)
    try:
        lines: list[str] = []
        info = jobs.follow(c, JOBS_NS, r.name, lines.append, poll_s=2.0)
        assert info.phase == "Succeeded", (info, lines[-20:])
        assert any("submit" in line for line in lines)
    finally:
        jobs.cancel(c, JOBS_NS, r.name, purge=True)
