"""HPE Slingshot: ``class/cxi/cxi<n>`` NICs with ``hsn<n>`` netdevs (GH200 systems: CSCS,
NERSC, Isambard-AI). NCCL reaches the cxi provider only through aws-ofi-nccl and the
host's libfabric (HPE libcxi), injected by the site (site.py). The plan sets the socket
interface to the high-speed network (NCCL_SOCKET_IFNAME=hsn, as HPE's ccl_env.sh and the
sites' docs do) so bootstrap traffic crosses Slingshot; with a plugin, the settings below
(SETTINGS) too. FI_PROVIDER is never set (no site sets it; FI_PROVIDER=efa finds no
provider)."""

from __future__ import annotations

from typing import Mapping

from ..contract import SITE_DEPS, SITE_LIB
from .findings import info, user
from .record import PLUGIN_NET, Fabric, Setting
from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe

NAME = "slingshot"
FI_PROVIDER = "cxi"
# What CSCS, NERSC and Isambard-AI set with aws-ofi-nccl on Slingshot (none sets FI_PROVIDER);
# the hpe-slingshot-gh200 preset takes them from here.
SETTINGS_SOURCE = ("eth-cscs/cscs-docs docs/software/communication (nccl_env_vars, 1774e6b7) and "
                   "HewlettPackard/shs-ccl-docs ccl_env.sh (14377487)")
SETTINGS = tuple(Setting(var, value, SETTINGS_SOURCE) for var, value in (
    ("NCCL_NET_GDR_LEVEL", "PHB"), ("NCCL_CROSS_NIC", "1"), ("FI_CXI_DISABLE_HOST_REGISTER", "1"),
    ("FI_MR_CACHE_MONITOR", "userfaultfd"), ("FI_CXI_DEFAULT_CQ_SIZE", "131072")))


def detect(env: Mapping[str, str], inv: Inventory, socket_if: SocketProbe) -> FabricReport | None:
    if not inv.cxi:
        return None
    hsn = [n for n in inv.netdevs if n.startswith("hsn")]
    notes = [info("slingshot.found", f"Slingshot: {', '.join(inv.cxi)}; NCCL reaches it only through the "
                  "aws-ofi-nccl plugin and the host's libfabric with the cxi provider")]
    added = []
    if hsn:
        added.append(("NCCL_SOCKET_IFNAME", "hsn"))
        notes.append(info("slingshot.ifname.hsn", f"NCCL_SOCKET_IFNAME=hsn: the Slingshot interfaces {', '.join(hsn)}"))
    else:
        notes.append(info("slingshot.ifname.none", "no hsn* interface in this network namespace: NCCL_SOCKET_IFNAME "
                          "left to NCCL"))
    provider = env.get("FI_PROVIDER")
    if provider is not None and provider != FI_PROVIDER:
        notes.append(user("slingshot.user.fi-provider", f"your FI_PROVIDER={provider!r} on a Slingshot node finds no "
                          "provider there; the cxi provider is what libfabric needs (sites leave FI_PROVIDER unset)"))
    return FabricReport(NAME, tuple(added), tuple(notes))


# HPE's libfabric and libcxi on the host, and the site's own aws-ofi-nccl build (HPE ships
# none): bound where site.py looks for them.
FABRIC = Fabric(NAME, detect, fi_provider=FI_PROVIDER,
                lib_dirs=("/opt/cray/libfabric/*/lib64", "/opt/cray/libfabric/*/lib"),
                binds=((None, SITE_LIB), ("/opt/cray/libfabric", "/opt/cray/libfabric"),
                       ("/usr/lib64/libcxi.so.1", f"{SITE_DEPS}/libcxi.so.1")),
                plugin_env=(PLUGIN_NET, *SETTINGS))
