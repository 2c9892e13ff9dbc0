#!/usr/bin/env bash
# Setup of a Debian/Ubuntu build host (root or sudo). Idempotent: a part whose tools are all
# present installs nothing (and needs no root). Each step prints its time, and a table of
# them closes the run.
#
#   ./setup.sh              what the first command needs: the Docker engine (started),
#                           mmdebstrap (registry-free Debian bases) and the toolkit
#                           (`pip install -e '.[toolkit]'`: invoke, the docker SDK, ...)
#   ./setup.sh --emulation  + QEMU user emulation registered in binfmt_misc (aarch64 builds
#                           on an x86_64 host, and the reverse)
#   ./setup.sh --tests      + everything the tests need: QEMU, etcd, a registry, Slurm's
#                           client, a C compiler (a stand-in NCCL net plugin), shellcheck,
#                           iperf3 and iproute2 (tc, nsenter) from Debian; the dev tools
#                           (pytest, ruff, mypy, ...), the default image's torch on the host
#                           (the contract tests), and SkyPilot in an environment of its own.
#                           `invoke test` runs this first.
#   ./setup.sh --bench      + what bench/layers.py needs beside the engine: a registry,
#                           skopeo (writes zstd layers) and podman (pulls them into an
#                           empty store)
#   --restart-docker        stop a running dockerd that runs no container first, so its
#                           store is swept (below) before it starts again (CI passes it)
#   --dry-run               print the steps it would run, and run none
#
# Before it starts dockerd, the engine's store is swept of layer folders that no image,
# container or build refers to (toolkit/torchpod_toolkit/imagebuild/dockerstore.py): a build that died
# with the engine leaves them, up to 5 GB each, and no docker command can remove them.
set -euo pipefail
cd "$(dirname "$0")"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

EMULATION=0; TESTS=0; BENCH=0; DRY=0; RESTART_DOCKER=0
for arg in "$@"; do
  case "$arg" in
    --emulation) EMULATION=1 ;;
    --tests) TESTS=1; EMULATION=1 ;;
    --bench) BENCH=1 ;;
    --restart-docker) RESTART_DOCKER=1 ;;
    --dry-run) DRY=1 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) shown=$(printf '%q' "$arg"); [ "$shown" != "$arg" ] || shown="'$arg'"  # one line, whatever it holds
       echo "setup.sh: unknown option $shown; expected --emulation, --tests, --bench, --restart-docker, --dry-run or --help" >&2; exit 2 ;;
  esac
done

log() { printf '==> %s\n' "$*"; }

