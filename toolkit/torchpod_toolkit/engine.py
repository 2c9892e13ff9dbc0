"""The build pipeline's side effects: Docker engine, BuildKit builds, probes, pushes.

``tasks.py`` calls these; the commands they run come from :mod:`.commands` so tests can
check them without an engine. Every failure is a :class:`TorchpodError` naming the cause
and the fix, and nothing is left half-tagged: an image gets its final tag only after its
versions were read back and matched its definition.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

from torchpod.contract import IMAGE_PLUGIN, Arch, normalise_arch
from torchpod.errors import InputError, RuntimeFailure

from . import commands
from .commands import Builder
from .definitions import ImageDef

DEFAULT_CA_BUNDLES = (Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt"))
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")


@dataclass(frozen=True)
class BuildResult:
    defn: ImageDef
    arch: Arch
    tag: str
    size: int
    versions: Mapping[str, str]
    seconds: float


def host_arch() -> Arch:
    return normalise_arch(platform.machine(), what="this host's architecture (uname -m)")


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, quiet: bool = False,
        what: str | None = None) -> str:
    """Run a command, streaming its output unless ``quiet``; raise naming it on failure."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(list(argv), env=full_env, text=True,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.STDOUT if quiet else None)
    if proc.returncode != 0:
        tail = ""
        if quiet and proc.stdout:
            tail = ": " + proc.stdout.strip().splitlines()[-1][:300]
        raise RuntimeFailure(f"{what or argv[0]} failed (exit {proc.returncode}){tail}; "
                             f"command: {' '.join(argv[:6])} ...")
    return proc.stdout or ""


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


