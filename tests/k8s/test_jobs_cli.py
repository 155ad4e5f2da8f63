# ruff: noqa: F811  (pytest fixtures imported from k8s_fixtures are redefined as arguments)
"""`dojo submit` and `dojo jobs ...` end to end against the FAKE API server (through a kubeconfig).

The fake's controllers stand in for the Job and Trainer controllers: pods appear, the test moves
them through Pending -> Running -> Succeeded/Failed, and the CLI must report and react.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tooldojo.cli import app

from k8s_fixtures import fake_manual  # noqa: F401,E402  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
NS = "tooldojo"


@pytest.fixture
def cluster(fake_manual, tmp_path):
    kc = fake_manual.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)
    return fake_manual, ["--kubeconfig", str(kc)]


def dojo(*args: str, env: dict | None = None):
    r = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    return r


def one_error(r, message: str) -> None:
    """Exit 1 and exactly one `error:` line (warnings aside), containing `message`; no traceback."""
    lines = [line for line in r.output.strip().splitlines() if not line.startswith("warning:")]
    assert r.exit_code == 1, r.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.output


def write_submit(tmp_path: Path, name: str = "tiny", **k8s) -> Path:
    cfg = {"job": {"kind": "train", "name": name, "config_file": str(ROOT / "examples/train_tiny.yaml")},
           "k8s": {"image": "registry.example/tooldojo:1", "namespace": NS, **k8s}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def pods(fake, name: str) -> list[dict]:
    return sorted(fake.pods(NS, f"tooldojo.dev/job={name}"),
                  key=lambda p: p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])


def drive(fake, name: str, n: int, *, logs: dict[int, str] | None = None, end: str = "Succeeded",
          delay: float = 0.3) -> threading.Thread:
    """In the background: wait for the job's n pods, run them, write their logs, end them."""

    def run() -> None:
        deadline = time.monotonic() + 20
        while len(pods(fake, name)) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        ps = pods(fake, name)
        for p in ps:
            fake.set_pod_phase(NS, p["metadata"]["name"], "Running")
        time.sleep(delay)
        for i, p in enumerate(ps):
            fake.append_log(NS, p["metadata"]["name"], (logs or {}).get(i, ""))
        time.sleep(delay)
        for i, p in enumerate(ps):
            fake.set_pod_phase(NS, p["metadata"]["name"], end if i == 0 else "Succeeded",
                               exit_code=0 if end == "Succeeded" or i else 3)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_dry_run_prints_validated_yaml_and_touches_nothing(tmp_path):
    r = dojo("submit", str(write_submit(tmp_path, gpus=8, nodes=2, pvc={"name": "ckpt"})), "--dry-run",
             "--server", "http://127.0.0.1:9")
    assert r.exit_code == 0, r.output
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert [d["kind"] for d in docs] == ["ConfigMap", "Service", "Job"]


def test_server_dry_run_stores_nothing(cluster, tmp_path):
    fake, kc = cluster
    r = dojo("submit", str(write_submit(tmp_path, nodes=2, pvc={"name": "c", "create": True, "size": "1Gi"})),
             "--server-dry-run", *kc)
    assert r.exit_code == 0, r.output
    assert "accepted 4 object(s)" in r.stdout and "Job/tiny" in r.stdout
    assert [c for c in fake.calls if c[0] == "POST" and c[2].get("dryRun") != ["All"]] == []
    assert fake.list("Job", NS) == [] and fake.list("ConfigMap", NS) == []


