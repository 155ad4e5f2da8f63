"""The FAKE API server's tiny controllers (k8s/fake_apiserver.py): a Job makes its (indexed) pods, a
TrainJob one pod per node, a SandboxWarmPool keeps warm Sandboxes, a SandboxClaim adopts one (or
cold-starts one); pod phases drive their owners' status."""

from __future__ import annotations

import copy
import threading

from k8s.fake_objects import CORE, INDEX_KEY, POD_NAME_ANNOTATION, TERMINAL, WARM_POOL_LABEL, rand_suffix, utc_now


class Controllers:
    """Controller reactions to creates, deletes and pod phases (mixed into FakeApiServer: uses its store)."""

    def _after_create(self, group: str, plural: str, obj: dict) -> None:
        kind = obj["kind"]
        if kind == "Pod":
            self._event(obj["metadata"]["namespace"], obj, "Normal", "Scheduled",
                        f"Successfully assigned {obj['metadata']['namespace']}/{obj['metadata']['name']} to fake-node",
                        source="default-scheduler")
            if self.auto_start_pods:
                t = threading.Timer(self.start_delay_s, self._auto_run,
                                    args=(obj["metadata"]["namespace"], obj["metadata"]["name"], obj["metadata"]["uid"]))
                t.daemon = True
                self._timers.append(t)
                t.start()
        elif kind == "Job":
            self._run_job(obj)
        elif kind == "TrainJob":
            self._run_trainjob(obj)
        elif kind == "SandboxWarmPool":
            self._fill_warm_pool(obj)
        elif kind == "SandboxClaim":
            self._claim(obj)

    def _after_delete(self, group: str, plural: str, obj: dict) -> None:
        if obj["kind"] == "Sandbox":
            pool = obj["metadata"].get("labels", {}).get(WARM_POOL_LABEL)
            wp = self._objs.get(("extensions.agents.x-k8s.io", "sandboxwarmpools", obj["metadata"]["namespace"], pool or ""))
            if wp is not None:
                self._fill_warm_pool(wp)

    def _auto_run(self, ns: str, name: str, uid: str) -> None:
        with self._lock:
            pod = self._objs.get((CORE, "pods", ns, name))
            if pod is None or pod["metadata"]["uid"] != uid or pod["status"].get("phase") != "Pending":
                return
            if (pod["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("waiting"):
                return  # a test parked it (image pull error...)
            self._apply_phase(pod, "Running")
            self._modified(CORE, "pods", pod)
            self._reconcile_owners(pod)

    def _apply_phase(self, pod: dict, phase: str, *, exit_code: int | None = None, reason: str | None = None,
                     message: str | None = None) -> None:
        now = utc_now()
        st = pod.setdefault("status", {})
        st["phase"] = phase
        st.setdefault("startTime", now)
        st.setdefault("podIP", f"10.0.0.{next(self._ips) % 250 + 2}")
        st["hostIP"] = "10.1.0.1"
        pod["spec"].setdefault("nodeName", "fake-node")
        if phase == "Running":
            state = {"running": {"startedAt": now}}
            ready = "True"
            self._event(pod["metadata"]["namespace"], pod, "Normal", "Started", "Started container")
        elif phase in TERMINAL:
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            state = {"terminated": {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                                    "message": message or "", "startedAt": st["startTime"], "finishedAt": now}}
            ready = "False"
        else:
            state = {"waiting": {"reason": reason or "ContainerCreating"}}
            ready = "False"
        st["conditions"] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": ready}]
        if reason and phase in TERMINAL:
            st["reason"] = reason
        if message:
            st["message"] = message
        st["containerStatuses"] = [{"name": c["name"], "ready": ready == "True", "restartCount": 0,
                                    "image": c.get("image", ""), "imageID": "", "state": state}
                                   for c in pod["spec"]["containers"]]

    def _owner_ref(self, owner: dict) -> dict:
        return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    def _new_pod(self, ns: str, name: str, template: dict, labels: dict, annotations: dict,
                 owner: dict, hostname: str | None = None) -> dict:
        spec = copy.deepcopy(template.get("spec") or {})
        if hostname:
            spec["hostname"] = hostname
        meta = {"name": name, "labels": {**(template.get("metadata") or {}).get("labels", {}), **labels},
                "annotations": {**(template.get("metadata") or {}).get("annotations", {}), **annotations},
                "ownerReferences": [self._owner_ref(owner)]}
        pod = self._insert(CORE, "pods", ns, {"metadata": meta, "spec": spec})
        self._event(ns, owner, "Normal", "SuccessfulCreate", f"Created pod: {name}", source=f"{owner['kind'].lower()}-controller")
        return pod

    def _run_job(self, job: dict) -> None:
        spec, meta = job["spec"], job["metadata"]
        if spec.get("suspend"):
            return
        n = int(spec.get("completions") or spec.get("parallelism") or 1)
        indexed = spec.get("completionMode") == "Indexed"
        sub = spec["template"]["spec"].get("subdomain")
        for i in range(n):
            labels = {"batch.kubernetes.io/controller-uid": meta["uid"], "controller-uid": meta["uid"],
                      "batch.kubernetes.io/job-name": meta["name"], "job-name": meta["name"]}
            ann = {}
            if indexed:
                labels[INDEX_KEY] = ann[INDEX_KEY] = str(i)
            name = f"{meta['name']}-{i}-{rand_suffix()}" if indexed else f"{meta['name']}-{rand_suffix()}"
            self._new_pod(meta["namespace"], name, spec["template"], labels, ann, job,
                          hostname=f"{meta['name']}-{i}" if indexed and sub else None)
        job["status"] = {"active": n, "startTime": utc_now(), "ready": 0}
        self._modified("batch", "jobs", job)

    def _run_trainjob(self, tj: dict) -> None:
        spec, meta = tj["spec"], tj["metadata"]
        if spec.get("suspend"):
            return
        trainer = spec.get("trainer") or {}
        n = int(trainer.get("numNodes") or 1)
        patch: dict = {}
        for rp in spec.get("runtimePatches") or []:
            for rj in (((rp.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get(
                    "replicatedJobs") or []:
                if rj.get("name") == "node":
                    patch = (((rj.get("template") or {}).get("spec") or {}).get("template")) or {}
        for o in spec.get("podTemplateOverrides") or []:  # Kubeflow Trainer 2.1
            if any(t.get("name") == "node" for t in o.get("targetJobs") or []):
                patch = {"metadata": o.get("metadata") or {}, "spec": o.get("spec") or {}}
        pspec = patch.get("spec") or {}
        mounts = next((c.get("volumeMounts") for c in pspec.get("containers") or [] if c.get("name") == "node"), [])
        container = {"name": "node", "image": trainer.get("image", "runtime-default"),
                     "command": trainer.get("command"), "args": trainer.get("args"), "env": trainer.get("env"),
                     "resources": trainer.get("resourcesPerNode"), "volumeMounts": mounts}
        template = {"metadata": patch.get("metadata") or {}, "spec": {
            "containers": [{k: v for k, v in container.items() if v}], "restartPolicy": "Never",
            **{k: pspec[k] for k in ("volumes", "nodeSelector", "tolerations", "serviceAccountName") if k in pspec}}}
        for i in range(n):
            labels = {"jobset.sigs.k8s.io/jobset-name": meta["name"], "jobset.sigs.k8s.io/replicatedjob-name": "node",
                      "batch.kubernetes.io/job-name": f"{meta['name']}-node-0", INDEX_KEY: str(i)}
            self._new_pod(meta["namespace"], f"{meta['name']}-node-0-{i}-{rand_suffix()}", template, labels,
                          {INDEX_KEY: str(i)}, tj)
        tj["status"] = {"conditions": []}
        self._modified("trainer.kubeflow.org", "trainjobs", tj)

    def _reconcile_owners(self, pod: dict) -> None:
        ns = pod["metadata"]["namespace"]
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref["kind"] == "Job":
                job = self._objs.get(("batch", "jobs", ns, ref["name"]))
                if job is not None:
                    self._reconcile_job(job)
            elif ref["kind"] == "TrainJob":
                tj = self._objs.get(("trainer.kubeflow.org", "trainjobs", ns, ref["name"]))
                if tj is not None:
                    self._reconcile_trainjob(tj)
            elif ref["kind"] == "Sandbox":
                sb = self._objs.get(("agents.x-k8s.io", "sandboxes", ns, ref["name"]))
                if sb is not None:
                    self._reconcile_sandbox(sb, pod)

    def _owned_pods(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        return [o for (g, p, _, _), o in self._objs.items() if p == "pods" and g == CORE
                and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    def _reconcile_job(self, job: dict) -> None:
        pods = self._owned_pods(job)
        phases = [p["status"].get("phase") for p in pods]
        st = job.setdefault("status", {})
        st["active"] = sum(ph not in TERMINAL for ph in phases)
        st["ready"] = sum(ph == "Running" for ph in phases)
        st["succeeded"] = phases.count("Succeeded")
        st["failed"] = phases.count("Failed")
        completions = int(job["spec"].get("completions") or 1)
        backoff = int(job["spec"].get("backoffLimit", 6))
        conds = st.setdefault("conditions", [])
        if not conds:
            if st["succeeded"] >= completions:
                conds += [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": utc_now()},
                          {"type": "Complete", "status": "True", "lastTransitionTime": utc_now()}]
                st["completionTime"] = utc_now()
            elif st["failed"] > backoff:
                msg = "Job has reached the specified backoff limit"
                conds += [{"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": msg},
                          {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": msg,
                           "lastTransitionTime": utc_now()}]
                self._event(job["metadata"]["namespace"], job, "Warning", "BackoffLimitExceeded", msg,
                            source="job-controller")
        self._modified("batch", "jobs", job)

    def _reconcile_trainjob(self, tj: dict) -> None:
        phases = [p["status"].get("phase") for p in self._owned_pods(tj)]
        conds = tj.setdefault("status", {}).setdefault("conditions", [])
        if not any(c["type"] in ("Complete", "Failed") for c in conds):
            if phases and all(ph == "Succeeded" for ph in phases):
                conds.append({"type": "Complete", "status": "True", "reason": "JobsCompleted",
                              "message": "jobset completed successfully", "lastTransitionTime": utc_now()})
            elif "Failed" in phases:
                conds.append({"type": "Failed", "status": "True", "reason": "JobsFailed",
                              "message": "jobset failed", "lastTransitionTime": utc_now()})
        self._modified("trainer.kubeflow.org", "trainjobs", tj)

    # agent-sandbox: a warm pool keeps `replicas` unclaimed Sandboxes; a claim adopts one
    def _template(self, ns: str, name: str) -> dict | None:
        return self._objs.get(("extensions.agents.x-k8s.io", "sandboxtemplates", ns, name))

    def _new_sandbox(self, ns: str, name: str, template: dict, owner: dict, labels: dict) -> dict:
        pod_template = template["spec"]["podTemplate"]
        sb = self._insert("agents.x-k8s.io", "sandboxes", ns, {
            "metadata": {"name": name, "labels": labels, "ownerReferences": [self._owner_ref(owner)],
                         "annotations": {POD_NAME_ANNOTATION: name}},
            "spec": {"podTemplate": copy.deepcopy(pod_template)}})
        self._new_pod(ns, name, pod_template, labels, {}, sb)
        return sb

    def _fill_warm_pool(self, wp: dict) -> None:
        ns, name = wp["metadata"]["namespace"], wp["metadata"]["name"]
        tmpl = self._template(ns, (wp["spec"].get("sandboxTemplateRef") or {}).get("name", ""))
        if tmpl is None:
            return
        have = [o for (g, p, n, _), o in self._objs.items() if p == "sandboxes" and n == ns
                and o["metadata"]["labels"].get(WARM_POOL_LABEL) == name]
        for _ in range(int(wp["spec"].get("replicas", 1)) - len(have)):
            self._new_sandbox(ns, f"{name}-{rand_suffix()}", tmpl, wp, {WARM_POOL_LABEL: name})
        wp["status"] = {"replicas": int(wp["spec"].get("replicas", 1)), "readyReplicas": 0}
        self._modified("extensions.agents.x-k8s.io", "sandboxwarmpools", wp)

    def _claim(self, claim: dict) -> None:
        ns, meta = claim["metadata"]["namespace"], claim["metadata"]
        pool_name = (claim["spec"].get("warmPoolRef") or {}).get("name", "")
        wp = self._objs.get(("extensions.agents.x-k8s.io", "sandboxwarmpools", ns, pool_name))
        extra = ((claim["spec"].get("additionalPodMetadata") or {}).get("labels")) or {}
        if wp is None:
            claim["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "WarmPoolNotFound",
                                               "message": f"SandboxWarmPool {pool_name!r} not found",
                                               "lastTransitionTime": utc_now()}]}
            self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)
            return
        warm = sorted((o for (g, p, n, _), o in self._objs.items() if p == "sandboxes" and n == ns
                       and o["metadata"]["labels"].get(WARM_POOL_LABEL) == pool_name),
                      key=lambda o: int(o["metadata"]["resourceVersion"]))
        if warm:
            sb = warm[0]
            sb["metadata"]["labels"].pop(WARM_POOL_LABEL, None)
            sb["metadata"]["labels"].update(extra)
            sb["metadata"]["ownerReferences"] = [self._owner_ref(claim)]
            self._modified("agents.x-k8s.io", "sandboxes", sb)
            pod = self._objs.get((CORE, "pods", ns, sb["metadata"]["annotations"][POD_NAME_ANNOTATION]))
            if pod is not None:
                pod["metadata"]["labels"].pop(WARM_POOL_LABEL, None)
                pod["metadata"]["labels"].update(extra)
                self._modified(CORE, "pods", pod)
            self._fill_warm_pool(wp)
        else:
            tmpl = self._template(ns, (wp["spec"].get("sandboxTemplateRef") or {}).get("name", ""))
            if tmpl is None:
                claim["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "TemplateNotFound",
                                                   "message": "SandboxTemplate not found", "lastTransitionTime": utc_now()}]}
                self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)
                return
            sb = self._new_sandbox(ns, meta["name"], tmpl, claim, extra)
            pod = self._objs.get((CORE, "pods", ns, meta["name"]))
        ready = pod is not None and pod["status"].get("phase") == "Running"
        claim["status"] = {"sandbox": {"name": sb["metadata"]["name"]},
                           "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                           "reason": "SandboxReady" if ready else "SandboxNotReady",
                                           "message": "", "lastTransitionTime": utc_now()}]}
        self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)

    def _reconcile_sandbox(self, sb: dict, pod: dict) -> None:
        ready = pod["status"].get("phase") == "Running"
        sb["status"] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                        "reason": "DependenciesReady" if ready else "DependenciesNotReady",
                                        "message": "", "lastTransitionTime": utc_now()}],
                        "podIPs": [pod["status"].get("podIP")] if ready else []}
        self._modified("agents.x-k8s.io", "sandboxes", sb)
        for ref in sb["metadata"].get("ownerReferences") or []:
            if ref["kind"] == "SandboxClaim":
                claim = self._objs.get(("extensions.agents.x-k8s.io", "sandboxclaims", sb["metadata"]["namespace"],
                                        ref["name"]))
                if claim is not None:
                    claim.setdefault("status", {})["conditions"] = sb["status"]["conditions"]
                    self._modified("extensions.agents.x-k8s.io", "sandboxclaims", claim)
