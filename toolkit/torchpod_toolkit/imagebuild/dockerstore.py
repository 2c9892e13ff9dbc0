"""The Docker engine's overlay2 store, swept of layer folders nothing refers to any more.

A build that dies with the engine (the machine suspended, the daemon killed mid-build) leaves
BuildKit's snapshot folders under ``overlay2/`` that neither an image, a container nor
BuildKit's own databases name any more: ``docker system prune`` and ``docker builder prune``
cannot see them, and each is up to a payload's 5 GB. On this project's build hosts they had
grown to 28 GB, and a CI run then failed on a full disk.

What refers to a folder of ``<root>/overlay2`` (moby 20.10, the engine Debian ships):

- an image layer: ``image/overlay2/layerdb/sha256/<chain id>/cache-id`` (moby layer/filestore.go,
  ``getCacheID``);
- a container's layers: ``image/overlay2/layerdb/mounts/<container>/mount-id`` and ``init-id``
  (layer/filestore.go, ``GetMountID`` and ``GetInitID``);
- a BuildKit snapshot: its key, which is the folder's name (builder/builder-next/adapters/
  snapshot/snapshot.go creates the graph driver's layer under the snapshot's key), written
  in the bolt databases under ``buildkit/``. Those are searched as bytes: a name still in a
  freed page counts as referred to, which only ever keeps a folder;
- a folder kept for any reason above keeps every folder its ``lower`` file names (overlay2's
  short links, ``l/<link>``; daemon/graphdriver/overlay2/overlay.go): a layer BuildKit made
  and the layer store took over stands on BuildKit's snapshot of its parent, a folder that
  no layer store entry names. Without this rule the sweep once removed the empty layer under
  a payload image, and that image could no longer be mounted.

The sweep runs only while the engine is stopped (setup.sh calls it before it starts dockerd),
so no build or pull is creating a folder meanwhile. It is a file of its own, on the standard
library and the launcher's bounded reader alone (``torchpod.readers``, itself on the standard
library), so setup.sh runs it by path before anything is installed:
``python3 toolkit/torchpod_toolkit/imagebuild/dockerstore.py [DOCKER_ROOT]``. Every file it
reads goes through that reader, each kind under its own cap; a file it cannot read as its
kind stops the sweep with nothing removed: a reference it could not read might have kept a
folder.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run by path (setup.sh): the launcher's package, next to the toolkit's
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "entrypoints"))
from torchpod import readers  # noqa: E402
from torchpod.errors import TorchpodError  # noqa: E402

# the graph driver's folder names: overlay2 makes them from random IDs (stringid), BuildKit from
# its own (identity.NewID: 25 base-36 characters); "-init" marks a container's init layer
_LAYER_NAME = re.compile(r"[0-9a-z]{25,64}(-init)?")
_ID_FILES = ("cache-id", "mount-id", "init-id")
# an ID file holds one folder name; an overlay2 ``link`` one short name and ``lower`` a
# colon-separated list of them, each 26 characters with its ``l/`` (64 KiB: two thousand
# layers, far past overlay2's depth limit); BuildKit's bolt databases grow with the build cache, and one over
# this is not read: the sweep stops, keeping everything
_NAME_CAP = 4 << 10
_LOWER_CAP = 64 << 10
_BOLT_CAP = 1 << 30


@dataclass(frozen=True)
class Sweep:
    removed: tuple[str, ...]
    freed_bytes: int


def referred(root: Path) -> set[str]:
    """The overlay2 folder names that an image layer or a container names (see the module)."""
    layerdb = root / "image" / "overlay2" / "layerdb"
    if not layerdb.is_dir():
        raise FileNotFoundError(f"{layerdb} is not a folder: not an overlay2 Docker root")
    return {_text(path, _NAME_CAP) for path in layerdb.rglob("*") if path.name in _ID_FILES and not path.is_dir()}


def buildkit_bytes(root: Path) -> bytes:
    """BuildKit's databases, concatenated, to search for a snapshot's key."""
    folder = root / "buildkit"
    if not folder.is_dir():
        return b""
    return b"\0".join(readers.read_bytes(path, what=str(path), expected="a BuildKit bolt database", cap=_BOLT_CAP)
                      for path in sorted(folder.rglob("*.db")) if not path.is_dir())


def orphans(root: Path) -> list[Path]:
    """The layer folders of ``<root>/overlay2`` that nothing refers to."""
    store = root / "overlay2"
    if not store.is_dir():
        return []
    databases = buildkit_bytes(root)
    layers = [f for f in sorted(store.iterdir()) if _LAYER_NAME.fullmatch(f.name) and f.is_dir() and not f.is_symlink()]
    kept = {f.name for f in layers if f.name.encode() in databases} | referred(root)
    by_link = {_optional(f / "link", _NAME_CAP): f.name for f in layers}
    pending = list(kept)
    while pending:  # a kept layer keeps the layers it stands on
        for short in _optional(store / pending.pop() / "lower", _LOWER_CAP).split(":"):
            below = by_link.get(short.removeprefix("l/"))
            if below is not None and below not in kept:
                kept.add(below)
                pending.append(below)
    return [f for f in layers if f.name not in kept]


def _text(path: Path, cap: int) -> str:
    return readers.read_text(path, what=str(path), expected="a layer's name or names, as moby writes them",
                             cap=cap).strip()


def _optional(path: Path, cap: int) -> str:
    """``_text``, or "" where the file does not exist (a layer without a ``lower``: a base)."""
    try:
        return _text(path, cap)
    except readers.Unreadable as exc:
        if exc.errno == errno.ENOENT:
            return ""
        raise


def _size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            stat = path.lstat()
        except OSError:
            continue
        if not path.is_symlink() and path.is_file():
            total += stat.st_size
    return total


def sweep(root: Path) -> Sweep:
    """Remove every orphaned layer folder and its short link (``overlay2/l/<link>``)."""
    removed, freed = [], 0
    for folder in orphans(root):
        short = _optional(folder / "link", _NAME_CAP)
        freed += _size(folder)
        shutil.rmtree(folder)
        entry = root / "overlay2" / "l" / short
        # the short link goes only when it is this folder's own (it points at its diff)
        if short and "/" not in short and entry.is_symlink() and os.readlink(entry) == f"../{folder.name}/diff":
            entry.unlink()
        removed.append(folder.name)
    return Sweep(tuple(removed), freed)


def data_root(config: Path = Path("/etc/docker/daemon.json")) -> Path:
    """The engine's root: ``data-root`` of its configuration file, else /var/lib/docker."""
    try:
        value = json.loads(readers.read_text(config, what=str(config), expected="the engine's JSON configuration",
                                             cap=readers.DATA_CAP)).get("data-root")
    except (TorchpodError, ValueError, AttributeError):  # absent or unusable: the engine's own default
        value = None
    return Path(value) if isinstance(value, str) and value.startswith("/") else Path("/var/lib/docker")


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: dockerstore.py [DOCKER_ROOT] (run it while dockerd is stopped)", file=sys.stderr)
        return 2
    root = Path(argv[0]) if argv else data_root()
    try:
        result = sweep(root)
    except (OSError, TorchpodError) as exc:
        print(f"docker store {root}: not swept: {exc}", file=sys.stderr)
        return 1
    if result.removed:
        print(f"    {len(result.removed)} layer folders no image, container or build refers to removed from "
              f"{root / 'overlay2'}: {result.freed_bytes / 2**30:.1f} GiB freed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
