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
from typing import Iterable

TRANSPORTS = ("ib-gdrdma", "ib", "libfabric", "socket", "unknown")
# Work per line is linear in its length and the length is capped: no pattern below can
# backtrack across a line (a lazy group before an optional suffix and ``\s*$`` was
# quadratic: 93 s on a 200 KB line). NCCL's lines are a few hundred characters.
LINE_CAP = 16 * 1024

_NCCL_LINE = re.compile(r"NCCL (INFO|WARN)")
_VERSION = re.compile(r"NCCL version ([0-9]+\.[0-9]+\.[0-9]+)")
_CHANNEL = re.compile(r"Channel [0-9]+/[0-9]+ : [0-9]+\[[0-9]+\] -> [0-9]+\[[0-9]+\] \[(send|receive)\] "
                      r"via NET/([^/]+)/[0-9]+(\([0-9]+\))?(/GDRDMA)?")
_USING = re.compile(r"(?:Using network|Assigned NET plugin) (.*)")
_DEVICES = re.compile(r"NET/(IB|Socket) : (Using .*|No device found\.?)")
_PLUGIN = re.compile(r"NET/Plugin ?: ?(.*)|NET/OFI (Selected [Pp]rovider is .*|Initializing .*)|"
                     r"Successfully loaded external (?:network )?plugin .*")
# the weakest path decides: one channel over sockets is a socket job
_ORDER = {"socket": 0, "unknown": 1, "libfabric": 2, "ib": 3, "ib-gdrdma": 4}


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


def _network(line: str) -> str | None:
    """The network a ``Using network X`` / ``Assigned NET plugin X to comm`` line names."""
    m = _USING.search(line)
    if m is None:
        return None
    name = m.group(1).rstrip()
    name = name[: -len(" to comm")] if name.endswith(" to comm") else name
    return name or None


@dataclass
class _Seen:
    """What the verdict needs, kept as the lines stream by: bounded, whatever the log's size."""

    any_line: bool = False
    version: str | None = None
    channels: dict = field(default_factory=dict)  # kind -> (first line, every one GDRDMA)
    using_first: str | None = None
    using_last: tuple[str, str] | None = None  # (line, network)
    devices: list = field(default_factory=list)  # the first one
    plugin: list = field(default_factory=list)  # the first two

    def add(self, line: str) -> None:
        if not _NCCL_LINE.search(line):
            return
        self.any_line = True
        if self.version is None and (m := _VERSION.search(line)):
            self.version = m.group(1)
        if "Channel" in line and (m := _CHANNEL.search(line)):
            gdr = bool(m.group(4))
            kind = _kind(m.group(2), gdr)
            first, all_gdr = self.channels.get(kind, (line, True))
            self.channels[kind] = (first, all_gdr and gdr)
        network = _network(line) if ("Using network" in line or "Assigned NET" in line) else None
        if network is not None:
            self.using_first = self.using_first or line
            self.using_last = (line, network)
        if not self.devices and _DEVICES.search(line):
            self.devices.append(line)
        if len(self.plugin) < 2 and _PLUGIN.search(line):
            self.plugin.append(line)


def analyze(log: str | Iterable[str]) -> Verdict | None:
    """The verdict for a log (its text, or its lines streamed, e.g. torchpod.readers.Lines),
    or None when it holds no NCCL line at all. Lines a reader cut at its cap (its
    ``truncated`` count) are said in a note."""
    seen = _Seen()
    cut = 0
    for raw in log.splitlines() if isinstance(log, str) else log:
        cut += len(raw) > LINE_CAP
        seen.add(raw[:LINE_CAP].rstrip())
    truncated = cut + getattr(log, "truncated", 0)
    if not seen.any_line:
        return None
    notes = [f"{truncated} over-long lines were read up to their first {LINE_CAP} bytes only"] if truncated else []
    if seen.channels:
        kind = min(seen.channels, key=_ORDER.__getitem__)
        first, gdr = seen.channels[kind]
        if len(seen.channels) > 1:
            notes.append(f"channels took different paths: {', '.join(sorted(seen.channels))}")
        evidence = [first] + ([seen.using_first] if seen.using_first else []) + seen.devices
        return Verdict(kind, gdr, tuple(evidence), seen.version, tuple(notes))
    if seen.using_last:
        line, network = seen.using_last
        notes.append("no inter-node channel line (NCCL_DEBUG_SUBSYS without INIT? one node?): "
                     "the network NCCL chose, not the path each channel took")
        return Verdict(_kind(network, False), False, (line, *seen.devices, *seen.plugin), seen.version, tuple(notes))
    return Verdict("unknown", False, tuple(seen.devices + seen.plugin), seen.version,
                   tuple(notes) + ("no `Using network` and no `via NET/` line: was the log written with "
                                   "NCCL_DEBUG=INFO on a job that spans nodes?",))
