"""torchpod.fabric.infiniband: every ACTIVE InfiniBand port goes into NCCL_IB_HCA, never a GID
index (NCCL ignores it on InfiniBand, which a user setting it is told)."""

from __future__ import annotations

from pathlib import Path

from torchpod.fabric import infiniband
from torchpod.fabric.findings import info
from torchpod.fabric.sysfs import Inventory, Port

ROUTE = info("socket.ifname.route", "NCCL_SOCKET_IFNAME=ib0: the interface of the default route")


def inventory(*ports: Port) -> Inventory:
    return Inventory(root=Path("/sys"), ports=ports, cxi=(), netdevs=("ib0",))


def test_active_infiniband_ports_are_chosen_and_others_left_out():
    inv = inventory(Port("mlx5_0", 1, "4: ACTIVE", "InfiniBand", ()), Port("mlx5_1", 1, "1: DOWN", "InfiniBand", ()),
                    Port("mlx5_2", 2, "4: ACTIVE", "InfiniBand", ()), Port("mlx5_3", 1, "4: ACTIVE", "Ethernet", ()))
    report = infiniband.detect({}, inv, lambda: ("ib0", ROUTE))
    assert report.fabric == "infiniband"
    assert report.env == (("NCCL_IB_HCA", "=mlx5_0,mlx5_2:2"), ("NCCL_SOCKET_IFNAME", "ib0"))
    assert "NCCL_IB_GID_INDEX" not in dict(report.env)
    assert report.findings[0].code == "infiniband.found" and "2 active ports" in report.notes[0]


def test_no_active_infiniband_port_is_not_infiniband():
    inv = inventory(Port("mlx5_0", 1, "1: DOWN", "InfiniBand", ()), Port("mlx5_1", 1, "4: ACTIVE", "Ethernet", ()))
    assert infiniband.detect({}, inv, lambda: ("ib0", ROUTE)) is None


def test_a_users_gid_index_is_said_to_have_no_effect():
    inv = inventory(Port("mlx5_0", 1, "4: ACTIVE", "InfiniBand", ()))
    report = infiniband.detect({"NCCL_IB_GID_INDEX": "3"}, inv, lambda: (None, ROUTE))
    codes = [f.code for f in report.findings]
    assert "infiniband.user.gid-index-ignored" in codes and dict(report.env) == {"NCCL_IB_HCA": "=mlx5_0"}
