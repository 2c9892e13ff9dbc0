"""Per-arch locks of what an image installs: ``images/locks/<image>-<arch>.txt`` (wheels) and
``images/locks/<image>-<arch>.deb.txt`` (Debian packages), written by ``invoke lock``.

The wheel lock is a pip requirements file in hash-checking mode: one line per file,
``NAME==VERSION --hash=sha256:HEX  # FILENAME`` (pip drops a comment that follows
whitespace: pip/_internal/req/req_file.py, ``COMMENT_RE``), so
``pip install --require-hashes -r images/locks/pytorch-x86_64.txt`` reads it as is on an
x86_64 host. A source-only package (python-etcd) is locked by its sdist's hash and built
into a wheel on the build host (:mod:`.wheelhouse`).

The Debian lock names every package of the bootstrapped base (``NAME=VERSION  # base``)
and of the image's own apt layer (``# apt``: a variant's libfabric).

Each lock's header names its image, its arch and the digest of the definition's inputs
(Python, platform tags, index, pins; or release, mirror, package lists). A definition
edited without relocking therefore refuses to build, naming the command that relocks.
The pip report the lock is read from is pip's ``--report`` (pip >= 22.2, docs
"Installation Report": ``install[].download_info.archive_info.hashes``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from torchpod.contract import Arch
from torchpod.errors import InputError
from torchpod.fabric import driver

from .. import grammars
from . import commands
from .definition_yaml import read_text
from .definitions import ImageDef

LOCKS_DIR = "locks"  # under images/
MAX_LOCK_BYTES = 1 << 20
LOCK_FILE = "a lock file `invoke lock` wrote"
# A variant's apt layer (docker/Dockerfile, netplugin-image): Debian's libfabric, a fallback
# for a site's own, and its tools.
NETPLUGIN_DEBS = ("libfabric1", "libfabric-bin")

_FILE = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.(?:whl|tar\.gz|zip)"
WHEEL_LINE = re.compile(rf"(?P<name>{grammars.PYTHON_PROJECT})==(?P<version>[A-Za-z0-9.+!_-]{{1,64}}) "
                        rf"--hash=sha256:(?P<sha256>[0-9a-f]{{64}})  # (?P<file>{_FILE})", re.ASCII)
DEB_LINE = re.compile(rf"(?P<name>{grammars.DEBIAN_PACKAGE.pattern})=(?P<version>{grammars.DEBIAN_VERSION})  "
                      r"# (?P<layer>base|apt)", re.ASCII)
_HEADER = re.compile(r"# (?P<key>image|arch|inputs): (?P<value>\S+)", re.ASCII)


@dataclass(frozen=True)
class Wheel:
    """One locked file: a wheel for the target, or a source-only package's sdist."""

    name: str
    version: str
    sha256: str
    file: str

    @property
    def sdist(self) -> bool:
        return not self.file.endswith(".whl")

    @property
    def line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}  # {self.file}"


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    layer: str  # "base" (the bootstrapped rootfs) or "apt" (the image's own apt layer)

    @property
    def pin(self) -> str:
        return f"{self.name}={self.version}"


@dataclass(frozen=True)
class Lock:
    """A parsed lock file; ``entries`` are :class:`Wheel` or :class:`Deb` records."""

    path: Path
    image: str
    arch: str
    inputs: str
    entries: tuple

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def text(self) -> str:
        return read_text(self.path, MAX_LOCK_BYTES, LOCK_FILE)


def canonical(name: str) -> str:
    """PEP 503 normalised project name (packaging's, as definition_values.check_pin uses)."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def wheel_path(images_dir: Path, defn: ImageDef, arch: Arch) -> Path:
    return images_dir / LOCKS_DIR / f"{defn.name}-{arch.name}.txt"


def deb_path(images_dir: Path, defn: ImageDef, arch: Arch) -> Path:
    return images_dir / LOCKS_DIR / f"{defn.name}-{arch.name}.deb.txt"


def relock(defn: ImageDef, arch: Arch) -> str:
    return f"`invoke lock --image {defn.name} --arch {arch.name}`"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def wheel_inputs(defn: ImageDef, arch: Arch) -> str:
    """What decides the wheel lock: the target's Python and platform tags, the index, the pins."""
    return _digest({"target": commands.pip_target(defn, arch), "source": commands.pip_source(defn),
                    "requirements": commands.requirements(defn), "sdists": list(defn.torch.sdist_packages)})


