"""torchpod_toolkit.imagebuild.proc: a command's environment is laid over this process's, its output is
returned when quiet, and a failure is one error naming the command and its last line (no
program is started: subprocess.run is stood in for)."""

from __future__ import annotations

import subprocess

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.imagebuild import proc


def _standin(monkeypatch, code: int, stdout: str | None) -> list[dict]:
    calls: list[dict] = []

    def run(argv, **kwargs):
        calls.append({"argv": argv, **kwargs})
        return subprocess.CompletedProcess(argv, code, stdout=stdout)

    monkeypatch.setattr(proc.subprocess, "run", run)
    return calls


def test_quiet_returns_the_output_and_the_environment_is_laid_over_ours(monkeypatch):
    monkeypatch.setenv("KEPT_FROM_OURS", "yes")
    calls = _standin(monkeypatch, 0, "done\n")
    assert proc.run(("pip", "download"), env={"PIP_CONFIG_FILE": "/dev/null"}, quiet=True) == "done\n"
    (call,) = calls
    assert call["argv"] == ["pip", "download"] and call["stdout"] == subprocess.PIPE
    assert call["env"]["PIP_CONFIG_FILE"] == "/dev/null" and call["env"]["KEPT_FROM_OURS"] == "yes"


def test_streamed_output_is_not_captured(monkeypatch):
    calls = _standin(monkeypatch, 0, None)
    assert proc.run(["true"]) == ""
    assert calls[0]["stdout"] is None and calls[0]["stderr"] is None


def test_a_failure_names_the_step_its_exit_and_its_last_line(monkeypatch):
    _standin(monkeypatch, 3, "collecting\nERROR: no matching distribution\n")
    with pytest.raises(RuntimeFailure) as caught:
        proc.run(["pip", "download", "-r", "x.txt"], quiet=True, what="pip download of 2 locked wheels")
    assert str(caught.value) == ("pip download of 2 locked wheels failed (exit 3): ERROR: no matching distribution; "
                                 "command: pip download -r x.txt ...")


def test_a_failure_without_a_name_names_the_program(monkeypatch):
    _standin(monkeypatch, 1, None)
    with pytest.raises(RuntimeFailure, match=r"^mmdebstrap failed \(exit 1\); command: mmdebstrap"):
        proc.run(["mmdebstrap", "bookworm"])