def check_emulation(arch: Arch, host: Arch, binfmt_dir: Path = BINFMT_DIR) -> None:
    """A foreign-arch build needs QEMU registered with binfmt_misc; say how if it is not."""
    if arch == host:
        return
    entry = binfmt_dir / (arch.qemu or "")
    if not entry.exists() or "enabled" not in entry.read_text():
        raise InputError(
            f"--arch={arch.name} on a {host.name} host needs QEMU user emulation, but "
            f"{entry} is not registered; run ./setup.sh, or by hand: apt-get install qemu-user-static, "
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


def ensure_base(client, builder: Builder, defn: ImageDef, arch: Arch, cache: Path) -> str:
    """The base image for ``arch``: a registry image, or a rootfs bootstrapped once and cached."""
    if defn.base.image:
        return defn.base.image
    tag = commands.base_tag(defn, arch)
    if image_exists(client, tag):
        return tag
    if shutil.which("mmdebstrap") is None:
        raise RuntimeFailure("mmdebstrap is not installed; run: apt-get install mmdebstrap (or ./setup.sh)")
    if arch != host_arch() and shutil.which("arch-test") is None:
        raise RuntimeFailure(
            f"bootstrapping a {arch.name} base on a {host_arch().name} host needs arch-test "
            "(mmdebstrap checks emulation with it); run: apt-get install arch-test (or ./setup.sh)"
        )
    with tempfile.TemporaryDirectory(prefix="torchpod-rootfs-", dir=cache) as tmp:
        context = Path(tmp)
        print(f"==> bootstrapping Debian {defn.base.debian} for {arch.name} ({tag})", flush=True)
        run(commands.rootfs_command(defn, arch, context / "rootfs.tar"), what="mmdebstrap")
        (context / "Dockerfile").write_text(commands.BASE_DOCKERFILE)
        run(commands.base_import_command(builder, arch, context, tag), env=builder.env, what="base import")
    return tag


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


def probe_image(client, ref: str, arch: Arch, cache: Path, *, timeout: int = 300) -> dict[str, str]:
    """Run the probe in ``ref`` (it imports torch, emulated or not) and return what it read."""
    container = client.containers.run(ref, ["-m", "torchpod.probe", "--import-torch"],
                                      entrypoint="python", platform=arch.docker, detach=True,
                                      network_disabled=True,
                                      volumes=emulation_volumes(arch, host_arch(), cache))
    import requests

    try:
        try:
            status = container.wait(timeout=timeout)["StatusCode"]
        # a hung emulated process (some urllib3 versions say ConnectionError: Read timed out)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            raise RuntimeFailure(f"probe of {ref} did not finish in {timeout} s") from None
        output = container.logs().decode(errors="replace").strip()
        if status != 0:
            raise RuntimeFailure(f"probe of {ref} failed (exit {status}): {output.splitlines()[-1:]}")
        return json.loads(output.splitlines()[-1])
    finally:
        container.remove(force=True)


def stage_netplugin_source(defn: ImageDef, root: Path, ca_bundle: Path | None) -> str:
    """The verified plugin source, copied into the build context; its context path.

    The checksum step runs first (sources.py: an unpinned download, a mismatch or a missing
    tarball stops the build before Docker runs and nothing is tagged)."""
    from .sources import aws_ofi_nccl_source

    source = aws_ofi_nccl_source(defn, root / ".cache", ca_bundle)
    folder = root / ".cache" / "sources" / "netplugin"
    folder.mkdir(parents=True, exist_ok=True)
    # aws_ofi_nccl_source refused a definition without the section
    staged = folder / f"{defn.name}-{defn.aws_ofi_nccl.version}.tar.gz"  # type: ignore[union-attr]
    if not staged.exists() or staged.read_bytes() != source.read_bytes():
        shutil.copyfile(source, staged)
    return str(staged.relative_to(root))


def netplugin_facts(client, ref: str, nccl: str) -> dict[str, str]:
    """What the plugin in the built image says it is, read from the file (any arch)."""
    import io
    import tarfile

    from torchpod import netplugin

    from . import plugin

    container = client.containers.create(ref, entrypoint=["true"])
    try:
        stream, _ = container.get_archive(str(Path(IMAGE_PLUGIN).parent))
        tar = tarfile.open(fileobj=io.BytesIO(b"".join(stream)))
    finally:
        container.remove(force=True)
    members = {Path(m.name).name: m for m in tar.getmembers()}
    member = members.get(Path(IMAGE_PLUGIN).name)
    while member is not None and member.issym():
        member = members.get(Path(member.linkname).name)
    if member is None or not member.isfile():
        raise RuntimeFailure(f"{ref}: the net plugin stage left no {IMAGE_PLUGIN}")
    info = plugin.read(tar.extractfile(member).read())  # type: ignore[union-attr]  # a regular file: isfile() above
    want = netplugin.wanted(tuple(int(x) for x in nccl.split(".")) if nccl else None)
    api = sorted(set(info.exported) & set(want), reverse=True)
    return {"nccl-net-plugin": f"{info.label}, ncclNetPlugin_v{api[0] if api else '?'}",
            "nccl-net-plugin-version": info.version or "", "nccl-net-plugin-machine": info.machine,
            "nccl-net-plugin-api": f"v{api[0]}" if api else ""}


# pip's words for "no such version for this platform" (resolver and finder messages)
_NO_WHEEL = ("No matching distribution found", "Could not find a version that satisfies", "ResolutionImpossible",
             "conflicting dependencies")


def check_wheels(defn: ImageDef, arch: Arch, cache: Path, ca_bundle: Path | None,
                 wheelhouse: Path | None = None) -> None:
    """Before Docker runs: every wheel pin of ``defn`` exists for ``arch`` on its index (or in
    the wheelhouse), else one line naming the pin and the arch. A passing check is
    remembered per selection (.cache/wheel-checks), so an unchanged definition costs nothing."""
    import hashlib

    scratch = cache / "wheel-checks" / "target"
    key = hashlib.sha256(" ".join(commands.wheel_check_command(
        defn, arch, defn.torch.wheels, "python", None, wheelhouse, scratch)).encode()).hexdigest()[:16]
    marker = cache / "wheel-checks" / f"{defn.name}-{arch.name}-{key}"
    if marker.exists():
        return
    where = f"the wheelhouse {wheelhouse}" if wheelhouse else defn.torch.index_url

    def dry_run(requirements: Sequence[str]) -> subprocess.CompletedProcess:
        argv = commands.wheel_check_command(defn, arch, requirements, sys.executable, ca_bundle, wheelhouse, scratch)
        return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})

    if dry_run(defn.torch.wheels).returncode != 0:
        for requirement in defn.torch.wheels:  # which pin: one at a time, only on failure
            proc = dry_run([requirement])
            if proc.returncode != 0:
                said = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.startswith("ERROR")]
                if not any(word in (proc.stderr + proc.stdout) for word in _NO_WHEEL):
                    raise RuntimeFailure(f"pip could not read {where} for {requirement} ({arch.name}): "
                                         f"{(said or ['no error text'])[0][:200]}; check the network or the index")
                raise InputError(
                    f"{defn.path.name}: {requirement} has no wheel for {arch.name} (CPython {defn.python}, "
                    f"manylinux glibc {'.'.join(map(str, commands.glibc(defn)))}) on {where}; expected a "
                    f"version that {where} serves for {arch.name}; change the pin, or drop {arch.name} "
                    "from 'arches'"
                )
        raise RuntimeFailure(f"pip could not resolve {' '.join(defn.torch.wheels)} for {arch.name} together "
                             f"from {where}, though each resolves alone; check the pins")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(" ".join(defn.torch.wheels) + "\n")


