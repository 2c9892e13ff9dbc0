"""InfiniBand: every ACTIVE port whose link layer is InfiniBand. No GID index: NCCL
ignores NCCL_IB_GID_INDEX on InfiniBand (src/transport/net_ib, link layer IB uses the
LID or the routable FLID)."""

from __future__ import annotations

from typing import Mapping

from .findings import info, user
from .record import Fabric
from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe, active_ports, common_env

NAME = "infiniband"


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    chosen = active_ports(inv, "InfiniBand")
    if not chosen:
        return None
    added, notes = common_env(env, chosen, socket_if)
    if env.get("NCCL_IB_GID_INDEX") is not None:
        notes.append(user("infiniband.user.gid-index-ignored",
                          f"your NCCL_IB_GID_INDEX={env['NCCL_IB_GID_INDEX']!r} has no effect on InfiniBand"))
    return FabricReport(NAME, tuple(added), (info("infiniband.found", f"InfiniBand: {len(chosen)} active ports"),
                                             *notes))


FABRIC = Fabric(NAME, detect, verbs_provider="mlx5")
