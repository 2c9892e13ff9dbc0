"""torchpod.fabric.sysfs: the node's RDMA hardware and routes as the kernel writes them.
(Hostile attributes, names and bytes: test_sysfs_hostile.py.)"""

from __future__ import annotations

import pytest

from torchpod.fabric import detect_fabric
from torchpod.fabric.sysfs import read

from fabric_cases import FIXTURES, write_node


@pytest.mark.parametrize("table", [
    "",  # no IPv6 at all
    f"{'0' * 32} 00 {'0' * 32} 00 {'0' * 32} ffffffff 00000001 00000000 00200200 lo\n",  # only the reject route
    "garbage\n\x00\x01 line\n" + f"{'0' * 32} 00 {'0' * 32} 00 {'0' * 32} 0 0 0 zz eth1\n",  # bad flags
])
def test_an_ipv6_route_table_without_a_usable_default_chooses_nothing(tmp_path, table):
    case = {k: v for k, v in FIXTURES["roce_ipv6_only_cluster"].items() if k != "route6"}
    sysfs, proc = write_node(tmp_path, case)
    (proc / "net" / "ipv6_route").write_text(table)
    report = detect_fabric({}, sysfs, proc)
    assert dict(report.env) == {} and any("no RoCE v2 IPv4 GID" in n for n in report.notes)


def test_the_inventory_lists_ports_in_natural_order_with_their_gids(tmp_path):
    ib = tmp_path / "class" / "infiniband"
    for device in ("mlx5_10", "mlx5_2"):
        port = ib / device / "ports" / "1"
        (port / "gids").mkdir(parents=True)
        (port / "gid_attrs" / "types").mkdir(parents=True)
        (port / "state").write_text("4: ACTIVE\n")
        (port / "link_layer").write_text("Ethernet\n")
        (port / "gids" / "0").write_text("FE80:0000:0000:0000:0000:0000:0000:0001\n")
        (port / "gids" / "1").write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")  # an empty slot
        (port / "gids" / "3").write_text("0000:0000:0000:0000:0000:ffff:0a00:0001\n")
        (port / "gid_attrs" / "types" / "3").write_text("RoCE v2\n")  # slot 0's type unreadable
    for name in ("cxi0", "cxi1", "cxil"):
        (tmp_path / "class" / "cxi" / name).mkdir(parents=True)
    (tmp_path / "class" / "net" / "hsn0").mkdir(parents=True)
    inv = read(tmp_path)
    assert inv.devices == ("mlx5_2", "mlx5_10") and inv.cxi == ("cxi0", "cxi1") and inv.netdevs == ("hsn0",)
    port = inv.ports[0]
    assert port.active and port.link_layer == "Ethernet" and [g.index for g in port.gids] == [0, 3]
    link_local, v2 = port.gids
    assert link_local.gid.startswith("fe80:") and link_local.type is None and not link_local.ipv6_global
    assert v2.ipv4 and v2.roce_v2 and v2.ndev is None
    assert read(tmp_path / "absent").ports == ()
