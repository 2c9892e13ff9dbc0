"""How long the first node of a c10d rendezvous waits for the last: torch's 600 s holds for
small jobs and is raised as the node count grows.

torch's c10d rendezvous (torch 2.13, torch/distributed/elastic/rendezvous/dynamic_rendezvous.py)
keeps one state object in the store: every node joins by rewriting it (compare-and-set,
retried whenever another node wrote first) and waiting nodes read it every second.
Measured with torch's own handlers over a real TCPStore (``bench/rendezvous_scale.py``,
docs/measurements.md), a complete rendezvous takes about PER_NODE_S seconds per node
(64 nodes 11.5 s, 128 nodes 23 s, 256 nodes 38-43 s), and the time grows with N.

So for a job of up to N nodes (``settings``), ``join_timeout``, the time the first node
waits for the last, covers the nodes' start spread (START_SPREAD_S: pods of one job start
that far apart when a 15-20 GB image is pulled at 4-6 minutes a node) plus twice the
rendezvous itself, and is never below torch's 600 s: above it from about 940 nodes.

The keep-alive settings stay torch's: raising the time one beat may take
(``heartbeat_timeout``) alone made matters worse in the same bench (256 nodes, 41 s: 6 and
then 14 nodes dropped from the state as dead in two runs, against none with torch's 5 s
beside them), since torch drops a node whose last beat is older than the beat interval
times its attempts (15 s) whether or not a beat is still on its way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .words import plural

# the backends whose handler is torch's DynamicRendezvousHandler, which reads join_timeout
# (torch 2.13, dynamic_rendezvous.py, create_handler; the static and legacy etcd handlers
# read a "timeout" of their own)
DYNAMIC_BACKENDS = ("c10d", "etcd-v2")
TORCH_JOIN_S = 600  # torch's RendezvousTimeout._DEFAULT_TIMEOUTS["join"]
TORCH_HEARTBEAT_S = 5  # ... ["heartbeat"]: kept
TORCH_KEEP_ALIVE_S = 5  # create_handler's keep_alive_interval default: kept
START_SPREAD_S = 300  # seconds between the first and the last node of one job starting
PER_NODE_S = 0.16  # seconds a complete rendezvous takes per node (bench/rendezvous_scale.py)
MAX_NODES = 65_536  # the timeout stops growing here: a day's join, not an overflow


@dataclass(frozen=True)
class Timeouts:
    """What torchpod sets for a c10d rendezvous of up to ``nodes`` nodes, and why."""

    nodes: int
    join_s: int

    @property
    def conf(self) -> dict[str, str]:
        """The ``--rdzv-conf`` entries that differ from torch's defaults."""
        return {"join_timeout": str(self.join_s)} if self.join_s != TORCH_JOIN_S else {}

    def in_effect(self, conf: dict[str, str]) -> bool:
        """Whether ``conf`` (a plan's --rdzv-conf) holds the join timeout torchpod chose."""
        return conf.get("join_timeout", str(TORCH_JOIN_S)) == str(self.join_s)

    @property
    def why(self) -> str:
        return (f"join {self.join_s} s: the nodes' start spread ({START_SPREAD_S} s) and twice a rendezvous of "
                f"{plural(self.nodes, 'node')} (about {PER_NODE_S * self.nodes:.0f} s), "
                f"at least torch's {TORCH_JOIN_S}")


def settings(nodes: int) -> Timeouts:
    """The timeouts for a c10d rendezvous of up to ``nodes`` nodes (1 to MAX_NODES; any
    count beyond is taken as MAX_NODES)."""
    nodes = min(max(1, nodes), MAX_NODES)
    return Timeouts(nodes, max(TORCH_JOIN_S, math.ceil(START_SPREAD_S + 2 * PER_NODE_S * nodes)))