def apt_packages(defn: ImageDef) -> list[str]:
    """The packages of the image's own apt layer (a variant's libfabric), none otherwise."""
    return list(NETPLUGIN_DEBS) if defn.aws_ofi_nccl is not None else []


def deb_inputs(defn: ImageDef, arch: Arch) -> str:
    return _digest({"debian": defn.base.debian, "mirror": defn.base.mirror, "arch": arch.debian,
                    "base": commands.base_packages(defn), "apt": apt_packages(defn)})


def render(defn: ImageDef, arch: Arch, entries: Sequence, *, debian: bool) -> str:
    what = "Debian packages" if debian else "wheels"
    how = ("every package of the bootstrapped base (base) and of the image's apt layer (apt)" if debian else
           "every file the payload stage installs; `pip install --require-hashes -r` reads this file as is")
    lines = [f"# torchpod {what} lock: images/{defn.path.name} for {arch.name}: {how}.",
             f"# Written by {relock(defn, arch)}. Edit the definition and relock; never this file.",
             f"# image: {defn.name}", f"# arch: {arch.name}",
             f"# inputs: {deb_inputs(defn, arch) if debian else wheel_inputs(defn, arch)}"]
    if debian:
        lines += [f"{d.pin}  # {d.layer}" for d in sorted(entries, key=lambda d: (d.layer != "base", d.name))]
    else:
        lines += [w.line for w in sorted(entries, key=lambda w: canonical(w.name))]
    return "\n".join(lines) + "\n"


def parse(path: Path, text: str, *, debian: bool) -> Lock:
    """A lock's text, every line checked; anything else is one line naming the file and line."""
    header: dict[str, str] = {}
    entries: list = []
    seen: dict[str, int] = {}
    grammar = DEB_LINE if debian else WHEEL_LINE
    form = ("NAME=VERSION  # base|apt" if debian else "NAME==VERSION --hash=sha256:<64 hex>  # FILE")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            match = _HEADER.fullmatch(line)
            if match:
                header[match["key"]] = match["value"]
            continue
        match = grammar.fullmatch(line)
        if match is None:
            shown = line if len(line) <= 120 else line[:120] + "..."
            raise InputError(f"{path} line {number}: {shown!r}; expected {form} (the file is written by "
                             "`invoke lock`: relock instead of editing it)")
        name = match["name"] if debian else canonical(match["name"])
        if name in seen:
            raise InputError(f"{path} line {number}: {match['name']} is locked twice (line {seen[name]} too); "
                             "expected one line per package (relock with `invoke lock`)")
        seen[name] = number
        entries.append(Deb(match["name"], match["version"], match["layer"]) if debian
                       else Wheel(canonical(match["name"]), match["version"], match["sha256"], match["file"]))
    missing = [k for k in ("image", "arch", "inputs") if k not in header]
    if missing:
        raise InputError(f"{path}: no '# {missing[0]}: ...' header line; expected the header `invoke lock` writes")
    if not entries:
        raise InputError(f"{path}: locks nothing; expected one line per package (relock with `invoke lock`)")
    return Lock(path, header["image"], header["arch"], header["inputs"], tuple(entries))


def load(images_dir: Path, defn: ImageDef, arch: Arch, *, debian: bool) -> Lock:
    """The lock a build of ``defn`` for ``arch`` installs from, checked against the definition."""
    path = deb_path(images_dir, defn, arch) if debian else wheel_path(images_dir, defn, arch)
    if arch not in defn.arches:
        raise InputError(f"{defn.path.name} declares {', '.join(a.name for a in defn.arches)}, not {arch.name}; "
                         f"expected one of its arches (no lock is written for {arch.name})")
    if not path.exists():
        raise InputError(f"{path}: no lock for {defn.name} on {arch.name}; run {relock(defn, arch)} on a host "
                         f"that reaches {defn.base.mirror if debian else defn.torch.index_url}, and commit it")
    lock = parse(path, read_text(path, MAX_LOCK_BYTES, LOCK_FILE), debian=debian)
    if lock.image != defn.name or lock.arch != arch.name:
        raise InputError(f"{path}: says image {lock.image!r}, arch {lock.arch!r}; expected {defn.name}, "
                         f"{arch.name} (a copied lock?); run {relock(defn, arch)}")
    wanted = deb_inputs(defn, arch) if debian else wheel_inputs(defn, arch)
    if lock.inputs != wanted:
        raise InputError(f"{path}: images/{defn.path.name} changed since this lock was written (inputs "
                         f"{lock.inputs[:12]}, definition {wanted[:12]}); run {relock(defn, arch)} and commit it")
    if not debian:
        _check_pins(lock, defn)
    return lock


