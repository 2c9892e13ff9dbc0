"""What the kernel says about this node's RDMA hardware, read from sysfs under a root.

Layouts (Linux drivers/infiniband/core/sysfs.c and Documentation/ABI/stable/
sysfs-class-infiniband; HPE shs-cxi-driver for Slingshot):

- ``class/infiniband/<dev>/ports/<p>/state``: ``"4: ACTIVE"``;
  ``link_layer``: ``InfiniBand``, ``Ethernet`` (RoCE) or ``Unknown`` (AWS EFA);
  ``gids/<n>``: the full IPv6 form (``0000:...:ffff:0a00:0001`` is an IPv4-mapped GID, all
  zeros an empty slot); ``gid_attrs/types/<n>``: ``RoCE v2`` or ``IB/RoCE v1``, unreadable
  (EINVAL) for slots not mapped into a container's sysfs; ``gid_attrs/ndevs/<n>``: the
  netdev the GID belongs to.
- EFA devices are ``efa_<n>``, or ``rdmap<bus>s<slot>`` after rdma-core's udev rename.
- Slingshot NICs are ``class/cxi/cxi<n>``; their netdevs are ``hsn<n>`` in ``class/net``.

Pure: reads files under the given root only, through torchpod.readers. A missing or
unreadable file is a fact about the node, reported as None / absent; a file that is not
a regular one (a FIFO, /dev/zero behind a link), over the cap, or not the kernel's ASCII
is one error naming it. Directories are followed through links (device links are how
sysfs is built); every attribute's final target must be a regular file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import readers
from ..contract import ENV_SYSFS_ROOT
from ..errors import InputError

IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"
EMPTY_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str | None  # "RoCE v2", "IB/RoCE v1", or None when gid_attrs/types is unreadable
    ndev: str | None

    @property
    def ipv4(self) -> bool:
        return self.gid.startswith(IPV4_MAPPED)

    @property
    def roce_v2(self) -> bool:
        return self.type == "RoCE v2"

    @property
    def ipv6_global(self) -> bool:
        """An IPv6 GID NCCL can route with AF_INET6: neither IPv4-mapped, link-local (fe80::/64)
        nor zero (NVIDIA/nccl v2.30.7-1 src/transport/net_ib/connect.cc)."""
        return not self.ipv4 and not self.gid.startswith("fe80:0000:0000:0000:") and self.gid.strip("0:") != ""


@dataclass(frozen=True)
class Port:
    device: str
    port: int
    state: str  # "4: ACTIVE"
    link_layer: str  # "InfiniBand", "Ethernet", "Unknown"
    gids: tuple[Gid, ...]

    @property
    def active(self) -> bool:
        return self.state.split(":")[-1].strip() == "ACTIVE"


@dataclass(frozen=True)
class Inventory:
    root: Path
    ports: tuple[Port, ...]
    cxi: tuple[str, ...]  # Slingshot NICs
    netdevs: tuple[str, ...]
    ignored: tuple[str, ...] = ()  # entries whose names are not device names (NAME_RE), by path

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.device for p in self.ports))


# What the launcher accepts as an RDMA device or netdev name: it goes into NCCL_IB_HCA
# (',' ':' '^' '=' are its syntax), NCCL_SOCKET_IFNAME and the plan's notes. Linux allows
# more in a netdev name (any byte but '/', ':', whitespace); such entries are listed as
# ignored, never used.
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,63}", re.ASCII)
_INDEX_RE = re.compile(r"[0-9]{1,9}", re.ASCII)  # ports and GID slots: ASCII digits, never '²'
_GID_RE = re.compile(r"[0-9a-f]{4}(?::[0-9a-f]{4}){7}", re.ASCII)
_ATTR_EXPECTED = f"a kernel attribute file under sysfs ({ENV_SYSFS_ROOT.name} / --sysfs-root)"


def _read(path: Path) -> str | None:
    """An attribute's text, stripped; None when absent or unreadable (EINVAL for a GID slot
    not mapped into this namespace). Not a regular file, over the cap, not UTF-8, or not
    printable ASCII (the kernel writes nothing else here): one error naming the file."""
    what = f"sysfs file {str(path)!r}"
    try:
        text = readers.read_text(path, what=what, expected=_ATTR_EXPECTED, cap=readers.ATTR_CAP).strip()
    except readers.Unreadable:
        return None
    if not (text.isascii() and text.isprintable()):
        raise InputError(f"{what} holds {ascii(text[:80])}; expected {_ATTR_EXPECTED}: one line of printable ASCII")
    return text


def _numbered(folder: Path) -> list[Path]:
    try:
        entries = [p for p in folder.iterdir() if _INDEX_RE.fullmatch(p.name)]
    except OSError:
        return []
    return sorted(entries, key=lambda p: int(p.name))


def _natural(name: str) -> list:
    """mlx5_2 before mlx5_10, as people and `ibv_devices` list them."""
    return [int(part) if part.isascii() and part.isdigit() else part for part in re.split(r"([0-9]+)", name)]


def _names(folder: Path, pattern: str = r".+", ignored: list[str] | None = None) -> tuple[str, ...]:
    """Entries of ``folder`` matching ``pattern`` (and NAME_RE); the others that are not
    names at all go to ``ignored``."""
    try:
        found = [p.name for p in folder.iterdir()]
    except OSError:
        return ()
    good = [n for n in found if NAME_RE.fullmatch(n) and re.fullmatch(pattern, n, re.ASCII)]
    if ignored is not None:
        ignored += [str(folder / n) for n in found if not NAME_RE.fullmatch(n)]
    return tuple(sorted(good, key=_natural))


def read_port(device: Path, port: Path) -> Port:
    gids = []
    for entry in _numbered(port / "gids"):
        gid = _read(entry)
        if not gid or gid == EMPTY_GID:
            continue
        if not _GID_RE.fullmatch(gid.lower()):
            raise InputError(f"sysfs file {str(entry)!r} holds {gid[:80]!r}; expected a GID as the kernel "
                             "writes it: 8 groups of 4 hex digits, e.g. 0000:0000:0000:0000:0000:ffff:0a00:0001")
        gids.append(Gid(int(entry.name), gid.lower(), _read(port / "gid_attrs" / "types" / entry.name),
                        _read(port / "gid_attrs" / "ndevs" / entry.name)))
    return Port(device=device.name, port=int(port.name), state=_read(port / "state") or "",
                link_layer=_read(port / "link_layer") or "Unknown", gids=tuple(gids))


def read(sysfs_root: Path) -> Inventory:
    ports: list[Port] = []
    ignored: list[str] = []
    for name in _names(sysfs_root / "class" / "infiniband", ignored=ignored):
        device = sysfs_root / "class" / "infiniband" / name
        ports += [read_port(device, p) for p in _numbered(device / "ports")]
    return Inventory(root=sysfs_root, ports=tuple(ports),
                     cxi=_names(sysfs_root / "class" / "cxi", r"cxi[0-9]+", ignored),
                     netdevs=_names(sysfs_root / "class" / "net", ignored=ignored), ignored=tuple(ignored))


def default_route_interface(proc_root: Path) -> str | None:
    """The interface of the IPv4 default route (``/proc/net/route``: destination 00000000)."""
    path = proc_root / "net" / "route"
    try:
        text = readers.read_text(path, what=f"routing table {str(path)!r}", cap=readers.TABLE_CAP,
                                 expected="the kernel's IPv4 routing table (/proc/net/route)")
    except readers.Unreadable:
        return None
    for line in text.split("\n")[1:]:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return None


RTF_UP, RTF_REJECT = 0x0001, 0x0200  # linux/route.h: the unreachable ::/0 on lo is REJECT


def default_route6_interface(proc_root: Path) -> str | None:
    """The interface of the IPv6 default route (``/proc/net/ipv6_route``: ::/0, up, not a reject)."""
    path = proc_root / "net" / "ipv6_route"
    try:
        text = readers.read_text(path, what=f"routing table {str(path)!r}", cap=readers.TABLE_CAP,
                                 expected="the kernel's IPv6 routing table (/proc/net/ipv6_route)")
    except readers.Unreadable:
        return None
    for line in text.split("\n"):
        fields = line.split()
        if len(fields) == 10 and fields[0] == "0" * 32 and fields[1] == "00":
            try:
                flags = int(fields[8], 16)
            except ValueError:
                continue
            if flags & RTF_UP and not flags & RTF_REJECT:
                return fields[9]
    return None
