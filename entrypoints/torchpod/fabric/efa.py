"""AWS EFA: ``efa_<n>`` / ``rdmap*`` devices (link layer Unknown; NCCL's IB transport skips
them). NCCL reaches EFA only through the aws-ofi-nccl net plugin, injected by the site
(the EFA installer's /opt/amazon; site.py). Without one the plan sets nothing: NCCL_NET
naming an absent plugin would fail every job at init. FI_PROVIDER is never set
(aws-ofi-nccl picks efa itself; aws/aws-ofi-nccl doc/efa-env-var.md lists FI_PROVIDER,
FI_EFA_USE_DEVICE_RDMA and FI_EFA_FORK_SAFE as obsolete)."""

from __future__ import annotations

import re
from typing import Mapping

from .findings import info, user
from .record import PLUGIN_NET, Fabric
from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe

NAME = "efa"
FI_PROVIDER = "efa"


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    devices = [d for d in inv.devices if re.fullmatch(r"efa_[0-9]+|rdmap[0-9]+s[0-9]+", d)]
    if not devices:
        return None
    notes = [info("efa.found", f"EFA: {', '.join(devices)}; NCCL reaches it only through the aws-ofi-nccl plugin")]
    provider = env.get("FI_PROVIDER")
    if provider is not None and provider != FI_PROVIDER:
        notes.append(user("efa.user.fi-provider", f"your FI_PROVIDER={provider!r} on an EFA node: libfabric will "
                          "not use EFA"))
    return FabricReport(NAME, (), tuple(notes))


# The EFA installer puts libfabric in /opt/amazon/efa and aws-ofi-nccl in /opt/amazon/ofi-nccl
# (aws-efa-installer); binding /opt/amazon whole keeps the two side by side.
FABRIC = Fabric(NAME, detect, verbs_provider="efa", fi_provider=FI_PROVIDER,
                lib_dirs=("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64", "/opt/amazon/efa/lib",
                          "/opt/amazon/efa/lib64"),
                binds=(("/opt/amazon", "/opt/amazon"),),
                plugin_env=(PLUGIN_NET,))
