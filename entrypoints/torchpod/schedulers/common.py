"""Shared pieces of scheduler detection: the facts main() gathers, what a detector
returns, and the small parsers every detector needs (integers, host names, endpoints).

Pure: nothing here reads ``os.environ``, the clock or the hostname; callers pass them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..contract import (
    ENV_HOSTNAME,
    ENV_RDZV_PORT,
    EPHEMERAL_PORTS,
    RDZV_PORT_DEFAULT,
    SYSFS_ROOT_DEFAULT,
    number,
    setting,
)
from ..errors import InputError
from ..options import split_master_addr
from ..values import (  # noqa: F401 - re-exported for the detectors
    Endpoint,
    Env,
    NodeCount,
    check_host,
    get,
    parse_int,
    parse_port,
)

# The default port (contract.RDZV_PORT_DEFAULT, torch's c10d default) lies below Linux's
# ephemeral range, so a client socket cannot hold it; a port the user picks may not.
_EPHEMERAL = range(EPHEMERAL_PORTS[0], EPHEMERAL_PORTS[1] + 1)


# One node needs no name: `torchrun --standalone`'s localhost:0 and the agent's hostname
# (the workers' store address) both fail in a container whose /etc/hosts is empty
# (Docker's NetworkDisabled; found by the image tier), where IPv4 loopback still works.
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Facts:
    """What main() learned about this machine, so detectors never look themselves."""

    hostname: str = "localhost"
    gpu_count: int | None = None  # `nvidia-smi -L` lines; None when not probed/absent
    root: Path = Path("/")  # where /etc/volcano/*.host live (a temp dir in tests)
    sysfs_root: Path = Path(SYSFS_ROOT_DEFAULT)
    slurm_hosts: tuple[str, ...] | None = None  # `scontrol show hostnames`, when available
    # the NVLink domain every GPU of this node is in (fabric.nvlink: ClusterUUID.CliqueId
    # from `nvidia-smi -q`), None without one or when it was not asked
    nvlink_domain: str | None = None
    # Whether the installed torchrun takes --signals-to-handle (torch >= 2.10); False makes
    # the plan leave the flag out and forward only the signals old torchrun handles.
    torchrun_signals: bool = True
    notes: tuple[str, ...] = ()  # what gathering said (a helper tool that did not answer)
    # Where this user can write (home.writable_places): an arbitrary UID (OpenShift,
    # Apptainer, enroot) or a read-only root often has HOME=/ or a HOME it cannot write.
    uid: int | None = None
    home_writable: bool = True
    writable_tmp: str | None = None  # the first writable of $TMPDIR, /tmp, /dev/shm
    tmp_writable: bool = True  # whether Python's tempfile default ($TMPDIR or /tmp) is


@dataclass(frozen=True)
class Detection:
    """What one scheduler says about this node; the resolver overlays the user's options."""

    scheduler: str
    nnodes: NodeCount
    node_rank: int | None  # this node's index, when the scheduler tells it
    rdzv_endpoint: Endpoint | None
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
    single_node: bool = False  # standalone: one node by definition, never more
    # The node count is the user's --nnodes alone (explicit flags): none given means one
    # node to torchrun, which the resolver refuses where a platform marks a multi-node job.
    count_from_user: bool = False
    count_source: str = ""  # the flags that described the job, for that refusal
    # This node's topology domains, top first (a Slurm switch path), and where they came
    # from: nodes of one domain take contiguous group ranks (torchpod.order.domain_order).
    domains: tuple[str, ...] = ()
    domain_source: str = ""


def int_var(env: Env, name: str, *, minimum: int = 0, hint: str = "") -> int | None:
    found = get(env, name)
    return None if found is None else parse_int(name, found[1], minimum=minimum, hint=hint)


