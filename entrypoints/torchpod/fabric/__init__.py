"""Network fabric detection: the NCCL settings that follow from the node's RDMA hardware.

One module per fabric, tried in the order of FABRICS (most specific first): Slingshot
(cxi NICs), EFA, InfiniBand, RoCE. Each ``detect(env, inventory, socket_if)`` returns a
FabricReport or None; the first report wins. Its ``env`` is added to torchrun's
environment by the resolver, which never changes a variable the user set: a user value
that contradicts the hardware becomes a note instead. Nothing found: no NCCL variable,
one note. Pure: reads only under the sysfs and proc roots it is given (sysfs.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import efa, infiniband, roce, slingshot
from .report import FabricReport
from .sysfs import default_route_interface, read

FABRICS = (slingshot, efa, infiniband, roce)

# Interfaces that never carry the traffic between nodes: loopback, container bridges and
# the host ends of veth pairs.
_LOCAL_ONLY = ("lo", "docker", "veth", "br-", "virbr", "cni", "flannel", "cali")


def socket_interface(proc_root: Path) -> tuple[str | None, str]:
    """NCCL_SOCKET_IFNAME for bootstrap and out-of-band traffic: the interface of the
    default route, unless it is local-only; and the note that says so."""
    name = default_route_interface(proc_root)
    if name is None:
        return None, f"no IPv4 default route in {proc_root}/net/route: NCCL_SOCKET_IFNAME left to NCCL"
    if name.startswith(_LOCAL_ONLY):
        return None, f"the default route leaves through {name}, a local-only interface: NCCL_SOCKET_IFNAME left to NCCL"
    return name, f"NCCL_SOCKET_IFNAME={name}: the interface of the default route"


def detect_fabric(env: Mapping[str, str], sysfs_root: Path, proc_root: Path = Path("/proc")) -> FabricReport:
    inventory = read(sysfs_root)
    for module in FABRICS:
        report = module.detect(env, inventory, lambda: socket_interface(proc_root))
        if report is not None:
            return report
    found = ", ".join(inventory.devices)
    return FabricReport(notes=(
        f"RDMA devices {found} under {sysfs_root}/class/infiniband, none with an active port: no NCCL settings"
        if found else f"no RDMA fabric detected under {sysfs_root}: no NCCL settings (NCCL uses sockets)",
    ))


__all__ = ["FABRICS", "FabricReport", "detect_fabric", "socket_interface"]
