#!/usr/bin/env bash
# The main job: set up, check the sandboxes, and run a sandboxed tool episode.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/dojo sandbox doctor
.venv/bin/dojo sandbox demo
