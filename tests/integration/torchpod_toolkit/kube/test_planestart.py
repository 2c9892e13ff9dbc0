"""torchpod_toolkit.kube.planestart with stand-in programs (copies of sleep) in place of the
control plane's: missing programs and a folder in use are refused before anything starts, a
component that exits or never answers is one error carrying its log, and every process
started before it is stopped; a damaged record is one error naming it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import plane, planeargs, planestart

SLEEP = Path(shutil.which("sleep") or "/bin/sleep").resolve()


def _stand_ins(bindir: Path) -> Path:
    bindir.mkdir()
    for component in plane.COMPONENTS:
        shutil.copy(SLEEP, bindir / component)
    return bindir


def _running(binary: Path) -> list[int]:
    """The ids of processes whose executable is ``binary``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "exe") == str(binary):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_missing_programs_are_named_with_the_command_that_builds_them(tmp_path):
    (tmp_path / "bin").mkdir()
    with pytest.raises(RuntimeFailure, match="etcd, kube-apiserver, .* missing in .*; run `invoke kube.build`"):
        planestart.start(tmp_path / "bin", tmp_path / "plane")
    assert not (tmp_path / "plane").exists()


def test_a_folder_in_use_is_refused(tmp_path):
    bindir = _stand_ins(tmp_path / "bin")
    (tmp_path / "plane").mkdir()
    (tmp_path / "plane" / "etcd").mkdir()
    with pytest.raises(RuntimeFailure, match="is not empty"):
        planestart.start(bindir, tmp_path / "plane")


def test_a_component_that_exits_is_reported_with_its_log(tmp_path):
    bindir = _stand_ins(tmp_path / "bin")
    # sleep refuses etcd's flags at once
    with pytest.raises(RuntimeFailure, match=r"etcd exited with 1; the end of .*etcd\.log: .*'--name=torchpod'"):
        planestart.start(bindir, tmp_path / "plane", timeout=30)
    assert not _running(bindir / "etcd")
    assert (tmp_path / "plane" / "logs" / "etcd.log").is_file()  # kept for the reader


def test_a_component_that_never_answers_is_stopped_with_the_ones_before_it(tmp_path, monkeypatch):
    bindir = _stand_ins(tmp_path / "bin")
    monkeypatch.setitem(planeargs.ARGV, "etcd", lambda b, r, p: [str(b / "etcd"), "60"])
    with pytest.raises(RuntimeFailure, match="etcd did not answer its health check in time"):
        planestart.start(bindir, tmp_path / "plane", timeout=1)
    assert not _running(bindir / "etcd")


@pytest.mark.parametrize("text", ["", "{", '{"root": "/x"}', '{"root": "/x", "ports": {"etcd": 1}}',
                                  json.dumps({"root": "/x", "ports": dict.fromkeys(("etcd", "etcd_peer", "apiserver",
                                              "controller_manager", "scheduler"), 1),
                                              "pids": {"etcd": "1"}, "binaries": {"etcd": "/b"}, "seconds": 1})])
def test_a_damaged_record_is_one_error_naming_it(tmp_path, text):
    (tmp_path / planestart.STATE).write_text(text)
    with pytest.raises(RuntimeFailure, match=f"{tmp_path / planestart.STATE}: not the record `start` writes"):
        planestart.load(tmp_path)
