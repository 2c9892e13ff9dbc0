"""Whether this node's address has a name that the resolver gives at once. Standard library only.

torch's c10d names each store connection by a reverse lookup of its address
(torch/csrc/distributed/c10d/socket.cpp: ``getnameinfo`` on the peer's address as the
dual-stack listener sees it, ``::ffff:a.b.c.d``; when it fails: "The hostname of the client
socket cannot be retrieved. err=-3"). The lookup blocks the connection until it returns. Where
the cluster's DNS cannot answer a reverse query (an upstream it forwards to that is not
reachable; Docker's DNS for a container whose name is longer than one DNS label), glibc's
resolver waits out its timeout, 5 s, twice (resolv.conf(5)): every rendezvous and every
process group then starts 10 s late, on every node, at every restart. The launcher's
rendezvous and the workers' process group each open such connections.

``lookup`` asks the question c10d asks, for this node's own address, under a bound of its
own (a thread the caller never waits on past ``bound``), and ``finding`` turns a slow or
missing answer into a doctor row. A fast failure (NXDOMAIN: no name) is fine: c10d only
waits for the resolver, it needs no name.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .fabric.findings import Finding, Severity

SLOW_S = 1.0  # an answer later than this delays every store connection by as much
BOUND_S = 3.0  # how long the doctor waits for an answer before calling it missing
FIX = ("give the cluster DNS an answer for reverse lookups of pod and node addresses (CoreDNS: the "
       "kubernetes plugin's `in-addr.arpa ip6.arpa` zones, an upstream it can reach), or add this node's "
       "address to /etc/hosts; or lower the wait (RES_OPTIONS='timeout:1 attempts:1' in the job's environment)")

Resolve = Callable[[tuple, int], tuple]  # socket.getnameinfo(sockaddr, flags) -> (host, port)


@dataclass(frozen=True)
class Lookup:
    """One reverse lookup: the address asked, seconds to the answer (None: none within the
    bound) and the answer (a name, or the resolver's error)."""

    address: str
    seconds: float | None
    answer: str


def _bounded(call: Callable[[], str], bound: float) -> tuple[float | None, str]:
    """``call`` in a daemon thread: (seconds, its result or error) or (None, "") past ``bound``."""
    done: list[str] = []
    start = time.monotonic()

    def run() -> None:
        try:
            done.append(call())
        except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
            done.append(f"error: {exc}")

    worker = threading.Thread(target=run, name="torchpod-reverse-dns", daemon=True)
    worker.start()
    worker.join(bound)
    return (time.monotonic() - start, done[0]) if done else (None, "")


def own_address(bound: float = BOUND_S) -> str | None:
    """This node's IPv4 address as its hostname resolves (/etc/hosts first, as peers'
    connections come from it), or None when it does not resolve within ``bound``."""
    _, found = _bounded(lambda: socket.gethostbyname(socket.gethostname()), bound)
    return found if found and not found.startswith("error: ") else None


def lookup(address: str, bound: float = BOUND_S, resolve: Resolve = socket.getnameinfo) -> Lookup:
    """The reverse lookup c10d makes of ``address`` (IPv4), in the form a dual-stack
    listener sees it (IPv4-mapped IPv6), name required, within ``bound`` seconds."""
    seconds, answer = _bounded(lambda: resolve((f"::ffff:{address}", 0, 0, 0), socket.NI_NAMEREQD)[0], bound)
    return Lookup(address, seconds, answer)


def finding(found: Lookup, bound: float = BOUND_S) -> Finding | None:
    """A warning when the answer came late or not at all; None when it came at once (a
    name or a refusal alike)."""
    if found.seconds is not None and found.seconds < SLOW_S:
        return None
    said = (f"no answer within {bound:g} s" if found.seconds is None
            else f"{found.seconds:.1f} s to answer ({found.answer})")
    return Finding("doctor.reverse-dns.slow", Severity.WARN,
                   f"a reverse lookup of this node's address {found.address} took {said}: torch's c10d makes one "
                   "for each store connection, so every rendezvous and process group waits as long", FIX)
