"""AWS EFA: ``efa_<n>`` / ``rdmap*`` devices (link layer Unknown; NCCL's IB transport skips
them). NCCL reaches EFA only through the aws-ofi-nccl net plugin, injected by the site
(the EFA installer's /opt/amazon; site.py). Without one the plan sets nothing: NCCL_NET
naming an absent plugin would fail every job at init. FI_PROVIDER is never set
(aws-ofi-nccl picks efa itself; aws/aws-ofi-nccl doc/efa-env-var.md lists FI_PROVIDER,
FI_EFA_USE_DEVICE_RDMA and FI_EFA_FORK_SAFE as obsolete)."""

from __future__ import annotations

import re
from typing import Mapping

from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe

NAME = "efa"


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    devices = [d for d in inv.devices if re.fullmatch(r"efa_[0-9]+|rdmap[0-9]+s[0-9]+", d)]
    if not devices:
        return None
    notes = [f"EFA: {', '.join(devices)}; NCCL reaches it only through the aws-ofi-nccl plugin"]
    provider = env.get("FI_PROVIDER")
    if provider is not None and provider != "efa":
        notes.append(f"your FI_PROVIDER={provider!r} on an EFA node: libfabric will not use EFA")
    return FabricReport(NAME, (), tuple(notes))
