"""The user's own rendezvous options: torchrun flags on the command line, then torchrun's
PET_<OPTION> environment spelling. Read once, parsed into typed values that remember
where they came from, so every later message can name the flag or variable.

Pure: takes the environment and the split command line; never reads ``os.environ``.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Any, Generic, Mapping, TypeVar

from .contract import TORCHRUN_MASTER_PORT
from .errors import InputError
from .torchrun_flags import Invocation
from .values import Endpoint, NodeCount, check_host, get, parse_int, parse_port

T = TypeVar("T")


@dataclass(frozen=True)
class Given(Generic[T]):
    """A value the user gave, and where: ``--nnodes`` or ``PET_NNODES``."""

    value: T
    source: str

    @property
    def on_command_line(self) -> bool:
        return self.source.startswith("-")


@dataclass(frozen=True)
class UserOptions:
    nnodes: Given[NodeCount] | None = None
    node_rank: Given[int] | None = None
    rdzv_backend: Given[str] | None = None
    rdzv_endpoint: Given[Endpoint] | None = None
    rdzv_id: Given[str] | None = None  # None also when the user said "none" (see rdzv_id_none)
    rdzv_conf: Given[tuple[tuple[str, str], ...]] | None = None
    standalone: Given[bool] | None = None
    max_restarts: Given[int] | None = None
    master_addr: Given[Endpoint] | None = None  # the port, when the address carried one
    master_port: Given[int] | None = None
    local_addr: Given[str] | None = None
    nproc_per_node: Given[str] | None = None
    signals_to_handle: Given[tuple[str, ...]] | None = None
    rdzv_id_none: str | None = None  # the source that said `none` (torchrun's default id)


NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")


def _raw(env: Mapping[str, str], inv: Invocation, dest: str) -> tuple[str, str] | None:
    """(value, source) of one option: the flag wins over PET_<DEST>. A value holding a
    control character (a newline, an escape) is refused here, for every option: torchrun
    would take it into its own argument (``--rdzv-conf``, ``--rdzv-id``) and its logs."""
    if dest in inv.options:
        flag = f"--{dest.replace('_', '-')}"
        value = inv.options[dest].strip()
        if value == "":
            raise InputError(f"{flag} is empty; expected a value, e.g. {flag}=VALUE")
        found: tuple[str, str] | None = (flag, value)
    else:
        found = get(env, f"PET_{dest.upper()}")
    if found is None:
        return None
    source, value = found
    bad = next((ch for ch in value if not ch.isprintable()), None)
    if bad is not None:
        raise InputError(f"{source}={value[:80]!r} holds the control character {bad!r}; expected printable "
                         "text on one line, as torchrun's own options take it")
    return value, source


def parse_conf(source: str, value: str) -> tuple[tuple[str, str], ...]:
    conf: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        key, eq, val = item.partition("=")
        if not key.strip() or not eq or not val.strip():
            raise InputError(
                f"{source}={value!r} is not a rendezvous config; expected key=value,... "
                "(e.g. join_timeout=900,is_host=true)"
            )
        conf[key.strip()] = val.strip()
    return tuple(conf.items())


def parse_signals(source: str, value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in signal.Signals.__members__]
    if not names or unknown:
        raise InputError(
            f"{source}={value!r} names no known signal{f' ({unknown[0]!r})' if unknown else ''}; "
            "expected comma-separated names such as SIGTERM,SIGUSR1"
        )
    return names


def parse_nproc(source: str, value: str) -> str:
    if value in NPROC_WORDS:
        return value
    return str(parse_int(source, value, minimum=1, hint="or one of " + ", ".join(NPROC_WORDS)))


def split_master_addr(source: str, value: str) -> Endpoint:
    """MASTER_ADDR-style ``value``: a host, ``host:port`` or ``[v6]:port`` (the port split
    off, never part of the host), or an unbracketed IPv6 address (no port: which colon
    would start it is ambiguous). torch's env:// reads MASTER_ADDR as a bare host
    (torch/distributed/rendezvous.py, _env_rendezvous_handler), so a port there is a mistake
    that would otherwise become the endpoint ``[node0:1234]:29400``."""
    text = value.strip()
    m = re.fullmatch(r"\[([^\]]*)\](?::([^:]*))?", text)
    if text.startswith("[") and not m:
        raise InputError(f"{source}={value!r} is not an address; expected HOST, HOST:PORT or [IPv6]:PORT")
    if m:
        host, port = m.group(1), m.group(2)
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, None
    check_host(source, host)
    if port is None:
        return Endpoint(host)
    hint = f"expected HOST or HOST:PORT, e.g. node0:{TORCHRUN_MASTER_PORT}"
    if not port.strip():  # "node0:" names no port: say so of the whole value, not of ''
        raise InputError(f"{source}={value!r} ends in ':' with no port; {hint}")
    return Endpoint(host, parse_port(source, port, hint=hint))


def parse_backend(source: str, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
        raise InputError(f"{source}={value!r} is not a rendezvous backend; expected c10d, etcd-v2, etcd or static")
    return value


_PARSERS = {
    "nnodes": NodeCount.parse,
    "node_rank": lambda s, v: parse_int(s, v, hint="this node's index"),
    "rdzv_backend": parse_backend,
    "rdzv_endpoint": Endpoint.parse,
    "rdzv_id": lambda s, v: v,
    "rdzv_conf": parse_conf,
    "standalone": lambda s, v: True,
    "max_restarts": lambda s, v: parse_int(s, v, hint="e.g. 3"),
    "master_addr": split_master_addr,
    "master_port": lambda s, v: parse_port(s, v, minimum=0),
    "local_addr": check_host,
    "nproc_per_node": parse_nproc,
    "signals_to_handle": parse_signals,
}


def read_user_options(env: Mapping[str, str], inv: Invocation) -> UserOptions:
    """Every resolved torchrun option the user gave, parsed, naming its source on error."""
    given: dict[str, Any] = {}  # one Given[...] per dest, each of its parser's type
    rdzv_id_none = None
    for dest, parse in _PARSERS.items():
        raw = _raw(env, inv, dest)
        if raw is None:
            continue
        value, source = raw
        if dest == "rdzv_id" and value.lower() == "none":
            rdzv_id_none = source  # torchrun's default; torchpod keeps an id stable per job
            continue
        given[dest] = Given(parse(source, value), source)
    return UserOptions(**given, rdzv_id_none=rdzv_id_none)
