"""Which transport NCCL really used between nodes, read from an ``NCCL_DEBUG=INFO`` log.

The lines that say so, as NVIDIA/nccl prints them in 2.18 to 2.29 (tags v2.18.6-1 ...
v2.29.7-1):

- ``Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA`` (src/transport/net.cc:
  ``via NET/%s/%d%s%s``, ``(%d)`` the PXN proxy rank, ``/GDRDMA`` GPUDirect RDMA,
  ``/Shared`` shared buffers, and from 2.26 ``(PCI)`` after ``/GDRDMA`` on C2C systems);
  the network name is ``IB``, ``Socket``, or the plugin's (``AWS Libfabric`` up to
  aws-ofi-nccl 1.12, ``Libfabric`` after; ``IBext``, ``IBext_v6``, ``IBext_v8`` for NVIDIA's
  nccl-rdma-sharp-plugins, the ``libnccl-net.so`` HPC-X and NGC images ship, which drives
  the same verbs devices as NCCL's own IB transport);
- ``Using network IB|Socket|AWS Libfabric|Libfabric|IBext_v8`` (src/init.cc), and from 2.27
  ``Assigned NET plugin %s to comm``;
- ``NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB ...`` or ``NET/IB : No device found.``;
- ``NET/Socket : Using [0]eth0:10.0.0.1<0>``;
- the plugin lines (``NET/Plugin ...``) and aws-ofi-nccl's ``NET/OFI Selected provider is ...``;
- ``comm 0x... rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0`` (src/init.cc,
  ``initTransportsRank``): how many nodes each communicator spans. When every one spans a
  single node, the network NCCL chose carried nothing, and a ``Socket`` there is no fallback.

Older NCCLs, as the public logs in tests/unit/fixtures/nccl_logs_real.yaml print them (each
cited there; the versions are those the logs show, not the exact release of each change):
2.7.6 has no ``/<n>`` after the channel number (``Channel 01 : 2[c7000] -> 0[87000] [receive]
via NET/IB/5/GDRDMA``), 2.5 says ``Ring 00 : 15[41000] -> 0[1b000] ...`` and 2.4 ``Ring 00 :
1 -> 0 [receive] via NET/Socket/0`` (no bracket); in older logs the bracket holds a hex bus
id (``6[4f000]``); 2.5 and older print no ``Using network`` line (2.3 says ``Using internal
Network IB``), and up to 2.19 ``NCCL version`` is printed bare, without the ``NCCL INFO`` tag.

Launchers put their own prefix before NCCL's (mpirun's ``[1,7]<stdout>:``, pdsh's ``host: ``,
torchrun's ``[rank0]:``, srun -l's ``0: ``, Ray's ``(RayTrainWorker pid=...)``, CloudWatch's
``| time |``) and interleave the ranks' lines: every pattern is searched anywhere in a line,
and every line stands alone.

Evidence, strongest first: channel lines (the path each channel took), then the ``Using
network`` line (the network NCCL chose), then the device lines (which network NCCL's init
found: a plugin that selected a provider, IB devices, or no IB device and sockets), said in
a note. Pure: takes the text, returns the verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable

TRANSPORTS = ("ib-gdrdma", "ib", "libfabric", "socket", "unknown")
# Work per line is linear in its length and the length is capped: no pattern below can
# backtrack across a line (a lazy group before an optional suffix and ``\s*$`` was
# quadratic: 93 s on a 200 KB line). NCCL's lines are a few hundred characters.
LINE_CAP = 16 * 1024

_NCCL_LINE = re.compile(r"NCCL (INFO|WARN)")
_VERSION = re.compile(r"NCCL version ([0-9]+\.[0-9]+\.[0-9]+)")
_RANK = r"[0-9]+(?:\[[0-9a-fA-F]+\])?"  # 0 (2.4), 0[0], or 6[4f000] (a hex bus id, older)
_CHANNEL = re.compile(rf"(?:Channel|Ring) [0-9]+(?:/[0-9]+)? : {_RANK} -> {_RANK} \[(send|receive)\] "
                      r"via NET/([^/]+)/[0-9]+(\([0-9]+\))?(/GDRDMA)?")
# case matters: 2.3 says "Using internal Network IB", 2.21 "NET/Plugin: Using internal network plugin."
_USING = re.compile(r"(?:Using network|Using internal Network|Assigned NET plugin) (.*)")
_DEVICES = re.compile(r"NET/(IB|Socket) ?: (Using .*|No device found\.?)")
_OFI_SELECTED = re.compile(r"NET/OFI Selected [Pp]rovider is")
_PLUGIN = re.compile(r"NET/Plugin ?: ?(.*)|NET/OFI (Selected [Pp]rovider is .*|Initializing .*)|"
                     r"Successfully loaded external (?:network )?plugin .*|P2P plugin (.*)")
_COMM = re.compile(r"comm (?:0x)?[0-9a-fA-F]+ rank [0-9]+ nRanks [0-9]+ nNodes ([0-9]{1,9}) ")
_IB = re.compile(r"IB(?:ext(?:_v[0-9]+)?)?")  # NCCL's own, or the SHARP plugin's by version
# the weakest path decides: one channel over sockets is a socket job
_ORDER = {"socket": 0, "unknown": 1, "libfabric": 2, "ib": 3, "ib-gdrdma": 4}


@dataclass(frozen=True)
class Verdict:
    transport: str  # one of TRANSPORTS
    gdrdma: bool
    evidence: tuple[str, ...]  # the log lines that prove it, as written
    nccl_version: str | None = None
    notes: tuple[str, ...] = field(default=())
    network: str | None = None  # the network's name as the log gives it: IB, IBext_v8, AWS Libfabric, ...
    nodes: int | None = None  # the most nodes a communicator in the log spans (None: no such line)


def _kind(network: str, gdr: bool) -> str:
    name = network.strip()
    if _IB.fullmatch(name):
        return "ib-gdrdma" if gdr else "ib"
    if name == "Socket":
        return "socket"
    if "Libfabric" in name or name == "OFI":
        return "libfabric"
    return "unknown"


def _network_note(network: str | None) -> list[str]:
    """What a network name other than NCCL's own says: which plugin carried the traffic."""
    name = (network or "").strip()
    if name.startswith("IBext"):
        return [f"through the external net plugin {name} (NVIDIA's nccl-rdma-sharp-plugins, as HPC-X "
                "and NGC images ship it): InfiniBand/RoCE verbs, as NCCL's own IB transport"]
    if name and _kind(name, False) == "unknown":
        return [f"NCCL used the network {name!r}, a net plugin this doctor does not classify"]
    return []


