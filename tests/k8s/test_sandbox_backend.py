# ruff: noqa: F811  (pytest fixtures imported from k8s_fixtures are redefined as arguments)
"""The kubernetes sandbox backend against the FAKE API server: pods, exec stream, pool, claims, reaping.

The fake runs the exec'd tool server as a local process (under bubblewrap, the pod's volumes bound at
their paths). What these tests prove is the backend's behaviour against the Kubernetes API (pod
lifecycle, the exec WebSocket protocol through the real kubernetes client, claims, labels, errors);
the isolation itself is proved only by the conformance suite on a live cluster (test_live.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml

from k8s.client import K8sClient, TokenBucket
from k8s.validate import lint_sandbox_pod, validate_all
from sandboxes import (
    BackendUnavailable,
    Hardening,
    Limits,
    SandboxConfig,
    SandboxDead,
    SandboxPool,
    SandboxStartError,
    open_sandbox,
)
from sandboxes import kubernetes_backend as kb
from sandboxes.models import KubernetesOptions

from k8s_fixtures import fake, fake_manual, need_bwrap  # noqa: F401,E402  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
NS = "sandboxes-test"


def cfg_for(fake, **opts) -> SandboxConfig:
    start_timeout = opts.pop("start_timeout_s", 20.0)
    return SandboxConfig(backend="kubernetes", image="python:3.12-slim", start_timeout_s=start_timeout,
                         kubernetes=KubernetesOptions(server=fake.url, namespace=NS, **opts))


# ------------------------------------------------------------------ manifests
def test_pod_is_hardened_and_valid():
    cfg = SandboxConfig(backend="kubernetes", limits=Limits(memory_mb=512, cpus=2, scratch_mb=32))
    opts = KubernetesOptions(namespace=NS, runtime_class="gvisor", cpu_request=0.5,
                             node_selector={"pool": "sandboxes"},
                             tolerations=[{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}])
    pod = kb.pod_manifest(cfg, opts, "img:1", "p")
    objs = [pod, kb.toolserver_configmap(NS), kb.network_policy(NS), kb.sandbox_template(cfg, opts, "img:1", "t"),
            kb.sandbox_warm_pool(opts, "t", "t"), kb.sandbox_claim(opts, "c", "t")]
    for version in ("1.30", "1.37"):
        assert validate_all(objs, version) == []
    spec = pod["spec"]
    assert lint_sandbox_pod("pod", spec) == []
    c = spec["containers"][0]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    # baseline (the default): a root start holding only what the tool server needs to drop to its own uid
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SETUID", "SETGID", "SETPCAP", "KILL"]}
    assert sc["runAsUser"] == 0 and sc["runAsNonRoot"] is False
    strict = kb.pod_manifest(cfg, opts.model_copy(update={"pod_security": "restricted"}), "img:1", "p")
    ssc = strict["spec"]["containers"][0]["securityContext"]
    assert ssc["capabilities"] == {"drop": ["ALL"]} and ssc["runAsUser"] == 65534 and ssc["runAsNonRoot"] is True
    assert validate_all([strict], "1.37") == [] and lint_sandbox_pod("pod", strict["spec"]) == []
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["runtimeClassName"] == "gvisor" and spec["activeDeadlineSeconds"] == opts.max_lifetime_s
    assert c["resources"]["limits"]["memory"] == "512Mi" and c["resources"]["limits"]["cpu"] == "2000m"
    assert c["resources"]["requests"]["cpu"] == "500m"
    dirs = {v["name"]: v for v in spec["volumes"]}
    assert dirs["workspace"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Mi"}
    assert pod["metadata"]["labels"][kb.EGRESS_LABEL] == "deny"
    assert kb.network_policy(NS)["spec"]["podSelector"] == {"matchLabels": {kb.EGRESS_LABEL: "deny"}}


def test_pods_are_sealed_like_the_other_backends():
    """Issue 29 where it applies to pods: the runtime's seccomp profile on pod and container, every
    writable tmpfs (/dev/shm included) capped at scratch_mb, and a reset that empties /dev/shm and
    /dev/mqueue as on docker and local."""
    cfg = SandboxConfig(backend="kubernetes", limits=Limits(scratch_mb=16))
    opts = KubernetesOptions(namespace=NS)
    spec = kb.pod_manifest(cfg, opts, "img:1", "p")["spec"]
    c = spec["containers"][0]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"].get("seccompProfile", {"type": "RuntimeDefault"}) == {"type": "RuntimeDefault"}
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for path in ("/workspace", "/tmp", "/dev/shm"):
        assert vols[mounts[path]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Mi"}, path
    assert validate_all([kb.pod_manifest(cfg, opts, "img:1", "p")], "1.37") == []
    assert json.loads(kb.exec_command(cfg, opts)[-1])["wiped"] == ["/dev/shm", "/dev/mqueue"]


def test_the_tool_server_is_separated_in_every_pod_security_level():
    """Issue 21: baseline pods (the default) separate by uid as docker does; `restricted` pods only
    make the server non-dumpable; both pass the schema and the lint, and loosening it is visible."""
    for pod_security, hardening, mode in (("baseline", Hardening(), "uid"),
                                          ("restricted", Hardening(), "non_dumpable"),
                                          ("baseline", Hardening(non_root=False), "non_dumpable"),
                                          ("baseline", Hardening(isolate_tool_server=False), None)):
        opts = KubernetesOptions(namespace=NS, pod_security=pod_security)
        cfg = SandboxConfig(backend="kubernetes", hardening=hardening, kubernetes=opts)
        pod = kb.pod_manifest(cfg, opts, "img:1", "p")
        if hardening.non_root:
            assert validate_all([pod], "1.37") == [] and lint_sandbox_pod("pod", pod["spec"]) == []
        else:  # loosened: visible to the lint
            assert any("runAsNonRoot" in p for p in validate_all([pod], "1.37"))
        assert json.loads(kb.exec_command(cfg, opts)[-1])["separation"] == mode
    # a root start with any other capability is not the separation's: the lint says so
    opts = KubernetesOptions(namespace=NS)
    pod = kb.pod_manifest(SandboxConfig(backend="kubernetes"), opts, "img:1", "p")
    pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")
    assert any("SYS_ADMIN" in p and "baseline" in p for p in lint_sandbox_pod("pod", pod["spec"]))
    assert any("runAsNonRoot" in p for p in lint_sandbox_pod("pod", pod["spec"]))


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="the fake API server starts a root container only as root")
def test_commands_cannot_signal_the_tool_server_in_a_baseline_pod(need_bwrap, fake):
    """On the fake (which honours the container's runAsUser 0 and added capabilities): the server runs
    as 65533 with no capability a command could use, commands as 65534, and a command's SIGKILL
    to the server is refused; with `restricted` the same kill ends the sandbox (typed, never a hang)."""
    async def main():
        async with await open_sandbox(cfg_for(fake)) as sb:
            assert (await sb.call_tool("kv_set", {"key": "a", "value": "1"})).ok
            r = await sb.exec("id -u; for p in /proc/[0-9]*; do "
                              "grep -q toolserver $p/cmdline 2>/dev/null && grep ^Uid: $p/status && "
                              "kill -KILL ${p#/proc/}; echo kill=$?; done", timeout=10)
            lines = r.stdout.split("\n")
            assert lines[0] == "65534", r
            assert any(line.split()[1:3] == ["65533", "65533"] for line in lines if line.startswith("Uid:")), r
            assert "kill=1" in r.stdout and "kill=0" not in r.stdout, r
            assert (await sb.call_tool("kv_get", {"key": "a"})).output == {"key": "a", "value": "1"}
        with pytest.raises((SandboxDead, SandboxStartError, Exception)) as e:
            async with await open_sandbox(cfg_for(fake, pod_security="restricted")) as sb:
                await sb.exec("for p in /proc/[0-9]*; do grep -q toolserver $p/cmdline 2>/dev/null && "
                              "kill -KILL ${p#/proc/}; done; sleep 1", timeout=10)
                await sb.call_tool("kv_get", {"key": "a"})
        assert isinstance(e.value, SandboxDead), repr(e.value)

    anyio.run(main)


def test_loosened_hardening_is_visible_to_the_lint():
    opts = KubernetesOptions(namespace=NS)
    open_net = kb.pod_manifest(SandboxConfig(hardening=Hardening(network=True)), opts, "i", "p")
    assert kb.EGRESS_LABEL not in open_net["metadata"]["labels"]  # the deny-all policy no longer selects it
    loose = kb.pod_manifest(SandboxConfig(hardening=Hardening(read_only_root=False, no_new_privileges=False,
                                                              drop_capabilities=False)), opts, "i", "p")
    problems = " ".join(validate_all([loose]))
    for what in ("readOnlyRootFilesystem", "allowPrivilegeEscalation", "capabilities.drop"):
        assert what in problems


def test_shipped_network_policy_is_the_backends():
    shipped = yaml.safe_load((ROOT / "k8s/manifests/networkpolicy-sandboxes.yaml").read_text())
    ours = kb.network_policy("tooldojo-sandboxes")
    assert shipped["spec"] == ours["spec"] and shipped["metadata"]["name"] == ours["metadata"]["name"]


def test_auto_never_picks_kubernetes(monkeypatch):
    from sandboxes import backends, docker_backend, local_backend

    monkeypatch.setenv("TOOLDOJO_K8S_SERVER", "http://127.0.0.1:1")
    monkeypatch.setattr(docker_backend, "engine_available", lambda: (False, "no engine"))
    monkeypatch.setattr(local_backend, "bwrap_available", lambda: (False, "no bwrap"))
    backends.resolve_backend.cache_clear()
    try:
        with pytest.raises(BackendUnavailable) as e:
            backends.resolve_backend("auto")
        assert "kubernetes" not in str(e.value)
        assert backends.resolve_backend("kubernetes") == ("kubernetes", "requested")
    finally:
        backends.resolve_backend.cache_clear()


def test_token_bucket_paces_creations():
    now = [0.0]
    b = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0], sleep=lambda s: None)
    waits = [b.reserve() for _ in range(6)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([0.5, 1.0, 1.5])
    now[0] = 10.0  # a quiet spell refills up to the burst, no more
    assert [b.reserve() for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.5])


# ------------------------------------------------------------- against the fake
async def test_sandbox_over_the_exec_stream(fake, need_bwrap):
    cfg = cfg_for(fake)
    async with await open_sandbox(cfg) as sb:
        assert sb.backend == "kubernetes"
        pod = fake.get("Pod", sb.pod_name, NS)
        assert pod is not None and pod["metadata"]["labels"][kb.SANDBOX_LABEL] == "1"
        assert (await sb.call_tool("kv_set", {"key": "a", "value": "1"})).ok
        assert (await sb.call_tool("kv_get", {"key": "a"})).output == {"key": "a", "value": "1"}
        bad = await sb.call_tool("kv_get", {"key": "missing"})
        assert not bad.ok and bad.code == "not_found"
        r = await sb.exec("echo hi; pwd; ls /opt/tooldojo", timeout=10)
        assert r.exit_code == 0 and r.stdout.split() == ["hi", "/workspace", "toolserver.py"]
        await sb.write_file("notes/x.txt", "data")
        assert await sb.read_file("notes/x.txt") == b"data"
        snap = await sb.snapshot()
        await sb.call_tool("kv_delete", {"key": "a"})
        await sb.restore(snap)
        assert (await sb.snapshot()).digest == snap.digest
        # a timeout kills every process the command left, escaped ones included
        r = await sb.exec("sleep 300 & setsid sleep 301 & sleep 302", timeout=1)
        assert r.timed_out and r.exit_code == 137
        r = await sb.exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '", timeout=5)
        assert "sleep" not in r.stdout
        await sb.reset()
        with pytest.raises(FileNotFoundError):
            await sb.read_file("notes/x.txt")
        name = sb.pod_name
    assert fake.get("Pod", name, NS) is None  # closing deletes the pod
    assert fake.exec_count() == 0
    created = [c for c in fake.calls if c[0] == "POST"]
    assert [c[1].rsplit("/", 1)[-1] for c in created] == ["configmaps", "networkpolicies", "pods"]
    cm = fake.get("ConfigMap", kb.toolserver_configmap_name(), NS)
    assert cm["data"]["toolserver.py"] == (ROOT / "sandboxes/toolserver.py").read_text()


async def test_pool_keeps_pods_warm_and_resets_them(fake, need_bwrap):
    async with SandboxPool(cfg_for(fake), size=2) as pool:
        for i in range(4):
            async with pool.sandbox() as sb:
                assert (await sb.call_tool("kv_list", {})).output == {"keys": []}
                await sb.call_tool("kv_set", {"key": f"k{i}", "value": "v"})
                await sb.write_file("left.txt", "x")
        assert pool.stats.started == 2 and pool.stats.acquired == 4
        assert len(fake.pods(NS, kb.SANDBOX_LABEL)) == 2
    assert fake.pods(NS, kb.SANDBOX_LABEL) == []


async def test_deleted_pod_means_a_dead_sandbox(fake, need_bwrap):
    async with await open_sandbox(cfg_for(fake)) as sb:
        K8sClient.connect(server=fake.url).delete("Pod", sb.pod_name, NS, grace_period_s=0)
        with pytest.raises(SandboxDead):
            for _ in range(50):
                await sb.ping()
                await anyio.sleep(0.05)
        assert not sb.alive


async def test_image_pull_error_fails_fast_and_cleans_up(fake_manual):
    async def park_the_pod():
        for _ in range(200):
            pods = fake_manual.pods(NS, kb.SANDBOX_LABEL)
            if pods:
                fake_manual.set_waiting(NS, pods[0]["metadata"]["name"], "ErrImagePull",
                                        'pull access denied for "nope"')
                return
            await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        tg.start_soon(park_the_pod)
        with pytest.raises(SandboxStartError, match="ErrImagePull.*pull access denied"):
            await open_sandbox(cfg_for(fake_manual))
    assert fake_manual.pods(NS, kb.SANDBOX_LABEL) == []


async def test_unschedulable_pod_times_out_with_the_schedulers_reason(fake_manual):
    async def unschedulable():
        for _ in range(200):
            pods = fake_manual.pods(NS, kb.SANDBOX_LABEL)
            if pods:
                fake_manual.set_unschedulable(NS, pods[0]["metadata"]["name"], "0/3 nodes are available: 3 Insufficient cpu.")
                return
            await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        tg.start_soon(unschedulable)
        with pytest.raises(SandboxStartError, match="did not start within.*Insufficient cpu"):
            await open_sandbox(cfg_for(fake_manual, start_timeout_s=1.5))
    assert fake_manual.pods(NS, kb.SANDBOX_LABEL) == []


async def test_forbidden_is_one_clear_error(fake):
    fake.fail("POST", r"/pods$", 403, 'pods is forbidden: User "ci" cannot create resource "pods"')
    with pytest.raises(SandboxStartError, match="cannot create resource.*RBAC"):
        await open_sandbox(cfg_for(fake))


async def test_unreachable_cluster_is_backend_unavailable():
    cfg = SandboxConfig(backend="kubernetes", kubernetes=KubernetesOptions(server="http://127.0.0.1:9", namespace=NS))
    try:
        with pytest.raises(BackendUnavailable, match="cannot reach"):
            await open_sandbox(cfg)
    finally:
        kb.forget_clusters()


async def test_claims_from_agent_sandbox_crds(fake, need_bwrap):
    fake.install_agent_sandbox()
    cfg = cfg_for(fake)
    async with await open_sandbox(cfg) as sb:
        assert sb.claim is not None and fake.get("SandboxClaim", sb.claim, NS) is not None
        assert (await sb.call_tool("counter_incr", {"name": "c"})).output["value"] == 1
        tmpl = fake.list("SandboxTemplate", NS)
        pool = fake.list("SandboxWarmPool", NS)
        assert len(tmpl) == 1 and len(pool) == 1
        assert tmpl[0]["spec"]["networkPolicyManagement"] == "Unmanaged"
        strip = lambda o: {k: v for k, v in o.items() if k != "status"}  # noqa: E731
        meta_keys = ("name", "namespace", "labels")
        objs = [{**strip(o), "metadata": {k: o["metadata"][k] for k in meta_keys}} for o in tmpl + pool]
        assert validate_all(objs) == []
        pod = fake.get("Pod", sb.pod_name, NS)
        assert pod["metadata"]["labels"][kb.EGRESS_LABEL] == "deny"
        claim = sb.claim
    assert fake.get("SandboxClaim", claim, NS) is None
    assert fake.list("Sandbox", NS) == [] and fake.pods(NS, kb.SANDBOX_LABEL) == []


async def test_claims_adopt_warm_pods(fake, need_bwrap):
    fake.install_agent_sandbox()
    cfg = cfg_for(fake, warm_pool_size=2)
    async with await open_sandbox(cfg) as first:
        pool = fake.list("SandboxWarmPool", NS)[0]["metadata"]["name"]
        async with await open_sandbox(cfg) as sb:
            assert sb.pod_name.startswith(pool)  # adopted from the pool, not cold-started from the claim
            assert (await sb.ping())["pong"]
        assert first.pod_name.startswith(pool)


async def test_use_crds_always_needs_the_crds(fake):
    with pytest.raises(BackendUnavailable, match="agent-sandbox CRDs"):
        await open_sandbox(cfg_for(fake, use_crds="always"))


def test_gc_reaps_by_label(fake):
    client = K8sClient.connect(server=fake.url)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = kb.owner_labels()
    gone = {**live, "tooldojo.owner_pid": str(dead.pid), "tooldojo.owner_start": "1"}
    elsewhere = {**gone, "tooldojo.owner_host": "another-host"}
    opts = KubernetesOptions(server=fake.url, namespace=NS)
    for name, labels in (("live", live), ("orphan", gone), ("remote", elsewhere), ("finished", live)):
        pod = kb.pod_manifest(SandboxConfig(), opts, "i", name)
        pod["metadata"]["labels"].update(labels)
        client.create(pod)
    fake.set_pod_phase(NS, "finished", "Succeeded")
    removed = kb.gc(config=SandboxConfig(backend="kubernetes", kubernetes=opts))
    assert sorted(removed) == ["pod/finished", "pod/orphan"]
    assert sorted(p["metadata"]["name"] for p in fake.pods(NS)) == ["live", "remote"]
    assert sorted(kb.gc(everything=True, config=SandboxConfig(kubernetes=opts))) == ["pod/live", "pod/remote"]
