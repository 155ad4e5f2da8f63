"""Size a cluster for N concurrent sandboxes on the kubernetes backend — on paper.

    python bench/k8s_plan.py [--target 10000] [--node-cpus 32 --node-mem-gib 128] [--cpu-request 0.25] ...

Nothing here runs on a cluster. From the backend's own settings (sandboxes.models.Limits and
KubernetesOptions defaults, overridable by flags) and the stated assumptions (node shape, client
processes, episode length, failure rate, cluster pod-creation throughput) it computes the pods,
nodes, warm-pool size, creation rates and API-server request rates the backend would use. The API
requests one sandbox start and close cost are MEASURED (unless --no-measure) by running the real
backend against the fake API server (k8s/fake_apiserver.py) and counting its requests, in both the
bare-pod and the agent-sandbox-claim mode; everything else is arithmetic. The LAST line on stdout is
one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from typing import Any

import _common  # noqa: E402  (first: fixes sys.path)

from sandboxes.models import KubernetesOptions, Limits

# What a start/close costs when it cannot be measured here (read off the backend's code path).
STATIC_REQUESTS = {
    "pods": {"start": 3, "close": 1, "per_process_once": 3,
             "calls": "POST pod, WATCH pod, GET exec (WebSocket); DELETE pod"},
    "claims": {"start": 5, "close": 1, "per_process_once": 5,
               "calls": "POST claim, WATCH claim, GET sandbox, WATCH pod, GET exec; DELETE claim"},
}


def _describe(call: tuple[str, str, dict]) -> str:
    method, path, query = call
    parts = path.strip("/").split("/")
    i = parts.index("namespaces") + 2 if "namespaces" in parts else len(parts) - 1
    resource = parts[i] if i < len(parts) else parts[-1]
    if len(parts) > i + 2:
        resource = parts[i + 2]  # a subresource: exec, log
    if method == "GET" and query.get("watch") == ["true"]:
        method = "WATCH"
    return f"{method} {resource}"


def measure_requests() -> dict[str, Any]:
    """Start and close sandboxes on the real backend against the fake API server; count the requests."""
    import anyio

    from k8s.fake_apiserver import FakeApiServer
    from sandboxes import SandboxConfig, open_sandbox
    from sandboxes import kubernetes_backend as kb

    out: dict[str, Any] = {}
    for mode in ("pods", "claims"):
        with FakeApiServer(auto_start_pods=True, agent_sandbox=mode == "claims") as fake:
            cfg = SandboxConfig(backend="kubernetes", image="python:3.12-slim", start_timeout_s=30,
                                kubernetes=KubernetesOptions(server=fake.url, namespace="plan"))

            async def run(cfg: SandboxConfig, fake: FakeApiServer) -> list[int]:
                marks = [len(fake.calls)]
                for _ in range(2):  # the first start also pays the per-process set-up
                    sb = await open_sandbox(cfg)
                    marks.append(len(fake.calls))
                    await sb.call_tool("counter_incr", {"name": "n"})
                    await sb.reset()
                    marks.append(len(fake.calls))
                    await sb.close()
                    marks.append(len(fake.calls))
                return marks

            try:
                m = anyio.run(run, cfg, fake)
            finally:
                kb.forget_clusters()
            first_start, second_start = m[1] - m[0], m[4] - m[3]
            out[mode] = {"start": second_start, "close": m[6] - m[5], "per_process_once": first_start - second_start,
                         "tool_calls_and_reset": m[5] - m[4],
                         "calls": ", ".join(_describe(c) for c in fake.calls[m[3]:m[6]])}
    return out


def plan(a: argparse.Namespace, requests: dict[str, Any], source: str) -> dict[str, Any]:
    lim, opts = Limits(), KubernetesOptions()
    cpu_req = a.cpu_request if a.cpu_request is not None else (opts.cpu_request or lim.cpus)
    mem_mib = a.memory_mb if a.memory_mb is not None else lim.memory_mb
    creations_per_client = a.creations_per_s if a.creations_per_s is not None else opts.creations_per_s
    api_qps_client = opts.api_qps
    mode = a.mode
    req = requests[mode]

    clients = math.ceil(a.target / a.sandboxes_per_client)
    # cold-start buffer: sandboxes that die are replaced; a cluster-side warm pool (SandboxWarmPool, or a
    # SandboxPool larger than its concurrency) hides the cold start of the replacements
    failures_per_s = a.target * a.failure_rate / a.episode_s
    expiries_per_s = a.target / opts.max_lifetime_s  # activeDeadlineSeconds retires every pod eventually
    steady_creations = failures_per_s + expiries_per_s
    warm = math.ceil(steady_creations * a.cold_start_s * 2) + math.ceil(a.target * a.warm_headroom)
    pods = a.target + warm

    cpu_alloc = a.node_cpus - a.node_reserved_cpus
    mem_alloc_mib = (a.node_mem_gib - a.node_reserved_mem_gib) * 1024
    per_node = {"max_pods": a.max_pods - a.daemonset_pods, "cpu": math.floor(cpu_alloc / cpu_req),
                "memory": math.floor(mem_alloc_mib / mem_mib)}
    limiting = min(per_node, key=per_node.get)
    pods_per_node = per_node[limiting]
    nodes = math.ceil(pods / pods_per_node)

    ramp_rate = min(a.cluster_creation_rate, clients * creations_per_client)
    ramp_s = pods / ramp_rate
    recommended_client_rate = max(0.1, round(a.cluster_creation_rate / clients, 2))
    qps_ramp = ramp_rate * req["start"] + clients * req["per_process_once"] / max(ramp_s, 1.0)
    qps_steady = steady_creations * (req["start"] + req["close"])
    return {
        "target_concurrent_sandboxes": a.target,
        "mode": mode,
        "pods": pods,
        "warm_pool_size": warm,
        "nodes": nodes,
        "pods_per_node": pods_per_node,
        "limiting_resource": limiting,
        "clients": clients,
        "sandboxes_per_client": a.sandboxes_per_client,
        "creation_rate_ramp_per_s": round(ramp_rate, 1),
        "ramp_to_target_s": round(ramp_s, 1),
        "creation_rate_steady_per_s": round(steady_creations, 2),
        "creations_per_s_per_client": creations_per_client,
        "recommended_creations_per_s_per_client": recommended_client_rate,
        "api_requests_per_start": req["start"],
        "api_requests_per_close": req["close"],
        "api_requests_per_episode_reused": 0,
        "api_qps_ramp": round(qps_ramp, 1),
        "api_qps_steady": round(qps_steady, 2),
        "api_qps_client_cap": round(clients * api_qps_client, 1),
        "exec_streams_open": a.target,
        "client_threads_peak": 2 * a.target,
        "requests_source": source,
        "requests_measured": requests,
        "settings": {
            "cpu_limit_cores": lim.cpus, "cpu_request_cores": cpu_req, "memory_mib": mem_mib,
            "scratch_mib_each": lim.scratch_mb, "ephemeral_storage_mib": opts.ephemeral_storage_mb,
            "creations_per_s": opts.creations_per_s, "creation_burst": opts.creation_burst,
            "api_qps_per_client": api_qps_client, "max_lifetime_s": opts.max_lifetime_s,
            "idle_exit_s": opts.idle_exit_s, "warm_pool_size_default": opts.warm_pool_size,
        },
        "assumptions": {
            "node_cpus": a.node_cpus, "node_mem_gib": a.node_mem_gib, "node_reserved_cpus": a.node_reserved_cpus,
            "node_reserved_mem_gib": a.node_reserved_mem_gib, "max_pods_per_node": a.max_pods,
            "daemonset_pods_per_node": a.daemonset_pods, "episode_s": a.episode_s,
            "failure_rate_per_episode": a.failure_rate, "cold_start_s": a.cold_start_s,
            "warm_headroom": a.warm_headroom, "cluster_creation_rate_per_s": a.cluster_creation_rate,
            "sandbox_reuse": "SandboxPool resets and reuses a sandbox across episodes; only replacements and "
                             "lifetime expiry create pods in steady state",
        },
        "notes": [
            "memory requests equal limits (no overcommit: an OOM kill is a sandbox's, not a neighbour's); the "
            "memory-backed scratch dirs count inside the memory limit",
            "Limits.pids has no per-pod field: set the kubelet's podPidsLimit on sandbox nodes",
            "every open sandbox holds one exec WebSocket through the API server to its kubelet: spread clients "
            "across API server replicas; raise the API server's --max-requests-inflight if long-running requests "
            "are capped",
            "NetworkPolicy isolation needs a CNI that enforces it; gVisor (runtime_class) needs runsc on the nodes",
            "numbers are arithmetic on the stated assumptions, not measurements of a cluster",
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--target", type=int, default=10_000, help="concurrent sandboxes")
    ap.add_argument("--mode", choices=["pods", "claims"], default="pods", help="bare pods or agent-sandbox claims")
    ap.add_argument("--cpu-request", type=float, default=None, help="cores per sandbox (default: the backend's)")
    ap.add_argument("--memory-mb", type=int, default=None, help="MiB per sandbox (default: Limits.memory_mb)")
    ap.add_argument("--creations-per-s", type=float, default=None, help="per client (default: the backend's)")
    ap.add_argument("--node-cpus", type=float, default=32)
    ap.add_argument("--node-mem-gib", type=float, default=128)
    ap.add_argument("--node-reserved-cpus", type=float, default=1.0, help="kubelet, system, daemonsets")
    ap.add_argument("--node-reserved-mem-gib", type=float, default=8.0)
    ap.add_argument("--max-pods", type=int, default=110, help="kubelet maxPods")
    ap.add_argument("--daemonset-pods", type=int, default=5)
    ap.add_argument("--sandboxes-per-client", type=int, default=256, help="sandboxes one rollout process holds")
    ap.add_argument("--episode-s", type=float, default=60.0)
    ap.add_argument("--failure-rate", type=float, default=0.01, help="episodes whose sandbox dies and is replaced")
    ap.add_argument("--cold-start-s", type=float, default=5.0, help="pod create to tool server up (image cached)")
    ap.add_argument("--warm-headroom", type=float, default=0.02, help="extra warm pods as a share of the target")
    ap.add_argument("--cluster-creation-rate", type=float, default=100.0,
                    help="pods/s the control plane and kubelets sustain (scheduler and API server limits)")
    ap.add_argument("--no-measure", action="store_true", help="use the static request counts")
    a = ap.parse_args()

    requests, source = STATIC_REQUESTS, "static"
    if not a.no_measure:
        if shutil.which("bwrap") is None:
            print("bubblewrap is missing: the fake API server cannot exec; using static request counts",
                  file=sys.stderr)
        else:
            print("measuring API requests per sandbox start and close against the fake API server...",
                  file=sys.stderr)
            requests, source = measure_requests(), "measured against k8s/fake_apiserver.py"
    result = plan(a, requests, source)
    print(f"{result['target_concurrent_sandboxes']} sandboxes -> {result['pods']} pods on {result['nodes']} nodes "
          f"({result['pods_per_node']}/node, {result['limiting_resource']}-bound); ramp {result['ramp_to_target_s']}s "
          f"at {result['creation_rate_ramp_per_s']} pods/s; {result['api_qps_ramp']} API req/s while ramping, "
          f"{result['api_qps_steady']} steady", file=sys.stderr)
    _common.emit(result, ("target_concurrent_sandboxes", "mode", "pods", "nodes", "warm_pool_size"))


if __name__ == "__main__":
    main()
