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

Pure: reads files under the given root only, never raises for a missing or unreadable
file (that is a fact about the node, reported as None / absent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.device for p in self.ports))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):  # absent, or EINVAL for a slot not in this namespace
        return None


def _numbered(folder: Path) -> list[Path]:
    try:
        entries = [p for p in folder.iterdir() if p.name.isdigit()]
    except OSError:
        return []
    return sorted(entries, key=lambda p: int(p.name))


def _natural(name: str) -> list:
    """mlx5_2 before mlx5_10, as people and `ibv_devices` list them."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _names(folder: Path, pattern: str = r".+") -> tuple[str, ...]:
    try:
        return tuple(sorted((p.name for p in folder.iterdir() if re.fullmatch(pattern, p.name)), key=_natural))
    except OSError:
        return ()


def read_port(device: Path, port: Path) -> Port:
    gids = []
    for entry in _numbered(port / "gids"):
        gid = _read(entry)
        if not gid or gid == EMPTY_GID:
            continue
        gids.append(Gid(int(entry.name), gid.lower(), _read(port / "gid_attrs" / "types" / entry.name),
                        _read(port / "gid_attrs" / "ndevs" / entry.name)))
    return Port(device=device.name, port=int(port.name), state=_read(port / "state") or "",
                link_layer=_read(port / "link_layer") or "Unknown", gids=tuple(gids))


def read(sysfs_root: Path) -> Inventory:
    ports = []
    for name in _names(sysfs_root / "class" / "infiniband"):
        device = sysfs_root / "class" / "infiniband" / name
        ports += [read_port(device, p) for p in _numbered(device / "ports")]
    return Inventory(root=sysfs_root, ports=tuple(ports), cxi=_names(sysfs_root / "class" / "cxi", r"cxi\d+"),
                     netdevs=_names(sysfs_root / "class" / "net"))


def default_route_interface(proc_root: Path) -> str | None:
    """The interface of the IPv4 default route (``/proc/net/route``: destination 00000000)."""
    text = _read(proc_root / "net" / "route")
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return None