def test_submit_then_status_logs_events_cancel(cluster, tmp_path):
    fake, kc = cluster
    r = dojo("submit", str(write_submit(tmp_path, nodes=2, secrets_from_env=["HF_TOKEN"])), *kc,
             env={"HF_TOKEN": "hf_secret_value"})
    assert r.exit_code == 0, r.output
    assert "submitted tiny" in r.stdout and "dojo jobs logs tiny -n tooldojo -f" in r.stdout
    assert "hf_secret_value" not in r.output
    job = fake.get("Job", "tiny", NS)
    assert job["spec"]["suspend"] is False  # created suspended, resumed once its Secret and Service existed
    for kind, name in (("Service", "tiny"), ("Secret", "tiny-env")):
        refs = fake.get(kind, name, NS)["metadata"]["ownerReferences"]
        assert refs[0]["uid"] == job["metadata"]["uid"]
    secret = fake.get("Secret", "tiny-env", NS)
    assert "HF_TOKEN" in secret["data"] and "stringData" not in secret
    assert len(pods(fake, "tiny")) == 2

    r = dojo("jobs", "list", *kc)
    assert r.exit_code == 0 and "tiny" in r.stdout and "Pending" in r.stdout

    fake.set_unschedulable(NS, pods(fake, "tiny")[1]["metadata"]["name"], "0/4 nodes are available: 4 Insufficient memory.")
    r = dojo("jobs", "events", "tiny", *kc)
    assert r.exit_code == 0 and "FailedScheduling" in r.stdout and "Insufficient memory" in r.stdout
    r = dojo("jobs", "status", "tiny", *kc)
    assert "Pending" in r.stdout and "Unschedulable" in r.stdout

    one_error(dojo("jobs", "logs", "tiny", "--node", "1", *kc), "has not started")

    for p in pods(fake, "tiny"):
        fake.set_pod_phase(NS, p["metadata"]["name"], "Running")
    fake.append_log(NS, pods(fake, "tiny")[1]["metadata"]["name"], "rank 1 step 1\nrank 1 step 2\n")
    r = dojo("jobs", "logs", "tiny", "--node", "1", "--tail", "1", *kc)
    assert r.exit_code == 0 and r.stdout == "rank 1 step 2\n"
    r = dojo("jobs", "status", "tiny", *kc)
    assert "Running" in r.stdout

    r = dojo("jobs", "cancel", "tiny", *kc)
    assert r.exit_code == 0 and "Job/tiny" in r.stdout
    assert fake.get("Job", "tiny", NS) is None and pods(fake, "tiny") == []
    assert fake.get("Service", "tiny", NS) is None and fake.get("Secret", "tiny-env", NS) is None
    assert fake.get("ConfigMap", "tiny-config", NS) is not None  # kept for resubmit


def test_follow_streams_node_zero_and_exits_with_the_jobs_result(cluster, tmp_path):
    fake, kc = cluster
    t = drive(fake, "ok", 1, logs={0: "step 1 reward 0.1\nstep 2 reward 0.4\n"})
    r = dojo("submit", str(write_submit(tmp_path, name="ok")), "--follow", *kc)
    t.join()
    assert r.exit_code == 0, r.output
    assert "step 1 reward 0.1\nstep 2 reward 0.4\n" in r.stdout and "ok: Succeeded" in r.stderr
    assert fake.get("Job", "ok", NS)["status"]["succeeded"] == 1

    t = drive(fake, "bad", 2, logs={0: "Traceback: boom\n"}, end="Failed")
    r = dojo("submit", str(write_submit(tmp_path, name="bad", nodes=2)), "--follow", *kc)
    t.join()
    assert r.exit_code == 1 and "Traceback: boom" in r.stdout and "bad: Failed" in r.stderr
    r = dojo("jobs", "status", "bad", *kc)
    assert "Failed" in r.stdout and "BackoffLimitExceeded" in r.stdout


