"""Node descriptors that make torch's c10d rendezvous rank nodes in torchpod's order.

torch ranks a round's participants by sorting their ``_NodeDesc`` (address, pid, local
id; torchpod.order says where). ``OrderedNodeDesc`` is that descriptor with one more
field, the node's order key, and sorts by the key first: a round of nodes whose keys are
their scheduler indexes gives each node its index as its group rank, round after round
(a replaced node comes back with the same key, so with the same rank). Equality and hash
stay torch's (address, pid, local id), so the rendezvous state's sets and dicts, its
heartbeats and its removal of dead nodes behave as before.

The rendezvous state is pickled into the store and read by every node
(dynamic_rendezvous.py, ``_BackendRendezvousStateHolder``), so every node's agent must be
able to import this module: every node runs ``torchpod.torchrun``. A descriptor without a
key (a node started by plain torchrun) sorts before every keyed one, by torch's own order.

These are torch's private names (``_NodeDesc``, ``_NodeDescGenerator``,
``DynamicRendezvousHandler._node_desc_generator``; torch 2.13). ``install`` returns a
reason instead of raising when a torch release has renamed them, and the caller says that
ranks then follow torch's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch.distributed.elastic.rendezvous import dynamic_rendezvous as _dr

_Base: Any = getattr(_dr, "_NodeDesc", object)
_Generator: Any = getattr(_dr, "_NodeDescGenerator", object)


def _key(node: Any) -> tuple:
    # () sorts before every non-empty key: an unkeyed node keeps torch's order among its kind
    return (getattr(node, "order", ()), node.addr, node.pid, node.local_id)


@dataclass(frozen=True, eq=False)
class OrderedNodeDesc(_Base):
    """torch's node descriptor, ordered by ``order`` first."""

    order: tuple[int, ...] = ()

    def __lt__(self, other: Any) -> bool:
        return _key(self) < _key(other)

    def __le__(self, other: Any) -> bool:
        return _key(self) <= _key(other)

    def __gt__(self, other: Any) -> bool:
        return _key(self) > _key(other)

    def __ge__(self, other: Any) -> bool:
        return _key(self) >= _key(other)

    def __repr__(self) -> str:  # torch logs descriptors as addr_pid_localid
        return f"{self.addr}_{self.pid}_{self.local_id}"


class OrderedNodeDescGenerator(_Generator):
    """torch's generator (one local id per descriptor, under its lock), keyed."""

    def __init__(self, order: tuple[int, ...]) -> None:
        super().__init__()
        self.order = order

    def generate(self, local_addr: str | None = None) -> OrderedNodeDesc:
        node = super().generate(local_addr)
        return OrderedNodeDesc(node.addr, node.pid, node.local_id, self.order)


def install(order: tuple[int, ...]) -> str | None:
    """Make every rendezvous handler created from now on in this process describe this node
    with ``order``; None when done, else why not (a torch without these names)."""
    handler = getattr(_dr, "DynamicRendezvousHandler", None)
    if _Base is object or _Generator is object or handler is None or \
            not hasattr(handler, "_node_desc_generator"):
        return ("this torch's dynamic rendezvous has no _NodeDesc/_NodeDescGenerator/"
                "_node_desc_generator (torch 2.13 has them)")
    handler._node_desc_generator = OrderedNodeDescGenerator(order)
    return None


__all__ = ["OrderedNodeDesc", "OrderedNodeDescGenerator", "install"]
