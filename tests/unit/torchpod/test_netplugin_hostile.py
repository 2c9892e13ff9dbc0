"""torchpod.netplugin, hostile: a probe child that prints no JSON object is a crash report,
never a traceback."""

from __future__ import annotations

import subprocess

import pytest


@pytest.mark.parametrize("stdout", ["1\n", "[]\n", "null\n", "\ufffd\ufffd\n", ""])
def test_a_net_plugin_probe_that_prints_no_json_object_is_a_crash_report(monkeypatch, stdout):
    """A plugin's constructor may print anything last (and in any encoding: errors=replace)."""
    from torchpod import netplugin

    def run(argv, **kw):
        assert kw.get("errors") == "replace" and kw.get("text")
        return subprocess.CompletedProcess(argv, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(netplugin.subprocess, "run", run)
    got = netplugin.run_probe({}, ["libnccl-net.so"])
    assert got["loaded"] is None and got["crashed"].startswith("the probe exited 0")