# step NAME CMD...: run one step, print its time, remember it for the closing table
STEPS=()
SETUP_START=$(date +%s.%N)
step() {
  local name=$1 t0 took; shift
  if [ "$DRY" = 1 ]; then echo "would run: $*"; return; fi
  t0=$(date +%s.%N)
  log "$name"
  "$@"
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  printf '    %s: %s s\n' "$name" "$took"
  STEPS+=("$name|$took")
}
# bg_step NAME CMD...: a step run beside the next ones (its output shown when it ends);
# finish_bg waits for it. pip and apt both wait on the network most of the time.
BG_PID=""
trap '[ -z "$BG_PID" ] || kill "$BG_PID" 2>/dev/null || true' EXIT
bg_step() {
  if [ "$DRY" = 1 ]; then shift; echo "would run: $*"; return; fi
  BG_NAME=$1; shift
  BG_T0=$(date +%s.%N)
  BG_LOG=$(mktemp)
  log "$BG_NAME (beside the next steps)"
  ( "$@" ) >"$BG_LOG" 2>&1 &
  BG_PID=$!
}
finish_bg() {
  local rc=0 took
  [ -n "$BG_PID" ] || return 0
  wait "$BG_PID" || rc=$?
  BG_PID=""
  cat "$BG_LOG"; rm -f "$BG_LOG"
  [ "$rc" -eq 0 ] || { echo "setup.sh: $BG_NAME failed (exit $rc); its output is above" >&2; exit "$rc"; }
  took=$(awk -v a="$BG_T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  printf '    %s: %s s\n' "$BG_NAME" "$took"
  STEPS+=("$BG_NAME|$took")
}
summary() {
  local total row
  [ "$DRY" = 0 ] || return 0
  total=$(awk -v a="$SETUP_START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  printf '\nsetup step%38s\n' "s"
  for row in "${STEPS[@]}"; do printf '  %-44s %6s\n' "${row%%|*}" "${row##*|}"; done
  printf '  %-44s %6s\n' "total" "$total"
}

# The Debian packages of each part; a part whose packages are all installed skips apt.
CORE_DEBS=(docker.io mmdebstrap ca-certificates)
EMULATION_DEBS=(binfmt-support arch-test)
# openssl: the push tests make a CA and a TLS certificate for their registry; busybox-static:
# the kubelet stand-in's pull tests push an image of it alone (no base image to fetch)
TEST_DEBS=(etcd-server docker-registry slurm-client gcc libc6-dev make shellcheck iperf3 iproute2 openssl
           busybox-static)
# bench/layers.py: a throwaway registry, skopeo to recompress the image's layers as zstd, and
# podman to pull each format into an empty store (Docker 20.10 cannot pull zstd layers)
BENCH_DEBS=(docker-registry skopeo podman)

absent() { # the packages of "$@" that dpkg does not report installed
  local p
  for p in "$@"; do
    dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || printf '%s\n' "$p"
  done
}

APT_UPDATED=0
apt_install() { # apt_install [-t RELEASE] PACKAGE...
  export DEBIAN_FRONTEND=noninteractive
  if [ "$APT_UPDATED" = 0 ]; then $SUDO apt-get update -qq; APT_UPDATED=1; fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

install_debs() {
  local want=("${CORE_DEBS[@]}") missing
  [ "$EMULATION" = 0 ] || want+=("${EMULATION_DEBS[@]}")
  [ "$TESTS" = 0 ] || want+=("${TEST_DEBS[@]}")
  [ "$BENCH" = 0 ] || want+=("${BENCH_DEBS[@]}")
  mapfile -t missing < <(absent "${want[@]}")
  if [ "${#missing[@]}" -gt 0 ]; then apt_install "${missing[@]}"; else echo "    all present"; fi
}

# QEMU: the aarch64 image's `import torch` is tested emulated with qemu 10 (bookworm's 7.2
# is untested there), so on bookworm take qemu-user-static from bookworm-backports.
install_qemu() {
  local from=()
  if [ -z "$(absent qemu-user-static)" ]; then echo "    qemu-user-static present"; else
    if grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release; then
      echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee /etc/apt/sources.list.d/torchpod-backports.list >/dev/null
      from=(-t bookworm-backports)
      APT_UPDATED=0  # the backports list is new
    fi
    apt_install "${from[@]}" qemu-user-static
  fi
  if [ -z "$(ls -A /proc/sys/fs/binfmt_misc 2>/dev/null)" ]; then
    $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  fi
  $SUDO update-binfmts --enable >/dev/null 2>&1 || true
  # qemu >= 8 ships systemd-binfmt files (/usr/lib/binfmt.d) instead of binfmt-support ones;
  # with no systemd running (containers, CI), register the foreign arch's handler directly.
  local foreign
  case "$(uname -m)" in x86_64) foreign=aarch64 ;; aarch64) foreign=x86_64 ;; *) foreign="" ;; esac
  if [ -n "$foreign" ] && [ ! -e "/proc/sys/fs/binfmt_misc/qemu-$foreign" ] && [ -f "/usr/lib/binfmt.d/qemu-$foreign.conf" ]; then
    $SUDO sh -c "cat /usr/lib/binfmt.d/qemu-$foreign.conf > /proc/sys/fs/binfmt_misc/register"
  fi
  [ -z "$foreign" ] || [ -e "/proc/sys/fs/binfmt_misc/qemu-$foreign" ] || {
    echo "QEMU for $foreign is not registered in binfmt_misc; foreign-arch builds will fail" >&2; exit 1; }
}

DOCKER=/usr/bin/docker
# stop_idle_docker: stop dockerd (TERM, as its service manager would) unless it runs a container
stop_idle_docker() {
  local pids
  pids=$(pidof dockerd || true)
  [ -n "$pids" ] || return 0
  if [ -n "$($SUDO $DOCKER ps -q 2>/dev/null)" ]; then echo "    dockerd runs containers: left running"; return 0; fi
  echo "    stopping dockerd ($pids) to sweep its store"
  # shellcheck disable=SC2086  # one word per pid
  $SUDO kill -TERM $pids
  for _ in $(seq 1 60); do pidof dockerd >/dev/null || return 0; sleep 0.5; done
  echo "dockerd did not stop within 30 s; see /var/log/torchpod-dockerd.log" >&2; exit 1
}
start_docker() {
  [ "$RESTART_DOCKER" = 0 ] || stop_idle_docker
  if $SUDO $DOCKER info >/dev/null 2>&1; then echo "    running"; return; fi
  pidof dockerd >/dev/null || $SUDO python3 toolkit/torchpod_toolkit/imagebuild/dockerstore.py
  echo "    starting dockerd (log: /var/log/torchpod-dockerd.log)"
  $SUDO sh -c 'nohup setsid dockerd >/var/log/torchpod-dockerd.log 2>&1 &'
  for _ in $(seq 1 120); do
    $SUDO $DOCKER info >/dev/null 2>&1 && return
    sleep 0.5
  done
  echo "dockerd did not start; see /var/log/torchpod-dockerd.log" >&2; exit 1
}

