"""What a test needs from the host, and what happens when it is absent.

Outside CI a test whose tool, privilege or host file is missing skips, naming what to
install; CI sets TORCHPOD_REQUIRE_TOOLS=1 (``.ci/run``; the setting is declared in
torchpod_toolkit.settings), and there the same absence fails the test: nothing skips
silently where coverage is promised.
"""

from __future__ import annotations

import importlib
import os

import pytest

from torchpod.contract import switch
from torchpod_toolkit.settings import REQUIRE_TOOLS


def required() -> bool:
    """Whether CI's switch is on; a value other than 1 or 0 is refused, never taken for off."""
    return switch(os.environ, REQUIRE_TOOLS)


def missing(what: str) -> None:
    """Skip (locally) or fail (CI, TORCHPOD_REQUIRE_TOOLS=1) because ``what`` is absent."""
    if required():
        pytest.fail(f"needs {what} ({REQUIRE_TOOLS.name}=1: CI must not skip)")
    pytest.skip(f"needs {what}")


def module(name: str, what: str):
    """``importlib.import_module(name)``, or :func:`missing` naming ``what`` to install."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(what)
        raise AssertionError("unreachable") from None
