"""The build pipeline's side effects: Docker engine, BuildKit builds, probes, pushes.

``tasks.py`` calls these; the commands they run come from :mod:`.commands` so tests can
check them without an engine. Every failure is a :class:`TorchpodError` naming the cause
and the fix, and nothing is left half-tagged: an image gets its final tag only after its
versions were read back and matched its definition.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

from torchpod.contract import IMAGE_PLUGIN, Arch, normalise_arch
from torchpod.errors import InputError, RuntimeFailure

from . import commands, locks, sbom, sources, wheelhouse
from .commands import Builder
from .definitions import ImageDef
from .proc import run

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
    # where the time went, in the order the phases ran (PHASES); wheels and base overlap
    phases: Mapping[str, float] = field(default_factory=dict)
    payload: str = ""  # the payload image it stands on (PAYLOAD_REPOSITORY:<arch>-<key>)


# The phases of a build, as `invoke build` reports them: the wheelhouse and the SBOM (before
# Docker), the Debian bases (bootstrapped at once with the wheels' download), the payload image
# (0 when an unchanged one is reused), the image's own layers, BuildKit's export of them, the
# probe (0 when remembered) and the labels.
PHASES = ("wheels", "sbom", "base", "payload", "layers", "export", "probe", "labels")


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


def check_emulation(arch: Arch, host: Arch, binfmt_dir: Path = BINFMT_DIR) -> None:
    """A foreign-arch build needs QEMU registered with binfmt_misc; say how if it is not."""
    if arch == host:
        return
    entry = binfmt_dir / (arch.qemu or "")
    if not entry.exists() or "enabled" not in entry.read_text():
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


def ensure_base(client, builder: Builder, defn: ImageDef, arch: Arch, cache: Path,
                debs: locks.Lock | None = None, quiet: bool = False) -> str:
    """The base image for ``arch``: a registry image, or a rootfs bootstrapped once and cached.

    With the Debian lock ``debs`` every base package is asked for at its locked version, and
    the bootstrapped rootfs is compared with the lock before it is tagged for use: a package
    the mirror now serves at another version, or no longer serves, is named in one line
    with the way to refresh the lock."""
    if defn.base.image:
        return defn.base.image
    pins = {d.name: d.version for d in debs.entries if d.layer == "base"} if debs else None
    tag = commands.base_tag(defn, arch, pins)
    if image_exists(client, tag):
        return tag
    if shutil.which("mmdebstrap") is None:
        raise RuntimeFailure("mmdebstrap is not installed; run: apt-get install mmdebstrap (or ./setup.sh)")
    if arch != host_arch() and shutil.which("arch-test") is None:
        raise RuntimeFailure(
            f"bootstrapping a {arch.name} base on a {host_arch().name} host needs arch-test "
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


# the probe and the one module it imports (torchpod.contract)
PROBE_SOURCES = tuple(Path(__file__).resolve().parents[2] / "entrypoints" / "torchpod" / name
                      for name in ("probe.py", "contract.py"))


def probe_key(inputs: Inputs, base_id: str, arch: Arch) -> str:
    """What decides everything the probe reads: the locked wheel lines (torch, torchvision,
    CUDA, NCCL), every locked Debian package (Python, rdma-core, and a variant's libfabric,
    which the probe reads too), the base image, the arch and the probe. A launcher-only edit
    changes none of them, so its rebuild does not import torch again (under QEMU, most of an
    aarch64 rebuild); and the key holds no path of the checkout, so a fresh clone finds it."""
    wheels = "".join(w.line + "\n" for w in inputs.wheels.entries)
    debs = "".join(f"{d.layer}:{d.name}={d.version}\n" for d in inputs.debs.entries) if inputs.debs else ""
    parts = [arch.name, hashlib.sha256(wheels.encode()).hexdigest(), hashlib.sha256(debs.encode()).hexdigest(),
             base_id, *(hashlib.sha256(path.read_bytes()).hexdigest() for path in PROBE_SOURCES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cached_probe(client, ref: str, arch: Arch, cache: Path, key: str) -> dict[str, str]:
    """The probe's result for ``key`` (``<cache>/probes/<key>.json``: the user's cache, so a fresh
    clone finds what an earlier one probed), probing ``ref`` when unknown."""
    path = cache / "probes" / f"{key}.json"
    try:
        found = json.loads(path.read_text())
        if isinstance(found, dict) and all(isinstance(v, str) for v in found.values()):
            return found
    except (OSError, ValueError):
        pass
    found = probe_image(client, ref, arch, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(found))
    os.replace(tmp, path)
    return found


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


# pip's words when it never reached the index: it then also says "Could not find a version"
# (pip/_internal/index/collector.py logs the connection error as "Could not fetch URL")
_UNREACHABLE = ("Could not fetch URL", "Max retries exceeded", "NewConnectionError", "ProxyError",
                "Network is unreachable", "Temporary failure in name resolution")


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
                lines = (proc.stderr + proc.stdout).splitlines()
                unreachable = [ln.strip() for ln in lines if any(word in ln for word in _UNREACHABLE)]
                said = unreachable or [ln.strip() for ln in lines if ln.startswith("ERROR")]
                if unreachable or not any(word in (proc.stderr + proc.stdout) for word in _NO_WHEEL):
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


def lock_wheels(defn: ImageDef, arch: Arch, cache: Path, ca_bundle: Path | None) -> list[locks.Wheel]:
    """Resolve every file the payload stage installs for ``arch``, with its sha256, from the
    definition's index (pip's report; the sdists downloaded and hashed here, and built into
    wheels only so that pip can resolve their dependencies)."""
    check_wheels(defn, arch, cache, ca_bundle)  # a pin with no wheel for the arch: one line first
    clean = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
    (cache / "locks").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lock-", dir=cache / "locks") as tmp:
        scratch = Path(tmp)
        sdists: dict[str, locks.Wheel] = {}
        built = None
        download = commands.sdist_download_command(defn, scratch / "sdists", sys.executable, ca_bundle)
        if download:
            run(download, env=clean, quiet=True, what="pip download of source-only packages")
            built = scratch / "built"
            for path in sorted((scratch / "sdists").iterdir()):
                name, _, version = path.name.rsplit(".tar.gz", 1)[0].rpartition("-")
                sdists[locks.canonical(name)] = locks.Wheel(locks.canonical(name), version,
                                                            sources.sha256_of(path), path.name)
                run([sys.executable, "-m", "pip", "wheel", "--isolated", "--disable-pip-version-check", "--no-deps",
                     "--quiet", "--wheel-dir",
                     str(built), *commands.pip_source(defn), *(["--cert", str(ca_bundle)] if ca_bundle else []),
                     str(path)], env=clean, quiet=True, what=f"pip wheel of {path.name}")
        report = scratch / "report.json"
        run(commands.resolve_command(defn, arch, sys.executable, ca_bundle, scratch=scratch / "target",
                                     report=report, find_links=built), env=clean, quiet=True,
            what=f"pip's resolution of {defn.name} for {arch.name}")
        return locks.from_report(json.loads(report.read_text()), sdists, defn.torch.index_url)


def lock_debs(defn: ImageDef, arch: Arch, root: Path, refreshed: set[str]) -> list[locks.Deb]:
    """Every Debian package of a freshly bootstrapped base for ``arch`` (from the mirror, as it
    is today: a cached unpinned base is bootstrapped again once per run, ``refreshed``), and
    the packages the image's apt layer would add (``apt-get install -s`` in that base,
    emulated for a foreign arch)."""
    client = docker_client()
    builder = find_builder()
    check_emulation(arch, host_arch())
    unpinned = commands.base_tag(defn, arch)
    if unpinned not in refreshed and image_exists(client, unpinned):
        client.images.remove(unpinned)
    refreshed.add(unpinned)
    base = ensure_base(client, builder, defn, arch, root / ".cache")
    found = installed_debs(client, base, arch, "base")
    wanted = locks.apt_packages(defn)
    if wanted:
        script = ("apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -s "
                  "--no-install-recommends " + " ".join(wanted))  # Debian package names (locks.NETPLUGIN_DEBS)
        out = client.containers.run(base, ["-c", script], entrypoint=["sh"], platform=arch.docker, remove=True)
        extra = locks.parse_simulation(out.decode())
        if not {d.name for d in extra} >= set(wanted):
            raise RuntimeFailure(f"apt-get install -s {' '.join(wanted)} in the {arch.name} base named "
                                 f"{[d.name for d in extra]}; expected at least {', '.join(wanted)}")
        found += extra
    # the pinned base's tag: the base just bootstrapped holds exactly these versions
    pinned = commands.base_tag(defn, arch, {d.name: d.version for d in found if d.layer == "base"})
    if base != pinned and not image_exists(client, pinned):
        client.images.get(base).tag(pinned)
    return found


def index_fetcher(ca_bundle: Path | None, timeout: float = 30.0):
    """fetch(url) -> (content type, body) for a package index page (PEP 691 JSON asked first)."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None)
    pages: dict[str, tuple[str, bytes]] = {}

    def fetch(url: str) -> tuple[str, bytes]:
        if url not in pages:
            request = urllib.request.Request(url, headers={
                "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
            try:
                with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                    pages[url] = (response.headers.get("Content-Type", ""), response.read(64 << 20))
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise RuntimeFailure(f"{url}: HTTP {exc.code}; check the index") from None
                pages[url] = ("text/html", b"")  # the project is gone: no file is listed
            except (urllib.error.URLError, OSError) as exc:
                raise RuntimeFailure(f"{url}: {getattr(exc, 'reason', exc)}; check the network or the index") from None
        return pages[url]

    return fetch


def git_revision(root: Path) -> str:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


@dataclass(frozen=True)
class Inputs:
    """What one build installs, all of it known before Docker runs: the locks, the SBOM."""

    wheels: locks.Lock
    debs: locks.Lock | None
    sbom: str

    def labels(self, defn: ImageDef) -> dict[str, str]:
        out = {"lock.wheels": self.wheels.sha256,
               "sbom": hashlib.sha256(self.sbom.encode()).hexdigest()}
        if self.debs is not None:
            out["lock.debian"] = self.debs.sha256
        floor = locks.driver_floor(self.wheels)
        if floor:
            out["cuda-driver-min"] = floor
        return out


def prepare(defn: ImageDef, arch: Arch, *, root: Path, offline: bool, ca_bundle: Path | None,
            clock: Clock | None = None) -> Inputs:
    """Before Docker: the locks read and checked against the definition, the wheelhouse filled
    (hash-checked; nothing downloaded when it holds the files), the lock's files and the
    SBOM staged in the build context."""
    clock = clock or Clock()
    images = root / "images"
    wheels = locks.load(images, defn, arch, debian=False)
    debs = locks.load(images, defn, arch, debian=True) if defn.base.debian else None
    with clock("wheels"):
        home = wheelhouse.root()
        fetched = wheelhouse.fill(defn, arch, wheels, home=home, ca_bundle=ca_bundle, offline=offline)
        print(f"==> wheelhouse {home}: {len(wheels.entries)} locked files, {fetched} fetched", flush=True)
        wheelhouse.stage(wheels, home=home, context=root)
    with clock("sbom"):
        text = sbom.generate(defn, arch, wheels, debs)
        folder = root / sbom.STAGE
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / Path(sbom.PATH_IN_IMAGE).name).write_text(text)
    return Inputs(wheels, debs, text)


class Clock:
    """Seconds per build phase (:data:`PHASES`). Phases may run in two threads at once (the
    bases beside the wheels); a phase run twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def phases(self, exported: Mapping[str, float]) -> dict[str, float]:
        """Every phase of :data:`PHASES`, rounded; ``exported`` is BuildKit's export time within
        each build phase, shown as "export" and taken out of that phase."""
        seconds = {**self.seconds, "export": sum(exported.values())}
        for name, part in exported.items():
            seconds[name] = max(0.0, seconds.get(name, 0.0) - part)
        return {name: round(seconds.get(name, 0.0), 1) for name in PHASES}

    def __call__(self, name: str):
        @contextlib.contextmanager
        def phase():
            start = time.monotonic()
            try:
                yield
            finally:
                self.add(name, time.monotonic() - start)

        return phase()


PAYLOAD_REPOSITORY = "torchpod-payload"
# the part of docker/Dockerfile that makes the payload image (up to the stage FROM it)
_PAYLOAD_END = "FROM ${PAYLOAD_IMAGE} AS runtime-base"


# what the payload stages run, besides the Dockerfile
PAYLOAD_SCRIPT = Path("docker") / "payload" / "payload.sh"


def payload_key(argv: Sequence[str], dockerfile: str, staged: Path, base_ids: Sequence[str],
                script: bytes = b"") -> str:
    """What decides the payload image's every byte: its build command (the build args: bases,
    Python, the pip target, a rebuild token; not its tag), the Dockerfile up to the stage that
    stands on it and the ``script`` its payload stages run, the staged lock lines (each with
    its sha256) and the wheels built from sdists, and the base images' IDs. A net plugin
    variant whose wheel lines and bases are its default image's gets the same key, and so the
    same payload image."""
    if _PAYLOAD_END not in dockerfile:
        raise RuntimeFailure(f"docker/Dockerfile has no line {_PAYLOAD_END!r}; the payload image cannot be keyed")
    digest = hashlib.sha256()
    for part in ("\0".join(_key_words(argv)), dockerfile.split(_PAYLOAD_END)[0], *base_ids):
        digest.update(part.encode() + b"\n")
    digest.update(hashlib.sha256(script).hexdigest().encode() + b"\n")
    for path in sorted(p for p in staged.rglob("*") if p.is_file() and p.suffix != ".whl"):
        digest.update(f"{path.relative_to(staged)}\0".encode() + path.read_bytes() + b"\n")
    for path in sorted((staged / wheelhouse.BUILT).glob("*.whl")):  # the lock's wheels are named by hash
        digest.update(f"{path.name}\0{sources.sha256_of(path)}\n".encode())
    return digest.hexdigest()


# Build args that name no input of the payload's bytes: the commit's time (SOURCE_DATE_EPOCH,
# which every commit moves; the payload stages declare no such ARG and give every file time 0)
_NOT_PAYLOAD_INPUTS = ("SOURCE_DATE_EPOCH=",)


def _key_words(argv: Sequence[str]) -> list[str]:
    """The words of a payload build that decide its result: the target, the platform, the
    build args (but :data:`_NOT_PAYLOAD_INPUTS`) and --no-cache; not the tag, the Dockerfile's
    path or the context's (a fresh clone sits elsewhere), whose contents are hashed apart."""
    words = []
    for flag, value in zip(argv, [*argv[1:], ""]):
        if flag in ("--target", "--platform") or (flag == "--build-arg" and not value.startswith(_NOT_PAYLOAD_INPUTS)):
            words += [flag, value]
    return words + (["--no-cache"] if "--no-cache" in argv else [])


