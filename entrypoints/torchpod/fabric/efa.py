"""AWS EFA: ``efa_<n>`` / ``rdmap*`` devices (link layer Unknown; NCCL's IB transport skips
them). NCCL reaches EFA only through the aws-ofi-nccl net plugin; no torchpod image carries
one yet, so the plan says so and sets nothing: NCCL_NET naming a plugin that is absent
would fail every job at init, and FI_PROVIDER is never set (aws-ofi-nccl picks efa itself;
aws/aws-ofi-nccl doc/efa-env-var.md lists FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA and
FI_EFA_FORK_SAFE as obsolete)."""

from __future__ import annotations

import re
from typing import Mapping

from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe

NAME = "efa"


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    devices = [d for d in inv.devices if re.fullmatch(r"efa_\d+|rdmap\d+s\d+", d)]
    if not devices:
        return None
    notes = [f"EFA: {', '.join(devices)}; NCCL needs the aws-ofi-nccl plugin for it, which this image "
             "does not carry: without it NCCL uses sockets"]
    provider = env.get("FI_PROVIDER")
    if provider is not None and provider != "efa":
        notes.append(f"your FI_PROVIDER={provider!r} on an EFA node: libfabric will not use EFA")
    return FabricReport(NAME, (), tuple(notes))
