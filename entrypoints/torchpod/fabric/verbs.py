"""What the verbs fabrics (InfiniBand, RoCE) share: choosing ports, NCCL_IB_HCA, the
socket interface, and the findings for a user's NCCL_IB_HCA that selects none of them."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from . import hca
from .findings import Finding, info, user
from .sysfs import Inventory, Port

SocketProbe = Callable[[], "tuple[str | None, Finding]"]


def active_ports(inv: Inventory, link_layer: str) -> list[Port]:
    return [p for p in inv.ports if p.link_layer == link_layer and p.active]


def common_env(env: Mapping[str, str], chosen: Sequence[Port], socket_if: SocketProbe
               ) -> tuple[list[tuple[str, str]], list[Finding]]:
    """NCCL_IB_HCA for ``chosen`` and NCCL_SOCKET_IFNAME, with their findings; a user's
    NCCL_IB_HCA that selects none of the ports is a finding (it is never changed)."""
    pairs = [(p.device, p.port) for p in chosen]
    out = [("NCCL_IB_HCA", hca.value(pairs))]
    notes = [info("verbs.hca.chosen", f"NCCL_IB_HCA={hca.value(pairs)}: the active ports found (exact names, "
                  "so mlx5_1 does not also match mlx5_10)")]
    given = env.get("NCCL_IB_HCA")
    if given is not None and not any(hca.selects(given, d, p) for d, p in pairs):
        notes.append(user("verbs.user.hca-selects-none", f"your NCCL_IB_HCA={given!r} selects none of the active "
                          f"ports ({', '.join(f'{d}:{p}' for d, p in pairs)}): NCCL will find no IB device and use "
                          "sockets"))
    name, why = socket_if()
    notes.append(why)
    if name is not None:
        out.append(("NCCL_SOCKET_IFNAME", name))
    return out, notes
