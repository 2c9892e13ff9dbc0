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
from .findings import Finding, Severity, info, ok, user
from .record import Fabric
from .report import FabricReport
from .sysfs import Inventory, Port
from .verbs import SocketProbe, active_ports, common_env

NAME = "roce"


def _first_v2_ipv4(port: Port) -> int | None:
    return next((g.index for g in port.gids if g.ipv4 and g.roce_v2), None)


def _skipped(p: Port) -> Finding:
    if any(g.type is None for g in p.gids):
        return Finding("roce.gid.port-unreadable", Severity.WARN,
                       f"{p.device}:{p.port} skipped: no RoCE v2 IPv4 GID (some GID types unreadable: not mapped "
                       "into this container's sysfs?)", "map the host's sysfs GID attributes into the container")
    return ok("roce.gid.port-skipped", f"{p.device}:{p.port} skipped: no RoCE v2 IPv4 GID")


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    ethernet = active_ports(inv, "Ethernet")
    if not ethernet:
        return None
    chosen = [p for p in ethernet if _first_v2_ipv4(p) is not None]
    notes = [info("roce.found", f"RoCE: {len(chosen)} active ports with a RoCE v2 IPv4 GID")]
    notes += [_skipped(p) for p in ethernet if _first_v2_ipv4(p) is None]
    if not chosen:
        ipv6 = _ipv6_only(env, ethernet, socket_if)
        if ipv6 is not None:
            return FabricReport(NAME, ipv6.env, (*notes, *ipv6.findings))
        notes.append(ok("roce.gid.none", "no RoCE v2 IPv4 GID on any port: NCCL settings left to NCCL"))
        return FabricReport(NAME, (), tuple(notes))
    added, more = common_env(env, chosen, socket_if)
    notes += more
    indices = {f"{p.device}:{p.port}": _first_v2_ipv4(p) for p in chosen}
    if len(set(indices.values())) == 1:
        index = next(iter(indices.values()))
        added.append(("NCCL_IB_GID_INDEX", str(index)))
        notes.append(ok("roce.gid.chosen", f"NCCL_IB_GID_INDEX={index}: the RoCE v2 IPv4-mapped GID on every "
                        "chosen port"))
    else:
        shown = ", ".join(f"{k}: {v}" for k, v in indices.items())
        notes.append(Finding("roce.gid.differs", Severity.WARN, f"RoCE v2 IPv4 GID index differs per port ({shown}): "
                             "NCCL_IB_GID_INDEX left to NCCL >= 2.21.5, which picks it per device",
                             "use NCCL >= 2.21.5, or give every port its RoCE v2 IPv4 GID at the same index"))
    notes += _user_gid_index(env, chosen)
    return FabricReport(NAME, tuple(added), tuple(notes))


def _first_v2_ipv6(port: Port) -> int | None:
    return next((g.index for g in port.gids if g.ipv6_global and g.roce_v2), None)


def _ipv6_only(env: Mapping[str, str], ethernet: list[Port], socket_if: SocketProbe) -> FabricReport | None:
    """No RoCE v2 IPv4 GID and a node whose traffic is IPv6 only (its socket interface is the
    IPv6 default route's): the RoCE v2 IPv6 GIDs, with NCCL_IB_ADDR_FAMILY=AF_INET6, which
    NCCL's own GID choice needs to pick them (v2.30.7-1 src/transport/net_ib/connect.cc)."""
    _, why = socket_if()
    chosen = [p for p in ethernet if _first_v2_ipv6(p) is not None]
    if why.code != "socket.ifname.route6" or not chosen:
        return None
    added, notes = common_env(env, chosen, socket_if)
    added.append(("NCCL_IB_ADDR_FAMILY", "AF_INET6"))
    indices = {_first_v2_ipv6(p) for p in chosen}
    text = "NCCL_IB_ADDR_FAMILY=AF_INET6: the node routes IPv6 only and its ports have RoCE v2 IPv6 GIDs"
    if len(indices) == 1:
        index = indices.pop()
        added.append(("NCCL_IB_GID_INDEX", str(index)))
        text += f"; NCCL_IB_GID_INDEX={index}, the RoCE v2 IPv6 GID on every chosen port"
    else:
        text += "; the GID index differs per port: left to NCCL, which picks it per device"
    return FabricReport(NAME, tuple(added), (*notes, ok("roce.gid.chosen-ipv6", text)))


def _user_gid_index(env: Mapping[str, str], chosen: list[Port]) -> list[Finding]:
    given = env.get("NCCL_IB_GID_INDEX")
    if given is None:
        return []
    number = ascii_int(given)
    if number is None:
        return [user("roce.user.gid-index-not-digits", f"your NCCL_IB_GID_INDEX={given!r} is not a number of ASCII "
                     "digits; NCCL reads it with strtoll and will not use the index you meant")]
    wrong = []
    for p in chosen:
        gid = next((g for g in p.gids if g.index == number), None)
        if gid is None or not (gid.ipv4 and gid.roce_v2):
            what = "an empty slot" if gid is None else f"{gid.type or 'an unreadable type'} {gid.gid}"
            wrong.append(f"{p.device}:{p.port} has {what} there")
    if not wrong:
        return []
    return [user("roce.user.gid-index-not-v2", f"your NCCL_IB_GID_INDEX={number} is not a RoCE v2 IPv4 GID "
                 f"({'; '.join(wrong)}); NCCL uses it as given")]


FABRIC = Fabric(NAME, detect, verbs_provider="mlx5")
