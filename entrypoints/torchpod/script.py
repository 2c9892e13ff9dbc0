"""Is the training script there, on this node, before the rendezvous?

A script path that is wrong on one node (a typo, a volume not mounted there) would
otherwise start torchrun anyway: that node's workers die after the rendezvous while the
others wait, and the user reads torchrun's ChildFailedError block instead of the cause.
So `torchpod run` checks first and exits 2 with one line naming the path, the node and
the working directory; the other nodes then fail at their rendezvous timeout with the
launcher's one-line count.

What torchrun will run, as torch/distributed/run.py reads its options:
- a Python file (the default): it must be a readable regular file;
- ``-m/--module MODULE``: it must be importable; found with importlib's path finder on
  the path `python -m` will use (the working directory first), without importing it or
  its parent packages;
- ``--no-python PROGRAM``: it must be an executable file, on PATH when it has no '/'.
"""

from __future__ import annotations

import errno
import importlib.machinery
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Mapping, Sequence

from . import readers
from .errors import InputError


def _module_found(name: str, search: Sequence[str]) -> bool:
    """Whether ``name`` (dotted) resolves on ``search`` without importing any of it."""
    path: Sequence[str] | None = list(search)
    spec = None
    parts = name.split(".")
    for i in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), path)
        if spec is None:
            return False
        path = spec.submodule_search_locations
        if path is None and i < len(parts) - 1:
            return False  # a module, not a package, cannot hold the rest of the name
    return spec is not None


def check(script: str, passthrough: Sequence[str], *, cwd: Path, env: Mapping[str, str], where: str) -> None:
    """Raise InputError unless ``script`` is something torchrun can start on this node.

    ``where`` names the node for the message ("node 1 (gpu002)")."""
    tail = f"on {where}, working directory {cwd}"
    if "--module" in passthrough:
        search = [str(cwd), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p], *sys.path[1:]]
        try:
            found = _module_found(script, search)
        except (OSError, ValueError, ImportError) as exc:  # a name too long for the file system, a NUL
            raise InputError(f"module {script!r} cannot be looked up {tail} ({_reason(exc)}); expected a "
                             "dotted module name, e.g. proj.train") from None
        if not found:
            raise InputError(
                f"module {script!r} is not importable {tail}; expected a module on the path "
                "`python -m` uses (the working directory, then PYTHONPATH); check the name and "
                "that its folder is mounted on every node"
            )
        return
    if "--no-python" in passthrough:
        on_path = shutil.which(script, path=env.get("PATH")) if "/" not in script else None
        path = Path(on_path) if on_path else cwd / script
        try:
            usable = stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
        except (OSError, ValueError):  # absent, or a name the file system cannot hold
            usable = False
        if not usable:
            raise InputError(
                f"program {script!r} is not an executable file {tail}; expected an executable "
                "(--no-python runs it directly); check the path, its mode and the volume mounts"
            )
        return
    path = cwd / script
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        missing = isinstance(exc, FileNotFoundError) or getattr(exc, "errno", None) == errno.ENOTDIR
        if missing:
            raise InputError(
                f"script {str(path)!r} does not exist {tail}; expected a Python file that every node "
                "can read; check the path and that its volume is mounted on every node"
            ) from None
        raise InputError(f"script {str(path)!r} cannot be read {tail} ({_reason(exc)}); expected a Python "
                         "file that every node can read, e.g. train.py") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"script {str(path)!r} is a directory {tail}; expected a Python file, e.g. train.py")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"script {str(path)!r} is {readers.kind_of(st.st_mode)} {tail}; expected a Python "
                         "file, e.g. train.py")
    if not os.access(path, os.R_OK):
        raise InputError(
            f"script {str(path)!r} is not readable {tail} (user id {os.getuid()}); expected a file "
            "this user can read; fix its mode or run as its owner"
        )


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