def _network(line: str) -> str | None:
    """The network a ``Using network X`` / ``Assigned NET plugin X to comm`` line names."""
    m = _USING.search(line)
    if m is None:
        return None
    name = m.group(1).split(" [", 1)[0].rstrip()  # Ray appends " [repeated 15x across cluster]"
    name = name[: -len(" to comm")] if name.endswith(" to comm") else name
    return name or None


@dataclass
class _Seen:
    """What the verdict needs, kept as the lines stream by: bounded, whatever the log's size."""

    any_line: bool = False
    version: str | None = None
    channels: dict = field(default_factory=dict)  # kind -> (first line, every one GDRDMA, network)
    using_first: str | None = None
    using_last: tuple[str, str] | None = None  # (line, network)
    devices: list = field(default_factory=list)  # the first one
    plugin: list = field(default_factory=list)  # the first two
    found: dict = field(default_factory=dict)  # "ofi" | "ib" | "no-ib" | "socket" -> its first line
    nodes: int | None = None

    def add(self, line: str) -> None:
        if self.version is None and "NCCL version" in line and (m := _VERSION.search(line)):
            self.version = m.group(1)  # 2.19 and older print it bare, without "NCCL INFO"
            self.any_line = True
        if not _NCCL_LINE.search(line):
            return
        self.any_line = True
        if ("Channel" in line or "Ring" in line) and (m := _CHANNEL.search(line)):
            gdr = bool(m.group(4))
            kind = _kind(m.group(2), gdr)
            first, all_gdr, network = self.channels.get(kind, (line, True, m.group(2)))
            self.channels[kind] = (first, all_gdr and gdr, network)
        network = _network(line) if ("Using" in line or "Assigned NET" in line) else None
        if network is not None:
            self.using_first = self.using_first or line
            self.using_last = (line, network)
        if "NET/" in line and (d := _DEVICES.search(line)):
            self.devices[:] = self.devices or [line]
            found = "no-ib" if d.group(2).startswith("No") else d.group(1).lower()
            self.found.setdefault(found, line)
        if "NCCL_IB_DISABLE set by environment to 1" in line or "Failed to open libibverbs" in line:
            self.found.setdefault("no-ib", line)
        if "NET/OFI" in line and _OFI_SELECTED.search(line):
            self.found.setdefault("ofi", line)
        if "nNodes" in line and (c := _COMM.search(line)):
            self.nodes = max(self.nodes or 0, int(c.group(1)))
        if len(self.plugin) < 2 and _PLUGIN.search(line):
            self.plugin.append(line)


