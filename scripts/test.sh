#!/usr/bin/env bash
# Set up, then run the whole test suite (every backend that works here), on 2 pytest-xdist workers.
#   bash scripts/test.sh                      # everything (what CI runs)
#   bash scripts/test.sh tests/rl             # one package's tests
#   TOOLDOJO_TEST_WORKERS=1 bash scripts/test.sh ...   # serially, in one process
# The workers take whole groups (--dist loadgroup): a file's tests, or the one group of every test that
# starts vLLM; tests/conftest.py makes the groups and hands the longest out first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Here both backends must work: a missing one is a failure, not a skip.
export TOOLDOJO_REQUIRE_BACKENDS="${TOOLDOJO_REQUIRE_BACKENDS-docker,local}"
.venv/bin/dojo sandbox gc
# ...and vLLM must serve the tiny model for the LLM-client tests (one server, on the worker of the vLLM group).
export TOOLDOJO_REQUIRE_VLLM="${TOOLDOJO_REQUIRE_VLLM-1}"
report=$(mktemp -d)
trap 'rm -rf "$report"' EXIT
start=$(date +%s)
rc=0
workers="${TOOLDOJO_TEST_WORKERS:-2}"
xdist=()
if [ "$workers" -gt 1 ]; then
  xdist=(-n "$workers" --dist loadgroup)
  # the cores shared out, not multiplied: torch's OpenMP threads spin while they wait, and two workers of 2
  # threads each on 2 cores ran a pair of tests/rl/test_continuous.py 2.65x slower than with one thread
  # each (122 vs 46 s, issue 31). Jobs that set their own thread count (bench/_stages.py) still do.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( ($(nproc) + workers - 1) / workers ))}"
fi
.venv/bin/python -m pytest -q -ra --durations=30 --junitxml="$report/junit.xml" "${xdist[@]}" "$@" || rc=$?
# What the suite cost, per file (the slowest first), so a slow-down is seen the day it lands.
.venv/bin/python scripts/test_times.py "$report/junit.xml" "$(( $(date +%s) - start ))" || true
exit $rc
