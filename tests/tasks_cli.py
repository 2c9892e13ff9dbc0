"""Run ``invoke`` as a user would, from the repository root, or load tasks.py as a module of
its own (shared by the task tests)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from types import ModuleType

from paths import ROOT


def invoke(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m invoke ARGS`` with ``env`` over the current environment; 120 s hang guard."""
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=120)


def load_tasks(name: str) -> ModuleType:
    """tasks.py loaded afresh under module name ``name`` (each test file its own copy)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
