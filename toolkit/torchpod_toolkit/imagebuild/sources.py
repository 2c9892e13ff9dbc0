"""Source tarballs a definition pins (aws-ofi-nccl): fetched once, verified every time.

A downloaded source must be pinned by sha256 in its definition; a local tarball (the
air-gapped case) is checked against the sha256 when one is given. Verification happens
on the build host, before any Docker step, so a wrong file never gets near an image and
nothing is tagged. Files land in ``.cache/sources/``, named by version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Sequence

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure

from .definitions import AwsOfiNccl, ImageDef

CHUNK = 1 << 20
RELEASE_FILE_CAP = 16 << 20  # one source file of a release pack_release makes (tests/netplugin: KiB)


def sha256_of(path: Path) -> str:
    """The sha256 of a regular file of any size (a wheel, a source tarball), streamed from a
    descriptor the bounded reader opened: a FIFO or a device in its place is one line."""
    fd = readers.open_regular(path, str(path), "a wheel or a source tarball", None)
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def aws_ofi_nccl_source(defn: ImageDef, cache: Path, ca_bundle: Path | None = None,
                        timeout: float = 60.0) -> Path:
    """The verified aws-ofi-nccl source tarball of ``defn``, downloading it if needed."""
    spec = defn.aws_ofi_nccl
    if spec is None:
        raise InputError(f"{defn.path}: no 'aws_ofi_nccl' section; nothing to fetch")
    if spec.tarball is not None:
        return _local(defn, spec, spec.tarball)
    if spec.url is None:
        raise InputError(f"{defn.path}: aws_ofi_nccl needs 'url' or 'tarball'")
    if spec.sha256 is None:
        raise InputError(
            f"{defn.path}: aws_ofi_nccl.sha256 is missing, so {spec.url} will not be downloaded; pin it: "
            f"fetch that tarball where it is reachable, run `sha256sum` on it and set aws_ofi_nccl.sha256 "
            "(or set aws_ofi_nccl.tarball to a local copy)")
    return _downloaded(defn, spec, spec.url, spec.sha256, cache / "sources", ca_bundle, timeout)


def stage_netplugin_source(defn: ImageDef, root: Path, ca_bundle: Path | None) -> str:
    """The verified plugin source, copied into the build context (``.cache/sources/netplugin``);
    its context path.

    The checksum step runs first (:func:`aws_ofi_nccl_source`: an unpinned download, a mismatch
    or a missing tarball stops the build before Docker runs and nothing is tagged)."""
    source = aws_ofi_nccl_source(defn, root / ".cache", ca_bundle)
    folder = root / ".cache" / "sources" / "netplugin"
    folder.mkdir(parents=True, exist_ok=True)
    # aws_ofi_nccl_source refused a definition without the section
    staged = folder / f"{defn.name}-{defn.aws_ofi_nccl.version}.tar.gz"  # type: ignore[union-attr]
    if not staged.exists() or sha256_of(staged) != sha256_of(source):
        shutil.copyfile(source, staged)
    return str(staged.relative_to(root))


def _local(defn: ImageDef, spec: AwsOfiNccl, tarball: Path) -> Path:
    if not tarball.is_file():
        raise InputError(
            f"{defn.path}: aws_ofi_nccl.tarball={str(tarball)!r} does not exist; copy the "
            f"aws-ofi-nccl {spec.version} release tarball there (relative paths start at the repository root)"
        )
    if spec.sha256:
        seen = sha256_of(tarball)
        if seen != spec.sha256:
            raise InputError(
                f"{defn.path}: checksum mismatch for aws_ofi_nccl.tarball={str(tarball)!r}: file has "
                f"sha256 {seen}, aws_ofi_nccl.sha256 says {spec.sha256}; replace the file with the "
                "release tarball, or correct the sha256 if the file is the one you trust"
            )
    return tarball


def _downloaded(defn: ImageDef, spec: AwsOfiNccl, url: str, sha256: str, folder: Path,
                ca_bundle: Path | None, timeout: float) -> Path:
    dest = folder / f"aws-ofi-nccl-{spec.version}.tar.gz"
    if dest.is_file() and sha256_of(dest) == sha256:
        return dest  # fetched before and still intact
    folder.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + f".part-{os.getpid()}")
    context = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None)
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response, part.open("wb") as out:
            for block in iter(lambda: response.read(CHUNK), b""):
                out.write(block)
        seen = sha256_of(part)
        if seen != sha256:
            raise InputError(
                f"{defn.path}: checksum mismatch for {url}: downloaded file has sha256 {seen}, "
                f"aws_ofi_nccl.sha256 says {sha256}; check the release page for the right sha256 "
                "(or a tampering proxy), nothing was kept"
            )
        part.replace(dest)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise RuntimeFailure(
            f"cannot download aws-ofi-nccl {spec.version} from {url}: {reason}; fetch it where "
            f"that address is reachable and set aws_ofi_nccl.tarball in {defn.path.name}"
        ) from None
    finally:
        part.unlink(missing_ok=True)
    return dest


def pack_release(src: Path, files: Sequence[str], name: str, version: str, dest: Path) -> Path:
    """``files`` of ``src`` as a release tarball ``name-version.tar.gz`` (one top directory),
    reproducible: fixed order, owner and mtime, so its sha256 only changes with the sources."""
    import gzip
    import io
    import tarfile

    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{name}-{version}.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(files):
            data = readers.read_bytes(src / rel, what=str(src / rel), expected="a source file of the release",
                                      cap=RELEASE_FILE_CAP)
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size, info.mtime, info.uid, info.gid = len(data), 0, 0, 0
            info.mode = 0o755 if os.access(src / rel, os.X_OK) else 0o644
            tar.addfile(info, io.BytesIO(data))
    packed = gzip.compress(raw.getvalue(), mtime=0)
    old = readers.read_head(path, what=str(path), expected="a tarball pack_release wrote",
                            limit=len(packed) + 1) if path.exists() else None
    if old != packed:
        path.write_bytes(packed)
    return path

