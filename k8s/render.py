"""Render a submit config into the Kubernetes objects of one job (plain dicts, deterministic).

    r = render(submit, base_dir=Path("examples/k8s"), git_commit="0123abc")
    print(r.yaml())                       # what `dojo submit --dry-run` prints

Objects, in creation order: the PersistentVolumeClaim (only with `pvc.create`), the Secret built
from `secrets_from_env` (values never rendered in YAML), the ConfigMap holding the resolved job
config and the submit config itself (what `dojo jobs resubmit` re-renders from), and either

* `kind: job`: a headless Service (multi-node) and a batch/v1 Job with `completionMode: Indexed`,
  one pod per node; machine rank = completion index; rank 0 is at `<name>-0.<name>`; or
* `kind: trainjob`: a Kubeflow Trainer TrainJob on a ClusterTrainingRuntime (torch-distributed by
  default), its volumes, tolerations and labels applied through `runtimePatches` (Trainer 2.2, 2.3)
  or `podTemplateOverrides` (2.1): `trainer_version`, the release the cluster runs.

A train job on several processes runs `accelerate launch --config_file /etc/tooldojo/accelerate.yaml
--num_processes <nodes x GPUs> ... -m tooldojo train ...`, the launch tests/rl/test_distributed.py
runs; the accelerate config (k8s.accelerate_config_file, default DDP), its num_machines and
num_processes set to the job's shape, travels in the ConfigMap. `k8s.generation_memory_cap` becomes
the override `rollout.generation_memory_cap=<x>` after the config (before job.args).

Every object carries the labels tooldojo.dev/job, /kind, /workload and /config-hash, and the
annotations tooldojo.dev/git-commit and /config-hash; GPU limits equal requests; GPU pods get
/dev/shm as a memory emptyDir. `k8s.validate.validate_all` checks the result strictly.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k8s.config import (CONFIG_DIR, CONFIG_PATH, SubmitConfig, SubmitConfigError, resolve_accelerate_config,
                        resolve_job_config)

MANAGER = "tooldojo.dev/submit"
LABEL_JOB = "tooldojo.dev/job"
LABEL_KIND = "tooldojo.dev/kind"
LABEL_WORKLOAD = "tooldojo.dev/workload"
LABEL_HASH = "tooldojo.dev/config-hash"
ANN_COMMIT = "tooldojo.dev/git-commit"
ANN_HASH = "tooldojo.dev/config-hash"
ANN_RESUBMIT = "tooldojo.dev/resubmit-of"
ANN_COMMAND = "tooldojo.dev/command"
ANN_NODES = "tooldojo.dev/nodes"
ANN_GPUS = "tooldojo.dev/gpus-per-node"
MANAGED = {"app.kubernetes.io/name": "tooldojo", "app.kubernetes.io/managed-by": "tooldojo"}
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_CONTAINER = "tooldojo"
TRAINJOB_CONTAINER = "node"  # the container and replicated job the Trainer runtimes name "node"
REDACTED = "<redacted>"
ACCELERATE_PATH = f"{CONFIG_DIR}/accelerate.yaml"  # from the ConfigMap, beside config.yaml


@dataclass
class Rendered:
    name: str
    namespace: str
    submit: SubmitConfig
    manifests: list[dict]
    config_hash: str
    git_commit: str
    command: list[str]
    secret_values: dict[str, str] = field(default_factory=dict, repr=False)
    warnings: list[str] = field(default_factory=list)

    @property
    def workload(self) -> dict:
        return next(m for m in self.manifests if m["kind"] in ("Job", "TrainJob"))

    def yaml(self) -> str:
        import yaml

        return yaml.safe_dump_all(self.manifests, sort_keys=False, width=120)


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def dojo_argv(submit: SubmitConfig, has_config: bool) -> list[str]:
    job = submit.job
    if job.command is not None:
        base = list(job.command)
    elif job.kind == "train":
        base = ["train", "{config}"]
    elif job.kind == "eval":
        base = ["eval", "run", "{config}"]
    else:
        base = ["synth"]
    argv = base + submit.train_overrides + list(job.args)
    if any("{config}" in a for a in argv) and not has_config:
        raise SubmitConfigError("job: the command uses {config} but the job has no config")
    return [a.replace("{config}", CONFIG_PATH) for a in argv]


def render(submit: SubmitConfig, *, base_dir: Path, git_commit: str, environ: dict[str, str] | None = None,
           resubmit_of: str | None = None, resolved_config: dict[str, Any] | None = None,
           name: str | None = None, trainer_version: str = "2.3") -> Rendered:
    """All objects of the job. `environ` supplies `secrets_from_env` values (None: placeholders);
    a TrainJob takes the pod-level overrides of Kubeflow Trainer `trainer_version` (2.1, 2.2, 2.3)."""
    import yaml

    from k8s.validate import check_trainer_version

    trainer_version = check_trainer_version(trainer_version)
    k = submit.k8s
    if name is not None:
        submit = submit.model_copy(update={"job": submit.job.model_copy(update={"name": name})})
        submit = SubmitConfig.model_validate(submit.model_dump())  # re-check the new name
    name = submit.name
    config = resolved_config if resolved_config is not None else resolve_job_config(submit, base_dir)
    args = dojo_argv(submit, config is not None)
    accelerate = resolve_accelerate_config(submit, base_dir)
    # what resubmit reads back: self-contained (the configs inline), no file paths
    k8s_record = k.model_dump(mode="json", exclude_defaults=True, exclude={"accelerate_config_file",
                                                                           "accelerate_config"})
    if accelerate is not None:
        k8s_record["accelerate_config"] = accelerate
    record = {"job": {**submit.job.model_dump(mode="json", exclude_none=True, exclude={"config_file", "config"}),
                      **({"config": config} if config is not None else {}), "name": name},
              "k8s": k8s_record}
    body_for_hash = {"job": {kk: v for kk, v in record["job"].items() if kk != "name"}, "k8s": record["k8s"]}
    full_hash = _hash(body_for_hash)
    labels = {**MANAGED, **k.labels, LABEL_JOB: name, LABEL_KIND: submit.job.kind, LABEL_WORKLOAD: k.kind,
              LABEL_HASH: full_hash[:12]}
    gpus = k.gpus
    command = _command(submit, args, multi_process=accelerate is not None)
    annotations = {**k.annotations, ANN_COMMIT: git_commit, ANN_HASH: full_hash, ANN_NODES: str(k.nodes),
                   ANN_GPUS: str(gpus), ANN_COMMAND: shlex.join(command)}
    if resubmit_of:
        annotations[ANN_RESUBMIT] = resubmit_of
    meta = lambda n, extra_labels=None: {  # noqa: E731
        "name": n, "namespace": k.namespace, "labels": {**labels, **(extra_labels or {})},
        "annotations": dict(annotations)}

    manifests: list[dict] = []
    warnings: list[str] = []
    if k.pvc is not None and k.pvc.create:
        pvc_spec: dict[str, Any] = {"accessModes": list(k.pvc.access_modes),
                                    "resources": {"requests": {"storage": k.pvc.size}}}
        if k.pvc.storage_class:
            pvc_spec["storageClassName"] = k.pvc.storage_class
        manifests.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": {"name": k.pvc.name, "namespace": k.namespace,
                                       "labels": {**MANAGED, LABEL_KIND: "checkpoints"}},
                          "spec": pvc_spec})
    if k.kind == "trainjob" and k.priority_class:
        warnings.append("k8s.priority_class is not applied to a TrainJob (Trainer runtime patches and pod template "
                        "overrides cannot set it); "
                        "set priorityClassName on the ClusterTrainingRuntime")
    warnings += _cap_warnings(submit, config)
    if submit.job.kind == "train" and k.pvc is None:
        warnings.append("no k8s.pvc: checkpoints are written inside the pod and lost with it; "
                        "`dojo jobs resubmit --from-checkpoint` needs a PVC")
    secret_values: dict[str, str] = {}
    if k.secrets_from_env:
        data = {}
        for var in k.secrets_from_env:
            if environ is None:
                data[var] = REDACTED
            elif var not in environ:
                raise SubmitConfigError(f"k8s.secrets_from_env: {var} is not set in your environment")
            else:
                data[var] = REDACTED
                secret_values[var] = environ[var]
        manifests.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta(f"{name}-env"), "type": "Opaque",
                          "stringData": data})
    cm_data = {"submit.yaml": yaml.safe_dump(record, sort_keys=False), "command": shlex.join(command)}
    if config is not None:
        cm_data["config.yaml"] = yaml.safe_dump(config, sort_keys=False)
    if accelerate is not None:
        cm_data["accelerate.yaml"] = yaml.safe_dump(accelerate, sort_keys=False)
    manifests.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"{name}-config"),
                      "data": dict(sorted(cm_data.items()))})

    env = _env(submit, name)
    volumes, mounts = _volumes(submit, name)
    resources = _resources(submit)
    pod_labels = dict(labels)
    if k.kind == "job":
        if k.nodes > 1:
            manifests.append({"apiVersion": "v1", "kind": "Service", "metadata": meta(name), "spec": {
                "clusterIP": "None", "publishNotReadyAddresses": True, "selector": {LABEL_JOB: name},
                "ports": [{"name": "rendezvous", "port": k.master_port, "targetPort": k.master_port}]}})
        container: dict[str, Any] = {"name": JOB_CONTAINER, "image": k.image, "imagePullPolicy": k.image_pull_policy,
                                     "command": command, "env": env, "volumeMounts": mounts}
        if resources:
            container["resources"] = resources
        pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container], "volumes": volumes}
        if k.nodes > 1:
            pod_spec["subdomain"] = name
        pod_spec.update(_placement(submit))
        job_spec: dict[str, Any] = {
            "completionMode": "Indexed", "completions": k.nodes, "parallelism": k.nodes,
            "backoffLimit": k.backoff_limit,
            "template": {"metadata": {"labels": pod_labels, "annotations": {ANN_COMMIT: git_commit}},
                         "spec": pod_spec}}
        if k.active_deadline_s:
            job_spec["activeDeadlineSeconds"] = k.active_deadline_s
        if k.ttl_after_finished_s is not None:
            job_spec["ttlSecondsAfterFinished"] = k.ttl_after_finished_s
        manifests.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name), "spec": job_spec})
    else:
        manifests.append(_trainjob(submit, name, meta(name), command, env, resources, volumes, mounts, pod_labels,
                                   git_commit, trainer_version))
    return Rendered(name=name, namespace=k.namespace, submit=submit, manifests=manifests, config_hash=full_hash,
                    git_commit=git_commit, command=command, secret_values=secret_values, warnings=warnings)


def _cap_warnings(submit: SubmitConfig, config: dict[str, Any] | None) -> list[str]:
    """Where k8s.generation_memory_cap would not size generation's cache: the job's config (with
    job.args' overrides) sets transformers' max_memory_percent itself, or generates with vLLM."""
    if submit.k8s.generation_memory_cap is None or config is None:
        return []
    from rl.config import ConfigError, apply_overrides

    try:
        rollout = apply_overrides(copy.deepcopy(config), [a for a in submit.job.args if "=" in a and
                                                           not a.startswith("-")]).get("rollout") or {}
    except ConfigError:
        rollout = config.get("rollout") or {}
    out = []
    if "max_memory_percent" in (rollout.get("hf_continuous_batching") or {}):
        out.append("k8s.generation_memory_cap: the job's config sets rollout.hf_continuous_batching."
                   "max_memory_percent, which wins over it")
    if rollout.get("use_vllm", True):
        out.append("k8s.generation_memory_cap caps transformers generation's KV cache; this job's config has "
                   "rollout.use_vllm true, and where the image has vLLM the colocated engine's cache is "
                   f"rollout.vllm_gpu_memory_utilization ({rollout.get('vllm_gpu_memory_utilization', 0.3)}) instead")
    return out


def _command(submit: SubmitConfig, args: list[str], *, multi_process: bool) -> list[str]:
    """One process: ``dojo ...``. Several: the launch the multi-process tests run
    (tests/rl/test_distributed.py), ``accelerate launch --config_file ACCELERATE --num_processes N
    ... -m tooldojo ...``, with N = nodes x processes per node and the node's rank and rank 0's
    address from the Job's completion index and headless Service, or from the Trainer runtime's
    PET_* variables (Kubernetes expands ``$(VAR)`` from the container's environment)."""
    k = submit.k8s
    if not multi_process:
        return ["dojo", *args]
    launch = ["accelerate", "launch", "--config_file", ACCELERATE_PATH, "--num_processes", str(k.processes)]
    if k.kind == "trainjob":
        launch += ["--num_machines", str(k.nodes), "--machine_rank", "$(PET_NODE_RANK)",
                   "--main_process_ip", "$(PET_MASTER_ADDR)", "--main_process_port", "$(PET_MASTER_PORT)"]
    elif k.nodes > 1:
        launch += ["--num_machines", str(k.nodes), "--machine_rank", "$(NODE_RANK)",
                   "--main_process_ip", "$(MASTER_ADDR)", "--main_process_port", "$(MASTER_PORT)"]
    else:
        launch += ["--main_process_port", str(k.master_port)]
    return [*launch, "-m", "tooldojo", *args]


def _env(submit: SubmitConfig, name: str) -> list[dict]:
    k = submit.k8s
    env: list[dict] = [{"name": "TOOLDOJO_JOB", "value": name}, {"name": "TOOLDOJO_CONFIG", "value": CONFIG_PATH}]
    if k.kind == "job" and k.nodes > 1:
        env += [
            {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}},
            {"name": "NNODES", "value": str(k.nodes)},
            {"name": "NPROC_PER_NODE", "value": str(max(1, k.gpus))},
            {"name": "MASTER_ADDR", "value": f"{name}-0.{name}"},
            {"name": "MASTER_PORT", "value": str(k.master_port)},
        ]
    env += [{"name": n, "value": v} for n, v in sorted(k.env.items())]
    env += [{"name": s.env, "valueFrom": {"secretKeyRef": {"name": s.secret, "key": s.key}}} for s in k.secrets]
    env += [{"name": v, "valueFrom": {"secretKeyRef": {"name": f"{name}-env", "key": v}}} for v in k.secrets_from_env]
    return env


def _volumes(submit: SubmitConfig, name: str) -> tuple[list[dict], list[dict]]:
    k = submit.k8s
    volumes: list[dict] = [{"name": "tooldojo-config", "configMap": {"name": f"{name}-config"}}]
    mounts: list[dict] = [{"name": "tooldojo-config", "mountPath": CONFIG_DIR, "readOnly": True}]
    if k.effective_shm:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": k.effective_shm}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if k.pvc is not None:
        volumes.append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": k.pvc.name}})
        mounts.append({"name": "checkpoints", "mountPath": k.pvc.mount_path})
    return volumes, mounts


def _resources(submit: SubmitConfig) -> dict:
    k = submit.k8s
    req: dict[str, Any] = {}
    if k.cpu:
        req["cpu"] = k.cpu
    if k.memory:
        req["memory"] = k.memory
    if k.gpus:
        req[k.gpu_resource] = str(k.gpus)
    return {"requests": dict(req), "limits": dict(req)} if req else {}


def _placement(submit: SubmitConfig) -> dict:
    k = submit.k8s
    out: dict[str, Any] = {}
    if k.node_selector:
        out["nodeSelector"] = dict(k.node_selector)
    if k.effective_tolerations:
        out["tolerations"] = k.effective_tolerations
    if k.service_account:
        out["serviceAccountName"] = k.service_account
    if k.priority_class:
        out["priorityClassName"] = k.priority_class
    if k.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": s} for s in k.image_pull_secrets]
    return out


def _trainjob(submit: SubmitConfig, name: str, meta: dict, command: list[str], env: list[dict], resources: dict,
              volumes: list[dict], mounts: list[dict], pod_labels: dict, git_commit: str,
              trainer_version: str = "2.3") -> dict:
    """A TrainJob built with kubeflow-trainer-api's typed models (types checked there), as a camelCase dict;
    for Trainer 2.1 its runtime patch becomes the pod template override that release has instead (the
    same pod metadata and spec, targeting the node job), checked by k8s.validate against 2.1's schema."""
    from kubeflow_trainer_api import models as m
    from pydantic import ValidationError

    k = submit.k8s
    placement = _placement(submit)
    try:
        pod_patch = m.TrainerV1alpha1PodSpecPatch.from_dict({
            **{kk: v for kk, v in placement.items() if kk != "priorityClassName"},
            "volumes": volumes,
            "containers": [{"name": TRAINJOB_CONTAINER, "volumeMounts": mounts}],
        })
        trainer: dict[str, Any] = {"image": k.image, "command": command, "numNodes": k.nodes, "env": env}
        if k.gpus:
            trainer["numProcPerNode"] = k.gpus
        if resources:
            trainer["resourcesPerNode"] = resources
        job = m.TrainerV1alpha1TrainJob.from_dict({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta,
            "spec": {
                "runtimeRef": {"name": k.runtime, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
                "trainer": trainer,
                **({"activeDeadlineSeconds": k.active_deadline_s} if k.active_deadline_s else {}),
                "runtimePatches": [{"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
                    "name": TRAINJOB_CONTAINER,
                    "template": {"metadata": {"labels": pod_labels}, "spec": {"template": {
                        "metadata": {"labels": pod_labels, "annotations": {ANN_COMMIT: git_commit}},
                        "spec": pod_patch.to_dict()}}}}]}}}}],
            }})
    except ValidationError as e:
        first = e.errors()[0]
        raise SubmitConfigError(f"TrainJob: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    out = _plain(job.to_dict())
    if trainer_version == "2.1":
        if k.active_deadline_s:
            raise SubmitConfigError("k8s.active_deadline_s: a TrainJob of Kubeflow Trainer 2.1 has no "
                                    "spec.activeDeadlineSeconds (2.2 and later do); drop it or pass --trainer-version 2.2")
        spec = out["spec"]
        pod = spec.pop("runtimePatches")[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
            "template"]["spec"]["template"]
        spec["podTemplateOverrides"] = [{"targetJobs": [{"name": TRAINJOB_CONTAINER}], "metadata": pod["metadata"],
                                         "spec": pod["spec"]}]
    return out


def _plain(obj: Any) -> Any:
    """Model dumps may hold Quantity wrappers or non-JSON scalars; make a plain JSON tree."""
    return json.loads(json.dumps(obj, default=str))
