"""A writable home and temporary directory for any user, on any root filesystem.

An image run as an arbitrary UID (OpenShift's restricted SCC gives one with group 0;
Apptainer and enroot run it as the submitting user, whom the image's /etc/passwd never
heard of) gets ``HOME=/`` or a home it cannot write, and with a read-only root (Docker's
``--read-only``, Kubernetes' ``readOnlyRootFilesystem``) nothing under / is writable. torch
hub (~/.cache/torch), triton (~/.triton), Inductor, pip and matplotlib then fail the first
time they cache something. torchpod moves HOME (and TMPDIR, when /tmp is not writable) to a
writable temporary directory for torchrun and the workers, and says so in a note; a HOME
that works is never touched.

``probe`` is the impure edge (facts.gather_facts calls it); ``decide`` is pure.
"""

from __future__ import annotations

import os
from typing import Mapping

# Where a temporary directory may be, in the order tried: the user's, the usual one, and the
# memory-backed one every container runtime mounts writable.
TMP_CANDIDATES = ("/tmp", "/dev/shm")


def writable_dir(path: str) -> bool:
    """An absolute directory this process can create files in (a read-only mount is not)."""
    try:
        return os.path.isabs(path) and os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
    except (OSError, ValueError):  # a NUL in the path, a name too long
        return False


def probe(env: Mapping[str, str]) -> tuple[bool, bool, str | None]:
    """(HOME is a writable directory other than /, Python's default temporary directory is
    writable, the first writable of $TMPDIR, /tmp, /dev/shm)."""
    home = env.get("HOME", "")
    home_ok = home not in ("", "/") and writable_dir(home)
    given = env.get("TMPDIR", "")
    tmp_ok = writable_dir(given or "/tmp")
    places = ((given,) if given else ()) + TMP_CANDIDATES
    return home_ok, tmp_ok, next((p for p in places if writable_dir(p)), None)


def decide(env: Mapping[str, str], home_ok: bool, tmp_ok: bool, writable: str | None,
           uid: int | None) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(variables to set, notes): HOME under the writable temporary directory when the
    current one cannot be written, TMPDIR when the default one cannot."""
    added: list[tuple[str, str]] = []
    notes: list[str] = []
    if writable is None:
        if not (home_ok and tmp_ok):
            notes.append("no writable HOME or temporary directory ($TMPDIR, /tmp, /dev/shm): torch, triton and "
                         "pip caches will fail; mount a writable volume (an emptyDir) at /tmp")
        return (), tuple(notes)
    if not tmp_ok:
        added.append(("TMPDIR", writable))
        notes.append(f"TMPDIR={writable}: {env.get('TMPDIR') or '/tmp'} is not writable (a read-only root?)")
    if not home_ok:
        home = f"{writable.rstrip('/')}/torchpod-home-{uid if uid is not None else 'user'}"
        added.append(("HOME", home))
        notes.append(f"HOME={home}: HOME={env.get('HOME', '')!r} is not a writable directory (a user the image does "
                     "not know, or a read-only root), and torch, triton and pip cache under it")
    return tuple(added), tuple(notes)
