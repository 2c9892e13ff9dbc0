"""Running another program on the build host: the one helper every build step shares.

It sits below the modules that run programs (:mod:`.base`, :mod:`.pipeline`,
:mod:`.resolver`, :mod:`.wheelhouse`) so none of them imports another for it. It imports
nothing of the toolkit, and knows nothing of images: a command, its environment on top of
this process's, and one error naming the command when it fails.
"""

from __future__ import annotations

import os
import subprocess
from typing import Mapping, Sequence

from torchpod.errors import RuntimeFailure


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, quiet: bool = False,
        what: str | None = None) -> str:
    """Run a command, streaming its output unless ``quiet``; raise naming it on failure.

    ``env`` is laid over this process's environment; with ``quiet`` the output is returned and
    a failure's message ends with its last line."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(list(argv), env=full_env, text=True,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.STDOUT if quiet else None)
    if proc.returncode != 0:
        tail = ""
        if quiet and proc.stdout:
            tail = ": " + proc.stdout.strip().splitlines()[-1][:300]
        raise RuntimeFailure(f"{what or argv[0]} failed (exit {proc.returncode}){tail}; "
                             f"command: {' '.join(argv[:6])} ...")
    return proc.stdout or ""
