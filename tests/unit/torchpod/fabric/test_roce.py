"""torchpod.fabric.roce: RoCE v2 GIDs chosen by address family; a node with RoCE v2 IPv6 GIDs
gets them only when its traffic is IPv6 only."""

from __future__ import annotations

from torchpod.fabric import detect_fabric

from fabric_cases import FIXTURES, write_node


def test_an_ipv6_only_node_gets_no_ipv6_gid_when_it_also_routes_ipv4(tmp_path):
    case = dict(FIXTURES["roce_ipv6_only_cluster"], route="eth1")
    sysfs, proc = write_node(tmp_path, case)
    report = detect_fabric({}, sysfs, proc)
    assert "NCCL_IB_ADDR_FAMILY" not in dict(report.env) and "NCCL_IB_HCA" not in dict(report.env)
    assert any("no RoCE v2 IPv4 GID on any port" in n for n in report.notes)
