"""Fabric fixtures (fixtures/fabrics.yaml) written out as sysfs and procfs trees under a
temp root: shared by the fabric and doctor tests (a plain module on pytest's pythonpath)."""

from __future__ import annotations

from pathlib import Path

import yaml

from paths import UNIT_FIXTURES

FIXTURES = yaml.safe_load((UNIT_FIXTURES / "fabrics.yaml").read_text())
ROUTE_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"


def write_node(root: Path, case: dict) -> tuple[Path, Path]:
    """The case's sysfs under root/sys and its /proc/net/route under root/proc."""
    sysfs = root / "sys"
    for device, ports in (case.get("devices") or {}).items():
        for port, spec in ports.items():
            base = sysfs / "class" / "infiniband" / device / "ports" / str(port)
            (base / "gids").mkdir(parents=True)
            (base / "gid_attrs" / "types").mkdir(parents=True)
            (base / "gid_attrs" / "ndevs").mkdir(parents=True)
            (base / "state").write_text(spec["state"] + "\n")
            (base / "link_layer").write_text(spec["link_layer"] + "\n")
            for index, (gid, kind, ndev) in (spec.get("gids") or {}).items():
                (base / "gids" / str(index)).write_text(gid + "\n")
                if kind is not None:  # unreadable in a container: absent here
                    (base / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
                if ndev is not None:
                    (base / "gid_attrs" / "ndevs" / str(index)).write_text(ndev + "\n")
            for index in range(len(spec.get("gids") or {}), 8):  # the kernel lists empty slots too
                if not (base / "gids" / str(index)).exists():
                    (base / "gids" / str(index)).write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    for cxi in case.get("cxi") or []:
        (sysfs / "class" / "cxi" / cxi / "device").mkdir(parents=True)
    for dev in case.get("netdevs") or []:
        (sysfs / "class" / "net" / dev).mkdir(parents=True)
    proc = root / "proc"
    (proc / "net").mkdir(parents=True)
    route = ROUTE_HEADER
    if case.get("route"):
        route += f"{case['route']}\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
    (proc / "net" / "route").write_text(route)
    if case.get("route6"):  # ::/0 via the interface, flags RTF_UP|RTF_GATEWAY|RTF_ADDRCONF, as `ip -6 route` leaves it
        (proc / "net" / "ipv6_route").write_text(
            f"{'0' * 32} 00 {'0' * 32} 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003 "
            f"{case['route6']}\n{'0' * 32} 00 {'0' * 32} 00 {'0' * 32} ffffffff 00000001 00000000 00200200 lo\n")
    return sysfs, proc