# pip_install EXTRA: `pip install -e .[EXTRA]`, skipped when every requirement of the extra
# is already satisfied (importlib.metadata; the check takes well under a second)
pip_install() {
  # -I: not this folder on sys.path, whose torchpod.egg-info (no direct_url.json) would shadow the install
  if python3 -I - "$1" <<'EOF' 2>/dev/null; then echo "    all present"; return; fi
import json
import sys
from importlib.metadata import PackageNotFoundError, distribution, requires
from pathlib import Path

from packaging.requirements import Requirement

extra = sys.argv[1]
try:
    dist = distribution("torchpod")
except PackageNotFoundError:
    sys.exit(1)
# an editable install of this very checkout (CI clones it afresh, in another folder)
url = json.loads(dist.read_text("direct_url.json") or "{}")
if not url.get("dir_info", {}).get("editable") or url.get("url") != Path.cwd().resolve().as_uri():
    sys.exit(1)
todo, seen = [r for r in requires("torchpod") or [] if f'extra == "{extra}"' in r], set()
while todo:
    req = Requirement(todo.pop())
    if req.name in seen:
        continue
    seen.add(req.name)
    if req.name == "torchpod":
        todo += [r for r in requires("torchpod") or [] for x in req.extras if f'extra == "{x}"' in r]
        continue
    if not req.specifier.contains(distribution(req.name).version, prereleases=True):
        sys.exit(1)
EOF
  python3 -m pip install -q --disable-pip-version-check -e ".[$1]"
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi  # put `invoke` on PATH under pyenv
}

# the default image's torch, read from images/ (the one place its version is written), and
# its numpy as the image's lock pins it: torch.distributed moves Python objects through numpy
# (all_gather_object: "Numpy is not available" without it), and pip does not install it with torch
install_host_torch() {
  local pin numpy
  pin=$(python3 -m torchpod_toolkit.imagebuild.definitions --host-torch)
  numpy=$(grep -m1 -o '^numpy==[^ ]*' "images/locks/pytorch-$(uname -m).txt")
  if python3 -c '
import sys
from importlib.metadata import version
sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))' "$pin" "$numpy" 2>/dev/null; then
    echo "    $pin $numpy present"; return
  fi
  python3 -m pip install -q --disable-pip-version-check "$pin" "$numpy"
}

# SkyPilot in an environment of its own: the tests judge the SkyPilot tasks `invoke manifests`
# writes with SkyPilot's own schema and parser, and its cloud SDKs stay out of the project's
# environment (tests/paths.py SKYPILOT_PYTHON names the same place).
SKY_VENV=/opt/torchpod-skypilot
install_skypilot() {
  if "$SKY_VENV/bin/python" -c 'import sky' >/dev/null 2>&1; then echo "    present in $SKY_VENV"; return; fi
  python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
  $SUDO python3 -m venv "$SKY_VENV"
  $SUDO "$SKY_VENV/bin/python" -m pip install -q --disable-pip-version-check 'skypilot==0.14.1'
}

if [ "$TESTS" = 0 ]; then
  bg_step "torchpod and its toolkit (pip install -e '.[toolkit]')" pip_install toolkit
else
  bg_step "torchpod and its dev tools (pip install -e '.[dev]')" pip_install dev
fi
step "Debian packages" install_debs
[ "$EMULATION" = 0 ] || step "QEMU user emulation (binfmt_misc) for foreign-arch builds" install_qemu
step "Docker engine" start_docker
finish_bg
if [ "$TESTS" = 0 ]; then
  summary
  log "ready: invoke build --arch x86_64 | invoke demo | ./setup.sh --tests, then invoke test"
  exit 0
fi
step "the default image's torch on the host" install_host_torch
step "SkyPilot 0.14.1 in $SKY_VENV" install_skypilot
summary
log "ready: invoke build --arch x86_64 | invoke build --arch aarch64 | invoke test"
