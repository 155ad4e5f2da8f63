#!/usr/bin/env bash
# The README's first command: set up, then run the embedded quickstart, `dojo demo`:
# build the tiny model, synthesise tasks from a slice of the seed zoo, prime it with
# behaviour-rich SFT traces, train it with Dr. GRPO (vLLM-CPU rollouts, sandboxed episodes),
# score the base, primed and trained policies on held-out tasks, and write a report
# (runs/demo/report.html, runs/demo/grpo/reward_curve.png); one JSON line last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/dojo sandbox doctor
rm -rf runs/demo
exec .venv/bin/dojo demo examples/demo.yaml "$@"
