#!/usr/bin/env bash
# Set up, then run the whole test suite (every backend that works here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/dojo sandbox gc
exec .venv/bin/python -m pytest -q -ra "$@"
