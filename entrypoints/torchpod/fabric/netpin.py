"""Loud, not silent: pin NCCL_NET=IB when torchpod chose the HCAs and no plugin is in play.

NCCL tries every network it knows in order (an external plugin, then its internal "IB",
then "Socket") and takes the first that initialises; with NCCL_NET set it skips every
network whose name differs (strcasecmp), and fails with "Failed to initialize any NET
plugin" when none matches (NVIDIA/nccl v2.30.7-1 src/plugin/net.cc ncclNetInit; the
value reaches comm->config.netName in src/init.cc). So a job whose HCAs are unusable (no
/dev/infiniband in the container, memlock, a wrong GID) fails at init with NCCL's reason
instead of running on sockets at a tenth of the speed.

Never pinned: when the user set NCCL_NET (the resolver keeps theirs), when a net plugin is
in play (NCCL_NET_PLUGIN names one, or the fabric needs one: EFA, Slingshot name their own
network), or when TORCHPOD_NCCL_NET_PIN=0 (the way to allow the fallback to sockets).
"""

from __future__ import annotations

from typing import Mapping

from ..contract import ENV_NET_PIN, switch
from .findings import info
from .registry import FABRICS
from .report import FabricReport

# The fabrics NCCL reaches through its internal verbs network: every one that needs no plugin.
VERBS_FABRICS = tuple(f.name for f in FABRICS if not f.needs_plugin)
IB_NET = "IB"  # the name of NCCL's internal verbs network (src/transport/net_ib: ncclNetIb.name)
SOCKET_NET = "Socket"  # the internal sockets network (src/transport/net_socket.cc)


def pin_wanted(env: Mapping[str, str]) -> bool:
    """TORCHPOD_NCCL_NET_PIN: "1" (default; unset or blank) pins, "0" does not; anything else is
    bad input (contract.switch)."""
    return switch(env, ENV_NET_PIN)


def with_net_pin(env: Mapping[str, str], report: FabricReport) -> FabricReport:
    """``report`` with NCCL_NET=IB and its note, when the rule in the module docstring says so."""
    merged = dict(report.env)
    if report.fabric not in VERBS_FABRICS or "NCCL_IB_HCA" not in merged or "NCCL_NET" in merged:
        return report
    wanted = pin_wanted(env)
    plugin = env.get("NCCL_NET_PLUGIN", "none").strip().lower() not in ("none", "")
    if "NCCL_NET" in env or plugin or not wanted:
        why = ("your NCCL_NET wins" if "NCCL_NET" in env else "NCCL_NET_PLUGIN names a plugin" if plugin
               else f"{ENV_NET_PIN.name}=0")
        note = info("netpin.net.not-pinned", f"NCCL_NET not pinned ({why}): NCCL may fall back to sockets")
        return FabricReport(report.fabric, report.env, (*report.findings, note))
    merged["NCCL_NET"] = IB_NET
    note = info("netpin.net.pinned", f"NCCL_NET={IB_NET}: a job that cannot use RDMA fails at init with NCCL's "
                f"reason instead of running on sockets; to allow sockets set NCCL_NET={SOCKET_NET} (sockets only) "
                f"or {ENV_NET_PIN.name}=0 (NCCL falls back)")
    return FabricReport(report.fabric, tuple(merged.items()), (*report.findings, note))
