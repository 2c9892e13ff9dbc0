"""torchpod_toolkit.kube.plane's processes, with a stand-in program (a copy of sleep) in
place of a control plane component: ``stop_processes`` signals only a process still running
the binary it started, reaps it, and memory is read from procfs while it runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from torchpod_toolkit.kube import plane

SLEEP = Path(shutil.which("sleep") or "/bin/sleep").resolve()


def test_only_a_process_still_running_its_binary_is_signalled(tmp_path):
    binary = tmp_path / "etcd"
    shutil.copy(SLEEP, binary)
    child = subprocess.Popen([str(binary), "60"])
    try:
        assert plane.stop_processes({"etcd": child.pid}, {"etcd": str(SLEEP)}) == []
        assert child.poll() is None  # another binary was recorded: left alone
        assert plane.rss_bytes({"etcd": child.pid})["etcd"] > 0
        assert plane.stop_processes({"etcd": child.pid}, {"etcd": str(binary)}) == []  # TERM was enough
        assert not Path(f"/proc/{child.pid}").exists()  # gone, and reaped: no zombie left
    finally:
        child.kill()
        child.wait()
    assert plane.rss_bytes({"etcd": child.pid}) == {"etcd": 0}
