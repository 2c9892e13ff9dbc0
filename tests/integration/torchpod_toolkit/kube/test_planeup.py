"""torchpod_toolkit.kube.planeup with a stand-in program (a copy of sleep) as the one
component of a plane `invoke kube.up` remembered: ``up`` refuses while it runs, ``down``
stops it, removes its folder and forgets it."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import plane, planestart, planeup

SLEEP = Path(shutil.which("sleep") or "/bin/sleep").resolve()


def _recorded(tmp_path: Path) -> tuple[plane.Plane, subprocess.Popen]:
    """A plane record whose one component is a stand-in that runs until stopped, remembered
    in the cache as `kube.up` remembers its plane."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(SLEEP, bindir / "etcd")
    child = subprocess.Popen([str(bindir / "etcd"), "60"])
    root = tmp_path / "plane"
    root.mkdir()
    record = plane.Plane(root=root, ports=plane.Ports(1, 2, 3, 4, 5), pids={"etcd": child.pid},
                         binaries={"etcd": str(bindir / "etcd")}, seconds=1.5)
    (root / planestart.STATE).write_text(json.dumps({**asdict(record), "root": str(root)}))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / planeup.CURRENT).write_text(f"{root}\n")
    return record, child


def test_down_stops_the_remembered_plane_and_removes_its_folder(tmp_path):
    record, child = _recorded(tmp_path)
    try:
        assert planestart.load(record.root) == record and plane.running(record)
        with pytest.raises(RuntimeFailure, match="already runs in .*plane; `invoke kube.down` stops it"):
            planeup.up(tmp_path / "bin", tmp_path / "cache")
        assert "etcd" in planeup.report(record) and "export KUBECONFIG=" in planeup.report(record)
        assert planeup.down(tmp_path / "cache") == record
    finally:
        child.kill()
    assert not Path(f"/proc/{child.pid}").exists() and not record.root.exists()
    assert not (tmp_path / "cache" / planeup.CURRENT).exists()
    assert planeup.down(tmp_path / "cache") is None
