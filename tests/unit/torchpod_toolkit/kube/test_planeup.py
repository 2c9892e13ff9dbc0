"""torchpod_toolkit.kube.planeup, what needs no component running: the cache's pointer to the
plane `invoke kube.up` started, read once through the bounded reader (no pointer, or no
record where it points, is nothing to stop; anything else in its place is one error)."""

from __future__ import annotations

import os
import re

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import plane, planeup


def test_no_pointer_and_no_record_where_it_points_are_nothing_to_stop(tmp_path):
    assert planeup.down(tmp_path / "cache") is None
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / planeup.CURRENT).write_text(f"{tmp_path / 'elsewhere'}\n")
    assert planeup.down(tmp_path / "cache") is None  # no record in the folder remembered: nothing to stop
    assert not (tmp_path / "cache" / planeup.CURRENT).exists()


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),  # one error, and no wait
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"/" * (planeup.POINTER_CAP + 1)), "over the 4 KiB cap"),
    (lambda p: p.write_bytes(b"/tmp/\xff\n"), "not UTF-8 text"),
])
def test_a_pointer_that_is_no_small_text_file_is_one_error(tmp_path, make, needle):
    make(tmp_path / planeup.CURRENT)
    for step in (lambda: planeup.down(tmp_path), lambda: planeup.up(tmp_path / "bin", tmp_path)):
        with pytest.raises(RuntimeFailure, match="no control plane remembered: .*" + re.escape(needle)):
            step()


def test_the_report_says_how_to_use_the_plane(tmp_path):
    record = plane.Plane(root=tmp_path, ports=plane.Ports(1, 2, 3, 4, 5), pids={"etcd": 1 << 30},
                         binaries={"etcd": "/bin/etcd"}, seconds=4.2)
    text = planeup.report(record)
    assert "https://127.0.0.1:3" in text and "started in   4.2 s" in text
    assert text.splitlines()[-1] == f"use it:      export KUBECONFIG={tmp_path / 'admin.kubeconfig'}"
