"""The NVLink domain this node's GPUs belong to, from the driver's fabric state.

On a multi-node NVLink system (GB200 NVL72, GH200 NVL32, ...) every GPU of one NVLink
domain reports the same cluster UUID and clique id once the fabric manager has trained
it: NVML's ``nvmlGpuFabricInfo_t`` (``clusterUuid[16]``, ``status``, ``cliqueId``,
``state``; NVIDIA/go-nvml gen/nvml/nvml.h), which ``nvidia-smi -q`` prints as the GPU's
``Fabric`` section::

    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 2
        ClusterUUID                       : dc6e40c4-d722-4357-9ba6-5291dd461278

A GPU belongs to a domain when State is ``Completed``, Status ``Success`` (NVML: status
"must be checked only if state returns complete") and the cluster UUID is not all zeros:
an HGX H100 board's NVSwitches report Completed with the zero UUID and clique 0 (one node,
no multi-node domain), a GPU without a fabric prints ``N/A`` everywhere. That is the test
NVIDIA's GPU feature discovery applies before it labels a node ``nvidia.com/gpu.clique``
with ``<ClusterUUID>.<CliqueId>`` (NVIDIA/k8s-device-plugin internal/lm/imex.go, and its
go-nvlib IsFabricAttached), and it leaves the label off when the node's GPUs disagree: so
does this module, and the domain's name is that label's value. The clique id alone is no
name: GB200 racks that share nothing often all report 32766.

Rows are split at the first ``" : "``, not at a column: the key column widens in newer
drivers (580.159 prints ``State                                          : In Progress``).
Pure: parses text it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# nvidia-smi's GPU section header: "GPU 00000000:1B:00.0" (domain:bus:device.function)
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", re.ASCII)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)
_CLIQUE = re.compile(r"0|[1-9][0-9]{0,9}", re.ASCII)
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# what a domain-less GPU prints (a board with no NVSwitch, or a driver before fabric info)
_NONE = ("", "N/A", "Not Supported")
MAX_GPUS = 64  # an NVML node holds far fewer; more sections than this are not a GPU list


@dataclass(frozen=True)
class GpuFabric:
    """One GPU's Fabric section as nvidia-smi printed it ('' where a row is missing)."""

    bus: str
    state: str = ""
    status: str = ""
    clique: str = ""
    cluster: str = ""

    @property
    def attached(self) -> bool:
        """In a multi-node NVLink domain: trained, healthy, a non-zero cluster UUID."""
        return (self.state == "Completed" and self.status == "Success" and bool(_UUID.fullmatch(self.cluster))
                and self.cluster != ZERO_UUID and bool(_CLIQUE.fullmatch(self.clique)))

    @property
    def domain(self) -> str:
        """GPU feature discovery's nvidia.com/gpu.clique value: ClusterUUID.CliqueId."""
        return f"{self.cluster}.{self.clique}"


_ROWS = {"State": "state", "Status": "status", "CliqueId": "clique", "ClusterUUID": "cluster"}


def parse(text: str) -> list[GpuFabric]:
    """Each GPU's Fabric rows from ``nvidia-smi -q`` output, in the order printed."""
    gpus: list[GpuFabric] = []
    fields: dict[str, str] = {}
    bus = None
    fabric_indent: int | None = None
    for line in text.splitlines():
        header = _GPU_HEADER.match(line)
        if header:
            if bus is not None:
                gpus.append(GpuFabric(bus, **fields))
            if len(gpus) >= MAX_GPUS:
                return gpus
            bus, fields, fabric_indent = header.group(1), {}, None
            continue
        if bus is None or not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if line.strip() == "Fabric":
            fabric_indent = indent
            continue
        if fabric_indent is None:
            continue
        if indent <= fabric_indent:
            fabric_indent = None  # the next section of the GPU
            continue
        key, sep, value = line.strip().partition(" : ")
        name = _ROWS.get(key.strip())
        if sep and name and name not in fields:
            fields[name] = value.strip()
    if bus is not None:
        gpus.append(GpuFabric(bus, **fields))
    return gpus


def domain(gpus: list[GpuFabric]) -> tuple[str | None, tuple[str, ...]]:
    """The node's NVLink domain (``ClusterUUID.CliqueId``) when every GPU is attached to the
    same one; else None, with a note when the GPUs say something is wrong (a fabric still
    training or failed, GPUs of one node in two domains)."""
    if not gpus:
        return None, ()
    if all(g.state in _NONE for g in gpus):
        return None, ()  # no fabric on this board: nothing to say
    attached = [g for g in gpus if g.attached]
    if not attached:
        if all(g.state == "Completed" and g.cluster == ZERO_UUID for g in gpus):
            return None, ()  # one node's NVSwitches (HGX): no multi-node domain
        first = next(g for g in gpus if g.state not in _NONE)
        return None, (f"NVLink fabric of GPU {first.bus} is State {first.state!r} Status {first.status!r}: "
                      "no NVLink domain orders the ranks (nvidia-smi -q, Fabric)",)
    if len(attached) != len(gpus):
        odd = next(g for g in gpus if not g.attached)
        return None, (f"GPU {odd.bus} is not in the NVLink domain of GPU {attached[0].bus} "
                      f"(State {odd.state!r} Status {odd.status!r}): no NVLink domain orders the ranks",)
    names = sorted({g.domain for g in attached})
    if len(names) > 1:
        return None, (f"this node's GPUs report {len(names)} NVLink domains ({', '.join(names[:3])}): "
                      "none orders the ranks",)
    return names[0], ()


__all__ = ["GpuFabric", "ZERO_UUID", "domain", "parse"]
