"""Network fabric detection: the NCCL settings that follow from the node's RDMA hardware.

One module per fabric, tried in the order of FABRICS (most specific first): Slingshot
(cxi NICs), EFA, InfiniBand, RoCE. Each ``detect(env, inventory, socket_if)`` returns a
FabricReport or None; the first report wins. Its ``env`` is added to torchrun's
environment by the resolver, which never changes a variable the user set: a user value
that contradicts the hardware becomes a note instead. Nothing found: no NCCL variable,
one note. Pure: reads only under the sysfs and proc roots it is given (sysfs.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from . import efa, hca, infiniband, presets, roce, slingshot
from .report import FabricReport
from .sysfs import Inventory, default_route_interface, read

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
    """Detection, then the TORCHPOD_PRESET overlay; the resolver drops what the user set."""
    inventory = read(sysfs_root)
    return with_preset(env, detected(env, inventory, proc_root), inventory)


def detected(env: Mapping[str, str], inventory: Inventory, proc_root: Path) -> FabricReport:
    for module in FABRICS:
        report = module.detect(env, inventory, lambda: socket_interface(proc_root))
        if report is not None:
            return report
    found = ", ".join(inventory.devices)
    return FabricReport(notes=(
        f"RDMA devices {found} under {inventory.root}/class/infiniband, none with an active port: no NCCL settings"
        if found else f"no RDMA fabric detected under {inventory.root}: no NCCL settings (NCCL uses sockets)",
    ))


def with_preset(env: Mapping[str, str], report: FabricReport, inventory: Inventory) -> FabricReport:
    """The preset's values over detection's (never over the user's), each with its source."""
    preset = presets.chosen(env)
    if preset is None:
        return report
    merged = dict(report.env)
    notes = list(report.notes)
    notes.append(f"TORCHPOD_PRESET={preset.name}: {preset.source}")
    if report.fabric not in (None, preset.fabric):
        notes.append(f"preset {preset.name} is for {preset.fabric} but this node shows {report.fabric}")
    for var, value, source in preset.env:
        if merged.get(var) not in (None, value):
            notes.append(f"{var}={value} from preset {preset.name} over detection's {merged[var]} ({source})")
        elif source != preset.source:
            notes.append(f"{var}={value} from preset {preset.name} ({source})")
        merged[var] = value
        if var == "NCCL_IB_HCA" and inventory.ports:
            missing = [n for n in value.lstrip("^=").split(",")
                       if not any(hca.selects("=" + n, p.device, p.port) for p in inventory.ports)]
            if missing:
                notes.append(f"preset {preset.name} names {', '.join(missing)}, which this node does not have")
    return FabricReport(report.fabric or preset.fabric, tuple(merged.items()), tuple(notes))


__all__ = ["FABRICS", "FabricReport", "detect_fabric", "socket_interface"]
