"""Slow a container's link from the host, as a bad NIC, cable or switch port would: for the
preflight tests and bench, which must see a slow node or a slow link among containers.

A node: a tbf on the root of its eth0 (iproute2 tc-tbf(8)), every packet it sends paced. A
link: an htb root whose default class is unbounded (100 Gbit/s) and a slow class that a u32
filter sends only the traffic to the other end's address to (tc-htb(8), tc-u32(8)), on both
ends. htb and u32, not prio and flower: kernels built without the latter two (this project's
CI machine among them: "Specified qdisc kind is unknown") still have the former.

Commands run in the container's network namespace by ``nsenter -t <pid> -n`` with the host's
tc (util-linux nsenter(1)): nothing is added to the image. The PID is the one `docker inspect`
reports (State.Pid, Docker Engine API ContainerInspect). Needs root, nsenter and tc.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from typing import Any

from torchpod.errors import InputError, RuntimeFailure

RATE = re.compile(r"^[1-9][0-9]{0,6}(?:kbit|mbit|gbit)$")
SLOW = "100mbit"  # against a bridge's GB/s: a throttled pair falls far under a quarter of the best


def _checked(pid: int, rate: str) -> tuple[str, str]:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise InputError(f"throttle pid={pid!r}; expected a running container's PID (a whole number over 0)")
    if not isinstance(rate, str) or not RATE.match(rate):
        raise InputError(f"throttle rate={rate!r}; expected digits then kbit, mbit or gbit (e.g. 100mbit)")
    return str(pid), rate


def node_commands(pid: int, rate: str = SLOW) -> list[list[str]]:
    """The argv that paces everything the namespace of ``pid`` sends on eth0."""
    at, rate = _checked(pid, rate)
    return [["nsenter", "-t", at, "-n", "tc", "qdisc", "add", "dev", "eth0", "root",
             "tbf", "rate", rate, "burst", "64kb", "latency", "400ms"]]


def link_commands(pid: int, address: str, rate: str = SLOW) -> list[list[str]]:
    """The argvs that pace only what the namespace of ``pid`` sends on eth0 to ``address``."""
    at, rate = _checked(pid, rate)
    try:
        dst = ipaddress.IPv4Address(address)
    except (ipaddress.AddressValueError, TypeError) as exc:
        raise InputError(f"throttle address={address!r}; expected an IPv4 address (e.g. 172.18.0.3)") from exc
    tc = ["nsenter", "-t", at, "-n", "tc"]
    return [[*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"],
            [*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "100gbit"],
            [*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", rate,
             "burst", "64kb"],
            [*tc, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
             "match", "ip", "dst", f"{dst}/32", "flowid", "1:20"]]


def _pid(container: Any) -> int:
    container.reload()
    pid = int(container.attrs["State"]["Pid"])
    if pid <= 0:
        raise RuntimeFailure(f"container {container.name} is not running (State.Pid {pid}): nothing to throttle")
    return pid


def address(container: Any) -> str:
    """The container's address on its one network."""
    container.reload()
    networks = container.attrs["NetworkSettings"]["Networks"]
    if len(networks) != 1:
        raise RuntimeFailure(f"container {container.name} is on {len(networks)} networks; expected one")
    return next(iter(networks.values()))["IPAddress"]


def _run(argvs: list[list[str]]) -> None:
    for argv in argvs:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if done.returncode:
            raise RuntimeFailure(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")


def node(container: Any, rate: str = SLOW) -> None:
    """Pace everything a running container sends: the whole node is slow."""
    _run(node_commands(_pid(container), rate))


def link(a: Any, b: Any, rate: str = SLOW) -> None:
    """Pace only the traffic between two running containers, both ways: the link is slow."""
    _run(link_commands(_pid(a), address(b), rate) + link_commands(_pid(b), address(a), rate))
