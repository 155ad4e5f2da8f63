"""Strict, offline validation of every manifest tooldojo renders, and the rules schemas cannot express.

    problems = validate_all(manifests)          # [] when every object is valid
    validate_all(manifests, raise_on_error=True)

Built-in kinds are checked against the official Kubernetes JSON schemas that ship inside
`kubernetes-validate` (its *strict* variant: unknown fields are errors). Custom resources are
checked against the schemas vendored in k8s/crds/ (TrainJob, one schema per Kubeflow Trainer
release: `trainer_version`, and agent-sandbox's Sandbox, SandboxTemplate, SandboxClaim,
SandboxWarmPool), also with unknown fields rejected; the
Kubernetes types they embed (PodSpec, EnvVar, Toleration...) resolve to the same official strict
definitions. `lint()` adds what the API server would only tell you at admission or runtime: GPU
requests must equal limits, a GPU pod needs /dev/shm as a memory emptyDir, an indexed multi-node
Job needs its headless Service, sandbox pods must carry every hardening control.

Nothing here touches a network.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CRD_DIR = Path(__file__).resolve().parent / "crds"
DEFAULT_K8S_VERSION = "1.33"
K8S_DEFS_ID = "https://kubernetes.io/api/_definitions.json"
TRAINJOB_API = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
# The Kubeflow Trainer releases whose TrainJob schema is vendored (k8s/crds/trainjob/), and where each
# puts the pod-level overrides: 2.1 spec.podTemplateOverrides; 2.2 replaced them by spec.runtimePatches
# (kubeflow/trainer#3309), which 2.3 keeps; 2.0's spec.podSpecOverrides cannot set pod labels, which
# tooldojo's jobs are found by, so 2.0 is not offered.
TRAINER_VERSIONS = ("2.1", "2.2", "2.3")
DEFAULT_TRAINER_VERSION = "2.3"
TRAINJOB_DIR = CRD_DIR / "trainjob"


def trainjob_schema_path(trainer_version: str = DEFAULT_TRAINER_VERSION) -> Path:
    return TRAINJOB_DIR / f"trainjob-trainer.kubeflow.org-v1alpha1-v{check_trainer_version(trainer_version)}.json"



class ManifestInvalid(ValueError):
    """One or more manifests failed validation; `problems` lists each as 'Kind/name: where: what'."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))


# ----------------------------------------------------------------- schemas
def check_k8s_version(version: str) -> str:
    """`version` (1.33, v1.33.2) as MAJOR.MINOR, when kubernetes-validate has schemas for it; else a ValueError
    saying which versions it has (a newer version must not quietly get older schemas)."""
    from kubernetes_validate import utils

    m = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,4})?", version.strip())
    known = sorted({utils.major_minor(v) for v in utils.all_versions()}, key=_vkey)
    span = f"{known[0]} to {known[-1]}" if known else "none"
    if m is None:
        raise ValueError(f"Kubernetes version {version!r} is not MAJOR.MINOR[.PATCH] (schemas: {span})")
    want = f"{int(m[1])}.{int(m[2])}"
    if not known or not _vkey(known[0]) <= _vkey(want) <= _vkey(known[-1]):
        raise ValueError(f"no schemas for Kubernetes {want}: kubernetes-validate has {span}")
    return want


def check_trainer_version(version: str) -> str:
    """`version` (2.3, v2.2.0) as MAJOR.MINOR, when a TrainJob schema of that Kubeflow Trainer release is
    vendored; else a ValueError naming the releases there are."""
    m = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,4})?", version.strip())
    want = f"{int(m[1])}.{int(m[2])}" if m else None
    if want not in TRAINER_VERSIONS:
        raise ValueError(f"no TrainJob schema for Kubeflow Trainer {version!r}: tooldojo has "
                         f"{', '.join(TRAINER_VERSIONS)} (MAJOR.MINOR)")
    return want


TRAINJOB_SCHEMA = trainjob_schema_path()  # the default release's


@functools.lru_cache(maxsize=8)
def trainjob_schema(trainer_version: str = DEFAULT_TRAINER_VERSION) -> dict:
    """The vendored TrainJob schema of a Kubeflow Trainer release."""
    return json.loads(trainjob_schema_path(trainer_version).read_text())


def _schema_dir(version: str) -> str:
    from kubernetes_validate import utils

    want = check_k8s_version(version)
    versions = [v for v in utils.all_versions() if _vkey(utils.major_minor(v)) <= _vkey(want)]
    return f"v{versions[-1]}-local-strict"


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


