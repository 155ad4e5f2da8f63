"""`dojo`: the root command. Each package owns its sub-commands; this only mounts them."""

from __future__ import annotations

import typer

from sandboxes.cli import app as sandbox_app

app = typer.Typer(
    name="dojo",
    help="tooldojo: RL post-training of tool-using agents with sandboxed, verifiable rewards.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(sandbox_app, name="sandbox")


def main() -> None:
    app()
