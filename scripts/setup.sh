#!/usr/bin/env bash
# Idempotent setup of everything tooldojo needs on a fresh Debian machine:
# system packages, a virtualenv with the project, a running Docker engine,
# and the sandbox image. Safe to run again; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# --- system packages (Docker engine, bubblewrap, debootstrap) --------------
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# --- Python environment ----------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.tooldojo-installed
want="$(sha256sum pyproject.toml | cut -c1-16)-${TOOLDOJO_EXTRAS:-dev}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing tooldojo[${TOOLDOJO_EXTRAS:-dev}] into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[${TOOLDOJO_EXTRAS:-dev}]"
  echo "$want" > "$stamp"
fi
# PyPI's torchvision/torchaudio/torchcodec break transformers next to our CPU torch.
for bad in torchvision torchaudio torchcodec; do
  if .venv/bin/python -m pip show -q "$bad" >/dev/null 2>&1; then
    log "removing $bad (incompatible with the pinned torch)"
    .venv/bin/python -m pip uninstall -q -y "$bad"
  fi
done

# --- Docker engine -----------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  $SUDO sh -c 'nohup dockerd >/var/log/tooldojo-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || log "dockerd did not come up (see /var/log/tooldojo-dockerd.log); the local backend will be used"
fi

# --- sandbox image (and the rootfs the local backend shares) --------------------
if docker info >/dev/null 2>&1; then
  .venv/bin/dojo sandbox build-image
else
  .venv/bin/dojo sandbox build-image --rootfs-only
fi
log "ready"
