"""torchpod.fabric.verbs: what InfiniBand and RoCE share: the active ports of a link layer,
NCCL_IB_HCA with exact names, the socket interface, and a user's NCCL_IB_HCA that selects
none of the ports (kept as set, and said)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchpod.fabric.findings import Severity, info
from torchpod.fabric.sysfs import Inventory, Port
from torchpod.fabric.verbs import active_ports, common_env

PORTS = (Port("mlx5_1", 1, "4: ACTIVE", "Ethernet", ()), Port("mlx5_10", 1, "4: ACTIVE", "Ethernet", ()),
         Port("mlx5_2", 1, "1: DOWN", "Ethernet", ()), Port("mlx5_3", 2, "4: ACTIVE", "InfiniBand", ()))
NO_ROUTE = info("socket.ifname.no-route", "no default route")


def test_active_ports_of_one_link_layer_in_order():
    inv = Inventory(root=Path("/sys"), ports=PORTS, cxi=(), netdevs=())
    assert [p.device for p in active_ports(inv, "Ethernet")] == ["mlx5_1", "mlx5_10"]
    assert [(p.device, p.port) for p in active_ports(inv, "InfiniBand")] == [("mlx5_3", 2)]


def test_hca_names_are_exact_and_the_socket_interface_follows_the_probe():
    added, notes = common_env({}, PORTS[:2], lambda: ("bond0", info("socket.ifname.route", "via bond0")))
    assert added == [("NCCL_IB_HCA", "=mlx5_1,mlx5_10"), ("NCCL_SOCKET_IFNAME", "bond0")]
    assert [n.code for n in notes] == ["verbs.hca.chosen", "socket.ifname.route"]
    added, notes = common_env({}, PORTS[3:], lambda: (None, NO_ROUTE))
    assert added == [("NCCL_IB_HCA", "=mlx5_3:2")] and notes[-1] is NO_ROUTE


@pytest.mark.parametrize("given, warned", [("mlx5_1", False), ("=mlx5_10", False), ("^mlx5_1", True),
                                           ("=mlx5_4,mlx5_5", True), ("mlx5_1:2", True), ("^=mlx5_1", False)])
def test_a_users_hca_that_selects_none_of_the_ports_is_a_warning(given, warned):
    added, notes = common_env({"NCCL_IB_HCA": given}, PORTS[:2], lambda: (None, NO_ROUTE))
    warnings = [n for n in notes if n.severity is Severity.WARN]
    assert [n.code for n in warnings] == (["verbs.user.hca-selects-none"] if warned else [])
    assert dict(added)["NCCL_IB_HCA"] == "=mlx5_1,mlx5_10"  # the resolver keeps the user's; this is what it would set