def build(defn: ImageDef, arch: Arch, *, root: Path, offline: bool = False,
          ca_bundle: Path | None = None, rebuild: str | None = None, quiet: bool = False,
          tag: str | None = None, no_cache: bool = False) -> BuildResult:
    """Build, probe, check and label one image; the final tag appears only if all pass.
    ``tag`` replaces the definition's tag (the two-builds-agree test builds beside it).

    Two BuildKit builds: the payload image (the base and the locked wheels, tagged under
    :data:`PAYLOAD_REPOSITORY` by :func:`payload_key`, and reused while that key holds, even
    after BuildKit's cache is pruned), then the image's own layers on it. ``no_cache`` builds
    both from nothing, the payload under a tag of its own that is removed afterwards."""
    started = time.monotonic()
    clock = Clock()
    netplugin_tarball = None
    if defn.aws_ofi_nccl is not None:
        netplugin_tarball = stage_netplugin_source(defn, root, ca_bundle)
    # both locks read and checked before Docker (prepare reads them again: a few ms)
    locks.load(root / "images", defn, arch, debian=False)
    debs = locks.load(root / "images", defn, arch, debian=True) if defn.base.debian else None
    client = docker_client()
    builder = find_builder()
    check_emulation(arch, host_arch())
    inputs, base, build_base = _inputs_and_bases(client, builder, defn, arch, root=root, debs=debs, offline=offline,
                                                 ca_bundle=ca_bundle, clock=clock)
    final = tag or defn.ref(arch)
    previous = client.images.get(final).id if image_exists(client, final) else None
    staging = f"torchpod-staging/{defn.name}:{arch.name}-{uuid.uuid4().hex[:8]}"
    epoch = source_date_epoch(root)

    def command(**kw) -> list[str]:
        return commands.build_command(builder, defn, arch, context=root, base_image=base, build_base_image=build_base,
                                      rebuild=rebuild, source_date_epoch=epoch, no_cache=no_cache, **kw)

    base_ids = [client.images.get(base).id, client.images.get(build_base).id]
    exported = {"payload": 0.0, "layers": 0.0}  # BuildKit's export, within each build
    payload = ""
    try:
        with clock("payload"):
            payload, exported["payload"] = _payload_image(client, builder, command(tag="payload"), root, base_ids,
                                                          arch, no_cache=no_cache, quiet=quiet)
        print(f"==> building {final} for {arch.docker} on {payload}", flush=True)
        argv = command(tag=staging, payload_image=payload, netplugin_tarball=netplugin_tarball,
                       netplugin_debs=[d.pin for d in inputs.debs.entries if d.layer == "apt"] if inputs.debs else ())
        with clock("layers"):
            exported["layers"] = run_build(argv, env=builder.env, quiet=quiet, what=f"docker build of {final}")
        with clock("probe"):
            versions = cached_probe(client, staging, arch, user_cache(), probe_key(inputs, base_ids[0], arch))
            if defn.aws_ofi_nccl is not None:
                versions.update(netplugin_facts(client, staging, versions.get("nccl", "")))
        with clock("labels"):
            _check_and_label(builder, defn, arch, staging, final, versions, inputs, epoch, root)
    finally:
        for name in (staging, payload if no_cache else None):
            if name and image_exists(client, name):
                client.images.remove(name, noprune=False)
    image = client.images.get(final)
    if previous and previous != image.id:
        _drop_if_untagged(client, previous)  # a rebuild must not leave 5 GB of <none> behind
    return BuildResult(defn, arch, final, image.attrs["Size"], versions, time.monotonic() - started,
                       clock.phases(exported), "" if no_cache else payload)


