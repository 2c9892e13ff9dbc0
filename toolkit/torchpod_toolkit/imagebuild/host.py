"""The build host: its Docker engine and BuildKit client, its architecture, QEMU emulation of
a foreign one, its CA bundle and torchpod's cache outside any checkout.

Every other build module reaches Docker through :func:`docker_client`, :func:`find_builder`
and :func:`run_build`, so a missing engine, client or emulation is one line saying how to
get it. It knows nothing of images: no definition, lock or tag is read here.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from torchpod import readers
from torchpod.contract import Arch, normalise_arch
from torchpod.errors import InputError, RuntimeFailure

from .commands import Builder

DEFAULT_CA_BUNDLES = (Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt"))
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")


def user_cache() -> Path:
    """torchpod's cache outside any checkout: ``$XDG_CACHE_HOME/torchpod``, else
    ``~/.cache/torchpod``. What it holds is keyed by content (the wheelhouse's files, the
    probes' results), so every checkout and CI's fresh clones share it safely."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "torchpod"


def host_arch() -> Arch:
    return normalise_arch(platform.machine(), what="this host's architecture (uname -m)")


def run_build(argv: Sequence[str], *, env: Mapping[str, str] | None = None, quiet: bool = False,
              what: str) -> float:
    """Run a BuildKit build (``--progress=plain``), printing its output unless ``quiet``; the
    seconds BuildKit spent exporting the image (:func:`export_seconds`)."""
    proc = subprocess.Popen(list(argv), env={**os.environ, **(env or {})}, text=True, errors="replace",
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    steps = _ExportSteps()
    last = ""
    assert proc.stdout is not None  # stdout=PIPE
    for line in proc.stdout:
        if not quiet:
            sys.stdout.write(line)
            sys.stdout.flush()
        steps.feed(line)
        last = line.strip() or last
    if proc.wait() != 0:
        tail = f": {last[:300]}" if quiet and last else ""
        raise RuntimeFailure(f"{what} failed (exit {proc.returncode}){tail}; command: {' '.join(argv[:6])} ...")
    return steps.seconds


class _ExportSteps:
    """The time of BuildKit's "exporting to image" steps, read from its plain progress output:
    ``#14 exporting to image`` names step 14, ``#14 DONE 21.7s`` ends it (moby/buildkit,
    util/progress/progressui/printer.go)."""

    _NAME = re.compile(r"#(\d+) exporting to image\s*$")
    _DONE = re.compile(r"#(\d+) DONE (\d+(?:\.\d+)?)s\s*$")

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.seconds = 0.0

    def feed(self, line: str) -> None:
        named = self._NAME.match(line)
        if named:
            self.ids.add(named.group(1))
            return
        done = self._DONE.match(line)
        if done and done.group(1) in self.ids:
            self.seconds += float(done.group(2))


def export_seconds(lines: Sequence[str]) -> float:
    """The seconds spent in "exporting to image" steps of a plain BuildKit log."""
    steps = _ExportSteps()
    for line in lines:
        steps.feed(line)
    return steps.seconds


def docker_client():
    """A docker SDK client for a live engine, or an error saying how to start one."""
    import docker
    import requests

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    # from_env raises DockerException when it cannot ask the engine its API version;
    # ping raises requests' ConnectionError when nothing listens on the socket.
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        raise RuntimeFailure(
            f"no Docker engine at {where} ({type(exc).__name__}); start one "
            "(`dockerd &` as root, or ./setup.sh) and retry"
        ) from None
    return client


def find_builder(candidates: Sequence[str] | None = None) -> Builder:
    """Prefer buildx; else a client that still has BuildKit built in (Docker < 23)."""
    seen = []
    for docker in candidates or _docker_candidates():
        if subprocess.run([docker, "buildx", "version"], capture_output=True).returncode == 0:
            return Builder(docker, buildx=True)
        version = subprocess.run([docker, "version", "--format", "{{.Client.Version}}"],
                                 capture_output=True, text=True).stdout.strip()
        seen.append(f"{docker} {version or '?'}")
        try:
            major = int(version.split(".")[0])
        except ValueError:
            continue
        if major < 23:
            return Builder(docker, buildx=False)
    raise RuntimeFailure(
        f"no BuildKit-capable docker client (tried: {', '.join(seen) or 'none on PATH'}); "
        "install the buildx plugin (docker-buildx) or Debian's docker.io client"
    )


def _docker_candidates() -> list[str]:
    out: list[str] = []
    for name in (shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker"):
        if name and os.path.exists(name) and os.path.realpath(name) not in map(os.path.realpath, out):
            out.append(name)
    return out


def _binfmt_entry(entry: Path) -> str:
    """A binfmt_misc registration's text (a kernel attribute: a few lines), "" when none is
    there; through the bounded reader, so anything but a regular file is one line."""
    try:
        return readers.read_text(entry, what=str(entry), expected="a binfmt_misc registration", cap=readers.ATTR_CAP)
    except readers.Unreadable:
        return ""


def check_emulation(arch: Arch, host: Arch, binfmt_dir: Path = BINFMT_DIR) -> None:
    """A foreign-arch build needs QEMU registered with binfmt_misc; say how if it is not."""
    if arch == host:
        return
    entry = binfmt_dir / (arch.qemu or "")
    if "enabled" not in _binfmt_entry(entry):
        raise InputError(
            f"--arch={arch.name} on a {host.name} host needs QEMU user emulation, but "
            f"{entry} is not registered; run ./setup.sh --emulation, or by hand: apt-get install qemu-user-static, "
            f"then `cat /usr/lib/binfmt.d/{arch.qemu}.conf > {binfmt_dir}/register` (qemu >= 8) "
            "or `update-binfmts --enable` (older qemu)"
        )


def default_ca_bundle() -> Path | None:
    """The host's CA bundle (behind a TLS-intercepting proxy pip needs it), if any."""
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(var)
        if value and Path(value).is_file():
            return Path(value)
    return next((p for p in DEFAULT_CA_BUNDLES if p.is_file()), None)


def image_exists(client, ref: str) -> bool:
    import docker

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


# MIDR_EL1 of an Arm Neoverse V2 core (the GH200's Grace CPU).
NEOVERSE_V2_MIDR = "0x00000000410fd4f0"


def emulation_volumes(arch: Arch, host: Arch, cache: Path) -> dict[str, dict[str, str]]:
    """Volumes that let torch import under QEMU user emulation of aarch64.

    oneDNN's CPU probe (xbyak_aarch64) reads MIDR_EL1 from sysfs, which QEMU's user mode
    does not provide, and then crashes or hangs ``import torch``. A read-only stand-in
    for /sys/devices/system/cpu with a Neoverse V2 MIDR lets it proceed. Native runs
    and x86_64 targets get nothing.
    """
    if arch == host or arch.name != "aarch64":
        return {}
    cpus = os.cpu_count() or 1
    root = cache / "qemu-sysfs-cpu"
    for n in range(cpus):
        ident = root / f"cpu{n}" / "regs" / "identification"
        ident.mkdir(parents=True, exist_ok=True)
        (ident / "midr_el1").write_text(NEOVERSE_V2_MIDR + "\n")
    for name in ("online", "possible", "present"):
        (root / name).write_text(f"0-{cpus - 1}\n")
    return {str(root): {"bind": "/sys/devices/system/cpu", "mode": "ro"}}