@functools.lru_cache(maxsize=8)
def _registry(version: str):
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    defs = utils.schema_contents(f"kubernetes-json-schema/{_schema_dir(version)}/_definitions.json", version)
    registry = Resource.from_contents(defs) @ Registry()
    for f in sorted(CRD_DIR.glob("*.json")) + sorted(TRAINJOB_DIR.glob("*.json")):
        registry = Resource.from_contents(json.loads(f.read_text())) @ registry
    return registry


@functools.lru_cache(maxsize=64)
def _builtin_schema(version: str, kind: str, api_version: str) -> dict | None:
    from kubernetes_validate import utils

    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        return utils.schema_contents(f"kubernetes-json-schema/{_schema_dir(version)}/{kind.lower()}-{api}.json",
                                     version)
    except FileNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> vendored schema (TrainJob apart: :func:`trainjob_schema`, per release)."""
    out = {}
    for f in sorted(CRD_DIR.glob("*.json")):
        s = json.loads(f.read_text())
        out[(s["properties"]["apiVersion"]["const"], s["properties"]["kind"]["const"])] = s
    return out


def _where(err: Any) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path).lstrip(".")
    return path or "(top level)"


def validate(obj: dict, version: str = DEFAULT_K8S_VERSION,
             trainer_version: str = DEFAULT_TRAINER_VERSION) -> list[str]:
    """Schema problems of one manifest ([] if valid), each as 'Kind/name: path: message'; a TrainJob
    against the schema of Kubeflow Trainer ``trainer_version``."""
    from jsonschema import Draft202012Validator

    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    name = f"{kind}/{(obj.get('metadata') or {}).get('name', '?')}"
    if not kind or not api_version:
        return [f"{name}: apiVersion and kind are required"]
    trainjob = (api_version, kind) == TRAINJOB_API
    schema = (trainjob_schema(trainer_version) if trainjob else crd_schemas().get((api_version, kind))) \
        or _builtin_schema(version, kind, api_version)
    if schema is None:
        return [f"{name}: no schema for {api_version} {kind} (Kubernetes {version}, or k8s/crds/)"]
    validator = Draft202012Validator(schema, registry=_registry(version))
    errors = sorted(validator.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    release = f" (not in Kubeflow Trainer {check_trainer_version(trainer_version)}'s TrainJob; see --trainer-version)"
    return [f"{name}: {_where(e)}: {_short(e)}" + (release if trainjob and e.validator == "additionalProperties"
                                                  else "") for e in errors]


def _short(err: Any) -> str:
    # oneOf/anyOf errors nest the useful message; prefer the deepest, most specific one
    if err.context:
        best = min(err.context, key=lambda e: (-len(list(e.absolute_path)), len(e.message)))
        return best.message
    return err.message


def validate_all(manifests: Iterable[dict], version: str = DEFAULT_K8S_VERSION, *,
                 trainer_version: str = DEFAULT_TRAINER_VERSION, raise_on_error: bool = False) -> list[str]:
    """Schema validation plus `lint()` of a set of manifests that belong together."""
    manifests = list(manifests)
    problems = [p for m in manifests for p in validate(m, version, trainer_version)]
    problems += lint(manifests)
    if problems and raise_on_error:
        raise ManifestInvalid(problems)
    return problems


# -------------------------------------------------------------------- lint
def _is_accelerator(resource_name: str) -> bool:
    return resource_name.endswith("/gpu") or resource_name.split("/")[-1] in ("gpu", "tpu", "neuron", "neuroncore")


def _container_problems(where: str, c: dict) -> tuple[list[str], int]:
    problems, gpus = [], 0
    res = c.get("resources") or {}
    req, lim = res.get("requests") or {}, res.get("limits") or {}
    for key in sorted(set(req) | set(lim)):
        if not _is_accelerator(key):
            continue
        if key not in lim:
            problems.append(f"{where}: container {c.get('name')}: {key} is requested but has no limit; "
                            "accelerators are set in limits (requests, if given, must equal them)")
        elif key in req and str(req[key]) != str(lim[key]):
            problems.append(f"{where}: container {c.get('name')}: {key} request {req[key]} != limit {lim[key]}; "
                            "Kubernetes rejects unequal requests and limits for extended resources")
        try:
            gpus += int(str(lim.get(key, req.get(key, 0))))
        except ValueError:
            problems.append(f"{where}: container {c.get('name')}: {key} must be a whole number, got {lim.get(key)}")
    return problems, gpus


def _shm_mounted(spec: dict, container: dict) -> bool:
    memory_dirs = {v["name"] for v in spec.get("volumes") or []
                   if (v.get("emptyDir") or {}).get("medium") == "Memory"}
    return any(m.get("mountPath") == "/dev/shm" and m.get("name") in memory_dirs
               for m in container.get("volumeMounts") or [])


def lint_pod_spec(where: str, spec: dict) -> list[str]:
    problems = []
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        p, gpus = _container_problems(where, c)
        problems += p
        if gpus > 0 and not _shm_mounted(spec, c):
            problems.append(f"{where}: container {c.get('name')} uses {gpus} GPU(s) but has no /dev/shm mounted from "
                            "an emptyDir with medium: Memory (NCCL and DataLoader workers crash with the 64 MiB default)")
    return problems


SANDBOX_REQUIRED = "tooldojo.dev/sandbox"


# Pod Security Standards, baseline: the capabilities a container may add.
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
# A sandbox pod may start as root with these alone: its tool server drops to a uid of its own
# (sandboxes.kubernetes_backend.SEPARATION_CAPS).
SEPARATION_CAPS = {"SETUID", "SETGID", "SETPCAP", "KILL"}


def lint_sandbox_pod(where: str, spec: dict) -> list[str]:
    """Every hardening control the sandbox backend promises, checked on the rendered pod."""
    problems = []
    if spec.get("automountServiceAccountToken") is not False:
        problems.append(f"{where}: automountServiceAccountToken must be false")
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        problems.append(f"{where}: host namespaces must not be shared")
    for c in spec.get("containers") or []:
        sc = c.get("securityContext") or {}
        name = f"{where}: container {c.get('name')}"
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: readOnlyRootFilesystem must be true")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{name}: capabilities.drop must include ALL")
        if sc.get("privileged"):
            problems.append(f"{name}: must not be privileged")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPS:
            problems.append(f"{name}: capabilities.add {sorted(added - BASELINE_CAPS)} is beyond Pod Security baseline")
        separating = sc.get("runAsUser") == 0 and added and added <= SEPARATION_CAPS
        if not (sc.get("runAsNonRoot") or (spec.get("securityContext") or {}).get("runAsNonRoot") or separating):
            problems.append(f"{name}: runAsNonRoot must be true (or a root start holding only "
                            f"{'/'.join(sorted(SEPARATION_CAPS))}, for the tool server to drop to its own uid)")
        lim = (c.get("resources") or {}).get("limits") or {}
        for r in ("cpu", "memory"):
            if r not in lim:
                problems.append(f"{name}: needs a {r} limit")
    return problems


def _pod_specs(m: dict) -> list[tuple[str, dict, dict]]:
    """(where, pod spec, pod metadata) of every pod template inside a manifest."""
    kind, name = m.get("kind"), (m.get("metadata") or {}).get("name", "?")
    where = f"{kind}/{name}"
    spec = m.get("spec") or {}
    if kind == "Pod":
        return [(where, spec, m.get("metadata") or {})]
    if kind == "Job":
        t = spec.get("template") or {}
        return [(where, t.get("spec") or {}, t.get("metadata") or {})]
    if kind in ("SandboxTemplate", "Sandbox"):
        t = spec.get("podTemplate") or {}
        return [(where, t.get("spec") or {}, t.get("metadata") or {})]
    return []


def _lint_trainjob(m: dict) -> list[str]:
    where = f"TrainJob/{(m.get('metadata') or {}).get('name', '?')}"
    trainer = (m.get("spec") or {}).get("trainer") or {}
    problems, gpus = _container_problems(where, {"name": "node", "resources": trainer.get("resourcesPerNode")})
    if gpus > 0:
        pods = []
        for rp in (m.get("spec") or {}).get("runtimePatches") or []:  # Trainer 2.2+
            jobs = ((((rp.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
                    .get("replicatedJobs") or [])
            pods += [((((rj.get("template") or {}).get("spec") or {}).get("template")) or {}).get("spec") or {}
                     for rj in jobs if rj.get("name") == "node"]
        for o in (m.get("spec") or {}).get("podTemplateOverrides") or []:  # Trainer 2.1
            if any(t.get("name") == "node" for t in o.get("targetJobs") or []):
                pods.append(o.get("spec") or {})
        ok = any(c.get("name") == "node" and _shm_mounted(pod, c) for pod in pods for c in pod.get("containers") or [])
        if not ok:
            problems.append(f"{where}: {gpus} GPU(s) per node but no runtime patch (or pod template override) mounts "
                            "/dev/shm from a memory emptyDir on the node container")
    return problems


def lint(manifests: list[dict]) -> list[str]:
    problems: list[str] = []
    services = {(m.get("metadata") or {}).get("name"): m for m in manifests if m.get("kind") == "Service"}
    for m in manifests:
        for where, spec, meta in _pod_specs(m):
            problems += lint_pod_spec(where, spec)
            if (meta.get("labels") or {}).get(SANDBOX_REQUIRED) or (m.get("metadata", {}).get("labels") or {}).get(
                    SANDBOX_REQUIRED):
                problems += lint_sandbox_pod(where, spec)
        if m.get("kind") == "Job":
            spec = m.get("spec") or {}
            n = int(spec.get("parallelism") or 1)
            if n > 1:
                where = f"Job/{m['metadata'].get('name')}"
                if spec.get("completionMode") != "Indexed" or int(spec.get("completions") or 1) != n:
                    problems.append(f"{where}: a multi-node job needs completionMode Indexed and completions == "
                                    "parallelism (one pod per node rank)")
                sub = (spec.get("template") or {}).get("spec", {}).get("subdomain")
                svc = services.get(sub)
                if not sub or svc is None or (svc.get("spec") or {}).get("clusterIP") != "None":
                    problems.append(f"{where}: pods of a multi-node job find rank 0 through a headless Service named "
                                    "by spec.template.spec.subdomain; it is missing")
        if m.get("kind") == "TrainJob":
            problems += _lint_trainjob(m)
    return problems


# ------------------------------------------------------ TrainJob schema
def trainjob_schema_from_models() -> dict:
    """The TrainJob schema derived from kubeflow-trainer-api's typed models (generated from the
    kubeflow/trainer OpenAPI spec of the same release): Trainer types strict, Kubernetes types as
    $refs to the official definitions. Written to k8s/crds/trainjob/ by `python -m k8s.validate
    --regenerate`, for the release of the package importable (an older one: PYTHONPATH=the unpacked
    wheel of kubeflow-trainer-api==2.1.0)."""
    from importlib.metadata import version

    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    release = ".".join(version("kubeflow-trainer-api").split(".")[:2])
    from kubernetes_validate import utils

    raw = TrainerV1alpha1TrainJob.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    defs = raw.pop("$defs")
    official = utils.schema_contents(f"kubernetes-json-schema/{_schema_dir('1.37')}/_definitions.json", "1.37")
    camel = {"".join(p[:1].upper() + p[1:] for p in k.split(".")): k for k in official["$defs"]}

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name.startswith("IoK8s"):
                if name not in camel:
                    raise KeyError(f"no official definition for {name}")
                return {"$ref": f"{K8S_DEFS_ID}#/$defs/{camel[name]}"}
            return {"$ref": f"#/$defs/{name}"}
        any_of = node.get("anyOf")
        if any_of and len(any_of) == 2 and {"type": "null"} in any_of:
            inner = next(a for a in any_of if a != {"type": "null"})
            return fix(inner)
        out = {k: fix(v) for k, v in node.items() if k not in ("title", "description", "default")}
        if node.get("format") == "date-time":
            out = {"type": "string", "format": "date-time"}
        if "properties" in out:
            out = {k: out[k] for k in ("type", "properties", "required") if k in out}
            out["type"] = "object"
            out["additionalProperties"] = False
        return out

    trainer_defs = {k: fix(v) for k, v in defs.items() if not k.startswith("IoK8s")}
    for k in list(trainer_defs):
        if k == "TrainerV1alpha1TrainJobStatus" or k.startswith(("TrainerV1alpha1JobStatus", "TrainerV1alpha1Metric",
                                                                "TrainerV1alpha1TrainerStatus")):
            trainer_defs[k] = {"type": "object"}  # status is the controller's; not validated
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://tooldojo.dev/crds/trainjob-trainer.kubeflow.org-v1alpha1-v{release}.json",
        "title": f"TrainJob trainer.kubeflow.org/v1alpha1 (Kubeflow Trainer {release})",
        "description": f"Generated by `python -m k8s.validate --regenerate` from kubeflow-trainer-api "
                       f"{version('kubeflow-trainer-api')} (typed models generated from the kubeflow/trainer OpenAPI "
                       "spec of that release). Unknown fields are rejected; Kubernetes types use kubernetes-validate's "
                       "strict official schemas. See k8s/crds/README.md.",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "trainer.kubeflow.org/v1alpha1"},
            "kind": {"const": "TrainJob"},
            "metadata": {"$ref": f"{K8S_DEFS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
            "spec": {"$ref": "#/$defs/TrainerV1alpha1TrainJobSpec"},
            "status": {"type": "object"},
        },
        "$defs": dict(sorted(trainer_defs.items())),
    }


def _main() -> None:
    import sys

    if sys.argv[1:] == ["--regenerate"]:
        from importlib.metadata import version

        path = trainjob_schema_path(version("kubeflow-trainer-api"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(trainjob_schema_from_models(), indent=1) + "\n")
        print(f"wrote {path}")
        return
    import yaml

    problems = []
    for path in sys.argv[1:]:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc:
                problems += [f"{path}: {p}" for p in validate(doc)]
    print("\n".join(problems) if problems else "ok")
    raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    _main()
