# ruff: noqa: F811  (the fake_manual fixture is redefined as an argument)
"""Issue 33 #5: a TrainJob for the Kubeflow Trainer release the cluster runs (`--trainer-version`): 2.1
puts the pod-level overrides in spec.podTemplateOverrides, 2.2 and 2.3 in spec.runtimePatches (the
vendored schemas, k8s/crds/trainjob/, come from kubeflow-trainer-api 2.1.0 / 2.2.0 / 2.3.0's models)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from k8s.config import SubmitConfigError, load_submit_config
from k8s.render import render
from k8s.validate import (TRAINER_VERSIONS, ManifestInvalid, check_trainer_version, trainjob_schema,
                          trainjob_schema_path, validate, validate_all)

import k8s_fixtures  # noqa: F401,E402  (skips without the k8s extra)
from k8s_fixtures import fake_manual  # noqa: F401,E402  (fixture)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "k8s" / "train_trainjob.yaml"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def rendered(trainer_version: str, **k8s):
    cfg, base = load_submit_config(EXAMPLE)
    if k8s:
        cfg = cfg.model_copy(update={"k8s": cfg.k8s.model_copy(update=k8s)})
    return render(cfg, base_dir=base, git_commit=COMMIT, trainer_version=trainer_version)


def node_pod(tj: dict) -> dict:
    """The pod metadata and spec a TrainJob patches onto the node job, whichever field holds them."""
    spec = tj["spec"]
    if "podTemplateOverrides" in spec:
        (o,) = spec["podTemplateOverrides"]
        assert o["targetJobs"] == [{"name": "node"}]
        return o
    (rj,) = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rj["name"] == "node"
    return rj["template"]["spec"]["template"]


@pytest.mark.parametrize("release", TRAINER_VERSIONS)
def test_each_release_renders_its_pod_overrides_and_validates(release):
    r = rendered(release)
    assert validate_all(r.manifests, trainer_version=release) == []
    spec = r.workload["spec"]
    field = "podTemplateOverrides" if release == "2.1" else "runtimePatches"
    assert field in spec and not {"podTemplateOverrides", "runtimePatches"} - {field} & set(spec)
    pod = node_pod(r.workload)
    assert pod["metadata"]["labels"]["tooldojo.dev/job"] == "grpo-tiny-tj"
    assert pod["metadata"]["annotations"]["tooldojo.dev/git-commit"] == COMMIT
    (node,) = pod["spec"]["containers"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in node["volumeMounts"]
    assert any(v["name"] == "dshm" for v in pod["spec"]["volumes"])
    assert pod["spec"]["serviceAccountName"] == "tooldojo-sandbox-controller"
    # the rest of the TrainJob does not depend on the release
    assert spec["trainer"] == rendered("2.3").workload["spec"]["trainer"]


def test_the_pod_overrides_are_the_same_in_every_release():
    pods = {v: {k: node_pod(rendered(v).workload)[k] for k in ("metadata", "spec")} for v in TRAINER_VERSIONS}
    assert pods["2.1"] == pods["2.2"] == pods["2.3"]


def test_a_2_3_trainjob_is_refused_by_the_2_1_schema_in_one_clear_line():
    tj = rendered("2.3").workload
    problems = validate(tj, trainer_version="2.1")
    assert problems == ["TrainJob/grpo-tiny-tj: spec: Additional properties are not allowed ('runtimePatches' was "
                        "unexpected) (not in Kubeflow Trainer 2.1's TrainJob; see --trainer-version)"]
    with pytest.raises(ManifestInvalid) as e:
        validate_all([tj], trainer_version="2.1", raise_on_error=True)
    assert "\n" not in str(e.value) and "runtimePatches" in str(e.value)
    # and the other way round: 2.1's field is not in 2.3
    assert any("podTemplateOverrides" in p and "Trainer 2.3" in p
               for p in validate(rendered("2.1").workload, trainer_version="2.3"))
    # 2.2 and 2.3 differ only where tooldojo renders nothing (terminationGracePeriodSeconds in 2.3's pod patch)
    assert validate(tj, trainer_version="2.2") == []


def test_2_1_lint_finds_a_missing_shm_in_the_pod_template_override():
    tj = rendered("2.1").workload
    node_pod(tj)["spec"]["containers"][0]["volumeMounts"] = []
    assert any("/dev/shm" in p for p in validate_all([tj], trainer_version="2.1"))


def test_2_1_has_no_active_deadline():
    with pytest.raises(SubmitConfigError, match="Kubeflow Trainer 2.1 has no spec.activeDeadlineSeconds"):
        rendered("2.1", active_deadline_s=3600)
    assert rendered("2.2", active_deadline_s=3600).workload["spec"]["activeDeadlineSeconds"] == 3600


def test_release_names():
    assert check_trainer_version("v2.2.0") == "2.2" and check_trainer_version("2.1") == "2.1"
    for bad in ("2.0", "2.4", "3", "latest"):
        with pytest.raises(ValueError, match="tooldojo has 2.1, 2.2, 2.3"):
            check_trainer_version(bad)
    for v in TRAINER_VERSIONS:
        s = trainjob_schema(v)
        assert f"kubeflow-trainer-api {v}.0" in s["description"] and s["$id"].endswith(f"-v{v}.json")
        assert trainjob_schema_path(v).parent.name == "trainjob"
    spec = {v: set(trainjob_schema(v)["$defs"]["TrainerV1alpha1TrainJobSpec"]["properties"]) for v in TRAINER_VERSIONS}
    assert "podTemplateOverrides" in spec["2.1"] and "runtimePatches" not in spec["2.1"]
    assert "runtimePatches" in spec["2.2"] and "podTemplateOverrides" not in spec["2.2"] and spec["2.2"] == spec["2.3"]


def _dojo(*args: str):
    from tooldojo.cli import app

    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize("release,field", [("2.1", "podTemplateOverrides"), ("2.2", "runtimePatches"),
                                           ("v2.3.1", "runtimePatches")])
def test_submit_takes_the_trainer_version(release, field):
    r = _dojo("submit", str(EXAMPLE), "--dry-run", "--trainer-version", release)
    assert r.exit_code == 0, r.output
    (tj,) = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "TrainJob"]
    assert field in tj["spec"]


def test_submit_defaults_to_2_3_and_a_bad_release_is_a_usage_error():
    r = _dojo("submit", str(EXAMPLE), "--dry-run")
    assert r.exit_code == 0 and "runtimePatches" in r.stdout and "podTemplateOverrides" not in r.stdout
    r = _dojo("submit", str(EXAMPLE), "--dry-run", "--trainer-version", "2.0")
    flat = " ".join(re.sub("[│╭╮╰╯─]", " ", r.output).split())  # typer's usage box, unwrapped
    assert r.exit_code == 2 and "no TrainJob schema for Kubeflow Trainer '2.0': tooldojo has 2.1, 2.2, 2.3" in flat
    assert "Traceback" not in r.output


def test_a_2_1_trainjob_runs_on_the_fake_cluster_and_resubmits_as_2_1(fake_manual, tmp_path):
    fake = fake_manual
    kc = ["--kubeconfig", str(fake.write_kubeconfig(tmp_path / "kubeconfig", namespace="tooldojo"))]
    fake.install_trainer()
    cfg = tmp_path / "tj.yaml"
    cfg.write_text(yaml.safe_dump({"job": {"kind": "train", "name": "tj21",
                                           "config_file": str(ROOT / "examples/train_tiny.yaml")},
                                   "k8s": {"image": "registry.example/tooldojo:1", "namespace": "tooldojo",
                                           "kind": "trainjob", "nodes": 2, "gpus": 1}}))
    r = _dojo("submit", str(cfg), "--trainer-version", "2.1", *kc)
    assert r.exit_code == 0, r.output
    assert "podTemplateOverrides" in fake.get("TrainJob", "tj21", "tooldojo")["spec"]
    assert len(fake.pods("tooldojo", "tooldojo.dev/job=tj21")) == 2  # the override's pod labels reached the pods
    r = _dojo("jobs", "resubmit", "tj21", "--dry-run", "--trainer-version", "2.1", *kc)
    assert r.exit_code == 0, r.output
    (tj,) = [d for d in yaml.safe_load_all(r.stdout) if d and d["kind"] == "TrainJob"]
    assert "podTemplateOverrides" in tj["spec"] and "runtimePatches" not in tj["spec"]