def _check_pins(lock: Lock, defn: ImageDef) -> None:
    """Every pin of the definition is in the lock at its version (an edited line is caught
    here even when its header is intact)."""
    locked = {w.name: w for w in lock.entries}
    for requirement in commands.requirements(defn):
        name, _, version = requirement.partition("==")
        entry = locked.get(canonical(name))
        if entry is None:
            raise InputError(f"{lock.path}: {requirement} from {defn.path.name} is not locked; "
                             f"run `invoke lock --image {defn.name} --arch {lock.arch}`")
        if version and entry.version != version:
            raise InputError(f"{lock.path}: locks {entry.name}=={entry.version}, {defn.path.name} pins {requirement}; "
                             f"run `invoke lock --image {defn.name} --arch {lock.arch}`")


def stray(images_dir: Path, defs: Mapping[str, ImageDef]) -> list[str]:
    """Lock files that belong to no declared (definition, arch): one line each."""
    out = []
    known = {wheel_path(images_dir, d, a).name for d in defs.values() for a in d.arches}
    known |= {deb_path(images_dir, d, a).name for d in defs.values() for a in d.arches}
    folder = images_dir / LOCKS_DIR
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.name == "README.md" or path.name in known:
            continue
        stem = path.name.removesuffix(".txt").removesuffix(".deb")
        owner = next((d for d in defs.values() if stem.startswith(d.name + "-")
                      and stem[len(d.name) + 1:] in ("x86_64", "aarch64")), None)
        if owner is not None:
            out.append(f"{path}: {owner.path.name} declares {', '.join(a.name for a in owner.arches)}, not "
                       f"{stem[len(owner.name) + 1:]}; delete the file or add the arch to the definition")
        else:
            out.append(f"{path}: no definition or arch of that name; expected <image>-<arch>.txt or .deb.txt")
    return out


# --- resolving a wheel lock from pip's installation report --------------------------------

def from_report(report: Mapping, sdists: Mapping[str, Wheel], where: str) -> list[Wheel]:
    """The locked files of a ``pip install --dry-run --report`` resolution.

    A requirement pip satisfied from the locally built wheel of a source-only package is
    locked by that package's sdist (``sdists``, by canonical name)."""
    out = []
    for item in report.get("install", []):
        meta, info = item.get("metadata", {}), item.get("download_info", {})
        name, version = canonical(str(meta.get("name", ""))), str(meta.get("version", ""))
        url = str(info.get("url", ""))
        if name in sdists:
            out.append(sdists[name])
            continue
        sha = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if not sha:
            raise InputError(f"{where} gave no sha256 for {name}=={version} ({url[:200]}); expected an index that "
                             "publishes file hashes (PEP 503 '#sha256=' or PEP 691)")
        out.append(Wheel(name, version, sha, unquote(urlsplit(url).path.rsplit("/", 1)[-1])))
    for wheel in out:  # the same grammar as a committed line: nothing odd reaches a lock file
        if WHEEL_LINE.fullmatch(wheel.line) is None:
            raise InputError(f"{where}: {wheel.line[:200]!r} is not a lockable file; expected a wheel or sdist name")
    return out


# --- checking a lock against its index (`invoke lock --check`) ----------------------------

