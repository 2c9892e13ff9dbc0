"""tests/needs.py: an absent tool skips outside CI and fails in CI (TORCHPOD_REQUIRE_TOOLS=1)."""

from __future__ import annotations

import pytest

import needs


def test_an_absent_tool_skips_outside_ci_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("TORCHPOD_REQUIRE_TOOLS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs a tool"):
        needs.missing("a tool")
    for value in ("0", "yes", ""):  # only "1" is CI's switch
        monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", value)
        with pytest.raises(pytest.skip.Exception):
            needs.missing("a tool")
    monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", "1")
    with pytest.raises(pytest.fail.Exception, match="needs a tool .*CI must not skip"):
        needs.missing("a tool")


def test_a_module_is_imported_or_its_absence_is_named(monkeypatch):
    monkeypatch.setenv("TORCHPOD_REQUIRE_TOOLS", "1")
    assert needs.module("json", "json").dumps([1]) == "[1]"
    with pytest.raises(pytest.fail.Exception, match="needs the ghost package"):
        needs.module("torchpod_no_such_module", "the ghost package")
