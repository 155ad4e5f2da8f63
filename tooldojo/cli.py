"""`dojo`: the root command. Each package owns its sub-commands; this only mounts them."""

from __future__ import annotations

import sys

import typer

from evals.cli import app as eval_app
from k8s.cli import app as jobs_app
from k8s.cli import submit_cmd
from rewards.cli import app as rewards_app
from rewards.cli import filter_cmd
from rl.cli import demo_cmd, rl_app, train_cmd
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
app.add_typer(rewards_app, name="rewards")
# `dojo synth filter` lives in rewards (synth must not import rewards); only the root sees both.
synth_app.command("filter")(filter_cmd)
app.command("train")(train_cmd)
app.command("demo")(demo_cmd)
app.add_typer(rl_app, name="rl")
app.add_typer(eval_app, name="eval")
app.command("submit")(submit_cmd)
app.add_typer(jobs_app, name="jobs")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C while the commands are still being built (inside one, one_line_errors says it)
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
