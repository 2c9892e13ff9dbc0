"""What one node of torch's c10d rendezvous costs in CPU at N nodes, and so how many cores a
simulation of N nodes on one machine needs before the protocol is what it measures.

    python bench/rendezvous_cost.py [--nodes 64,256,1024,4096] [--repeats 200]
                                    [--out bench/results/rendezvous_cost.json]

bench/rendezvous_scale.py runs N of torch's handlers on this machine's cores. On a cluster
each node's work runs on its own CPU; here all of it shares the machine, so at some N the
nodes' own work fills the cores and the run measures the machine, not the protocol. This
bench measures that work, one operation at a time, with torch's own classes
(torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, torch 2.13.0, git cf30153c4c)
over a real TCPStore holding the state N nodes make:

- ``poll``: what every node that waits for the others does once a second. The op executor
  (``_DistributedRendezvousOpExecutor.run``) sleeps ``_delay(seconds=1)`` after each SYNC
  action and the state holder (``_BackendRendezvousStateHolder``, ``cache_duration=1``)
  then reads the whole state again: ``sync()`` gets it from the store, unpickles it and
  sanitizes it (every node's last beat against the dead-node age).
- ``beat``: a keep-alive, every ``keep_alive_interval`` (5 s) on every node that has
  joined, while it waits as well (``_RendezvousJoinOp`` returns KEEP_ALIVE before SYNC):
  a poll, the node's own beat written into the state, and ``sync()`` writing the whole
  state back by the store's compare-and-set and unpickling what it returns.
- ``record``: ``get_method_name``, which names the method in every event a node records
  (``_record``: each write it makes, each beat); it calls ``inspect.stack()`` twice, and its
  cost grows with the calling thread's depth, so it is timed from a thread as deep as the
  handler's keep-alive timer's.

From them, the cores N nodes need: ``poll_cores`` = N polls a second while they all wait
for the last one; ``beat_cores`` = N beats every interval (each with its record) once they
have joined. A simulation holds the protocol only while these stay well under the cores
it has. Each node's address is a pod's DNS name of a realistic length
(``node-0042.train.default.svc.cluster.local``): the state's size grows with it. The timings
are the median of ``--repeats`` of each operation on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(ROOT / "entrypoints"))

from _options import MOST_IN_STATE, node_counts, whole_number  # noqa: E402  (bench/ is on sys.path: run by path)

from torchpod.rendezvous import TORCH_KEEP_ALIVE_S as KEEP_ALIVE_S  # noqa: E402  (standard library only)

RUN_ID = "cost"
POLL_EVERY_S = 1.0  # _delay(seconds=1) after a SYNC action, and the state holder's cache_duration
ADDRESS = "node-{:04d}.train.default.svc.cluster.local"
THREAD_DEPTH = 12  # frames under a keep-alive timer's thread: Thread._bootstrap ... _keep_alive ... _record


def median_s(work, repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``work``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_a_deep_thread(work, depth: int):
    """``work()``'s result, called from a new thread ``depth`` frames down."""
    out: list = []

    def down(n: int):
        return work() if n == 0 else down(n - 1)

    thread = threading.Thread(target=lambda: out.append(down(depth)))
    thread.start()
    thread.join()
    return out[0]


def one_size(world: int, repeats: int) -> dict:
    """The three operations' times against a store that holds the state of ``world`` nodes."""
    import pickle

    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    backend = C10dRendezvousBackend(store, RUN_ID)
    timeout = dr.RendezvousTimeout()
    settings = dr.RendezvousSettings(RUN_ID, world, world, timeout, timedelta(seconds=KEEP_ALIVE_S), 3)
    state = dr._RendezvousState()  # noqa: SLF001 - torch's own state, as its handlers build it
    now = datetime.now(timezone.utc)
    nodes = [dr._NodeDesc(ADDRESS.format(i), 100 + i, 0) for i in range(world)]  # noqa: SLF001
    for rank, node in enumerate(nodes):
        state.participants[node] = rank
        state.last_heartbeats[node] = now
    state.deadline = now + timedelta(seconds=30)
    backend.set_state(pickle.dumps(state))
    holder = dr._BackendRendezvousStateHolder(backend, settings, cache_duration=0)  # noqa: SLF001

    def poll() -> None:
        holder.sync()

    def beat() -> None:
        holder.sync()
        holder.state.last_heartbeats[nodes[0]] = datetime.now(timezone.utc)
        holder.mark_dirty()
        if holder.sync() is not True:
            raise RuntimeError("a beat's compare-and-set failed with no other writer")

    poll()  # warm: the first read also fetches the fencing token
    state_bytes = len(store.get("torch.rendezvous." + RUN_ID))
    poll_s, beat_s = median_s(poll, repeats), median_s(beat, repeats)
    record_s = in_a_deep_thread(lambda: median_s(lambda: dr.get_method_name(), repeats), THREAD_DEPTH)
    del store
    return {"nodes": world, "state_bytes": state_bytes, "poll_ms": round(poll_s * 1e3, 3),
            "beat_ms": round(beat_s * 1e3, 3), "record_ms": round(record_s * 1e3, 3),
            "poll_cores": round(world * poll_s / POLL_EVERY_S, 4),
            "beat_cores": round(world * (beat_s + record_s) / KEEP_ALIVE_S, 4)}


def table(rows: list[dict], cores: int) -> str:
    out = [f"{'nodes':>5} {'state KB':>8} {'poll ms':>7} {'beat ms':>7} {'record ms':>9} "
           f"{'cores: N polls/s':>16} {'cores: N beats/5 s':>18}   (this machine: {cores} cores)"]
    for r in rows:
        out.append(f"{r['nodes']:>5} {r['state_bytes'] / 1024:>8.1f} {r['poll_ms']:>7.2f} {r['beat_ms']:>7.2f} "
                   f"{r['record_ms']:>9.2f} {r['poll_cores']:>16.2f} {r['beat_cores']:>18.2f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=node_counts(MOST_IN_STATE), default="64,256,1024,4096")
    parser.add_argument("--repeats", type=whole_number(100000), default=200, help="times each operation is timed")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "rendezvous_cost.json")
    args = parser.parse_args(argv)
    import torch

    rows = []
    for world in args.nodes:
        rows.append(one_size(world, args.repeats))
        print(table(rows[-1:], os.cpu_count() or 0).splitlines()[-1], flush=True)
    print("\n" + table(rows, os.cpu_count() or 0))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"bench": "rendezvous_cost", "torch": torch.__version__, "repeats": args.repeats,
                                    "keep_alive_interval_s": KEEP_ALIVE_S, "poll_every_s": POLL_EVERY_S,
                                    "machine": {"cpus": os.cpu_count(), "arch": platform.machine()},
                                    "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