def _inputs_and_bases(client, builder: Builder, defn: ImageDef, arch: Arch, *, root: Path, debs: locks.Lock | None,
                      offline: bool, ca_bundle: Path | None, clock: Clock) -> tuple[Inputs, str, str]:
    """The wheelhouse filled and staged with the SBOM (:func:`prepare`) while the target's and
    the build host's Debian bases are bootstrapped (or found): both wait on mirrors, so they
    run side by side."""
    cache = root / ".cache"
    print(f"==> wheels and Debian bases of {defn.name} for {arch.name}, side by side", flush=True)

    def bases() -> tuple[str, str]:
        with clock("base"):
            return (ensure_base(client, builder, defn, arch, cache, debs, quiet=True),
                    ensure_base(client, builder, defn, host_arch(), cache, _host_debs(root, defn), quiet=True))

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(bases)
        inputs = prepare(defn, arch, root=root, offline=offline, ca_bundle=ca_bundle, clock=clock)
        base, build_base = pending.result()
    return inputs, base, build_base


def _payload_image(client, builder: Builder, argv: list[str], root: Path, base_ids: Sequence[str], arch: Arch, *,
                   no_cache: bool, quiet: bool) -> tuple[str, float]:
    """The payload image's tag, built unless an image with its key exists (or ``no_cache``),
    and BuildKit's export seconds of that build (0 when reused)."""
    key = payload_key(argv, (root / "docker" / "Dockerfile").read_text(), root / wheelhouse.STAGE, base_ids,
                      (root / PAYLOAD_SCRIPT).read_bytes())
    payload = (f"torchpod-staging/payload:{arch.name}-{uuid.uuid4().hex[:8]}" if no_cache
               else f"{PAYLOAD_REPOSITORY}:{arch.name}-{key[:24]}")
    if not no_cache and image_exists(client, payload):
        print(f"==> payload image {payload}: unchanged, reused", flush=True)
        return payload, 0.0
    print(f"==> building the payload image {payload}", flush=True)
    argv = list(argv)
    argv[argv.index("-t") + 1] = payload
    return payload, run_build(argv, env=builder.env, quiet=quiet, what=f"docker build of {payload}")


