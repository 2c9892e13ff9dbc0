"""Network fabric detection: the NCCL settings that follow from the node's RDMA hardware.

One module per fabric, each with its record in FABRICS (registry.py), tried in that order
(most specific first): Slingshot (cxi NICs), EFA, InfiniBand, RoCE. Each record's
``detect(env, inventory, socket_if)`` returns a FabricReport or None; the first report
wins. Its ``env`` is added to torchrun's environment by the resolver, which never changes a
variable the user set: a user value that contradicts the hardware becomes a finding
instead (findings.py: a code and a severity the doctor reads, a message the plan's notes
show). Nothing found: no NCCL variable, one finding. Pure: reads only under the sysfs and
proc roots it is given (sysfs.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..contract import ENV_PRESET, ENV_SITE_LIB
from . import hca, presets, site
from .findings import Finding, Severity, info, user
from .netpin import with_net_pin
from .record import PLUGIN_NET, Fabric
from .registry import FABRICS, by_name
from .report import FabricReport
from .sysfs import NAME_RE, Inventory, default_route6_interface, default_route_interface, read

# Interfaces that never carry the traffic between nodes: loopback, container bridges and
# the host ends of veth pairs.
_LOCAL_ONLY = ("lo", "docker", "veth", "br-", "virbr", "cni", "flannel", "cali")


def socket_interface(proc_root: Path) -> tuple[str | None, Finding]:
    """NCCL_SOCKET_IFNAME for bootstrap and out-of-band traffic: the interface of the
    default route, unless it is local-only; and the finding that says so."""
    name = default_route_interface(proc_root)
    family = "IPv4"
    if name is None:
        name, family = default_route6_interface(proc_root), "IPv6"
    if name is None:
        return None, info("socket.ifname.no-route", f"no IPv4 default route in {proc_root}/net/route (nor an "
                          "IPv6 one): NCCL_SOCKET_IFNAME left to NCCL")
    if not NAME_RE.fullmatch(name):
        return None, info("socket.ifname.bad-name", f"the default route leaves through {ascii(name)}, not an "
                          "interface name NCCL can be given: NCCL_SOCKET_IFNAME left to NCCL")
    if name.startswith(_LOCAL_ONLY):
        return None, info("socket.ifname.local-only", f"the default route leaves through {name}, a local-only "
                          "interface: NCCL_SOCKET_IFNAME left to NCCL")
    if family == "IPv6":  # roce.py reads this code: the node's traffic is IPv6 only
        return name, info("socket.ifname.route6", f"NCCL_SOCKET_IFNAME={name}: the interface of the IPv6 default "
                          "route (no IPv4 default route)")
    return name, info("socket.ifname.route", f"NCCL_SOCKET_IFNAME={name}: the interface of the default route")


def detect_fabric(env: Mapping[str, str], sysfs_root: Path, proc_root: Path = Path("/proc"),
                  root: Path = Path("/")) -> FabricReport:
    """Detection, the net plugin a fabric needs (site.py), then the TORCHPOD_PRESET
    overlay; the resolver drops what the user set."""
    inventory = read(sysfs_root)
    report = with_plugin(env, detected(env, inventory, proc_root), site.find(env, root), site.image_plugin(root))
    report = with_net_pin(env, with_preset(env, report, inventory))
    if inventory.ignored:
        shown = ", ".join(ascii(p) for p in inventory.ignored[:8])
        more = f" and {len(inventory.ignored) - 8} more" if len(inventory.ignored) > 8 else ""
        report = FabricReport(report.fabric, report.env, (*report.findings, info(
            "sysfs.ignored", f"ignored sysfs entries whose names are not device names (letters, digits, '_', '.', "
            f"'@', '+', '-'): {shown}{more}")))
    return report


def with_plugin(env: Mapping[str, str], report: FabricReport, libs: site.SiteLibs,
                own_plugin: str | None) -> FabricReport:
    """EFA and Slingshot: the injected plugin (else the image's own) and what NCCL needs to use it."""
    fabric = by_name(report.fabric)
    if fabric is None or not fabric.needs_plugin:
        return report
    merged, notes = dict(report.env), list(report.findings)
    if libs.plugin:
        user_ld = env.get("LD_LIBRARY_PATH", "")
        merged["LD_LIBRARY_PATH"] = ":".join([*libs.dirs, *([user_ld] if user_ld else [])])
        notes.append(info("site.plugin.injected", f"NCCL net plugin {libs.plugin} from {libs.source}; "
                          f"LD_LIBRARY_PATH starts with {':'.join(libs.dirs)}, so it and its libfabric "
                          f"({libs.libfabric or 'none beside it'}) win over the image's"))
        if "NCCL_NET_PLUGIN" in env and libs.plugin.endswith("/libnccl-net.so"):
            notes.append(user("site.user.net-plugin", f"your NCCL_NET_PLUGIN={env['NCCL_NET_PLUGIN']!r} stops NCCL "
                              "from trying the injected libnccl-net.so (NCCL tries it only when NCCL_NET_PLUGIN is "
                              "unset; CSCS known issue)"))
    elif own_plugin:
        merged["NCCL_NET_PLUGIN"] = own_plugin
        notes.append(info("site.plugin.image", f"NCCL_NET_PLUGIN={own_plugin}: this image's own plugin "
                          "(nothing injected)"))
    else:
        notes.append(_no_plugin("NCCL will use sockets"))
        return FabricReport(report.fabric, tuple(merged.items()), tuple(notes))
    notes += _plugin_env(fabric, merged)
    return FabricReport(report.fabric, tuple(merged.items()), tuple(notes))


NO_PLUGIN = "site.plugin.none"


def _no_plugin(consequence: str) -> Finding:
    """The finding for a fabric that needs a net plugin and has none, and what follows."""
    return info(NO_PLUGIN, f"no NCCL net plugin: none injected ({ENV_SITE_LIB.name}, {site.SITE_LIB}, "
                f"/opt/amazon/{{ofi-nccl,efa}}, /opt/cray/libfabric) and this image carries none: {consequence}")


def _plugin_env(fabric: Fabric, merged: dict[str, str]) -> list[Finding]:
    """The record's plugin environment into ``merged`` (never over a value already there)."""
    for setting in fabric.plugin_env:
        merged.setdefault(setting.var, setting.value)
    out = [info("site.net.named", f"NCCL_NET={PLUGIN_NET.value}: a plugin that cannot load fails at init "
                "instead of falling back to sockets")]
    own = [s for s in fabric.plugin_env if s is not PLUGIN_NET]
    if own:
        sources = dict.fromkeys(s.source for s in own)
        out.append(info(f"{fabric.name}.settings", f"{fabric.name.capitalize()} settings "
                        + ", ".join(f"{s.var}={s.value}" for s in own) + f" ({'; '.join(sources)})"))
    return out


def detected(env: Mapping[str, str], inventory: Inventory, proc_root: Path) -> FabricReport:
    for fabric in FABRICS:
        report = fabric.detect(env, inventory, lambda: socket_interface(proc_root))
        if report is not None:
            return report
    code = "fabric.none.inactive" if inventory.devices else "fabric.none"
    return FabricReport(findings=(info(code, f"{_nothing_found(inventory)}: no NCCL settings (NCCL uses sockets)"),))


def _nothing_found(inventory: Inventory) -> str:
    """What detection saw when it found no fabric: no RDMA device, or none with an active port."""
    if inventory.devices:
        return (f"RDMA devices {', '.join(inventory.devices)} under {inventory.root}/class/infiniband, none with "
                "an active port")
    return f"no RDMA fabric detected under {inventory.root}"


def _as_the_preset_sets(findings: list[Finding], preset: presets.Preset, merged: Mapping[str, str],
                        inventory: Inventory) -> list[Finding]:
    """Detection's findings once the preset's values are in: one that said "no NCCL settings"
    or "NCCL will use sockets" is said again for what the preset exports, so no note
    contradicts an export (the doctor reads codes; the first finding stays the headline)."""
    out = []
    for finding in findings:
        if finding.code.startswith("fabric.none") and preset.env:
            finding = info("preset.fabric.undetected", f"{_nothing_found(inventory)}: the NCCL settings are preset "
                           f"{preset.name}'s, for {preset.fabric}, not detection's; on a node without "
                           f"{preset.fabric}, unset {ENV_PRESET.name}")
        elif finding.code == NO_PLUGIN and "NCCL_NET" in merged:
            finding = _no_plugin(f"preset {preset.name}'s NCCL_NET={merged['NCCL_NET']} makes NCCL fail at init "
                                 "until one is injected, instead of using sockets")
        out.append(finding)
    return out


def with_preset(env: Mapping[str, str], report: FabricReport, inventory: Inventory) -> FabricReport:
    """The preset's values over detection's (never over the user's), each with its source."""
    preset = presets.chosen(env)
    if preset is None:
        return report
    merged = dict(report.env)
    notes = list(report.findings)
    notes.append(info("preset.chosen", f"{ENV_PRESET.name}={preset.name}: {preset.source}"))
    if report.fabric not in (None, preset.fabric):
        notes.append(info("preset.other-fabric", f"preset {preset.name} is for {preset.fabric} but this node shows "
                          f"{report.fabric}"))
    for var, value, source in preset.env:
        # the GID choice is the doctor's "gid" row, whoever made it
        topic, severity = ("gid", Severity.OK) if var == "NCCL_IB_GID_INDEX" else ("value", Severity.INFO)
        if merged.get(var) not in (None, value):
            notes.append(Finding(f"preset.{topic}.over-detection", severity, f"{var}={value} from preset "
                                 f"{preset.name} over detection's {merged[var]} ({source})"))
        elif source != preset.source:
            notes.append(Finding(f"preset.{topic}.sourced", severity, f"{var}={value} from preset {preset.name} "
                                 f"({source})"))
        merged[var] = value
        if var == "NCCL_IB_HCA" and inventory.ports:
            missing = [n for n in value.lstrip("^=").split(",")
                       if not any(hca.selects("=" + n, p.device, p.port) for p in inventory.ports)]
            if missing:
                notes.append(info("preset.hca.missing", f"preset {preset.name} names {', '.join(missing)}, which "
                                  "this node does not have"))
    return FabricReport(report.fabric or preset.fabric, tuple(merged.items()),
                        tuple(_as_the_preset_sets(notes, preset, merged, inventory)))


__all__ = ["FABRICS", "Fabric", "FabricReport", "Finding", "Severity", "by_name", "detect_fabric",
           "socket_interface"]
