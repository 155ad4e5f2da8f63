"""What `dojo submit CONFIG.yaml` reads: the job to run and where to run it.

    job:                          # the tooldojo job
      kind: train                 # train | synth | eval
      name: grpo-tiny             # the Kubernetes name (default: <kind>-<config file stem>)
      config_file: ../train_tiny.yaml   # its own config, relative to this file (or `config:` inline)
      args: []                    # extra arguments after the command (see `command`)
    k8s:                          # K8sJobConfig
      kind: job                   # job: batch/v1 indexed Job | trainjob: Kubeflow Trainer TrainJob
      accelerate_config_file: ../accelerate/ddp.yaml   # nodes x gpus > 1: the `accelerate launch` config
      generation_memory_cap: 0.3  # train: the share of free GPU memory generation's KV cache may take at most
      image: registry.example/tooldojo:0.1
      gpus: 8                     # per node
      nodes: 2
      pvc: {name: tooldojo-checkpoints, create: true, size: 200Gi}
      secrets: [{env: HF_TOKEN, secret: hf-token, key: token}]

Everything is validated before anything is rendered: unknown keys are errors (`k8s.gpu: unknown key`),
and a train job's own config is validated by `rl.config` (so a bad learning rate fails here, not
an hour later on a GPU node).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
MAX_NAME = 52  # pods of an indexed Job are <name>-<index>-<5 chars>; hostnames stop at 63
CONFIG_DIR = "/etc/tooldojo"
CONFIG_PATH = f"{CONFIG_DIR}/config.yaml"
# the training setting k8s.generation_memory_cap sets, as a `dojo train` override (rl.config, issue 32)
GENERATION_MEMORY_CAP_KEY = "rollout.generation_memory_cap"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _quantity(v: str | None) -> str | None:
    if v is not None and not QUANTITY.match(str(v)):
        raise ValueError(f"{v!r} is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
    return None if v is None else str(v)


class SecretEnv(_Model):
    """An environment variable read from an existing Secret: `kubectl create secret generic hf-token --from-literal=token=...`."""

    env: str
    secret: str
    key: str

    @field_validator("env")
    @classmethod
    def _env(cls, v: str) -> str:
        if not ENV_NAME.match(v):
            raise ValueError(f"{v!r} is not an environment variable name")
        return v


class PVCConfig(_Model):
    """Checkpoints outlive pods on a PersistentVolumeClaim; `create: true` makes it (once, kept after the job)."""

    name: str
    mount_path: str = "/checkpoints"
    create: bool = False
    size: str | None = None
    storage_class: str | None = None
    access_modes: list[Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod", "ReadOnlyMany"]] = Field(
        default_factory=lambda: ["ReadWriteMany"])

    @field_validator("size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        return _quantity(v)

    @model_validator(mode="after")
    def _create(self) -> PVCConfig:
        if self.create and not self.size:
            raise ValueError("create: true needs a size (e.g. 200Gi)")
        if not self.mount_path.startswith("/"):
            raise ValueError("mount_path must be absolute")
        return self


class K8sJobConfig(_Model):
    """Where and how the job runs on Kubernetes (the `k8s:` section)."""

    kind: Literal["job", "trainjob"] = Field("job", description="job: batch/v1 indexed Job (no operator); "
                                                                "trainjob: a Kubeflow Trainer v2 TrainJob")
    image: str = Field(..., min_length=1, description="an image with tooldojo installed (`dojo` on PATH)")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    image_pull_secrets: list[str] = Field(default_factory=list)
    namespace: str = "tooldojo"
    nodes: int = Field(1, ge=1, le=1024)
    gpus: int = Field(0, ge=0, le=64, description="GPUs per node (limits; requests are set equal)")
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str | None = Field(None, description="CPU per node (requests = limits)")
    memory: str | None = Field(None, description="memory per node (requests = limits)")
    shm_size: str | None = Field(None, description="/dev/shm as a memory emptyDir; default 16Gi with GPUs")
    tolerations: list[dict[str, Any]] | None = Field(
        None, description="default with GPUs: tolerate the nvidia.com/gpu NoSchedule taint")
    node_selector: dict[str, str] = Field(default_factory=dict)
    pvc: PVCConfig | None = None
    secrets: list[SecretEnv] = Field(default_factory=list)
    secrets_from_env: list[str] = Field(
        default_factory=list, description="names of local environment variables copied into a Secret owned by the job")
    env: dict[str, str] = Field(default_factory=dict)
    service_account: str | None = None
    priority_class: str | None = None
    active_deadline_s: int | None = Field(None, gt=0)
    backoff_limit: int = Field(0, ge=0, description="pod failures tolerated (job kind); 0: resubmit instead")
    ttl_after_finished_s: int | None = Field(None, ge=0, description="delete the finished Job after this long")
    master_port: int = Field(29500, gt=0, lt=65536)
    accelerate_config_file: str | None = Field(
        None, description="a train job on several processes (nodes x GPUs > 1) runs under `accelerate launch` with "
                          "this accelerate config, relative to this file (e.g. ../accelerate/fsdp2.yaml); default: "
                          "DDP, as examples/accelerate/ddp.yaml")
    accelerate_config: dict[str, Any] | None = Field(None, description="the accelerate config, inline")
    generation_memory_cap: float | None = Field(
        None, description="a train job: the largest share of free GPU memory generation's KV cache may take on each "
                          "GPU, in (0, 1] (transformers continuous batching's max_memory_percent); rendered as the "
                          f"override {GENERATION_MEMORY_CAP_KEY}=<x> of `dojo train`; default: the training "
                          "config's. A colocated vLLM engine keeps rollout.vllm_gpu_memory_utilization")
    runtime: str = Field("torch-distributed", description="trainjob: the ClusterTrainingRuntime to use")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("cpu", "memory", "shm_size")
    @classmethod
    def _q(cls, v: str | None) -> str | None:
        return _quantity(v)

    @field_validator("generation_memory_cap", mode="before")
    @classmethod
    def _cap(cls, v: Any) -> float | None:
        # NaN fails the comparison; a bool or a string is no share
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1):
            raise ValueError(f"{v!r} is not a share of free GPU memory in (0, 1] (e.g. 0.3)")
        return None if v is None else float(v)

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        if not DNS1035.match(v) or len(v) > 63:
            raise ValueError(f"{v!r} is not a valid namespace name")
        return v

    @field_validator("secrets_from_env")
    @classmethod
    def _envs(cls, v: list[str]) -> list[str]:
        for name in v:
            if not ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return v

    @model_validator(mode="after")
    def _accelerate(self) -> K8sJobConfig:
        if self.accelerate_config is not None and self.accelerate_config_file is not None:
            raise ValueError("give accelerate_config or accelerate_config_file, not both")
        return self

    @property
    def processes(self) -> int:
        """Training processes, all nodes together: one per GPU (one per node without GPUs)."""
        return self.nodes * max(1, self.gpus)

    @property
    def effective_shm(self) -> str | None:
        return self.shm_size or ("16Gi" if self.gpus else None)

    @property
    def effective_tolerations(self) -> list[dict[str, Any]]:
        if self.tolerations is not None:
            return [dict(t) for t in self.tolerations]
        if self.gpus:
            return [{"key": self.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}]
        return []


class JobSpec(_Model):
    """The tooldojo job (the `job:` section)."""

    kind: Literal["train", "synth", "eval"]
    name: str | None = Field(None, description="the Kubernetes name; default <kind>-<config file stem>")
    config: dict[str, Any] | None = Field(None, description="the job's own config, inline")
    config_file: str | None = Field(None, description="the job's own config file, relative to the submit file")
    args: list[str] = Field(default_factory=list, description="appended to the command")
    command: list[str] | None = Field(
        None, description="the `dojo` arguments, replacing the default (train: [train, {config}]; eval: "
                          "[eval, run, {config}]; synth: [synth]); {config} is the mounted config file")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and (not DNS1035.match(v) or len(v) > MAX_NAME):
            raise ValueError(f"{v!r} must be a DNS-1035 label (lowercase letters, digits, '-', starting with a letter) "
                             f"of at most {MAX_NAME} characters")
        return v

    @model_validator(mode="after")
    def _source(self) -> JobSpec:
        if self.config is not None and self.config_file is not None:
            raise ValueError("give config or config_file, not both")
        if self.kind in ("train", "eval") and self.config is None and self.config_file is None:
            raise ValueError(f"a {self.kind} job needs its config (config: {{...}} or config_file: PATH)")
        if self.kind == "synth" and not (self.args or self.command):
            raise ValueError("a synth job needs args, e.g. [tasks, --n, '1000', --out, /checkpoints/tasks]")
        return self


class SubmitConfig(_Model):
    job: JobSpec
    k8s: K8sJobConfig

    @model_validator(mode="after")
    def _shape(self) -> SubmitConfig:
        if self.k8s.kind == "trainjob" and self.job.kind != "train":
            raise ValueError("k8s.kind trainjob runs train jobs only; use kind: job for synth and eval")
        if self.k8s.nodes > 1 and self.job.kind != "train":
            raise ValueError(f"a {self.job.kind} job runs on one node (k8s.nodes: 1)")
        if self.k8s.generation_memory_cap is not None:
            if self.job.kind != "train":
                raise ValueError(f"k8s.generation_memory_cap is a train job's setting (it caps rollout generation's "
                                 f"KV cache); drop it from this {self.job.kind} job")
            if any(a.startswith(f"{GENERATION_MEMORY_CAP_KEY}=") for a in self.job.args):
                raise ValueError(f"k8s.generation_memory_cap and job.args' {GENERATION_MEMORY_CAP_KEY}=... set the "
                                 "same thing; keep one")
        return self

    @property
    def train_overrides(self) -> list[str]:
        """The `dojo train` overrides the k8s section's settings render (before job.args)."""
        cap = self.k8s.generation_memory_cap
        return [] if cap is None else [f"{GENERATION_MEMORY_CAP_KEY}={cap!r}"]

    @property
    def name(self) -> str:
        if self.job.name:
            return self.job.name
        stem = Path(self.job.config_file).stem if self.job.config_file else "job"
        name = re.sub(r"[^a-z0-9-]+", "-", f"{self.job.kind}-{stem}".lower()).strip("-")[:MAX_NAME].rstrip("-")
        return name


