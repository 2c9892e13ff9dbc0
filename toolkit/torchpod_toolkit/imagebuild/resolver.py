"""Resolving what ``invoke lock`` writes: every wheel file an image installs, with its sha256
(pip's report), and every Debian package of its base and apt layer (a fresh bootstrap, read
with dpkg-query); and checking, before Docker runs, that each wheel pin exists for an arch.

It returns lock entries; :mod:`.locks` renders, reads and checks the lock files.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from torchpod import readers
from torchpod.contract import Arch
from torchpod.errors import InputError, RuntimeFailure

from . import base, commands, host, locks, sources
from .definitions import ImageDef
from .proc import run

# pip's report of one image's resolution: about 150 packages with their metadata, a few MiB
REPORT_CAP = 64 << 20

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
        text = readers.read_text(report, what=f"pip's installation report {report}", cap=REPORT_CAP,
                                 expected="the JSON report `pip install --report` writes")
        return locks.from_report(json.loads(text), sdists, defn.torch.index_url)


def lock_debs(defn: ImageDef, arch: Arch, root: Path, refreshed: set[str]) -> list[locks.Deb]:
    """Every Debian package of a freshly bootstrapped base for ``arch`` (from the mirror, as it
    is today: a cached unpinned base is bootstrapped again once per run, ``refreshed``), and
    the packages the image's apt layer would add (``apt-get install -s`` in that base,
    emulated for a foreign arch)."""
    client = host.docker_client()
    builder = host.find_builder()
    host.check_emulation(arch, host.host_arch())
    unpinned = commands.base_tag(defn, arch)
    if unpinned not in refreshed and host.image_exists(client, unpinned):
        client.images.remove(unpinned)
    refreshed.add(unpinned)
    image = base.ensure_base(client, builder, defn, arch, root / ".cache")
    found = base.installed_debs(client, image, arch, "base")
    wanted = locks.apt_packages(defn)
    if wanted:
        script = ("apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -s "
                  "--no-install-recommends " + " ".join(wanted))  # Debian package names (locks.NETPLUGIN_DEBS)
        out = client.containers.run(image, ["-c", script], entrypoint=["sh"], platform=arch.docker, remove=True)
        extra = locks.parse_simulation(out.decode())
        if not {d.name for d in extra} >= set(wanted):
            raise RuntimeFailure(f"apt-get install -s {' '.join(wanted)} in the {arch.name} base named "
                                 f"{[d.name for d in extra]}; expected at least {', '.join(wanted)}")
        found += extra
    # the pinned base's tag: the base just bootstrapped holds exactly these versions
    pinned = commands.base_tag(defn, arch, {d.name: d.version for d in found if d.layer == "base"})
    if image != pinned and not host.image_exists(client, pinned):
        client.images.get(image).tag(pinned)
    return found


def index_fetcher(ca_bundle: Path | None, timeout: float = 30.0):
    """fetch(url) -> (content type, body) for a package index page (PEP 691 JSON asked first)."""
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
