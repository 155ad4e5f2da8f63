#!/usr/bin/env bash
# Set up, then run the whole test suite (every backend that works here).
#   bash scripts/test.sh                      # everything (what CI runs)
#   bash scripts/test.sh tests/rl             # one package's tests
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Here both backends must work: a missing one is a failure, not a skip.
export TOOLDOJO_REQUIRE_BACKENDS="${TOOLDOJO_REQUIRE_BACKENDS-docker,local}"
.venv/bin/dojo sandbox gc
# ...and vLLM must serve the tiny model for the LLM-client tests (one server per session).
export TOOLDOJO_REQUIRE_VLLM="${TOOLDOJO_REQUIRE_VLLM-1}"
report=$(mktemp -d)
trap 'rm -rf "$report"' EXIT
start=$(date +%s)
rc=0
.venv/bin/python -m pytest -q -ra --durations=30 --junitxml="$report/junit.xml" "$@" || rc=$?
# What the suite cost, per file (the slowest first), so a slow-down is seen the day it lands.
.venv/bin/python scripts/test_times.py "$report/junit.xml" "$(( $(date +%s) - start ))" || true
exit $rc
