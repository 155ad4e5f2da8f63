"""`dojo submit` and `dojo jobs ...`: tooldojo jobs on Kubernetes, SkyPilot-style output.

    dojo submit examples/k8s/train_job.yaml --dry-run     # the validated manifests, as YAML
    dojo submit examples/k8s/train_job.yaml --follow      # submit, stream node 0, exit with the job's result
    dojo jobs list | status NAME | logs NAME [-f] [--node i] | events NAME | cancel NAME | resubmit NAME [--from-checkpoint]

The cluster: --kubeconfig / --context (or $KUBECONFIG, ~/.kube/config, the in-cluster service
account), or --server URL; TOOLDOJO_K8S_KUBECONFIG / _CONTEXT / _SERVER set the same. Every request
times out (TOOLDOJO_K8S_REQUEST_TIMEOUT seconds to read, default 30). --trainer-version 2.1|2.2|2.3 is the
Kubeflow Trainer release the cluster runs: a TrainJob takes that release's pod overrides (2.1
podTemplateOverrides, 2.2+ runtimePatches) and is validated against its schema. A bad option value
(--server notaurl, --k8s-version 9.99, --trainer-version 2.0) is a usage error, exit 2; other errors print
one line and exit 1.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from sandboxes.cli import one_line_errors
from sandboxes.cli_options import count_option, url_option

app = typer.Typer(help="Manage tooldojo jobs on Kubernetes (see `dojo submit`).", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True, highlight=False)

F = TypeVar("F", bound=Callable[..., Any])

KubeconfigOpt = typer.Option(None, "--kubeconfig", envvar="TOOLDOJO_K8S_KUBECONFIG", help="kubeconfig file")
ContextOpt = typer.Option(None, "--context", envvar="TOOLDOJO_K8S_CONTEXT", help="kubeconfig context")
ServerOpt = url_option(None, "--server", envvar="TOOLDOJO_K8S_SERVER",
                       help="API server URL instead of a kubeconfig (no credentials)")
NamespaceOpt = typer.Option(None, "--namespace", "-n", help="namespace (default: the context's, else tooldojo)")
ConfigArg = typer.Argument(..., help="the submit config (YAML with job: and k8s:); see examples/k8s/")


def _k8s_version(value: str) -> str:
    from k8s.validate import check_k8s_version

    try:
        check_k8s_version(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    return value


VersionOpt = typer.Option("1.33", "--k8s-version", callback=_k8s_version,
                          help="Kubernetes version whose schemas validate the manifests")


def _trainer_version(value: str) -> str:
    from k8s.validate import check_trainer_version

    try:
        return check_trainer_version(value)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


TrainerVersionOpt = typer.Option("2.3", "--trainer-version", callback=_trainer_version,
                                 help="Kubeflow Trainer release of the cluster (2.1, 2.2, 2.3): a TrainJob's pod "
                                      "overrides and schema follow it")


def cli_errors(fn: F) -> F:
    """One line on stderr and exit 1 for every expected failure (cluster, config, validation)."""

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        from k8s.client import K8sError

        try:
            return fn(*args, **kwargs)
        except K8sError as e:
            raise ValueError(" ".join(str(e).split())) from None

    return one_line_errors(inner)  # type: ignore[return-value]


def _client(kubeconfig: str | None, context: str | None, server: str | None):
    from k8s.client import K8sClient

    return K8sClient.connect(kubeconfig=kubeconfig, context=context, server=server)


def _next_steps(name: str, ns: str, *, finished: bool = False) -> None:
    console.print("[bold]Next:[/]", highlight=False)
    steps = [f"dojo jobs status {name} -n {ns}", f"dojo jobs logs {name} -n {ns} -f", f"dojo jobs events {name} -n {ns}"]
    steps += ([f"dojo jobs resubmit {name} -n {ns}"] if finished else [f"dojo jobs cancel {name} -n {ns}"])
    for s in steps:
        console.print(f"  {s}", highlight=False, markup=False, soft_wrap=True)


def _summary(r) -> None:
    k = r.submit.k8s
    t = Table(title=f"submitted {r.name}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("", overflow="fold")
    rows = [("job", f"{r.submit.job.kind} {r.name}"), ("namespace", r.namespace),
            ("workload", f"{r.workload['apiVersion']} {r.workload['kind']}"),
            ("nodes x GPUs", f"{k.nodes} x {k.gpus}"), ("image", k.image), ("command", " ".join(r.command)),
            ("config hash", r.config_hash[:12]), ("git commit", r.git_commit)]
    if k.pvc is not None:
        rows.append(("checkpoints", f"PVC {k.pvc.name} at {k.pvc.mount_path}"))
    if k.generation_memory_cap is not None:
        rows.append(("generation memory cap", f"{k.generation_memory_cap:g} of free GPU memory"))
    for a, b in rows:
        t.add_row(a, b)
    console.print(t)


def _follow(client, ns: str, name: str) -> None:
    from k8s import jobs

    info = jobs.follow(client, ns, name, lambda line: print(line, flush=True),
                       on_wait=lambda msg: err_console.print(msg, markup=False))
    color = "green" if info.phase == "Succeeded" else "red"
    err_console.print(f"[{color}]{name}: {info.phase}[/]" + (f" ({info.reason})" if info.reason else ""))
    if info.phase != "Succeeded":
        raise typer.Exit(1)


def _validate(r, version: str, trainer_version: str) -> None:
    from k8s.validate import validate_all

    validate_all(r.manifests, version, trainer_version=trainer_version, raise_on_error=True)
    for w in r.warnings:
        err_console.print(f"warning: {w}", style="yellow", markup=False, soft_wrap=True)


@cli_errors
def submit_cmd(
    config: Path = ConfigArg,
    dry_run: bool = typer.Option(False, "--dry-run", help="print the validated manifests as YAML; create nothing"),
    server_dry_run: bool = typer.Option(False, "--server-dry-run",
                                        help="let the cluster's API server validate and admit every object "
                                             "(dryRun=All); create nothing"),
    follow: bool = typer.Option(False, "--follow", "-f", help="stream node 0's log until the job ends; "
                                                              "exit 1 unless it succeeds"),
    name: str = typer.Option(None, "--name", help="the job's name (default: job.name in the config)"),
    namespace: str = NamespaceOpt,
    kubeconfig: str = KubeconfigOpt,
    context: str = ContextOpt,
    server: str = ServerOpt,
    k8s_version: str = VersionOpt,
    trainer_version: str = TrainerVersionOpt,
) -> None:
    """Render, validate and submit a train, synth or eval job (a batch/v1 indexed Job or a Kubeflow TrainJob)."""
    from k8s.config import git_commit, load_submit_config
    from k8s.jobs import submit
    from k8s.render import render

    cfg, base = load_submit_config(config)
    if namespace:
        cfg = cfg.model_copy(update={"k8s": cfg.k8s.model_copy(update={"namespace": namespace})})
    r = render(cfg, base_dir=base, git_commit=git_commit(base), environ=None if dry_run else dict(os.environ),
               name=name, trainer_version=trainer_version)
    _validate(r, k8s_version, trainer_version)
    if dry_run:
        sys.stdout.write(r.yaml())
        return
    client = _client(kubeconfig, context, server)
    if server_dry_run:
        from k8s.jobs import server_dry_run as dry

        accepted = dry(client, r)
        console.print(f"the API server at {client.server} accepted {len(accepted)} object(s) (dryRun=All, nothing "
                      f"stored): {', '.join(accepted)}", highlight=False, soft_wrap=True)
        return
    submit(client, r)
    _summary(r)
    _next_steps(r.name, r.namespace)
    if follow:
        sys.stdout.flush()
        _follow(client, r.namespace, r.name)


@app.command("list")
@cli_errors
def list_cmd(namespace: str = NamespaceOpt, kubeconfig: str = KubeconfigOpt, context: str = ContextOpt,
             server: str = ServerOpt) -> None:
    """Every tooldojo job in the namespace, newest first."""
    from k8s import jobs

    client = _client(kubeconfig, context, server)
    ns = jobs.default_namespace(client, namespace)
    infos = jobs.list_jobs(client, ns)
    t = Table(title=f"tooldojo jobs in {ns}")
    for col in ("name", "kind", "workload", "phase", "nodes x GPUs", "age", "commit"):
        t.add_column(col, overflow="fold")
    for i in infos:
        t.add_row(i.name, i.kind, i.workload, _phase(i.phase), f"{i.nodes} x {i.gpus}", i.age, i.commit[:12])
    console.print(t)
    if infos:
        _next_steps(infos[0].name, ns, finished=infos[0].phase in ("Succeeded", "Failed"))
    else:
        console.print("no jobs yet: dojo submit CONFIG.yaml", highlight=False)


def _phase(p: str) -> str:
    return {"Running": "[blue]Running[/]", "Succeeded": "[green]Succeeded[/]", "Failed": "[red]Failed[/]",
            "Pending": "[yellow]Pending[/]"}.get(p, p)


@app.command("status")
@cli_errors
def status_cmd(name: str = typer.Argument(..., help="the job's name"), namespace: str = NamespaceOpt,
               kubeconfig: str = KubeconfigOpt, context: str = ContextOpt, server: str = ServerOpt) -> None:
    """One job: its phase (and why), its nodes' pods, its provenance."""
    from k8s import jobs

    client = _client(kubeconfig, context, server)
    ns = jobs.default_namespace(client, namespace)
    i = jobs.status(client, ns, name)
    t = Table(title=f"{i.name} ({i.kind}, {i.workload})", show_header=False)
    t.add_column("", style="bold")
    t.add_column("", overflow="fold")
    t.add_row("phase", _phase(i.phase) + (f" ({i.reason})" if i.reason else ""))
    t.add_row("nodes x GPUs", f"{i.nodes} x {i.gpus}")
    t.add_row("age", i.age)
    t.add_row("git commit", i.commit)
    if i.resubmit_of:
        t.add_row("resubmit of", i.resubmit_of)
    console.print(t)
    if i.pods:
        pt = Table(title="pods")
        for col in ("node", "pod", "phase", "reason"):
            pt.add_column(col, overflow="fold")
        for p in i.pods:
            pt.add_row(str(p.node), p.name, _phase(p.phase), p.reason)
        console.print(pt)
    _next_steps(name, ns, finished=i.phase in ("Succeeded", "Failed"))