def git_revision(root: Path) -> str:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def build(defn: ImageDef, arch: Arch, *, root: Path, offline: bool = False,
          ca_bundle: Path | None = None, rebuild: str | None = None, quiet: bool = False) -> BuildResult:
    """Build, probe, check and label one image; the final tag appears only if all pass."""
    started = time.monotonic()
    cache = root / ".cache"
    netplugin_tarball = None
    if defn.aws_ofi_nccl is not None:
        netplugin_tarball = stage_netplugin_source(defn, root, ca_bundle)
    client = docker_client()
    builder = find_builder()
    host = host_arch()
    check_emulation(arch, host)
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)  # the Dockerfile bind-mounts it, empty or not
    wheelhouse = None
    if offline:
        wheelhouse = f"{defn.name}-{arch.name}"
        if not any((wheels / wheelhouse).glob("*.whl")):
            raise InputError(
                f"--offline: no wheels in {wheels / wheelhouse}; run `invoke wheels --image {defn.name} "
                f"--arch {arch.name}` on a host that reaches {defn.torch.index_url}, then copy .cache/wheels here"
            )
    check_wheels(defn, arch, cache, ca_bundle, wheels / wheelhouse if wheelhouse else None)
    base = ensure_base(client, builder, defn, arch, cache)
    build_base = ensure_base(client, builder, defn, host, cache)
    final = defn.ref(arch)
    previous = client.images.get(final).id if image_exists(client, final) else None
    staging = f"torchpod-staging/{defn.name}:{arch.name}-{uuid.uuid4().hex[:8]}"
    print(f"==> building {final} for {arch.docker} (base {base})", flush=True)
    argv = commands.build_command(builder, defn, arch, context=root, tag=staging, base_image=base,
                                  build_base_image=build_base, wheelhouse=wheelhouse, ca_bundle=ca_bundle,
                                  rebuild=rebuild, netplugin_tarball=netplugin_tarball)
    try:
        run(argv, env=builder.env, quiet=quiet, what=f"docker build of {final}")
        versions = probe_image(client, staging, arch, cache)
        if defn.aws_ofi_nccl is not None:
            versions.update(netplugin_facts(client, staging, versions.get("nccl", "")))
        wrong = commands.mismatches(defn, arch, versions)
        if wrong:
            raise RuntimeFailure(f"{final} differs from {defn.path.name}: " + "; ".join(wrong))
        values = commands.labels(defn, arch, versions,
                                 created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 revision=git_revision(root))
        with tempfile.TemporaryDirectory(prefix="torchpod-label-") as tmp:
            dockerfile = Path(tmp) / "Dockerfile"
            dockerfile.write_text(commands.label_dockerfile(staging, values))
            run(commands.label_command(builder, arch, dockerfile, final), env=builder.env,
                quiet=True, what=f"labelling {final}")
    finally:
        if image_exists(client, staging):
            client.images.remove(staging, noprune=False)
    image = client.images.get(final)
    if previous and previous != image.id:
        _drop_if_untagged(client, previous)  # a rebuild must not leave 5 GB of <none> behind
    return BuildResult(defn, arch, final, image.attrs["Size"], versions, time.monotonic() - started)


def _drop_if_untagged(client, image_id: str) -> None:
    import docker

    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
    except docker.errors.APIError:  # still used by a container, or already gone: keep going
        pass


def summary_table(results: Sequence[BuildResult]) -> str:
    rows = [("image", "arch", "tag", "size", "torch", "cuda", "nccl", "rdma-core", "build")]
    for r in results:
        rows.append((r.defn.name, r.arch.name, r.tag, f"{r.size / 1e9:.2f} GB", r.versions.get("torch", ""),
                     r.versions.get("cuda", ""), r.versions.get("nccl", ""), r.versions.get("rdma-core", ""),
                     f"{r.seconds:.0f} s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

