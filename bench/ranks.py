"""Ring crossings: how many edges of the ring of group ranks (0 -> 1 -> ... -> N-1 -> 0)
join nodes of two different racks, and of two different blocks of racks, for three orders
of the same job's nodes:

- torch: torch's own c10d order, the nodes' addresses sorted as text
  (dynamic_rendezvous.py, ``_mark_rendezvous_complete``);
- index: the scheduler's node index (what torchpod gives when it knows no topology);
- torchpod: the nodes sorted as the rendezvous sorts them once torchpod.torchrun has
  installed its descriptor: ``torchpod.ranked.OrderedNodeDesc`` objects carrying
  ``torchpod.order.domain_order((block, rack), index)`` keys, sorted by that class's own
  comparison;

against the minimum, the number of racks (blocks) the job touches: a ring that enters each
domain once crosses once per domain. A ring and a tree both pay for each crossing edge
with the slower link (a rack's spine, a block's), so fewer is better.

Layouts, each drawn with a fixed seed (``--seed``):

- ``pods``: Kubernetes pods ``job-worker-<i>`` placed on nodes without regard to topology
  (no Kueue topology-aware scheduling): the pod index says nothing of the rack;
- ``ips``: cloud VMs named by IPv4 addresses scattered over the racks, the scheduler's
  index the order of its host list (SkyPilot's, SageMaker's);

at 12 nodes (three racks of four, as in the cluster tests) and at 8 ... 1,024 nodes on a
cluster with racks of 18 nodes (a GB200 NVL72's NVLink domain) or 32 (an InfiniBand leaf
switch), blocks of 4 racks, the job taking its nodes from a cluster 12.5 % larger.

    python bench/ranks.py          (or with --seed N)

Prints a table and writes bench/results/ranks.json. Needs torch (the rendezvous'
descriptor class); nothing is timed.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from torchpod.order import domain_order  # noqa: E402

SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
RACKS = (18, 32)  # nodes per rack: a GB200 NVL72 rack; an InfiniBand leaf switch
RACKS_PER_BLOCK = 4
SPARE = 1.125  # the cluster is this much larger than the job: the job's nodes are scattered


def ring_crossings(domains: list) -> int:
    """Edges of the ring (rank r to r+1, the last back to 0) whose ends differ in domain."""
    n = len(domains)
    return 0 if n < 2 else sum(domains[r] != domains[(r + 1) % n] for r in range(n))


def minimum(domains: list) -> int:
    """The fewest crossings any order has: one per domain the job touches (0 for one)."""
    count = len(set(domains))
    return 0 if count < 2 else count


def place(n: int, rack_size: int, rng: random.Random) -> list[tuple[int, int]]:
    """(block, rack) of each of the job's ``n`` nodes, taken at random from a cluster of
    whole racks SPARE times larger than the job."""
    racks = -(-int(n * SPARE) // rack_size)
    slots = [(r // RACKS_PER_BLOCK, r) for r in range(racks) for _ in range(rack_size)]
    return rng.sample(slots, n)


def names(layout: str, n: int, rng: random.Random) -> list[str]:
    """Each node's address as the rendezvous sees it, in the scheduler's index order."""
    if layout == "pods":
        return [f"job-worker-{i}.job" for i in range(n)]
    net = ipaddress.ip_network("10.0.0.0/16")
    return [str(net[a]) for a in rng.sample(range(1, net.num_addresses - 1), n)]


def orders(addrs: list[str], where: list[tuple[int, int]]) -> dict[str, list[int]]:
    """Node indexes in rank order, for each way of ranking."""
    from torchpod.ranked import OrderedNodeDesc

    n = len(addrs)
    keyed = [OrderedNodeDesc(addrs[i], 1, i, domain_order((f"block{b}", f"rack{r}"), i))
             for i, (b, r) in enumerate(where)]
    return {"torch": sorted(range(n), key=lambda i: addrs[i]),
            "index": list(range(n)),
            "torchpod": [d.local_id for d in sorted(keyed)]}


def measure(layout: str, n: int, rack_size: int, rng: random.Random) -> dict:
    where = place(n, rack_size, rng)
    addrs = names(layout, n, rng)
    row: dict = {"layout": layout, "nodes": n, "rack_size": rack_size,
                 "racks": len({r for _, r in where}), "blocks": len({b for b, _ in where})}
    for level, pick in (("rack", lambda p: p[1]), ("block", lambda p: p[0])):
        domain = [pick(p) for p in where]
        row[f"{level}_min"] = minimum(domain)
        for how, ranked in orders(addrs, where).items():
            row[f"{level}_{how}"] = ring_crossings([domain[i] for i in ranked])
    return row


def run(seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = [measure(layout, 12, 4, rng) for layout in ("pods", "ips")]
    rows += [measure(layout, n, rack, rng) for rack in RACKS for layout in ("pods", "ips") for n in SIZES]
    return rows


def table(rows: list[dict]) -> str:
    head = ("layout", "nodes", "rack", "racks", "rack: torch", "index", "torchpod", "min",
            "blocks", "block: torch", "index", "torchpod", "min")
    lines = ["  ".join(f"{h:>12}" for h in head)]
    for r in rows:
        cells = (r["layout"], r["nodes"], r["rack_size"], r["racks"], r["rack_torch"], r["rack_index"],
                 r["rack_torchpod"], r["rack_min"], r["blocks"], r["block_torch"], r["block_index"],
                 r["block_torchpod"], r["block_min"])
        lines.append("  ".join(f"{c:>12}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1, help="the layouts' random seed")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ranks.json")
    args = parser.parse_args(argv)
    rows = run(args.seed)
    print(table(rows))
    at_min = all(r["rack_torchpod"] == r["rack_min"] and r["block_torchpod"] == r["block_min"] for r in rows)
    print(f"torchpod's order at the minimum in every row: {at_min}")
    args.out.write_text(json.dumps({"seed": args.seed, "racks_per_block": RACKS_PER_BLOCK, "spare": SPARE,
                                    "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