class SubmitConfigError(ValueError):
    """A bad submit config; the message is one line per problem, each naming the field."""


def _translate(e: ValidationError, prefix: str = "") -> SubmitConfigError:
    lines = []
    for err in e.errors(include_url=False):
        where = prefix + ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required, but not set"
        else:
            msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where or 'config'}: {msg}")
    return SubmitConfigError("; ".join(dict.fromkeys(lines)))


def load_submit_config(path: str | Path) -> tuple[SubmitConfig, Path]:
    """The validated submit config and the folder its relative paths start from."""
    from sandboxes.cli_files import InputFileError, load_yaml

    p = Path(path)
    try:
        data = load_yaml(p, "submit config")
    except InputFileError as e:
        raise SubmitConfigError(str(e)) from None
    if not isinstance(data, dict):
        raise SubmitConfigError(f"{p} must hold a mapping with job: and k8s: sections")
    return parse_submit_config(data), p.resolve().parent


def parse_submit_config(data: dict[str, Any]) -> SubmitConfig:
    try:
        return SubmitConfig.model_validate(data)
    except ValidationError as e:
        raise _translate(e) from None


def resolve_job_config(submit: SubmitConfig, base_dir: Path) -> dict[str, Any] | None:
    """The job's own config as a mapping: read config_file, validate (train: by rl.config) and fill defaults;
    with a PVC, a relative run.output_dir moves onto it so checkpoints survive the pod."""
    import yaml

    job = submit.job
    data: Any = job.config
    if job.config_file is not None:
        f = (base_dir / job.config_file).resolve()
        try:
            data = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        except OSError as e:
            raise SubmitConfigError(f"job.config_file: cannot read {f}: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            raise SubmitConfigError(f"job.config_file: {f} is not valid YAML: {' '.join(str(e).split())}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise SubmitConfigError("job.config: must be a mapping")
    if job.kind != "train":
        return data
    from rl.config import ConfigError, validate_config

    try:
        cfg = validate_config(data)
    except ConfigError as e:
        raise SubmitConfigError("; ".join(f"job.config.{f}: {' '.join(str(r).split())}" if f else str(r)
                                          for f, r in e.problems)) from None
    resolved = cfg.model_dump(mode="json")
    pvc = submit.k8s.pvc
    out = resolved["run"]["output_dir"]
    if pvc is not None and not out.startswith("/"):
        resolved["run"]["output_dir"] = f"{pvc.mount_path.rstrip('/')}/{submit.name}/{out}"
    validate_config(resolved)  # the dump must load again, unchanged in meaning
    return resolved


# What examples/accelerate/ddp.yaml holds (a test keeps them equal): the launch of a multi-process
# train job that names no accelerate config.
DEFAULT_ACCELERATE: dict[str, Any] = {
    "compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_machines": 1, "num_processes": 2,
    "machine_rank": 0, "main_training_function": "main", "mixed_precision": "no", "rdzv_backend": "static",
    "same_network": True, "use_cpu": False,
}
ACCELERATE_KEYS = ("distributed_type", "mixed_precision")


def resolve_accelerate_config(submit: SubmitConfig, base_dir: Path) -> dict[str, Any] | None:
    """The accelerate config of a train job on several processes (None for one process): the file,
    the inline mapping, or DDP (:data:`DEFAULT_ACCELERATE`), with ``num_machines`` and
    ``num_processes`` set to the job's shape (what the launch's flags say too; the rest as given)."""
    import yaml

    k = submit.k8s
    if submit.job.kind != "train" or k.processes == 1:
        return None
    data: Any = k.accelerate_config if k.accelerate_config is not None else dict(DEFAULT_ACCELERATE)
    if k.accelerate_config_file is not None:
        f = (base_dir / k.accelerate_config_file).resolve()
        try:
            data = yaml.safe_load(f.read_text(encoding="utf-8"))
        except OSError as e:
            raise SubmitConfigError(f"k8s.accelerate_config_file: cannot read {f}: {e.strerror or e}") from None
        except yaml.YAMLError as e:
            raise SubmitConfigError(f"k8s.accelerate_config_file: {f} is not valid YAML: "
                                    f"{' '.join(str(e).split())}") from None
    if not isinstance(data, dict) or any(key not in data for key in ACCELERATE_KEYS):
        raise SubmitConfigError(f"k8s.accelerate_config: an accelerate config mapping with {', '.join(ACCELERATE_KEYS)} "
                                "(see examples/accelerate/)")
    if data.get("use_cpu") and k.gpus:
        raise SubmitConfigError("k8s.accelerate_config: use_cpu is set but the job asks for GPUs")
    return {**data, "num_machines": k.nodes, "num_processes": k.processes}


def git_commit(where: Path) -> str:
    """HEAD of the repository holding `where` (+"-dirty" with uncommitted changes); "unknown" outside one."""
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
