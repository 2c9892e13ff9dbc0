"""Which transport NCCL really used between nodes, read from an ``NCCL_DEBUG=INFO`` log.

The lines that say so, as NVIDIA/nccl prints them in 2.18 to 2.29 (tags v2.18.6-1 ...
v2.29.7-1):

- ``Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA`` (src/transport/net.cc:
  ``via NET/%s/%d%s%s``, ``(%d)`` the PXN proxy rank, ``/GDRDMA`` GPUDirect RDMA,
  ``/Shared`` shared buffers, and from 2.26 ``(PCI)`` after ``/GDRDMA`` on C2C systems);
  the network name is ``IB``, ``Socket``, or the plugin's (``AWS Libfabric`` up to
  aws-ofi-nccl 1.12, ``Libfabric`` after);
- ``Using network IB|Socket|AWS Libfabric|Libfabric`` (src/init.cc), and from 2.27
  ``Assigned NET plugin %s to comm``;
- ``NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB ...`` or ``NET/IB : No device found.``;
- ``NET/Socket : Using [0]eth0:10.0.0.1<0>``;
- the plugin lines (``NET/Plugin ...``) and aws-ofi-nccl's ``NET/OFI Selected provider is ...``.

Channel lines are the strongest evidence (they name the path each channel took); the
``Using network`` line is the next. Pure: takes the text, returns the verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TRANSPORTS = ("ib-gdrdma", "ib", "libfabric", "socket", "unknown")

_NCCL_LINE = re.compile(r"NCCL (INFO|WARN)")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_CHANNEL = re.compile(r"Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\] \[(send|receive)\] via NET/([^/]+)/\d+(\(\d+\))?(/GDRDMA)?")
_USING = re.compile(r"(?:Using network|Assigned NET plugin) (.+?)(?: to comm)?\s*$")
_DEVICES = re.compile(r"NET/(IB|Socket) : (Using .*|No device found\.?)")
_PLUGIN = re.compile(r"NET/Plugin ?: ?(.*)|NET/OFI (Selected [Pp]rovider is .*|Initializing .*)|"
                     r"Successfully loaded external (?:network )?plugin .*")


@dataclass(frozen=True)
class Verdict:
    transport: str  # one of TRANSPORTS
    gdrdma: bool
    evidence: tuple[str, ...]  # the log lines that prove it, as written
    nccl_version: str | None = None
    notes: tuple[str, ...] = field(default=())


def _kind(network: str, gdr: bool) -> str:
    name = network.strip()
    if name == "IB":
        return "ib-gdrdma" if gdr else "ib"
    if name == "Socket":
        return "socket"
    if "Libfabric" in name or name == "OFI":
        return "libfabric"
    return "unknown"


def analyze(text: str) -> Verdict | None:
    """The verdict for a log, or None when it holds no NCCL line at all."""
    lines = [ln.rstrip() for ln in text.splitlines() if _NCCL_LINE.search(ln)]
    if not lines:
        return None
    version = next((m.group(1) for ln in lines if (m := _VERSION.search(ln))), None)
    channels = [(ln, m) for ln in lines if (m := _CHANNEL.search(ln))]
    using = [(ln, m) for ln in lines if (m := _USING.search(ln))]
    devices = [ln for ln in lines if _DEVICES.search(ln)]
    plugin = [ln for ln in lines if _PLUGIN.search(ln)]
    notes = []
    if channels:
        kinds = {(_kind(m.group(2), bool(m.group(4))), bool(m.group(4))) for _, m in channels}
        # the weakest path decides: one channel over sockets is a socket job
        order = {"socket": 0, "unknown": 1, "libfabric": 2, "ib": 3, "ib-gdrdma": 4}
        kind, gdr = min(kinds, key=lambda k: order[k[0]])
        if len({k for k, _ in kinds}) > 1:
            notes.append(f"channels took different paths: {', '.join(sorted({k for k, _ in kinds}))}")
        first = next(ln for ln, m in channels if _kind(m.group(2), bool(m.group(4))) == kind)
        evidence = [first] + [ln for ln, _ in using[:1]] + devices[:1]
        return Verdict(kind, gdr, tuple(evidence), version, tuple(notes))
    if using:
        line, m = using[-1]
        kind = _kind(m.group(1), False)
        notes.append("no inter-node channel line (NCCL_DEBUG_SUBSYS without INIT? one node?): "
                     "the network NCCL chose, not the path each channel took")
        return Verdict(kind, False, (line, *devices[:1], *plugin[:2]), version, tuple(notes))
    return Verdict("unknown", False, tuple(devices[:1] + plugin[:2]), version,
                   ("no `Using network` and no `via NET/` line: was the log written with NCCL_DEBUG=INFO "
                    "on a job that spans nodes?",))
