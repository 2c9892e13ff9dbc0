"""torchpod_toolkit.kube.plane, what needs no component running: the loopback ports handed
out, the end of a component's log read a bounded way whatever stands in its place, and a
process's resident memory read from procfs."""

from __future__ import annotations

import os

from torchpod_toolkit.kube import plane


def test_the_ports_handed_out_are_distinct_loopback_ports():
    ports = plane.free_ports(5)
    assert len(set(ports)) == 5 and all(1024 <= p < 65536 for p in ports)


def test_a_log_tail_is_bounded_and_any_bytes_read(tmp_path):
    log = tmp_path / "x.log"
    log.write_bytes(b"\xff" * 10 + b"end")
    assert plane.log_tail(log, limit=5) == "\ufffd\ufffdend"
    assert plane.log_tail(tmp_path / "absent").startswith("(no log: ")
    with open(log, "wb") as f:
        f.truncate(1 << 30)  # a sparse gigabyte: its end alone is read
        f.seek(0, 2)
        f.write(b"last words\n")
    assert plane.log_tail(log, limit=11) == "last words\n"


def test_a_log_that_is_no_file_is_named_in_the_tail_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "fifo.log")
    assert plane.log_tail(tmp_path / "fifo.log").startswith(f"(no log: {tmp_path / 'fifo.log'} is a FIFO (named pipe)")
    assert "is a directory" in plane.log_tail(tmp_path)


def test_resident_memory_is_read_from_procfs_and_0_for_a_process_gone():
    found = plane.rss_bytes({"me": os.getpid(), "gone": 1 << 30})
    assert found["me"] > 0 and found["gone"] == 0


def test_a_plane_whose_processes_are_gone_is_not_running(tmp_path):
    record = plane.Plane(root=tmp_path, ports=plane.Ports(1, 2, 3, 4, 5), pids={"etcd": 1 << 30},
                         binaries={"etcd": "/bin/etcd"}, seconds=0)
    assert not plane.running(record)
    assert record.server == "https://127.0.0.1:3" and record.kubeconfig == tmp_path / "admin.kubeconfig"
