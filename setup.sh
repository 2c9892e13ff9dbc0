#!/usr/bin/env bash
# One-time setup of a Debian/Ubuntu build host (root or sudo): Docker engine, QEMU for
# foreign-arch builds, mmdebstrap for registry-free base images, etcd, a registry,
# slurm-client (scontrol) and a C compiler (the tests build a stand-in NCCL net plugin)
# for the tests, then torchpod with its dev tools, and SkyPilot apart. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '==> %s\n' "$*"; }

log "installing system packages"
export DEBIAN_FRONTEND=noninteractive
# QEMU: the aarch64 image's `import torch` is tested emulated with qemu 10 (bookworm's
# 7.2 is untested there), so on bookworm take qemu-user-static from bookworm-backports.
QEMU_FROM=()
if grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release; then
  echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee /etc/apt/sources.list.d/torchpod-backports.list >/dev/null
  QEMU_FROM=(-t bookworm-backports)
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  docker.io binfmt-support mmdebstrap arch-test etcd-server docker-registry slurm-client ca-certificates \
  gcc libc6-dev make shellcheck iperf3 >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${QEMU_FROM[@]}" qemu-user-static >/dev/null

log "enabling QEMU user emulation (binfmt_misc) for foreign-arch builds"
if [ -z "$(ls -A /proc/sys/fs/binfmt_misc 2>/dev/null)" ]; then
  $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
$SUDO update-binfmts --enable >/dev/null 2>&1 || true
# qemu >= 8 ships systemd-binfmt files (/usr/lib/binfmt.d) instead of binfmt-support ones;
# with no systemd running (containers, CI), register the foreign arch's handler directly.
case "$(uname -m)" in x86_64) FOREIGN=aarch64 ;; aarch64) FOREIGN=x86_64 ;; *) FOREIGN="" ;; esac
if [ -n "$FOREIGN" ] && [ ! -e "/proc/sys/fs/binfmt_misc/qemu-$FOREIGN" ] && [ -f "/usr/lib/binfmt.d/qemu-$FOREIGN.conf" ]; then
  $SUDO sh -c "cat /usr/lib/binfmt.d/qemu-$FOREIGN.conf > /proc/sys/fs/binfmt_misc/register"
fi
[ -z "$FOREIGN" ] || [ -e "/proc/sys/fs/binfmt_misc/qemu-$FOREIGN" ] || {
  echo "QEMU for $FOREIGN is not registered in binfmt_misc; foreign-arch builds will fail" >&2; exit 1; }

DOCKER=/usr/bin/docker
if ! $SUDO $DOCKER info >/dev/null 2>&1; then
  log "starting dockerd (log: /var/log/torchpod-dockerd.log)"
  $SUDO sh -c 'nohup setsid dockerd >/var/log/torchpod-dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    $SUDO $DOCKER info >/dev/null 2>&1 && break
    sleep 1
  done
  $SUDO $DOCKER info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/torchpod-dockerd.log" >&2; exit 1; }
fi

log "installing torchpod and its dev tools"
python3 -m pip install -q -e '.[dev]'
# the default image's torch, read from images/ (the one place its version is written)
python3 -m pip install -q "$(python3 -m torchpod_toolkit.definitions --host-torch)"
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi  # put `invoke` on PATH under pyenv

# SkyPilot in an environment of its own: the tests judge the SkyPilot tasks `invoke manifests`
# writes with SkyPilot's own schema and parser, and its cloud SDKs stay out of the project's
# environment (tests/paths.py SKYPILOT_PYTHON names the same place).
SKY_VENV=/opt/torchpod-skypilot
if ! "$SKY_VENV/bin/python" -c 'import sky' >/dev/null 2>&1; then
  log "installing SkyPilot 0.14.1 in $SKY_VENV"
  python3 -m venv --help >/dev/null 2>&1 || $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  $SUDO python3 -m venv "$SKY_VENV"
  $SUDO "$SKY_VENV/bin/python" -m pip install -q 'skypilot==0.14.1'
fi
log "ready: invoke build --arch x86_64 | invoke build --arch aarch64 | invoke test"
