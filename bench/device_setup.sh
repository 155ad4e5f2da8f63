#!/usr/bin/env bash
# On a lent GPU machine (bench/results/reader_h100.md): what its image lacks, carried from here.
#   here, once:  bash bench/device_setup.sh --download      (wheels and bubblewrap's .deb into .whl/, ~15 MB)
#   there:       bash bench/device_setup.sh                 (first thing in every device call; carry .whl)
# Installed into the image's own site-packages (not --target + PYTHONPATH: subprocess ranks may reset it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--download" ]; then
  mkdir -p .whl && cd .whl
  P="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
     --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
     --platform manylinux1_x86_64"
  python3 -m pip download -q --no-deps $P trl==1.16.0 datasets==5.2.0 dill==0.4.0 multiprocess==0.70.18
  python3 -m pip download -q $P "pydantic>=2.10,<3" docker==7.2.0 "jsonschema>=4.23" "mcp>=2.3,<3" "openai>=1.60"
  apt-get download bubblewrap
  exit 0
fi
for f in .whl/*.deb; do dpkg -x "$f" /; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl
python3 -c "import trl, datasets, pydantic, jsonschema, mcp, openai, rich, typer, yaml, anyio; print('device setup ok')"
bwrap --version
