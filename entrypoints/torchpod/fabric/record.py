"""One record per fabric: what the launcher, the doctor and the manifests need to know
about it, written once (torchpod.fabric.registry holds the ordered FABRICS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from .report import FabricReport
from .sysfs import Inventory
from .verbs import SocketProbe

Detector = Callable[[Mapping[str, str], Inventory, SocketProbe], Optional[FabricReport]]


@dataclass(frozen=True)
class Setting:
    """A variable the launcher sets for a fabric, with the upstream document it comes from."""

    var: str
    value: str
    source: str


# Every aws-ofi-nccl version answers to this name (<= 1.11 know only it; later ones rename
# themselves to it when NCCL_NET asks). Naming the network makes NCCL fail at init when the
# plugin cannot load, instead of falling back to sockets (NVIDIA/nccl src/plugin/net.cc).
PLUGIN_NET = Setting("NCCL_NET", "AWS Libfabric", "every aws-ofi-nccl version answers to it; NCCL fails at init "
                     "when the plugin is missing instead of falling back to sockets")


@dataclass(frozen=True)
class Fabric:
    name: str  # "roce", "infiniband", "efa", "slingshot": FabricReport.fabric, presets' "fabric"
    detect: Detector
    # the rdma-core verbs provider NCCL's IB transport (or EFA's libfabric) opens
    # (/etc/libibverbs.d/<name>.driver); None: the fabric is not reached through verbs here
    verbs_provider: str | None = None
    # the libfabric provider aws-ofi-nccl uses; set: NCCL reaches the fabric only through
    # the aws-ofi-nccl net plugin (site.py finds it, the doctor loads it)
    fi_provider: str | None = None
    # where the vendor installs the plugin and libfabric, as seen inside the container
    # (globs; torchpod.fabric.site searches them)
    lib_dirs: tuple[str, ...] = ()
    # (host path, container path) a container runtime binds so site.py finds them; a host
    # path of None is the site's own plugin build (`invoke manifests --site-lib`)
    binds: tuple[tuple[str | None, str], ...] = ()
    # set with the plugin, never over the user's value: NCCL_NET first, then the fabric's own
    plugin_env: tuple[Setting, ...] = ()

    @property
    def needs_plugin(self) -> bool:
        return self.fi_provider is not None