def _check_and_label(builder: Builder, defn: ImageDef, arch: Arch, staging: str, final: str,
                     versions: Mapping[str, str], inputs: Inputs, epoch: int, root: Path) -> None:
    """``staging`` checked against its definition, then tagged ``final`` with its labels."""
    wrong = commands.mismatches(defn, arch, versions)
    if wrong:
        raise RuntimeFailure(f"{final} differs from {defn.path.name}: " + "; ".join(wrong))
    values = commands.labels(defn, arch, {**versions, **inputs.labels(defn)},
                             created=datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                             revision=git_revision(root))
    with tempfile.TemporaryDirectory(prefix="torchpod-label-") as tmp:
        dockerfile = Path(tmp) / "Dockerfile"
        dockerfile.write_text(commands.label_dockerfile(staging, values))
        run(commands.label_command(builder, arch, dockerfile, final), env=builder.env,
            quiet=True, what=f"labelling {final}")


def drop_stale_payloads(client) -> list[str]:
    """Remove every payload image that no tagged torchpod image stands on (its top layer is in
    none of theirs): once an image is rebuilt on a new payload, the old payload's 5 GB would
    otherwise stay. A payload whose images are not rebuilt yet is still stood on, and kept."""
    used = {layer for image in client.images.list() if any(t.startswith("torchpod/") for t in image.tags)
            for layer in image.attrs["RootFS"]["Layers"]}
    return _remove_payloads(client, lambda image, tag: image.attrs["RootFS"]["Layers"][-1] not in used)


