#!/usr/bin/env bash
# Set up, then run the whole test suite (every backend that works here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Here both backends must work: a missing one is a failure, not a skip.
export TOOLDOJO_REQUIRE_BACKENDS="${TOOLDOJO_REQUIRE_BACKENDS-docker,local}"
.venv/bin/dojo sandbox gc
# ...and vLLM must serve the tiny model for the LLM-client tests (one server per session).
export TOOLDOJO_REQUIRE_VLLM="${TOOLDOJO_REQUIRE_VLLM-1}"
exec .venv/bin/python -m pytest -q -ra "$@"
