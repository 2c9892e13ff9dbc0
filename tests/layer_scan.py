"""Search every layer of a local image for byte strings, each layer once.

A layer is named by its diff ID, the sha256 of its uncompressed tar: the same diff ID is the
same bytes, in any image and any run. So a layer found clean of a set of needles is
remembered (in the user's cache, under the needles' digest) and never read again; an
image whose layers are all remembered costs nothing, and after a launcher edit only its
small new layers are read.

Where Docker keeps layers as overlay2 directories (Docker's `DockerRootDir`, the layer
database `image/overlay2/layerdb/sha256/<chain ID>/cache-id`, then `overlay2/<cache id>/diff`,
moby's layer/layer_store.go and daemon/graphdriver/overlay2), each new layer's files are read
there: every regular file's bytes, every name and every link target, which is all a layer
tar carries besides fixed-size headers (a file deleted by a later layer is still in the
layer that added it). Anywhere else, `docker save` streams the whole image, and each layer
tar found in it is searched and hashed to its diff ID.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Iterable, Iterator

CHUNK = 8 << 20


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The OCI chain IDs of a layer list (image-spec config.md, "Layer ChainID")."""
    chains: list[str] = []
    for diff in diff_ids:
        chains.append(diff if not chains else
                      "sha256:" + hashlib.sha256(f"{chains[-1]} {diff}".encode()).hexdigest())
    return chains


def found_in(chunks: Iterable[bytes], needles: list[bytes]) -> bool:
    """Whether any needle is in the concatenation of ``chunks`` (a needle may span two)."""
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        if any(n in window for n in needles):
            return True
        tail = window[-overlap:] if overlap else b""
    return False


def _tree_chunks(root: Path) -> Iterator[bytes]:
    """A layer directory's names, link targets and file bytes, each name and target apart."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            yield b"\0" + name.encode(errors="surrogateescape") + b"\0"
            if path.is_symlink():
                yield os.readlink(path).encode(errors="surrogateescape") + b"\0"
            elif path.is_file():
                with path.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        yield chunk
                yield b"\0"


def overlay_dirs(info: dict, diff_ids: list[str]) -> list[Path] | None:
    """Each layer's overlay2 directory, or None where Docker keeps layers otherwise (or they
    cannot be read)."""
    if info.get("Driver") != "overlay2":
        return None
    root = Path(info.get("DockerRootDir", "/var/lib/docker"))
    dirs = []
    for chain in chain_ids(diff_ids):
        try:
            cache_id = (root / "image" / "overlay2" / "layerdb" / "sha256" / chain.split(":", 1)[1]
                        / "cache-id").read_text().strip()
        except OSError:
            return None
        diff = root / "overlay2" / cache_id / "diff"
        if not diff.is_dir() or not os.access(diff, os.R_OK | os.X_OK):
            return None
        dirs.append(diff)
    return dirs


class Scanned:
    """Diff IDs found clean of one set of needles, kept as empty files under ``folder``."""

    def __init__(self, folder: Path, needles: list[bytes]):
        self.folder = folder / hashlib.sha256(b"\n".join(sorted(needles))).hexdigest()[:32]
        self.needles = needles

    def clean(self, diff_id: str) -> bool:
        return (self.folder / diff_id.replace(":", "-")).is_file()

    def remember(self, diff_id: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / diff_id.replace(":", "-")).touch()


def dirty_layers(image, info: dict, scanned: Scanned) -> tuple[list[str], int]:
    """The diff IDs of ``image``'s layers that hold a needle, and how many layers were read
    (the others were remembered clean)."""
    diff_ids = list(image.attrs["RootFS"]["Layers"])
    todo = [d for d in diff_ids if not scanned.clean(d)]
    if not todo:
        return [], 0
    dirs = overlay_dirs(info, diff_ids)
    dirty = []
    if dirs is not None:
        for diff_id, folder in zip(diff_ids, dirs):
            if diff_id in todo:
                if found_in(_tree_chunks(folder), scanned.needles):
                    dirty.append(diff_id)
                else:
                    scanned.remember(diff_id)
        return dirty, len(todo)
    return _dirty_in_save(image, scanned, set(todo)), len(todo)


def _dirty_in_save(image, scanned: Scanned, todo: set[str]) -> list[str]:
    """`docker save`'s stream: every member searched whole (a layer tar's headers too, the
    config and manifest besides), each hashed: a layer's hash is its diff ID."""
    raw = io.BufferedReader(_Stream(image.save(chunk_size=CHUNK)), CHUNK)  # type: ignore[arg-type]
    dirty = []
    with tarfile.open(fileobj=raw, mode="r|") as archive:
        for member in archive:
            if not member.isfile():
                continue
            f = archive.extractfile(member)
            digest = hashlib.sha256()
            hit = found_in(_hashed(f, digest), scanned.needles)
            for _ in _hashed(f, digest):  # the rest of the member, for its digest
                pass
            diff_id = "sha256:" + digest.hexdigest()
            if hit:
                dirty.append(diff_id if diff_id in todo else member.name)
            elif diff_id in todo:
                scanned.remember(diff_id)
    return dirty


def _hashed(f, digest) -> Iterator[bytes]:
    while chunk := f.read(CHUNK):
        digest.update(chunk)
        yield chunk


class _Stream(io.RawIOBase):
    """A readable raw stream over an iterator of byte chunks (docker's ``image.save()``)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._left:
            try:
                self._left = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n