def drop_payloads(client, keep: set[str]) -> list[str]:
    """Remove every payload image but those tagged ``keep`` (an image built on a removed one
    keeps its layers); the tags removed. CI calls it once every image is built, so a lock
    that changed leaves no 5 GB payload behind."""
    return _remove_payloads(client, lambda image, tag: tag not in keep)


def _remove_payloads(client, stale) -> list[str]:
    """Untag each payload image tag for which ``stale(image, tag)``; the tags removed."""
    import docker

    gone = []
    for image in client.images.list(name=PAYLOAD_REPOSITORY):
        for tag in image.tags:
            if tag.startswith(f"{PAYLOAD_REPOSITORY}:") and stale(image, tag):
                try:
                    client.images.remove(tag)
                    gone.append(tag)
                except docker.errors.APIError:  # in use by a running build or container: kept
                    pass
    return gone


def _host_debs(root: Path, defn: ImageDef) -> locks.Lock | None:
    """The build host's base is pinned by the definition's lock for that arch, when it has one
    (an x86_64-only definition built on an aarch64 host bootstraps its build stage unpinned)."""
    host = host_arch()
    if not defn.base.debian or host not in defn.arches:
        return None
    return locks.load(root / "images", defn, host, debian=True)


def _drop_if_untagged(client, image_id: str) -> None:
    import docker

    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
    except docker.errors.APIError:  # still used by a container, or already gone: keep going
        pass


def phase_table(results: Sequence[BuildResult]) -> str:
    """Where each build's time went, one row per image and arch (seconds per phase)."""
    rows: list[tuple[str, ...]] = [("image", "arch", *PHASES, "total")]
    for r in results:
        rows.append((r.defn.name, r.arch.name, *(f"{r.phases.get(p, 0.0):.1f}" for p in PHASES), f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


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

