"""HPE Slingshot: ``class/cxi/cxi<n>`` NICs with ``hsn<n>`` netdevs (GH200 systems: CSCS,
NERSC, Isambard-AI). NCCL reaches the cxi provider only through aws-ofi-nccl and the
host's libfabric (HPE libcxi), which no torchpod image carries yet: the plan sets the
socket interface to the high-speed network (NCCL_SOCKET_IFNAME=hsn, as HPE's ccl_env.sh
and the sites' docs do) so sockets at least cross Slingshot, and says the plugin is
missing. FI_PROVIDER is never set (no site sets it; FI_PROVIDER=efa finds no provider)."""

from __future__ import annotations

from typing import Mapping

from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe

NAME = "slingshot"


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    if not inv.cxi:
        return None
    hsn = [n for n in inv.netdevs if n.startswith("hsn")]
    notes = [f"Slingshot: {', '.join(inv.cxi)}; NCCL needs the aws-ofi-nccl plugin and the host's "
             "libfabric with the cxi provider, which this image does not carry: without them NCCL "
             "uses sockets"]
    added = []
    if hsn:
        added.append(("NCCL_SOCKET_IFNAME", "hsn"))
        notes.append(f"NCCL_SOCKET_IFNAME=hsn: the Slingshot interfaces {', '.join(hsn)}")
    else:
        notes.append("no hsn* interface in this network namespace: NCCL_SOCKET_IFNAME left to NCCL")
    provider = env.get("FI_PROVIDER")
    if provider is not None and provider != "cxi":
        notes.append(f"your FI_PROVIDER={provider!r} on a Slingshot node finds no provider there; "
                     "the cxi provider is what libfabric needs (sites leave FI_PROVIDER unset)")
    return FabricReport(NAME, tuple(added), tuple(notes))
