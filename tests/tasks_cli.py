"""Run ``invoke`` as a user would, from the repository root (shared by the task tests)."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT


def invoke(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m invoke ARGS`` with ``env`` over the current environment; 120 s hang guard."""
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)
