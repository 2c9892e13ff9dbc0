"""torchpod_toolkit.kube.plane's processes, with stand-in programs (copies of sleep) in place
of the control plane's: a component that exits or never answers is one error carrying its
log, and every process started before it is stopped; ``stop_processes`` signals only a
process still running the binary it started; health checks read what a server answers."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from dataclasses import asdict
from pathlib import Path

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import plane

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
        plane.start(tmp_path / "bin", tmp_path / "plane")
    assert not (tmp_path / "plane").exists()


def test_a_folder_in_use_is_refused(tmp_path):
    bindir = _stand_ins(tmp_path / "bin")
    (tmp_path / "plane").mkdir()
    (tmp_path / "plane" / "etcd").mkdir()
    with pytest.raises(RuntimeFailure, match="is not empty"):
        plane.start(bindir, tmp_path / "plane")


def test_a_component_that_exits_is_reported_with_its_log(tmp_path):
    bindir = _stand_ins(tmp_path / "bin")
    # sleep refuses etcd's flags at once
    with pytest.raises(RuntimeFailure, match=r"etcd exited with 1; the end of .*etcd\.log: .*'--name=torchpod'"):
        plane.start(bindir, tmp_path / "plane", timeout=30)
    assert not _running(bindir / "etcd")
    assert (tmp_path / "plane" / "logs" / "etcd.log").is_file()  # kept for the reader


def test_a_component_that_never_answers_is_stopped_with_the_ones_before_it(tmp_path, monkeypatch):
    bindir = _stand_ins(tmp_path / "bin")
    monkeypatch.setitem(plane.ARGV, "etcd", lambda b, r, p: [str(b / "etcd"), "60"])
    with pytest.raises(RuntimeFailure, match="etcd did not answer its health check in time"):
        plane.start(bindir, tmp_path / "plane", timeout=1)
    assert not _running(bindir / "etcd")


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


class _Health(http.server.BaseHTTPRequestHandler):
    body = b'{"health":"true","reason":""}'

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body, healthy", [(b'{"health":"true","reason":""}', True),
                                           (b'{"health":"false","reason":"NOSPACE"}', False)])
def test_etcds_health_is_read_from_its_answer(tmp_path, body, healthy):
    server = http.server.HTTPServer(("127.0.0.1", 0), type("Health", (_Health,), {"body": body}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ports = plane.Ports(server.server_address[1], 1, 1, 1, 1)
        assert plane.probe("etcd", ports, tmp_path) is healthy
    finally:
        server.shutdown()
        server.server_close()
    assert plane.probe("etcd", ports, tmp_path, timeout=0.5) is False  # nothing listens now


def _recorded(tmp_path: Path) -> tuple[plane.Plane, subprocess.Popen]:
    """A plane record whose one component is a stand-in that runs until stopped, remembered
    in the cache as `kube.up` remembers its plane."""
    bindir = _stand_ins(tmp_path / "bin")
    child = subprocess.Popen([str(bindir / "etcd"), "60"])
    root = tmp_path / "plane"
    root.mkdir()
    record = plane.Plane(root=root, ports=plane.Ports(1, 2, 3, 4, 5), pids={"etcd": child.pid},
                         binaries={"etcd": str(bindir / "etcd")}, seconds=1.5)
    (root / plane.STATE).write_text(json.dumps({**asdict(record), "root": str(root)}))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / plane.CURRENT).write_text(f"{root}\n")
    return record, child


def test_down_stops_the_remembered_plane_and_removes_its_folder(tmp_path):
    record, child = _recorded(tmp_path)
    try:
        assert plane.load(record.root) == record and plane.running(record)
        with pytest.raises(RuntimeFailure, match="already runs in .*plane; `invoke kube.down` stops it"):
            plane.up(tmp_path / "bin", tmp_path / "cache")
        assert "etcd" in plane.report(record) and "export KUBECONFIG=" in plane.report(record)
        assert plane.down(tmp_path / "cache") == record
    finally:
        child.kill()
    assert not Path(f"/proc/{child.pid}").exists() and not record.root.exists()
    assert not (tmp_path / "cache" / plane.CURRENT).exists()
    assert plane.down(tmp_path / "cache") is None


@pytest.mark.parametrize("text", ["", "{", '{"root": "/x"}', '{"root": "/x", "ports": {"etcd": 1}}',
                                  json.dumps({"root": "/x", "ports": dict.fromkeys(("etcd", "etcd_peer", "apiserver",
                                              "controller_manager", "scheduler"), 1),
                                              "pids": {"etcd": "1"}, "binaries": {"etcd": "/b"}, "seconds": 1})])
def test_a_damaged_record_is_one_error_naming_it(tmp_path, text):
    (tmp_path / plane.STATE).write_text(text)
    with pytest.raises(RuntimeFailure, match=f"{tmp_path / plane.STATE}: not the record `start` writes"):
        plane.load(tmp_path)
