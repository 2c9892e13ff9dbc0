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

from . import efa, hca, infiniband, presets, roce, site, slingshot
from .report import FabricReport
from .sysfs import NAME_RE, Inventory, default_route_interface, read

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
    if not NAME_RE.fullmatch(name):
        return None, (f"the default route leaves through {ascii(name)}, not an interface name NCCL can be "
                      "given: NCCL_SOCKET_IFNAME left to NCCL")
    if name.startswith(_LOCAL_ONLY):
        return None, f"the default route leaves through {name}, a local-only interface: NCCL_SOCKET_IFNAME left to NCCL"
    return name, f"NCCL_SOCKET_IFNAME={name}: the interface of the default route"


def detect_fabric(env: Mapping[str, str], sysfs_root: Path, proc_root: Path = Path("/proc"),
                  root: Path = Path("/")) -> FabricReport:
    """Detection, the net plugin a fabric needs (site.py), then the TORCHPOD_PRESET
    overlay; the resolver drops what the user set."""
    inventory = read(sysfs_root)
    report = with_plugin(env, detected(env, inventory, proc_root), site.find(env, root), site.image_plugin(root))
    report = with_preset(env, report, inventory)
    if inventory.ignored:
        shown = ", ".join(ascii(p) for p in inventory.ignored[:8])
        more = f" and {len(inventory.ignored) - 8} more" if len(inventory.ignored) > 8 else ""
        report = FabricReport(report.fabric, report.env, (*report.notes, f"ignored sysfs entries whose names are "
                              f"not device names (letters, digits, '_', '.', '@', '+', '-'): {shown}{more}"))
    return report


# Every aws-ofi-nccl version answers to this name (<= 1.11 know only it; later ones rename
# themselves to it when NCCL_NET asks). Naming the network makes NCCL fail at init when the
# plugin cannot load, instead of falling back to sockets (NVIDIA/nccl src/plugin/net.cc).
PLUGIN_NET = "AWS Libfabric"


def with_plugin(env: Mapping[str, str], report: FabricReport, libs: site.SiteLibs,
                own_plugin: str | None) -> FabricReport:
    """EFA and Slingshot: the injected plugin (else the image's own) and what NCCL needs to use it."""
    if report.fabric not in ("efa", "slingshot"):
        return report
    merged, notes = dict(report.env), list(report.notes)
    if libs.plugin:
        user_ld = env.get("LD_LIBRARY_PATH", "")
        merged["LD_LIBRARY_PATH"] = ":".join([*libs.dirs, *([user_ld] if user_ld else [])])
        notes.append(f"NCCL net plugin {libs.plugin} from {libs.source}; LD_LIBRARY_PATH starts with "
                     f"{':'.join(libs.dirs)}, so it and its libfabric ({libs.libfabric or 'none beside it'}) "
                     "win over the image's")
        if "NCCL_NET_PLUGIN" in env and libs.plugin.endswith("/libnccl-net.so"):
            notes.append(f"your NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']!r} stops NCCL from trying the injected "
                         "libnccl-net.so (NCCL tries it only when NCCL_NET_PLUGIN is unset; CSCS known issue)")
    elif own_plugin:
        merged["NCCL_NET_PLUGIN"] = own_plugin
        notes.append(f"NCCL_NET_PLUGIN={own_plugin}: this image's own plugin (nothing injected)")
    else:
        notes.append("no NCCL net plugin: none injected (TORCHPOD_SITE_LIB, " + site.SITE_LIB + ", "
                     "/opt/amazon/{ofi-nccl,efa}, /opt/cray/libfabric) and this image carries none: "
                     "NCCL will use sockets")
        return FabricReport(report.fabric, tuple(merged.items()), tuple(notes))
    merged["NCCL_NET"] = PLUGIN_NET
    notes.append(f"NCCL_NET={PLUGIN_NET}: a plugin that cannot load fails at init instead of falling back to sockets")
    if report.fabric == "slingshot":
        for var, value in slingshot.PLUGIN_ENV:
            merged.setdefault(var, value)
        notes.append("Slingshot settings " + ", ".join(f"{k}={v}" for k, v in slingshot.PLUGIN_ENV)
                     + f" ({slingshot.PLUGIN_ENV_SOURCE})")
    return FabricReport(report.fabric, tuple(merged.items()), tuple(notes))


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