def index_below(var: tuple[str, str], count: int, *, of: str, hint: str, tail: str = "") -> int:
    """This node's index from ``var`` (name, raw value): a whole number below ``count``, else
    one line naming the variable, ``of`` (what it indexes) and the range."""
    index = parse_int(*var, hint=hint)
    if index >= count:
        raise InputError(f"{var[0]}={var[1]!r} is outside {of}; expected 0-{count - 1}{tail}")
    return index


def rdzv_port(env: Env) -> tuple[int, tuple[str, ...]]:
    """The port for endpoints torchpod builds itself (TORCHPOD_RDZV_PORT, else
    contract.RDZV_PORT_DEFAULT)."""
    port = number(env, ENV_RDZV_PORT)
    if port is None:
        return RDZV_PORT_DEFAULT, ()
    notes: tuple[str, ...] = ()
    if port in _EPHEMERAL:
        notes = (
            f"{ENV_RDZV_PORT.name}={port} is inside the ephemeral range {_EPHEMERAL.start}-{_EPHEMERAL.stop - 1}; "
            "an outgoing connection may hold it when the store starts",
        )
    return port, notes


def master_endpoint(env: Env, addr_names: Sequence[str], port_names: Sequence[str]
                    ) -> tuple[Endpoint, tuple[str, ...]] | None:
    """The one rule for MASTER_ADDR-style variables: the first address set, with the port
    from the first port variable set, else rdzv_port's. An address that
    carries a port (``node0:1234``) is split, with a note; a port variable that disagrees
    with it is an error naming both. The note names where each came from; the
    ephemeral-port warning only when torchpod chose the port. None when no address
    variable is set."""
    addr = get(env, *addr_names)
    if addr is None:
        return None
    given = split_master_addr(addr[0], addr[1])
    port_var = get(env, *port_names)
    notes: tuple[str, ...] = ()
    if port_var is not None:
        port = parse_port(port_var[0], port_var[1])
        how = port_var[0]
        if given.port is not None and given.port != port:
            raise InputError(
                f"{addr[0]}={addr[1]!r} names port {given.port} and {port_var[0]}={port_var[1]!r} "
                f"names {port}; expected one port; drop the port from {addr[0]} or make them agree"
            )
    elif given.port is not None:
        port, how = given.port, f"the port in {addr[0]}"
    else:
        port, notes = rdzv_port(env)
        how = ENV_RDZV_PORT.name if setting(env, ENV_RDZV_PORT) else f"default {RDZV_PORT_DEFAULT}"
    ep = Endpoint(given.host, port)
    if given.port is not None:
        notes = (f"{addr[0]}={addr[1]} holds a port: host {given.host}, port {given.port}",) + notes
    return ep, (f"rendezvous endpoint {ep} from {addr[0]} and {how}",) + notes


def short(host: str) -> str:
    """The first DNS label: what `hostname -s` prints (IP addresses stay whole)."""
    if re.fullmatch(r"[0-9.]+", host) or ":" in host:
        return host
    return host.split(".", 1)[0]


def find_host(hosts: Sequence[str], *names: str) -> int | None:
    """Index of this node in ``hosts``, matching exact, then short vs. FQDN forms.

    A PBS nodefile may list ``node01.cluster`` while `hostname` prints ``node01`` (or the
    reverse); a hostNetwork pod carries the node's name. Compare case-insensitively. A
    short name that matches two different hosts (``n1.a``, ``n1.b``) is refused: taking
    the first would make both nodes node 0.
    """
    wanted = [n.strip().lower() for n in names if n and n.strip()]
    lowered = [h.lower() for h in hosts]
    for name in wanted:
        if name in lowered:
            return lowered.index(name)
    for name in wanted:
        found = [i for i, host in enumerate(lowered) if short(host) == short(name)]
        if len({lowered[i] for i in found}) > 1:
            raise InputError(
                f"this node's name {name!r} matches {hosts[found[0]]!r} and {hosts[found[1]]!r} of the "
                f"node list by short name; expected one match: set {ENV_HOSTNAME.name} to this node's "
                "name exactly as the node list spells it"
            )
        if found:
            return found[0]
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
