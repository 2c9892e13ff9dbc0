"""torchpod.netplugin: how NCCL names and picks a net plugin (NCCL_NET_PLUGIN, as NCCL's
plugin open reads it) and which plugin API versions each NCCL release asks for."""

from __future__ import annotations

import os

import pytest

from torchpod import netplugin

SLINGSHOT = {"NCCL_NET": "AWS Libfabric", "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_CROSS_NIC": "1",
             "FI_CXI_DISABLE_HOST_REGISTER": "1", "FI_MR_CACHE_MONITOR": "userfaultfd",
             "FI_CXI_DEFAULT_CQ_SIZE": "131072"}


@pytest.mark.parametrize("value, names", [
    (None, ["libnccl-net.so"]),
    ("none", []),
    ("ofi", ["ofi", "libnccl-net-ofi.so"]),
    ("libnccl-net-ofi.so", ["libnccl-net-ofi.so"]),
    ("/opt/x/libnccl-net.so,aws", ["/opt/x/libnccl-net.so", "aws", "libnccl-net-aws.so"]),
])
def test_candidates_follow_nccls_plugin_open(value, names):
    env = {} if value is None else {"NCCL_NET_PLUGIN": value}
    assert [n for n, _ in netplugin.candidates(env)] == names


@pytest.mark.parametrize("nccl, first, last", [((2, 30, 7), 12, 6), ((2, 28, 3), 11, 6), ((2, 27, 7), 10, 6),
                                                ((2, 21, 5), 8, 5), ((2, 18, 3), 6, 4), (None, 12, 6)])
def test_plugin_api_versions_by_nccl_release(nccl, first, last):
    want = netplugin.wanted(nccl)
    assert want[0] == first and want[-1] == last and list(want) == sorted(want, reverse=True)


def test_a_mapped_library_is_found_in_procfs_streamed_through_the_bounded_reader(tmp_path):
    assert netplugin._mapped(r"^ld-linux") is not None  # the dynamic loader is mapped into every process
    assert netplugin._mapped(r"^no-such-library\.so") is None
    maps = tmp_path / "maps"
    maps.write_bytes(b"7f00-7f01 r-xp 0 08:01 1 /opt/\xff/libfabric.so.1.2\n" + b"x" * (1 << 20) + b"\n")
    assert netplugin._mapped(r"^libfabric\.so", str(maps)) == "/opt/\ufffd/libfabric.so.1.2"


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir, lambda p: os.symlink("/dev/zero", p), lambda p: None])
def test_a_memory_map_that_cannot_be_read_names_no_library_and_never_waits(tmp_path, make):
    make(tmp_path / "maps")
    assert netplugin._mapped(r"^libfabric\.so", str(tmp_path / "maps")) is None
