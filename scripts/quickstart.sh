#!/usr/bin/env bash
# The main job: set up, check the sandboxes, run a sandboxed tool episode,
# then grow, validate, map and export a tool zoo from the seed domains.
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
echo "zoo, map and dataset are in runs/quickstart/"
