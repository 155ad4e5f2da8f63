"""`dojo`: the root command. Each package owns its sub-commands; this only mounts them."""

from __future__ import annotations

import typer

from sandboxes.cli import app as sandbox_app
from synth.cli import app as synth_app
from toolzoo.cli import app as zoo_app

app = typer.Typer(
    name="dojo",
    help="tooldojo: RL post-training of tool-using agents with sandboxed, verifiable rewards.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(zoo_app, name="zoo")
app.add_typer(synth_app, name="synth")


def main() -> None:
    app()
