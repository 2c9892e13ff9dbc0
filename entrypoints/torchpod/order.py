"""The order in which torch ranks the nodes of a c10d rendezvous, as torchpod names them.

torch's dynamic rendezvous (the ``c10d`` and ``etcd-v2`` backends) gives each round's
nodes their group ranks by sorting their node descriptors
(torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, torch 2.13:
``_DistributedRendezvousOpExecutor._mark_rendezvous_complete`` runs
``for rank, node in enumerate(sorted(state.participants))``), and ``_NodeDesc`` is an
ordered dataclass whose first field is the node's address string. ``--node-rank`` is
ignored there (torch/distributed/run.py: "node_rank is only used for static
rdzv_backend"). So ``job-worker-10`` ranks before ``job-worker-2``, ``10.0.0.10`` before
``10.0.0.9``, and a LeaderWorkerSet leader ``grp-0.grp`` after its worker ``grp-0-1.grp``:
torch's ranks then disagree with the node numbers the scheduler gave.

torchpod gives each node an order key, a path of whole numbers such as ``10`` (the
scheduler's node index) or ``2.10`` (a domain, then the index), in the rendezvous config
as ``torchpod_order`` (torch hands unknown keys through ``RendezvousParameters.config``
and reads only its own: dynamic_rendezvous.py create_handler, c10d_rendezvous_backend.py
create_backend). ``torchpod.torchrun`` reads it and gives the rendezvous node descriptors
that sort by that key first (``torchpod.ranked``), so a fixed-size job's group ranks are
the keys' order. Pure: this module only parses and writes keys.
"""

from __future__ import annotations

import re
import zlib

from .errors import InputError

# the rendezvous config key torchpod.torchrun reads; torch reads no key of this name
ORDER_KEY = "torchpod_order"
# the backends whose ranks come from torch's DynamicRendezvousHandler
ORDERED_BACKENDS = ("c10d", "etcd-v2")
# at most eight levels (blocks, racks, switches, ... then the node), each below 10**9
_ORDER = re.compile(r"(?:0|[1-9][0-9]{0,8})(?:\.(?:0|[1-9][0-9]{0,8})){0,7}", re.ASCII)


def parse_order(source: str, value: str) -> tuple[int, ...]:
    """``value`` (``10``, ``2.10``) as the tuple it sorts by, or one line naming ``source``."""
    if not _ORDER.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InputError(
            f"{source}={shown!r} is not a node order; expected whole numbers joined by '.' "
            "(at most 8, each below 10**9, no leading zeros), e.g. 10 or 2.10"
        )
    return tuple(int(part) for part in value.split("."))


# the levels of topology an order key holds before the node index (the grammar's 8 parts)
MAX_DOMAIN_LEVELS = 7


def domain_order(domains: tuple[str, ...], node: int) -> tuple[int, ...]:
    """The key of a node inside nested topology ``domains`` (top first: a block, a spine,
    a leaf switch): one number per level, then the node index. A level's number names its
    whole path (``top.leaf1``), the same on every node that shares it, so nodes of one
    domain sort next to each other at every level; the domains' own order is that of the
    numbers (a CRC-32 of the path), not of their names. Only the innermost
    MAX_DOMAIN_LEVELS levels count: the levels above them hold every node of the job
    anyway. Two paths whose numbers collide merge into one domain, which only loosens the
    grouping."""
    paths = [".".join(domains[: i + 1]) for i in range(len(domains))][-MAX_DOMAIN_LEVELS:]
    return (*(zlib.crc32(path.encode()) % 10**9 for path in paths), node)


def order_text(order: tuple[int, ...]) -> str:
    """The key as the rendezvous config carries it."""
    return ".".join(str(part) for part in order)


__all__ = ["ORDER_KEY", "ORDERED_BACKENDS", "MAX_DOMAIN_LEVELS", "domain_order", "parse_order", "order_text"]
