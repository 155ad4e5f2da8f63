"""`dojo zoo ...`: the tool zoo's commands."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sandboxes.cli import one_line_errors
from sandboxes.cli_files import check_out_dir
from sandboxes.cli_options import count_option, float_option, port_option, timeout_option, url_option
from toolzoo.domain_dirs import HELP as DOMAIN_DIR_HELP

DomainDirOpt = typer.Option(None, "--domain-dir", metavar="DIR", help=DOMAIN_DIR_HELP)
ReadOpt = typer.Option(None, "--read", metavar="TOOL", help="a tool that only reads, whatever its name or annotations "
                       "say (repeatable)")
WriteOpt = typer.Option(None, "--write", metavar="TOOL", help="a tool that writes (repeatable)")

app = typer.Typer(help="The tool zoo.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


EnvOpt = typer.Option(None, "--env", metavar="NAME[=VALUE]", help="environment variable of the --command server (repeatable): NAME passes "
                      "your $NAME (stored as ${NAME}, never its value); NAME=VALUE stores VALUE as given (it may "
                      "refer to ${OTHER})")


@app.command("import-mcp")
@one_line_errors
def import_mcp(
    command: str = typer.Option(None, "--command", help='stdio server command line, e.g. "npx -y @scope/server"'),
    url: str = url_option(None, "--url", help="streamable-HTTP endpoint, e.g. http://127.0.0.1:8765/mcp"),
    out: str = typer.Option(..., "--out", help="directory to write the zoo (zoo.json) into"),
    name: str = typer.Option("", "--name", help="domain name for the tools (default: from the server's name)"),
    token: str = typer.Option(None, "--token", help="bearer token sent to the --url server (never stored)"),
    env: list[str] = EnvOpt,
    timeout: float = timeout_option(30.0, "--timeout", help="seconds the whole import may take (starting or connecting to the server, listing its tools, probing the state hooks)"),
    domain: bool = typer.Option(False, "--domain", help="write a domain folder OUT/NAME (mcp.json) that episodes, "
                                "training and evals use (load it with --domain-dir OUT), not a zoo.json"),
    state_read: str = typer.Option(None, "--state-read", help="with --domain: tool:NAME or resource:URI returning the "
                                   "server's world state as JSON (enables world-state rewards)"),
    state_reset: str = typer.Option(None, "--state-reset", help="with --domain: tool:NAME or resource:URI putting the "
                                    "state back to its start (called before every episode and replay)"),
    read: list[str] = ReadOpt,
    write: list[str] = WriteOpt,
) -> None:
    """List a real MCP server's tools and save them as a zoo (in `external`), or as a domain (--domain).

    Effects come from the tools' annotations: readOnlyHint true is a read; anything else, a
    destructiveHint or no annotation, a write (MCP's default), unless --read/--write say otherwise."""
    import anyio

    from toolzoo.mcp import domain_slug, import_mcp_tools
    from toolzoo.spec import McpSource, Zoo

    if (command is None) == (url is None):
        raise ValueError("give exactly one of --command or --url")
    if name and name != domain_slug(name):
        raise ValueError(f"--name {name!r}: a domain name is lowercase letters, digits and _ (e.g. "
                         f"{domain_slug(name) or 'my_server'!r})")
    check_out_dir(out)
    if env and command is None:
        raise ValueError("--env is for a --command (stdio) server; an HTTP server has its own environment")
    if command is not None:
        argv = shlex.split(command)
        if not argv:
            raise ValueError("--command is empty")
        source = McpSource(command=argv, server_name=name, env=_env_option(env or []))
    else:
        source = McpSource(url=url, server_name=name)
    headers = {"Authorization": f"Bearer {token}"} if token else None

    for flag, ref in (("--state-read", state_read), ("--state-reset", state_reset)):
        if ref is not None and not ref.strip():
            raise ValueError(f"{flag} is empty: give tool:NAME or resource:URI")
    if (state_read or state_reset or read or write) and not domain:
        raise ValueError("--state-read, --state-reset, --read and --write go with --domain")
    if state_reset and not state_read:
        raise ValueError("--state-reset needs --state-read (a reset without a read gives no world-state reward)")
    deadline = time.monotonic() + timeout  # --timeout bounds the whole import: tools, then the hooks' probe
    imported = anyio.run(lambda: import_mcp_tools(source, headers=headers, timeout=timeout))
    for skip in imported.skipped:
        err_console.print(f"skipped MCP tool {skip.name!r}: {skip.reason}", highlight=False, markup=False, soft_wrap=True)
    specs = imported.tools
    if imported.skipped and not specs:
        raise ValueError(f"none of the server's {len(imported.skipped)} tool(s) could be imported")
    if domain:
        from toolzoo.domain_dirs import load_folder
        from toolzoo.mcp_domain import probe_state, resolve_hooks, write_mcp_domain
        from toolzoo.spec import McpStateHook

        dom_name = name or (specs[0].domain if specs else "mcp")
        hook = resolve_hooks(specs, McpStateHook(read=state_read, reset=state_reset)) if state_read else None
        if hook is not None:  # a hook that fails or answers non-JSON is refused now, not found in every episode
            left = deadline - time.monotonic()
            if left <= 0:
                raise ValueError(f"--timeout {timeout:g}s was used up listing the tools; nothing is left to probe "
                                 "the --state-read/--state-reset hooks: pass a longer --timeout")
            probe_state(specs, hook, dom_name, timeout=left)
        effects = {**{t: "read" for t in read or ()}, **{t: "write" for t in write or ()}}
        folder = write_mcp_domain(specs, out, dom_name, state=hook, effects=effects)
        specs, path = load_folder(folder).tools, folder  # as episodes will see them: hooks hidden, effects set
    else:
        zoo = Zoo(external=specs)
        zoo.check_names()
        path = zoo.save(out)

    table = Table(title=f"{len(specs)} MCP tool(s) from {specs[0].domain if specs else 'the server'}")
    for col in ("tool (model)", "on the server", "effect", "parameters", "description"):
        table.add_column(col, overflow="fold")
    for t in specs:
        params = ", ".join(t.parameters.get("properties", {}))
        table.add_row(t.name, "same" if t.call_name == t.name else t.call_name, t.effect, params,
                      t.description.strip().splitlines()[0] if t.description.strip() else "")
    console.print(table)
    console.print(f"wrote {path / 'mcp.json' if domain else path / 'zoo.json'}", highlight=False)


def _env_option(items: list[str]) -> dict[str, str]:
    """--env NAME (a reference to the caller's $NAME, so no value is stored) or --env NAME=VALUE."""
    from toolzoo.spec import ENV_NAME_RE

    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not ENV_NAME_RE.match(key):
            raise ValueError(f"--env {key!r}: give NAME or NAME=VALUE, NAME an environment variable name")
        out[key] = value if sep else "${" + key + "}"
    return out


@app.command("call")
@one_line_errors
def call_cmd(
    zoo_dir: str = typer.Argument(..., metavar="ZOO_DIR", help="a saved zoo (zoo.json), an export, `seed`, or a "
                                                                "domain folder (see Bring your own environment)"),
    tool: str = typer.Argument(..., help="the tool's name as the model sees it (an MCP tool's server name works too)"),
    args: str = typer.Option("{}", "--args", help="the arguments, a JSON object"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend for zoo tools: auto | docker | local"),
    seed: int = count_option(0, "--seed", limit="seed", min=0, help="seed of the domain's initial state (zoo tools)"),
    token: str = typer.Option(None, "--token", help="bearer token sent to an HTTP MCP server (never stored)"),
) -> None:
    """Call one tool of a zoo, as an episode would: zoo tools in a sandbox (from the seeded state), MCP tools
    on their server. Prints the output as JSON; a tool error goes to stderr and exits 1."""
    import anyio

    from toolzoo.call import call_tool, find_tool

    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    zoo = _zoo_at(zoo_dir)
    spec = find_tool(zoo, tool)
    arguments = _json_object(args)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    result = anyio.run(lambda: call_tool(zoo, spec, arguments, backend=backend, seed=seed, headers=headers))
    if not result.ok:
        code = f", {result.code}" if result.code else ""
        err_console.print(f"{result.name}: {result.kind}{code}: {result.message}", highlight=False, markup=False,
                          soft_wrap=True)
        raise typer.Exit(1)
    print(json.dumps(result.output, ensure_ascii=False, default=str))


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"--args is not JSON: {e}") from None
    except RecursionError:
        raise ValueError("--args is nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError(f"--args must be a JSON object of arguments, not {type(value).__name__}")
    return value


@app.command("import-openai")
@one_line_errors
def import_openai_cmd(
    tools: str = typer.Option(..., "--tools", help="tool classes (get_info() + invoke(data, **kwargs)): a .py file or a folder"),
    data: str = typer.Option(..., "--data", help="the database: JSON, JSONL, or a folder of <table>.json"),
    name: str = typer.Option(..., "--name", help="the domain's name"),
    out: str = typer.Option(..., "--out", help="write the domain folder OUT/NAME here"),
    policy: str = typer.Option(None, "--policy", help="the environment's rules (wiki) for the agent"),
    read: list[str] = ReadOpt,
    write: list[str] = WriteOpt,
    overwrite: bool = typer.Option(False, "--overwrite", help="replace OUT/NAME if it exists"),
    max_data_mb: float = float_option(8.0, "--max-data-mb", limit="data_mb", min=0.0,
                                      help="refuse a database bigger than this as JSON (every sandbox receives it "
                                      "in one request, capped at 8 MiB unless you raise Limits.max_request_bytes)"),
) -> None:
    """Turn an OpenAI-function environment (tau-bench style) into a domain folder; load it with --domain-dir.
    Everything is checked before anything is written; a failure leaves nothing behind."""
    from toolzoo.domain_dirs import load_folder
    from toolzoo.openai_functions import import_environment

    check_out_dir(out)
    effects = {**{t: "read" for t in read or ()}, **{t: "write" for t in write or ()}}
    folder = import_environment(tools, data, name=name, out=out, policy=policy, effects=effects, overwrite=overwrite,
                                max_data_mb=max_data_mb)
    dom = load_folder(folder)
    console.print(f"wrote {folder}: {len(dom.tools)} tools ("
                  + ", ".join(f"{t.name} {t.effect}" for t in dom.tools) + ")", highlight=False)


@app.command("serve-mcp")
@one_line_errors
def serve_mcp(
    domain: str = typer.Argument(..., help="a zoo domain, e.g. retail_orders, or a domain folder's path"),
    http: bool = typer.Option(False, "--http/--stdio", help="serve streamable HTTP at http://HOST:PORT/mcp, or stdio"),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP bind address; anything but loopback needs --token"),
    port: int = port_option(8765, "--port", any_free=True, help="HTTP port (0: any free port, printed at start)"),
    token: str = typer.Option(None, "--token", envvar="TOOLDOJO_MCP_TOKEN", show_envvar=True,
                              help="require `Authorization: Bearer <token>` on every HTTP request"),
    seed: int = count_option(0, "--seed", limit="seed", min=0, help="seed of the domain's initial state"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Serve a zoo domain (a name, or the path of a domain folder) as an MCP server; its tools run in a sandbox."""
    from toolzoo.domain_dirs import use
    from toolzoo.mcp import serve_domain

    use(domain_dir)

    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    serve_domain(domain, transport="http" if http else "stdio", host=host, port=port, token=token,
                 seed=seed, backend=backend)


def _zoo_at(where: str):  # -> Zoo
    """`seed` (the built-in seed zoo), an export (tools.parquet), a saved zoo (zoo.json), or a domain folder
    (or a folder of them, as --domain-dir takes)."""
    from toolzoo.export import is_export, load_exported
    from toolzoo.spec import Zoo

    if where == "seed":
        from toolzoo.domains import seed_zoo

        return seed_zoo()
    if is_export(where):
        return load_exported(where, source="parquet")
    if not (Path(where) / "zoo.json").is_file() and Path(where).is_dir():
        from toolzoo.domain_dirs import folders_in, is_domain_folder, load_folder, use

        if is_domain_folder(where) or any(True for _ in folders_in(where)):
            use([where])
            return Zoo(domains=[load_folder(f) for f in folders_in(where)])
    return Zoo.load(where)


@app.command("stats")
@one_line_errors
def stats_cmd(
    zoo_dir: str = typer.Argument(..., metavar="DIR", help="a saved zoo (zoo.json), an export, or `seed`"),
    plot: str = typer.Option(None, "--plot", help="also write a 2-D map of the tool descriptions (PNG)"),
    json_out: bool = typer.Option(False, "--json", help="print the stats as one JSON object"),
) -> None:
    """Counts per category/domain/provenance/effect and embedding diversity of a zoo."""
    from toolzoo.stats import plot_map, zoo_stats

    zoo = _zoo_at(zoo_dir)
    with err_console.status("embedding tool descriptions"):
        s = zoo_stats(zoo)
        png = plot_map(zoo, Path(plot)) if plot is not None else None
    if json_out:
        print(s.model_dump_json())
    else:
        console.print(f"{s.tools} tools, {s.domains_total} domains, {s.categories_total} categories"
                      f" ({s.external} external tools)", highlight=False)
        table = Table()
        for col in ("by", "value", "tools"):
            table.add_column(col, justify="right" if col == "tools" else "left")
        for by, counts in (("category", s.per_category), ("domain", s.per_domain),
                           ("provenance", s.per_provenance), ("effect", s.per_effect)):
            for i, (k, v) in enumerate(counts.items()):
                table.add_row(by if i == 0 else "", k, str(v), end_section=i == len(counts) - 1)
        console.print(table)
        d = s.diversity
        fmt = lambda x: "-" if x is None else f"{x:.3f}"
        console.print(f"diversity ({d.model}, cosine distance of descriptions): mean {fmt(d.mean_distance)}, "
                      f"within category {fmt(d.within_category)}, between {fmt(d.between_category)}, "
                      f"ratio {fmt(d.ratio)}; nearest neighbour {fmt(d.nn_distance_mean)}, "
                      f"{d.near_duplicate_pairs} near-duplicate pair(s)", highlight=False)
    if png is not None:
        err_console.print(f"wrote {png}", highlight=False)


@app.command("export")
@one_line_errors
def export_cmd(
    zoo_dir: str = typer.Argument(..., metavar="DIR", help="a saved zoo (zoo.json), or `seed`"),
    out: str = typer.Option(..., "--out", help="directory for the Hugging Face dataset, parquet files and card"),
) -> None:
    """Export a zoo as a Hugging Face dataset (save_to_disk + parquet + README card)."""
    from toolzoo.export import export_dataset

    zoo = _zoo_at(zoo_dir)
    path = export_dataset(zoo, check_out_dir(out))
    console.print(f"exported {len(zoo.tools)} tools, {len(zoo.domains)} domains to {path}", highlight=False)


@app.command("validate")
@one_line_errors
def validate_cmd(
    zoo_dir: str = typer.Argument(..., metavar="DIR", help="a saved zoo (zoo.json), `seed`, a domain folder "
                                  "(or a folder of them) or a domain's name"),
    backend: str = typer.Option("auto", "--backend", "-b", help="sandbox backend: auto | docker | local"),
    sandboxes: int = count_option(4, "--sandboxes", limit="sandboxes", min=1, help="sandboxes validating in parallel"),
    json_out: bool = typer.Option(False, "--json", help="print the report as one JSON object"),
    domain_dir: list[str] = DomainDirOpt,
) -> None:
    """Check every tool: spec, then sample valid and invalid calls in sandboxes. Exits 1 if any fails."""
    from toolzoo.domain_dirs import use
    from toolzoo.validate import validate_zoo_at

    use(domain_dir)

    if backend not in ("auto", "docker", "local"):
        raise ValueError(f"unknown backend {backend!r}: use auto, docker or local")
    with err_console.status("validating tools in sandboxes"):
        report = validate_zoo_at(zoo_dir, backend=backend, sandboxes=sandboxes)
    if json_out:
        print(report.model_dump_json())
    else:
        for r in report.failures():
            console.print(f"FAIL {r.domain}.{r.name} [{r.stage}]: {r.reason}", highlight=False, markup=False, soft_wrap=True)
        console.print(report.summary(), highlight=False)
    if not report.ok:
        raise typer.Exit(1)
