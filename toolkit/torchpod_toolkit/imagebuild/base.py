"""The Debian base an image stands on: a registry image, or a rootfs bootstrapped once with
mmdebstrap at the Debian lock's versions, compared with that lock, and cached as an image.

Also the commit's time (SOURCE_DATE_EPOCH) every reproducible step of a build is stamped
with. It builds no image layer of its own beyond the base.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from torchpod.contract import Arch
from torchpod.errors import RuntimeFailure

from . import commands, host, locks
from .commands import Builder
from .definitions import ImageDef
from .proc import run


def _pins(debs: locks.Lock | None) -> dict[str, str] | None:
    """The base packages' locked versions, or None without a Debian lock."""
    return {d.name: d.version for d in debs.entries if d.layer == "base"} if debs else None


def needs_bootstrap(client, defn: ImageDef, arch: Arch, debs: locks.Lock | None = None) -> bool:
    """Whether :func:`ensure_base` would bootstrap the base for ``arch`` (it is not a registry
    image and no image carries its tag yet)."""
    return not defn.base.image and not host.image_exists(client, commands.base_tag(defn, arch, _pins(debs)))


def ensure_base(client, builder: Builder, defn: ImageDef, arch: Arch, cache: Path,
                debs: locks.Lock | None = None, quiet: bool = False) -> str:
    """The base image for ``arch``: a registry image, or a rootfs bootstrapped once and cached.

    With the Debian lock ``debs`` every base package is asked for at its locked version, and
    the bootstrapped rootfs is compared with the lock before it is tagged for use: a package
    the mirror now serves at another version, or no longer serves, is named in one line
    with the way to refresh the lock."""
    if defn.base.image:
        return defn.base.image
    pins = _pins(debs)
    tag = commands.base_tag(defn, arch, pins)
    if host.image_exists(client, tag):
        return tag
    if shutil.which("mmdebstrap") is None:
        raise RuntimeFailure("mmdebstrap is not installed; run: apt-get install mmdebstrap (or ./setup.sh)")
    if arch != host.host_arch() and shutil.which("arch-test") is None:
        raise RuntimeFailure(
            f"bootstrapping a {arch.name} base on a {host.host_arch().name} host needs arch-test "
            "(mmdebstrap checks emulation with it); run: apt-get install arch-test (or ./setup.sh)"
        )
    fix = (f"refresh the lock with `invoke lock --image {defn.name} --arch {arch.name}`, or point base.mirror of "
           f"{defn.path.name} at a dated snapshot (https://snapshot.debian.org/archive/debian/<YYYYMMDDThhmmssZ>/)")
    cache.mkdir(parents=True, exist_ok=True)  # a fresh clone has none yet
    with tempfile.TemporaryDirectory(prefix="torchpod-rootfs-", dir=cache) as tmp:
        context = Path(tmp)
        print(f"==> bootstrapping Debian {defn.base.debian} for {arch.name} ({tag})", flush=True)
        argv = commands.rootfs_command(defn, arch, context / "rootfs.tar", pins)
        epoch = {"SOURCE_DATE_EPOCH": str(source_date_epoch(cache.parent))}
        if debs is None:
            run(argv, what="mmdebstrap", env=epoch)
        else:  # its output is read for apt's word on a locked version the mirror lacks
            proc = subprocess.run(argv, env={**os.environ, **epoch}, text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                # apt-pkg/cacheset.cc: "Version '%s' for '%s' was not found"
                gone = re.findall(r"Version '([^']{1,200})' for '([^']{1,100})' was not found", proc.stdout)
                what = (", ".join(f"{name}={version}" for version, name in gone[:3]) + " is not on the mirror"
                        if gone else f"exit {proc.returncode}: {(proc.stdout.strip().splitlines() or [''])[-1][:200]}")
                raise RuntimeFailure(f"mmdebstrap could not install the Debian packages of {debs.path} from "
                                     f"{defn.base.mirror}: {what}; a locked version is gone from the mirror: {fix}")
        (context / "Dockerfile").write_text(commands.BASE_DOCKERFILE)
        run(commands.base_import_command(builder, arch, context, tag), env=builder.env, what="base import",
            quiet=quiet)
    if debs is not None:
        wrong = locks.base_differences(debs, installed_debs(client, tag, arch, "base"))
        if wrong:
            client.images.remove(tag)
            raise RuntimeFailure(f"the {arch.name} base bootstrapped from {defn.base.mirror} differs from {debs.path}: "
                                 f"{wrong[0]}{f' (and {len(wrong) - 1} more)' if len(wrong) > 1 else ''}; {fix}")
    return tag


def installed_debs(client, ref: str, arch: Arch, layer: str) -> list[locks.Deb]:
    """Every Debian package installed in ``ref`` (dpkg-query; emulated for a foreign arch)."""
    out = client.containers.run(ref, ["-W", "-f", "${Package}=${Version}\\n"], entrypoint=["dpkg-query"],
                                platform=arch.docker, network_disabled=True, remove=True)
    return locks.parse_dpkg(out.decode(), layer)


def source_date_epoch(root: Path) -> int:
    """SOURCE_DATE_EPOCH: the commit's time (reproducible-builds.org/specs/source-date-epoch)."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        return int(os.environ["SOURCE_DATE_EPOCH"])
    proc = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    return int(proc.stdout.strip()) if proc.stdout.strip().isdigit() else 0


def host_debs(root: Path, defn: ImageDef) -> locks.Lock | None:
    """The build host's base is pinned by the definition's lock for that arch, when it has one
    (an x86_64-only definition built on an aarch64 host bootstraps its build stage unpinned)."""
    machine = host.host_arch()
    if not defn.base.debian or machine not in defn.arches:
        return None
    return locks.load(root / "images", defn, machine, debian=True)
