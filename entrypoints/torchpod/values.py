"""Typed values of a launch: node counts, endpoints, ports, host names, and the parsers
that produce them from a variable or option, naming it when the value is wrong.

Pure and dependency-free: used by the options reader, the detectors and the resolver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from .contract import RDZV_PORT_DEFAULT
from .errors import InputError

Env = Mapping[str, str]


def get(env: Env, *names: str) -> tuple[str, str] | None:
    """The first of ``names`` set to a non-empty value, as (name, stripped value)."""
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return name, value.strip()
    return None


# ASCII digits only: Python's ``\d`` and ``int()`` accept any Unicode decimal digit ('٣'),
# ``str.isdigit()`` also superscripts ('²', which int() then refuses); a value torchpod
# accepts must mean the same to torchrun, NCCL (strtol) and the shell. Eighteen digits
# keep every count and index far below int()'s 4300-digit limit and inside an int64.
_INT_RE = re.compile(r"[+]?[0-9]{1,18}", re.ASCII)


def ascii_int(text: str) -> int | None:
    """``text`` (surrounding whitespace ignored) as a non-negative int of ASCII digits, else None."""
    stripped = text.strip()
    return int(stripped) if _INT_RE.fullmatch(stripped) else None


def parse_int(name: str, value: str, *, minimum: int = 0, hint: str = "") -> int:
    """``value`` of variable/option ``name`` as an int >= minimum, or an InputError."""
    number = ascii_int(value)
    if number is None or number < minimum:
        raise InputError(
            f"{name}={value!r} is not a valid number; expected an integer >= {minimum}"
            + (f"; {hint}" if hint else "")
        )
    return number


def parse_port(name: str, value: str, *, hint: str = "", minimum: int = 1) -> int:
    """A TCP port (``minimum``-65535) from variable/option ``name``."""
    port = parse_int(name, value, minimum=minimum, hint=hint or f"a TCP port, e.g. {RDZV_PORT_DEFAULT}")
    if port > 65535:
        raise InputError(f"{name}={value!r} is not a TCP port; expected {minimum}-65535")
    return port


_HOST_RE = re.compile(r"[A-Za-z0-9_.:-]{1,253}", re.ASCII)  # fullmatch: '$' would let a trailing newline in


def check_host(name: str, host: str) -> str:
    """A host name or address as torch's endpoint parser accepts it."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not _HOST_RE.fullmatch(bare):
        raise InputError(
            f"{name} has host {host!r}; expected a host name, IPv4 or IPv6 address "
            "(letters, digits, '.', '-', '_', ':')"
        )
    return bare


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


@dataclass(frozen=True)
class NodeCount:
    """torchrun's --nnodes: exactly N, or elastic MIN:MAX."""

    lo: int
    hi: int

    def __str__(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}:{self.hi}"

    @classmethod
    def exactly(cls, n: int) -> "NodeCount":
        return cls(n, n)

    @classmethod
    def parse(cls, source: str, value: str) -> "NodeCount":
        m = re.fullmatch(r"\s*([0-9]{1,18})\s*(?::\s*([0-9]{1,18})\s*)?", value, re.ASCII)
        if not m:
            raise InputError(
                f"{source}={value!r} is not a node count; expected N or MIN:MAX (e.g. 2 or 1:4)"
            )
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 0 < lo <= hi:
            raise InputError(
                f"{source}={value!r} is not a node count; expected 0 < MIN <= MAX (e.g. 2 or 1:4)"
            )
        return cls(lo, hi)


@dataclass(frozen=True)
class Endpoint:
    """A rendezvous endpoint: a bare host (IPv6 unbracketed) and an optional port."""

    host: str
    port: int | None = None

    def __str__(self) -> str:
        """``host:port`` with IPv6 literals bracketed, as torch's parse_rendezvous_endpoint wants."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @classmethod
    def parse(cls, source: str, value: str) -> "Endpoint":
        host, port = split_endpoint(value)
        check_host(source, host)
        if port is None:
            return cls(host)
        hint = f"expected HOST:PORT, e.g. node1:{RDZV_PORT_DEFAULT}"
        return cls(host, parse_port(source, port, hint=hint, minimum=0))