@app.command("logs")
@cli_errors
def logs_cmd(name: str = typer.Argument(..., help="the job's name"),
             follow: bool = typer.Option(False, "--follow", "-f", help="wait for the pod, stream until it ends"),
             node: int = count_option(0, "--node", limit="node", min=0, help="node rank (completion index)"),
             tail: int = count_option(None, "--tail", limit="lines", min=0, help="only the last N lines"),
             namespace: str = NamespaceOpt, kubeconfig: str = KubeconfigOpt, context: str = ContextOpt,
             server: str = ServerOpt) -> None:
    """The log of one node of a job."""
    from k8s import jobs

    client = _client(kubeconfig, context, server)
    ns = jobs.default_namespace(client, namespace)
    for line in jobs.logs(client, ns, name, node=node, follow=follow, tail=tail,
                          on_wait=lambda m: err_console.print(m, markup=False)):
        print(line, flush=follow)


@app.command("events")
@cli_errors
def events_cmd(name: str = typer.Argument(..., help="the job's name"), namespace: str = NamespaceOpt,
               kubeconfig: str = KubeconfigOpt, context: str = ContextOpt, server: str = ServerOpt) -> None:
    """Events of a job and its pods (scheduling, image pulls, failures), oldest first."""
    from k8s import jobs

    client = _client(kubeconfig, context, server)
    ns = jobs.default_namespace(client, namespace)
    jobs.get_workload(client, ns, name)
    t = Table(title=f"events of {name}")
    for col in ("age", "type", "reason", "object", "message"):
        t.add_column(col, overflow="fold")
    for e in jobs.events(client, ns, name):
        obj = e.get("involvedObject") or {}
        when = e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")
        kind = "[red]Warning[/]" if e.get("type") == "Warning" else e.get("type", "")
        t.add_row(jobs.age(when), kind, e.get("reason", ""), f"{obj.get('kind', '')}/{obj.get('name', '')}",
                  e.get("message", ""))
    console.print(t)