def index_files(index_url: str, project: str, fetch: Callable[[str], tuple[str, bytes]]) -> dict[str, str]:
    """{filename: sha256} the index lists for ``project``: PEP 691 JSON, else PEP 503 HTML."""
    from html.parser import HTMLParser

    content_type, body = fetch(f"{index_url.rstrip('/')}/{project}/")
    if "json" in content_type:
        data = json.loads(body)
        return {f["filename"]: f.get("hashes", {}).get("sha256", "") for f in data.get("files", [])}
    files: dict[str, str] = {}

    class Anchors(HTMLParser):
        def handle_starttag(self, tag, attrs):
            href = dict(attrs).get("href") or ""
            if tag == "a" and href:
                path, _, fragment = href.partition("#")
                files[unquote(path.rsplit("/", 1)[-1])] = fragment.removeprefix("sha256=")

    Anchors().feed(body.decode("utf-8", "replace"))
    return files


def upstream_problems(lock: Lock, index_urls: Iterable[str], fetch: Callable[[str], tuple[str, bytes]]) -> list[str]:
    """One line per locked file its index no longer lists, or lists with another hash."""
    out = []
    for wheel in lock.entries:
        listed: dict[str, str] = {}
        for url in index_urls:
            listed.update(index_files(url, wheel.name, fetch))
        if wheel.file not in listed:
            out.append(f"{lock.path}: {wheel.name}=={wheel.version}: {wheel.file} is no longer on "
                       f"{' or '.join(index_urls)}; relock with `invoke lock --image {lock.image} --arch {lock.arch}`")
        elif listed[wheel.file] and listed[wheel.file] != wheel.sha256:
            out.append(f"{lock.path}: {wheel.name}=={wheel.version}: the hash of {wheel.file} changed upstream "
                       f"(lock {wheel.sha256[:12]}, index {listed[wheel.file][:12]}); do not relock blindly: "
                       "find out why the file changed")
    return out


# --- Debian ------------------------------------------------------------------------------

def parse_dpkg(text: str, layer: str) -> list[Deb]:
    """``dpkg-query -W -f '${Package}=${Version}\\n'`` output as lock entries."""
    out = []
    for line in text.splitlines():
        if line.strip():
            if grammars.DEBIAN_PIN.fullmatch(line.strip()) is None:
                raise InputError(f"dpkg-query printed {line.strip()[:200]!r}; expected NAME=VERSION")
            name, _, version = line.strip().partition("=")
            out.append(Deb(name, version, layer))
    return out


_INST = re.compile(r"^Inst (?P<name>[a-z0-9][a-z0-9+.-]+)(?::\S+)? (?:\[\S+\] )?\((?P<version>\S+) ", re.M)


def parse_simulation(text: str) -> list[Deb]:
    """The packages ``apt-get install -s`` would install (its ``Inst NAME (VERSION ...`` lines)."""
    return [Deb(m["name"], m["version"], "apt") for m in _INST.finditer(text)]


def base_differences(lock: Lock, installed: Sequence[Deb]) -> list[str]:
    """How a bootstrapped base differs from its lock's base entries, one phrase each."""
    want = {d.name: d.version for d in lock.entries if d.layer == "base"}
    have = {d.name: d.version for d in installed}
    out = [f"{n} is {have[n]}, the lock has {v}" for n, v in sorted(want.items()) if n in have and have[n] != v]
    out += [f"{n}={v} is missing" for n, v in sorted(want.items()) if n not in have]
    out += [f"{n}={have[n]} is not in the lock" for n in sorted(have) if n not in want]
    return out


# --- what the lock implies ---------------------------------------------------------------

CUDA_RUNTIME = re.compile(r"nvidia-cuda-runtime(?:-cu[0-9]{2})?")


def driver_floor(lock: Lock) -> str:
    """The oldest NVIDIA driver the locked CUDA runtime wheel runs on ('' when none is locked):
    minor version compatibility, the floor the doctor also judges by (torchpod.fabric.driver,
    from NVIDIA's CUDA Toolkit release notes, table 3). The NCCL wheel asks for nothing more
    than its CUDA (NCCL release notes, "Requirements")."""
    for wheel in lock.entries:
        if CUDA_RUNTIME.fullmatch(wheel.name):
            major = int(wheel.version.split(".")[0])
            floor = driver.MAJOR_FLOOR.get(major)
            return ".".join(map(str, floor)) if floor else ""
    return ""
