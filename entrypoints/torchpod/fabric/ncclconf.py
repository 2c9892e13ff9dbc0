"""The environment NCCL will see: the process environment, then NCCL's configuration files.

NVIDIA/nccl v2.30.7-1 src/misc/param.cc (initEnvFunc, setEnvFile) and src/os/linux.cc
(ncclOsSetEnv):

- files, in order: ``$NCCL_CONF_FILE`` when set and non-empty, else ``$HOME/.nccl.conf``
  (when HOME is set); then always ``/etc/nccl.conf``. A file that cannot be opened is skipped;
- each value is applied with ``setenv(name, value, 0)``: the process environment wins over
  every file, and an earlier file wins over a later one (NCCL_CONF_FILE or ~/.nccl.conf over
  /etc/nccl.conf);
- a line: one trailing "\\n" then one "\\r" dropped; a line starting with "#" is a comment; a
  line without "=" is skipped; the name is everything before the first "=" (at most 1023
  bytes, no trimming: ``NCCL_DEBUG =INFO`` sets "NCCL_DEBUG "), the value everything after
  it (at most 1023 bytes). An empty name is refused by setenv (EINVAL).

Bounded like every read (readers.py): regular files only, CONF_CAP bytes, UTF-8. A file the
doctor cannot judge (a FIFO, binary, too large) is a finding, never a hang or a traceback.
Pure: files are read under ``root``.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Mapping

from .. import readers
from ..errors import InputError
from .findings import Finding, Severity, ok

CONF_CAP = 1 << 20  # an nccl.conf is a few lines; NCCL itself reads any size
NAME_CAP = VALUE_CAP = 1023  # param.cc: envVar[1024], envValue[1024]
SYSTEM_FILE = "/etc/nccl.conf"
EXPECTED = "NAME=value lines (NCCL's nccl.conf format)"


def files(env: Mapping[str, str]) -> list[str]:
    """The files NCCL reads, in its order."""
    given = env.get("NCCL_CONF_FILE")
    if given:
        first = [given]
    else:
        first = [f"{env['HOME']}/.nccl.conf"] if "HOME" in env else []
    return [*first, SYSTEM_FILE]


def parse(text: str) -> list[tuple[str, str]]:
    """The (name, value) pairs setEnvFile applies from ``text``, in order."""
    pairs = []
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        name, value = name[:NAME_CAP], value[:VALUE_CAP]
        if name:  # setenv("", ...) fails with EINVAL: NCCL sets nothing
            pairs.append((name, value))
    return pairs


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/") if path.startswith("/") else root / path


def merged(env: Mapping[str, str], root: Path = Path("/")) -> tuple[dict[str, str], list[Finding]]:
    """(the environment NCCL sees, one finding per file that added something or was unjudgeable)."""
    seen = dict(env)
    notes: list[Finding] = []
    for path in files(env):
        what = f"NCCL configuration file {path!r}"
        try:
            text = readers.read_text(_under(root, path), what=what, expected=EXPECTED, cap=CONF_CAP)
        except readers.Unreadable as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                continue  # NCCL's fopen fails too: nothing to judge
            notes.append(Finding("ncclconf.file.unreadable", Severity.WARN, str(exc),
                                 "make it readable, or remove it"))
            continue
        except InputError as exc:
            notes.append(Finding("ncclconf.file.unjudged", Severity.WARN, f"{exc}: the doctor judged the "
                                 "environment without it", "make it a small text file of NAME=value lines"))
            continue
        added, shadowed = [], []
        for name, value in parse(text):
            if name in seen:
                shadowed.append(_shown(name))
            else:
                seen[name] = value
                added.append(_shown(name))
        message = f"{_shown(path)}: sets {', '.join(added) or 'nothing new'}"
        if shadowed:
            message += f"; {', '.join(sorted(set(shadowed)))} already set (the environment or an earlier file wins)"
        notes.append(ok("ncclconf.file.read", message))
    return seen, notes


def _shown(text: str) -> str:
    """A name or path as a message shows it: one line, control characters escaped."""
    return text if text.isprintable() and len(text) <= 200 else ascii(text[:200])
