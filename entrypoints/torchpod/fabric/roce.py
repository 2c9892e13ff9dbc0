"""RoCE: ACTIVE Ethernet-link-layer ports that carry a RoCE v2 GID with an IPv4-mapped
address (the OCI OKE and Run:ai RoCE setups).

NCCL >= 2.21.5 picks the RoCE v2 IPv4 GID itself when NCCL_IB_GID_INDEX is unset
(src/transport/net_ib: IB_GID_INDEX -1, IB_ROCE_VERSION_NUM 2, IB_ADDR_FAMILY AF_INET);
older NCCL uses index 0, typically a RoCE v1 link-local entry. So the plan sets
NCCL_IB_GID_INDEX when every chosen device has its first RoCE v2 IPv4 GID at the same
index, which is right for every NCCL; when they differ it is left to NCCL with a note.
A slot whose type cannot be read (not mapped into the container) is never chosen.
"""

from __future__ import annotations

from typing import Mapping

from ..values import ascii_int
from .report import FabricReport
from .sysfs import Inventory, Port
from .verbs import SocketProbe, active_ports, common_env

NAME = "roce"


def _first_v2_ipv4(port: Port) -> int | None:
    return next((g.index for g in port.gids if g.ipv4 and g.roce_v2), None)


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    ethernet = active_ports(inv, "Ethernet")
    if not ethernet:
        return None
    chosen = [p for p in ethernet if _first_v2_ipv4(p) is not None]
    skipped = [p for p in ethernet if _first_v2_ipv4(p) is None]
    notes = [f"RoCE: {len(chosen)} active ports with a RoCE v2 IPv4 GID"]
    for p in skipped:
        unread = any(g.type is None for g in p.gids)
        notes.append(f"{p.device}:{p.port} skipped: no RoCE v2 IPv4 GID"
                     + (" (some GID types unreadable: not mapped into this container's sysfs?)" if unread else ""))
    if not chosen:
        return FabricReport(NAME, (), tuple(notes + ["no RoCE v2 IPv4 GID on any port: NCCL settings left to NCCL"]))
    added, more = common_env(env, chosen, socket_if)
    notes += more
    indices = {f"{p.device}:{p.port}": _first_v2_ipv4(p) for p in chosen}
    if len(set(indices.values())) == 1:
        index = next(iter(indices.values()))
        added.append(("NCCL_IB_GID_INDEX", str(index)))
        notes.append(f"NCCL_IB_GID_INDEX={index}: the RoCE v2 IPv4-mapped GID on every chosen port")
    else:
        shown = ", ".join(f"{k}: {v}" for k, v in indices.items())
        notes.append(f"RoCE v2 IPv4 GID index differs per port ({shown}): NCCL_IB_GID_INDEX left to NCCL "
                     ">= 2.21.5, which picks it per device")
    user = env.get("NCCL_IB_GID_INDEX")
    number = ascii_int(user) if user is not None else None
    if user is not None and number is None:
        notes.append(f"your NCCL_IB_GID_INDEX={user!r} is not a number of ASCII digits; NCCL reads it with "
                     "strtoll and will not use the index you meant")
    elif number is not None:
        wrong = []
        for p in chosen:
            gid = next((g for g in p.gids if g.index == number), None)
            if gid is None or not (gid.ipv4 and gid.roce_v2):
                what = "an empty slot" if gid is None else f"{gid.type or 'an unreadable type'} {gid.gid}"
                wrong.append(f"{p.device}:{p.port} has {what} there")
        if wrong:
            notes.append(f"your NCCL_IB_GID_INDEX={number} is not a RoCE v2 IPv4 GID ({'; '.join(wrong)}); "
                         "NCCL uses it as given")
    return FabricReport(NAME, tuple(added), tuple(notes))
