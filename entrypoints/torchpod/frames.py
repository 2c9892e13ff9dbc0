"""Which frame of a Python stack is the user's own: the one answer shared by the stack reader
(``torchpod stacks``, reading a worker's faulthandler dump from outside it) and the hang
watch's thread (reading its own process's frames), so both name the same frame.

A frame is the user's when its file is not the interpreter's (a frozen module, the
standard library), not an installed package's (site-packages, dist-packages, or under this
interpreter's library folders, symlinks resolved) and not torchpod's own (the watch's
thread and the shim run in every worker). Standard library only.
"""

from __future__ import annotations

import os
import re
import sysconfig
from pathlib import Path

# where an interpreter and its packages live, by the path's own words (a dump read from
# another process names its files as that process saw them)
_LIBRARY = re.compile(r"/(?:site-packages|dist-packages)/|/lib/python3\.[0-9]+/|^<frozen ")
_LAUNCHER = str(Path(__file__).resolve().parent) + os.sep


def _library_roots() -> tuple[str, ...]:
    """This interpreter's library folders, symlinks resolved (a layout the words miss)."""
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.realpath(paths[k]) + os.sep
                         for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}))


LIBRARY_ROOTS = _library_roots()


def users(filename: str, roots: tuple[str, ...] = LIBRARY_ROOTS) -> bool:
    """Whether a frame in ``filename`` is the user's own (``roots``: library folders, each
    ending in the path separator)."""
    if _LIBRARY.search(filename) or filename.startswith(_LAUNCHER):
        return False
    real = os.path.realpath(filename) if filename.startswith("/") else filename
    return not real.startswith(_LAUNCHER) and not any(real.startswith(root) for root in roots)