@app.command("cancel")
@cli_errors
def cancel_cmd(name: str = typer.Argument(..., help="the job's name"),
               purge: bool = typer.Option(False, "--purge", help="also delete its config snapshot (no resubmit)"),
               namespace: str = NamespaceOpt, kubeconfig: str = KubeconfigOpt, context: str = ContextOpt,
               server: str = ServerOpt) -> None:
    """Delete a job and its pods (the config snapshot and the checkpoints PVC stay)."""
    from k8s import jobs

    client = _client(kubeconfig, context, server)
    ns = jobs.default_namespace(client, namespace)
    deleted = jobs.cancel(client, ns, name, purge=purge)
    console.print(f"cancelled {name}: deleted {', '.join(deleted) or 'nothing'}", highlight=False)
    if not purge:
        console.print("[bold]Next:[/]")
        console.print(f"  dojo jobs resubmit {name} -n {ns}", highlight=False, markup=False)


@app.command("resubmit")
@cli_errors
def resubmit_cmd(name: str = typer.Argument(..., help="the job to run again"),
                 from_checkpoint: bool = typer.Option(False, "--from-checkpoint",
                                                      help="resume training from its latest checkpoint on the PVC"),
                 new_name: str = typer.Option(None, "--name", help="the new job's name (default: NAME-r2, -r3...)"),
                 dry_run: bool = typer.Option(False, "--dry-run", help="print the manifests; create nothing"),
                 follow: bool = typer.Option(False, "--follow", "-f", help="stream node 0 until the job ends"),
                 namespace: str = NamespaceOpt, kubeconfig: str = KubeconfigOpt, context: str = ContextOpt,
                 server: str = ServerOpt, k8s_version: str = VersionOpt,
                 trainer_version: str = TrainerVersionOpt) -> None:
    """Submit a job again from its config snapshot (after a failure, a cancel or a preemption)."""
    from k8s import jobs

    client = _client(kubeconfig, context, server)
    ns = jobs.default_namespace(client, namespace)
    r = jobs.resubmit(client, ns, name, new_name=new_name, from_checkpoint=from_checkpoint,
                      environ=None if dry_run else dict(os.environ), trainer_version=trainer_version)
    _validate(r, k8s_version, trainer_version)
    if dry_run:
        sys.stdout.write(r.yaml())
        return
    jobs.submit(client, r)
    _summary(r)
    _next_steps(r.name, ns)
    if follow:
        sys.stdout.flush()
        _follow(client, ns, r.name)
