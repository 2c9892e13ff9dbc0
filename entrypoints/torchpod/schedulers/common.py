"""Shared pieces of scheduler detection: the facts main() gathers, what a detector
returns, and the small parsers every detector needs (integers, host names, endpoints).

Pure: nothing here reads ``os.environ``, the clock or the hostname; callers pass them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InputError

Env = Mapping[str, str]

# torchrun's own c10d default (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py,
# DEFAULT_PORT), below Linux's ephemeral range 32768-60999 so a client socket cannot hold it.
DEFAULT_RDZV_PORT = 29400
EPHEMERAL_PORTS = range(32768, 61000)


# One node needs no name: `torchrun --standalone`'s localhost:0 and the agent's hostname
# (the workers' store address) both fail in a container whose /etc/hosts is empty
# (Docker's NetworkDisabled; found by the image tier), where IPv4 loopback still works.
LOOPBACK = "127.0.0.1"
LOOPBACK_ENDPOINT = f"{LOOPBACK}:0"  # port 0: the store picks a free one


@dataclass(frozen=True)
class Facts:
    """What main() learned about this machine, so detectors never look themselves."""

    hostname: str = "localhost"
    gpu_count: int | None = None  # `nvidia-smi -L` lines; None when not probed/absent
    root: Path = Path("/")  # where /etc/volcano/*.host live (a temp dir in tests)
    sysfs_root: Path = Path("/sys")
    slurm_hosts: tuple[str, ...] | None = None  # `scontrol show hostnames`, when available
    # Whether the installed torchrun takes --signals-to-handle (torch >= 2.10); False makes
    # the plan leave the flag out and forward only the signals old torchrun handles.
    torchrun_signals: bool = True


@dataclass(frozen=True)
class Detection:
    """What one scheduler says about this node; the resolver overlays the user's flags."""

    scheduler: str
    nnodes: str  # "N" or "MIN:MAX"
    node_rank: int | None  # this node's index, when the scheduler tells it
    rdzv_endpoint: str | None
    rdzv_id: str | None
    hosts: tuple[str, ...] | None = None  # every node's listed name, node-index order
    local_addr: str | None = None
    nproc_per_node: str | None = None  # a count the scheduler allocated, if it says
    rdzv_backend: str | None = None
    max_restarts: int | None = None
    rdzv_conf: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    # Said when no endpoint can be derived and the user gives none (e.g. mpirun without -x MASTER_ADDR).
    endpoint_hint: str = ""


def get(env: Env, *names: str) -> tuple[str, str] | None:
    """The first of ``names`` set to a non-empty value, as (name, stripped value)."""
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return name, value.strip()
    return None


def parse_int(name: str, value: str, *, minimum: int = 0, hint: str = "") -> int:
    """``value`` of variable/option ``name`` as an int >= minimum, or an InputError."""
    text = value.strip()
    if not re.fullmatch(r"[+]?\d+", text) or int(text) < minimum:
        raise InputError(
            f"{name}={value!r} is not a valid number; expected an integer >= {minimum}"
            + (f"; {hint}" if hint else "")
        )
    return int(text)


def int_var(env: Env, name: str, *, minimum: int = 0, hint: str = "") -> int | None:
    found = get(env, name)
    return None if found is None else parse_int(name, found[1], minimum=minimum, hint=hint)


def rdzv_port(env: Env) -> tuple[int, tuple[str, ...]]:
    """The port for endpoints torchpod builds from a host list (TORCHPOD_RDZV_PORT)."""
    found = get(env, "TORCHPOD_RDZV_PORT")
    if found is None:
        return DEFAULT_RDZV_PORT, ()
    port = parse_int(found[0], found[1], minimum=1, hint="e.g. TORCHPOD_RDZV_PORT=29400")
    if port > 65535:
        raise InputError(f"TORCHPOD_RDZV_PORT={found[1]!r} is not a TCP port; expected 1-65535")
    notes = ()
    if port in EPHEMERAL_PORTS:
        notes = (
            f"TORCHPOD_RDZV_PORT={port} is inside the ephemeral range 32768-60999; an "
            "outgoing connection may hold it when the store starts",
        )
    return port, notes


_HOST_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


def check_host(name: str, host: str) -> str:
    """A host name or address as torch's endpoint parser accepts it."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not bare or not _HOST_RE.match(bare):
        raise InputError(
            f"{name} has host {host!r}; expected a host name, IPv4 or IPv6 address "
            "(letters, digits, '.', '-', '_', ':')"
        )
    return bare


def endpoint(host: str, port: int | str) -> str:
    """``host:port`` with IPv6 literals bracketed, as torch's parse_rendezvous_endpoint wants."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


def split_endpoint(value: str) -> tuple[str, str | None]:
    """(host, port or None) of ``host[:port]``, ``[v6]:port`` or a bare IPv6 literal."""
    text = value.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, (rest[1:] if rest.startswith(":") and rest[1:] else None)
    if text.count(":") > 1:  # bare IPv6 literal, no port
        return text, None
    host, sep, port = text.partition(":")
    return host, (port if sep and port else None)


def short(host: str) -> str:
    """The first DNS label: what `hostname -s` prints (IP addresses stay whole)."""
    if re.fullmatch(r"[\d.]+", host) or ":" in host:
        return host
    return host.split(".", 1)[0]


def find_host(hosts: Sequence[str], *names: str) -> int | None:
    """Index of this node in ``hosts``, matching exact, then short vs. FQDN forms.

    A PBS nodefile may list ``node01.cluster`` while `hostname` prints ``node01`` (or the
    reverse); a hostNetwork pod carries the node's name. Compare case-insensitively.
    """
    wanted = [n.strip().lower() for n in names if n and n.strip()]
    lowered = [h.lower() for h in hosts]
    for name in wanted:
        if name in lowered:
            return lowered.index(name)
    for name in wanted:
        for i, host in enumerate(lowered):
            if short(host) == short(name):
                return i
    return None


def stable_id(prefix: str, *parts: str) -> str:
    """A rendezvous id that is the same on every node of a job and differs between jobs."""
    text = "-".join(p for p in parts if p)
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
    if len(clean) > 48:
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        clean = f"{clean[:36]}-{digest}"
    return f"{prefix}-{clean}" if clean else prefix


def digest(text: str) -> str:
    """Ten hex digits naming ``text`` (a host list) in a rendezvous id."""
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def unique_in_order(items: Sequence[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return tuple(seen)
