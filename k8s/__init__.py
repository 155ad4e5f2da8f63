"""tooldojo on Kubernetes: `dojo submit` / `dojo jobs` and what the cluster admin applies.

* `k8s.config`   the submit config (`job:` + `k8s:`), validated before anything is rendered
* `k8s.render`   the job's manifests: an indexed batch/v1 Job with torchrun, or a Kubeflow TrainJob
* `k8s.validate` strict offline validation (official schemas + vendored CRD schemas + a lint)
* `k8s.jobs`     submit, status, logs, events, cancel, resubmit against any API server
* `k8s.client`   the typed kubernetes client wrapper (it lives in `sandboxes.kube`)
* `k8s.fake_apiserver`  a FAKE API server for tests
* `k8s/manifests/`      namespaces, RBAC, NetworkPolicy, an optional gVisor RuntimeClass (kustomize)

The kubernetes sandbox backend is `sandboxes.kubernetes_backend`.
"""