def _inferred(seen: _Seen, notes: list[str]) -> Verdict:
    """No channel and no ``Using network`` line: the network NCCL's init found, if the log says.
    NCCL tries its nets in order, an external plugin first, then IB, then sockets, and keeps the
    first that initialises with a device (NVIDIA/nccl src/net.cc, ``ncclNets[3] = { nullptr
    (the plugin), &ncclNetIb, ... }``, v2.18/v2.19)."""
    why = ("inferred from the network NCCL's init found (no channel line and no `Using network` line: NCCL 2.5 "
           "and older print none, or the log was cut short): ")
    if "ofi" in seen.found:
        line, kind = seen.found["ofi"], "libfabric"
        why += "aws-ofi-nccl selected a libfabric provider, and NCCL takes a net plugin that initialises first"
    elif "ib" in seen.found:
        line, kind = seen.found["ib"], "ib"
        why += "NCCL's IB transport found devices, and NCCL takes it before sockets"
    elif "no-ib" in seen.found and "socket" in seen.found:
        line, kind = seen.found["socket"], "socket"
        why += "no IB device (or IB disabled), so NCCL's network is sockets"
    else:
        return Verdict("unknown", False, tuple(seen.devices + seen.plugin), seen.version,
                       tuple(notes) + ("no `Using network` and no `via NET/` line: was the log written with "
                                       "NCCL_DEBUG=INFO on a job that spans nodes?",))
    evidence = [line] + [x for x in (seen.found.get("no-ib"),) if x and kind == "socket"]
    return Verdict(kind, False, tuple(evidence), seen.version, tuple(notes + [why]))


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
        first, gdr, network = seen.channels[kind]
        if len(seen.channels) > 1:
            notes.append(f"channels took different paths: {', '.join(sorted(seen.channels))}")
        evidence = [first] + ([seen.using_first] if seen.using_first else []) + seen.devices
        return Verdict(kind, gdr, tuple(evidence), seen.version, tuple(notes + _network_note(network)), network,
                       seen.nodes)
    if seen.using_last:
        line, network = seen.using_last
        if seen.nodes == 1:
            notes.append(f"every communicator in the log spans one node (nNodes 1): NCCL chose the network "
                         f"{network} but sent nothing over it; a job across nodes shows the path between them")
        else:
            notes.append("no inter-node channel line (NCCL_DEBUG_SUBSYS without INIT? one node?): "
                         "the network NCCL chose, not the path each channel took")
        return Verdict(_kind(network, False), False, (line, *seen.devices, *seen.plugin), seen.version,
                       tuple(notes + _network_note(network)), network, seen.nodes)
    return replace(_inferred(seen, notes), nodes=seen.nodes)
