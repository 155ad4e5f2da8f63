#!/usr/bin/env bash
# Set up, then run the whole test suite (every backend that works here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Here both backends must work: a missing one is a failure, not a skip.
export TOOLDOJO_REQUIRE_BACKENDS="${TOOLDOJO_REQUIRE_BACKENDS-docker,local}"
.venv/bin/dojo sandbox gc
exec .venv/bin/python -m pytest -q -ra "$@"
