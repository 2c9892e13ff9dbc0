"""The rendered files (``Output``: a name and its text) and putting them in place:
``write`` puts every file of a job in one directory, all of them or none, and keeps a file
already there with other content (edited by hand?) unless told to overwrite it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure


@dataclass(frozen=True)
class Output:
    """One rendered file: its name and the text it holds."""

    name: str  # file name, no directory
    text: str


def _existing(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file at ``path`` (None if nothing is there), read to at most
    ``limit`` + 1 bytes through the bounded reader: a longer file differs from what would be
    written whatever it holds, so a huge file costs no memory. Anything else (a directory, a
    link, a FIFO, a device) is refused: it is never read, never replaced."""
    expected = "a file torchpod wrote, or nothing there"
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):  # the reader follows links; a link here is not replaced
            raise InputError(f"{path} is a symbolic link; expected a regular file: {expected}")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path} cannot be read ({exc.strerror or exc}); expected {expected}") from None
    return readers.read_head(path, what=str(path), expected=expected, limit=limit + 1)


def _check_destination(dest: Path) -> None:
    """``dest`` is a directory, or can be made one under a writable existing directory."""
    try:
        _walk_destination(dest)
    except OSError as exc:  # a name too long, a loop of links, a permission on the way
        raise InputError(f"--out={str(dest)[:200]!r} cannot be used ({exc.strerror or exc}); expected a "
                         "directory path you can write") from None


NAME_MAX = 255  # bytes in one path component (Linux's NAME_MAX, <linux/limits.h>)


def _walk_destination(dest: Path) -> None:
    long = next((part for part in dest.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise InputError(f"--out has a component of {len(os.fsencode(long))} bytes ({long[:40]!r}...); expected "
                         f"names of at most {NAME_MAX} bytes")
    probe = dest
    while not os.path.lexists(probe):
        probe = probe.parent
    if not probe.is_dir():
        what = "is an existing file" if probe == dest else f"is under {probe}, which is not a directory"
        raise InputError(f"--out={str(dest)!r} {what}; expected a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"--out={str(dest)!r}: {probe} is not writable; expected a directory you can write")


def write(dest, outputs: list[Output], *, force: bool = False) -> list[tuple[Path, bool]]:
    """Put ``outputs`` in directory ``dest``: all of them or none.

    ``dest`` is normalised first (``x/a/../c`` is ``x/c``: no directory is made that the
    path does not end in). A file already there with other content is kept and named,
    unless ``force``; the same content is left alone. Files are written into a temporary
    directory beside them and renamed into place (rename(2) within one filesystem is
    atomic), only once every one of them was written. Returns (path, changed) per file."""
    dest = Path(os.path.abspath(dest))
    _check_destination(dest)
    plan, kept = [], []
    for o in outputs:
        data = o.text.encode("utf-8")
        old = _existing(dest / o.name, len(data))
        if old is not None and old != data and not force:
            kept.append(o.name)
        plan.append((o.name, data, old != data))
    if kept:
        raise InputError(f"kept {', '.join(str(dest / k) for k in kept)}: it exists with other content (edited by "
                         "hand?); expected --force to overwrite it, or another --out")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest, prefix=".torchpod-manifests-") as tmp:
            for name, data, changed in plan:
                if changed:
                    with open(Path(tmp) / name, "xb") as fh:  # the umask's mode, as write_text would
                        fh.write(data)
            done = []
            try:
                for name, _, changed in plan:
                    if changed:
                        os.replace(Path(tmp) / name, dest / name)
                        done.append(name)
            except OSError:
                for name in done:  # a later rename failed: take back the earlier ones
                    (dest / name).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise RuntimeFailure(f"could not write into --out={str(dest)!r}: {exc.strerror or exc}; nothing "
                             "was written") from None
    return [(dest / name, changed) for name, _, changed in plan]
