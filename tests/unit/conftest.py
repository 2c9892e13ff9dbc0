"""Unit-tier fixtures. Shared helpers live in launcher_cases.py: a module named
`conftest` is not importable from tests once several tiers are collected together."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_launcher_variables_from_outside():
    """torch's parser reads PET_* from os.environ; tests must not see the caller's."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("PET_", "TORCHPOD_"))}
    yield
    os.environ.update(saved)
