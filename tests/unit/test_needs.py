"""tests/needs.py: an absent tool skips outside CI and fails in CI (TORCHPOD_REQUIRE_TOOLS=1)."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError

import needs


def test_an_absent_tool_skips_outside_ci_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("TORCHPOD_REQUIRE_TOOLS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs a tool"):
        needs.missing("a tool")
    for value in ("0", ""):  # off, or set blank
        monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", value)
        with pytest.raises(pytest.skip.Exception):
            needs.missing("a tool")
    monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", "yes")  # neither on nor off: refused, never a skip
    with pytest.raises(InputError, match=r"^TORCHPOD_REQUIRE_TOOLS='yes' is not a switch; expected 1 or 0"):
        needs.missing("a tool")
    monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", "1")
    with pytest.raises(pytest.fail.Exception, match="needs a tool .*CI must not skip"):
        needs.missing("a tool")


def test_a_module_is_imported_or_its_absence_is_named(monkeypatch):
    monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", "1")
    assert needs.module("json", "json").dumps([1]) == "[1]"
    with pytest.raises(pytest.fail.Exception, match="needs the ghost package"):
        needs.module("torchpod_no_such_module", "the ghost package")