def test_resubmit_from_checkpoint_resumes_on_the_same_pvc(cluster, tmp_path):
    fake, kc = cluster
    assert dojo("submit", str(write_submit(tmp_path, name="long", pvc={"name": "ckpt", "create": True, "size": "1Gi"})),
                *kc).exit_code == 0
    first = yaml.safe_load(fake.get("ConfigMap", "long-config", NS)["data"]["config.yaml"])
    assert first["run"]["output_dir"] == "/checkpoints/long/runs/train-tiny" and first["run"]["resume"] is False
    for p in pods(fake, "long"):
        fake.set_pod_phase(NS, p["metadata"]["name"], "Failed", exit_code=137, reason="OOMKilled")
    r = dojo("jobs", "resubmit", "long", "--from-checkpoint", *kc)
    assert r.exit_code == 0, r.output and "submitted long-r2" in r.stdout
    again = yaml.safe_load(fake.get("ConfigMap", "long-r2-config", NS)["data"]["config.yaml"])
    assert again["run"]["resume"] is True and again["run"]["output_dir"] == first["run"]["output_dir"]
    job = fake.get("Job", "long-r2", NS)
    assert job["metadata"]["annotations"]["tooldojo.dev/resubmit-of"] == "long"
    assert len(fake.list("PersistentVolumeClaim", NS)) == 1  # the same checkpoints volume
    assert dojo("jobs", "resubmit", "long", *kc).stdout.count("submitted long-r3") == 1

    assert dojo("submit", str(write_submit(tmp_path, name="nopvc")), *kc).exit_code == 0
    one_error(dojo("jobs", "resubmit", "nopvc", "--from-checkpoint", *kc), "had no k8s.pvc")


def test_trainjob_needs_the_trainer_and_then_runs(cluster, tmp_path):
    fake, kc = cluster
    cfg = write_submit(tmp_path, name="tj", kind="trainjob", nodes=2, gpus=2)
    one_error(dojo("submit", str(cfg), *kc), "install Kubeflow Trainer")
    assert fake.get("ConfigMap", "tj-config", NS) is None  # checked before anything was created
    fake.install_trainer()

    r = dojo("submit", str(cfg), *kc)
    assert r.exit_code == 0, r.output
    tj = fake.get("TrainJob", "tj", NS)
    assert tj["spec"]["trainer"]["numNodes"] == 2 and not tj["spec"].get("suspend")
    ps = pods(fake, "tj")
    assert len(ps) == 2 and ps[0]["spec"]["containers"][0]["name"] == "node"
    for p in ps:
        fake.set_pod_phase(NS, p["metadata"]["name"], "Running")
    fake.append_log(NS, ps[0]["metadata"]["name"], "trainer node 0\n")
    assert dojo("jobs", "logs", "tj", *kc).stdout == "trainer node 0\n"
    for p in ps:
        fake.set_pod_phase(NS, p["metadata"]["name"], "Succeeded")
    r = dojo("jobs", "list", *kc)
    assert "tj" in r.stdout and "TrainJob" in r.stdout and "Succeeded" in r.stdout


@pytest.mark.parametrize("args,message", [
    (["jobs", "status", "nope"], "no tooldojo job nope"),
    (["jobs", "logs", "nope"], "no tooldojo job nope"),
    (["jobs", "cancel", "nope"], "no tooldojo job nope"),
    (["jobs", "resubmit", "nope"], "no config snapshot nope-config"),
])
def test_errors_are_one_line(cluster, args, message):
    fake, kc = cluster
    one_error(dojo(*args, *kc), message)


def test_submit_errors_are_one_line(cluster, tmp_path):
    fake, kc = cluster
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"job": {"kind": "train", "config": {}}, "k8s": {"image": "i", "gpu": 8}}))
    one_error(dojo("submit", str(bad), *kc), "k8s.gpu: unknown key")

    cfg = write_submit(tmp_path, name="dup")
    assert dojo("submit", str(cfg), *kc).exit_code == 0
    one_error(dojo("submit", str(cfg), *kc), "already exists")

    fake.fail("POST", r"/jobs$", 403, 'jobs.batch is forbidden: User "alice" cannot create resource "jobs"')
    r = dojo("submit", str(cfg), "--name", "denied", *kc)
    one_error(r, "cannot create resource")
    assert "RBAC" in r.output

    one_error(dojo("jobs", "list", "--server", "http://127.0.0.1:9"), "cannot reach")
