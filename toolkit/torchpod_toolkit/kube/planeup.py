"""The control plane `invoke kube.up` leaves running (``plane``): started in a new folder
under the system's temporary directory and remembered by one pointer file in the build
cache, refused while the one remembered still runs, stopped by `invoke kube.down`, and the
report a person reads to use it.

The pointer and the record it leads to are each read once, through the bounded reader: a
file that is not there is the one answer that means "none", and nothing is checked first
that could change before the read.
"""

from __future__ import annotations

import errno
import shlex
import tempfile
from pathlib import Path

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure

from .plane import Plane, rss_bytes, running, stop
from .planestart import recorded, start

CURRENT = "current-plane"  # in the build cache: the folder of the plane kube.up started
POINTER_CAP = 4096  # the cache's pointer to the running plane: one folder name (PATH_MAX)


def up(bindir: Path, cache: Path, timeout: float = 180.0) -> Plane:
    """Start a plane in a new folder under the system's temporary directory and remember it
    in ``cache``; refuse while the one remembered there still runs."""
    pointer = cache / CURRENT
    folder = _remembered(pointer)
    previous = recorded(folder) if folder is not None else None
    if previous is not None and running(previous):
        raise RuntimeFailure(f"a control plane already runs in {folder}; `invoke kube.down` stops it")
    root = Path(tempfile.mkdtemp(prefix="torchpod-kube-"))
    started = start(bindir, root, timeout=timeout)
    cache.mkdir(parents=True, exist_ok=True)
    pointer.write_text(f"{root}\n", encoding="utf-8")
    return started


def _remembered(pointer: Path) -> Path | None:
    """The folder ``up`` wrote into ``pointer``, read through the bounded reader; None when
    no pointer is there."""
    try:
        text = readers.read_text(pointer, what=str(pointer), expected="the folder `invoke kube.up` wrote there",
                                 cap=POINTER_CAP)
    except InputError as exc:
        if isinstance(exc, readers.Unreadable) and exc.errno == errno.ENOENT:
            return None
        raise RuntimeFailure(f"no control plane remembered: {exc}") from None
    return Path(text.strip())


def down(cache: Path) -> Plane | None:
    """Stop the plane ``up`` remembered in ``cache`` and remove its folder; None if there is none."""
    pointer = cache / CURRENT
    folder = _remembered(pointer)
    if folder is None:
        return None
    plane = recorded(folder)
    if plane is not None:
        stop(plane)
    pointer.unlink()
    return plane


def report(plane: Plane) -> str:
    """What a person needs to use the plane, its start time and the memory each component holds."""
    memory = rss_bytes(plane.pids)
    rows = [f"API server   {plane.server}", f"kubeconfig   {plane.kubeconfig}",
            f"started in   {plane.seconds:.1f} s", f"{'component':<26}{'RSS MiB':>10}"]
    rows += [f"{c:<26}{memory[c] / 2**20:>10.0f}" for c in plane.pids]
    rows += [f"{'total':<26}{sum(memory.values()) / 2**20:>10.0f}",
             f"use it:      export KUBECONFIG={shlex.quote(str(plane.kubeconfig))}"]
    return "\n".join(rows)
