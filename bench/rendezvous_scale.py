"""torch's c10d rendezvous at 8 to 1,024 simulated nodes on this machine: how long until
every node has its rank, what the store serves meanwhile, whether every node's keep-alive
still gets through once the job runs, and whether a node that starts late still joins.

    python bench/rendezvous_scale.py [--nodes 8,64,128,256] [--procs 8] [--late-s 0] [--spread-s 0]
                                     [--settings torch,torchpod|custom] [--join-timeout 600]
                                     [--heartbeat-timeout 5] [--keep-alive-interval 5] [--steady-s 20]
                                     [--out bench/results/rendezvous_scale.json]

Each node is torch's own rendezvous handler as torchrun's agent makes it
(``DynamicRendezvousHandler.from_backend`` over a ``C10dRendezvousBackend``, torch 2.13,
torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), with a TCPStore client of its
own, calling ``next_rendezvous()`` in a thread: N nodes are N handlers spread over
``--procs`` processes. The store's server, the real TCPStore, runs in a process of its own,
so its CPU time is the store's load. Each size runs with each of ``--settings``, side by
side: ``torch``, torch's defaults (join 600 s, last call 30 s, a keep-alive beat every 5 s
that may take 5 s, dead after 3 missed); ``torchpod``, the join timeout torchpod's plan
sets for that many nodes (``torchpod.rendezvous.settings``: the join timeout and the
keep-alive interval); ``custom``, ``--join-timeout``, ``--heartbeat-timeout`` and
``--keep-alive-interval``.

What it measures, per N:
- ``complete_s``: from the first node's join to the last node's rank (the rendezvous);
- each node's own wait (median, p99), the nodes that failed and why;
- the CPU seconds of the nodes' processes (``nodes_cpu_s``): on a cluster each node's is
  its own, here they share this machine's cores;
- the store server's CPU seconds during the rendezvous and per second afterwards, while
  every node only keeps alive for ``--steady-s`` seconds (torch writes the whole state,
  every node's entry, at each beat: its size in bytes is recorded);
- at the end, the nodes whose last beat is older than the interval times the attempts:
  torch's sanitizer drops them from the state as dead (``_sanitize``), so a rendezvous
  whose beats cannot get through on time loses healthy nodes (``dropped``: the nodes that
  had a rank and are no longer in the state); and the beats that missed their deadline
  (``missed_beats``, torch's own warning, counted from the nodes' logs).

With ``--late-s D`` the last node starts D seconds after the others; they wait for it
(min = max = N), and it joins if the join timeout allows. With ``--spread-s S`` the nodes
start one after another, evenly over S seconds, as the pods of a real job do (each pulls
and starts on its own node), and ``after_last_start_s`` is the time from the last node's
start to the last rank; with 0 all start at once, the worst case for torch's
compare-and-set, whose joins then collide. Every node runs on this
machine's cores: a node's own work (unpickling the state each second) is shared by all,
where on a cluster each node has its own, so the figures are an upper bound of a real
rendezvous's time; the store's load is the real store's. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from _options import MOST_SIMULATED, node_counts, seconds, whole_number  # noqa: E402  (bench/ is on sys.path: run by path)

from torchpod import readers, rendezvous  # noqa: E402  (standard library only)

TORCH_DEFAULTS = {"join_timeout": rendezvous.TORCH_JOIN_S, "last_call_timeout": 30, "close_timeout": 30,
                  "heartbeat_timeout": rendezvous.TORCH_HEARTBEAT_S,
                  "keep_alive_interval": rendezvous.TORCH_KEEP_ALIVE_S, "keep_alive_max_attempt": 3}
MISSED_BEAT = "has failed to send a keep-alive heartbeat"  # torch's warning (DynamicRendezvousHandler._keep_alive)
RUN_ID = "scale"
TICK = 2.0  # seconds between two looks at the server's CPU time
SETTINGS = ("torch", "torchpod", "custom")
MOST_PROCS = 256
DAY_S = 86400


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU seconds (/proc/PID/stat, fields 14 and 15, after the
    command name, which may hold any bytes), read through the launcher's bounded reader."""
    path = f"/proc/{pid}/stat"
    stat = readers.read_head(path, what=path, expected="procfs's stat line", limit=readers.ATTR_CAP)
    fields = stat.decode("utf-8", "replace").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the store's process -------------------------------------------------------------------

def serve() -> None:
    """The TCPStore server: prints its port, then lives until its stdin closes."""
    from datetime import timedelta

    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=3600))
    print(json.dumps({"port": store.port}), flush=True)
    sys.stdin.read()


# -- a process of nodes --------------------------------------------------------------------

def nodes(port: int, world: int, count: int, conf: dict, late: float, steady: float,
          starts: list[float]) -> None:
    """``count`` handlers, each in a thread, node i starting ``starts[i]`` s after "go";
    the last starts ``late`` s after its start. Prints one JSON line per node, then the
    state it reads at the end."""
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler, RendezvousTimeout

    timeout = RendezvousTimeout(join=timedelta(seconds=conf["join_timeout"]),
                                last_call=timedelta(seconds=conf["last_call_timeout"]),
                                close=timedelta(seconds=conf["close_timeout"]),
                                heartbeat=timedelta(seconds=conf["heartbeat_timeout"]))
    lines, lock, done = [], threading.Lock(), threading.Event()
    handlers = []

    def one(i: int) -> None:
        time.sleep(starts[i] + (late if i == count - 1 else 0))
        started = time.time()
        row = {"start": started}
        try:
            store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=3600))
            handler = DynamicRendezvousHandler.from_backend(
                RUN_ID, store, C10dRendezvousBackend(store, RUN_ID), world, world, "127.0.0.1", timeout,
                keep_alive_interval=conf["keep_alive_interval"], keep_alive_max_attempt=conf["keep_alive_max_attempt"])
            handlers.append(handler)
            info = handler.next_rendezvous()
            row.update(end=time.time(), rank=info.rank, world=info.world_size)
        except Exception as exc:  # noqa: BLE001 - a node's failure is a figure of the run
            row.update(end=time.time(), error=f"{type(exc).__name__}: {exc}"[:300])
        with lock:
            lines.append(row)
            if len(lines) == count:
                done.set()

    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"  # no second server per rank 0: the store's load alone
    print(json.dumps({"ready": True}), flush=True)  # torch imported: the rendezvous's CPU starts at "go"
    sys.stdin.readline()
    for i in range(count):
        threading.Thread(target=one, args=(i,), daemon=True).start()
    done.wait()
    for row in lines:
        print(json.dumps(row), flush=True)
    time.sleep(steady)  # the nodes' keep-alive threads beat meanwhile
    print(json.dumps({"end_of_steady": time.time()}), flush=True)
    sys.stdin.read()  # until the main process has read the state


def read_state(port: int) -> dict:
    """The rendezvous state as the store holds it: size, participants and beats' ages."""
    from datetime import timedelta

    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    raw = store.get("torch.rendezvous." + RUN_ID)
    state = pickle.loads(base64.b64decode(raw))  # noqa: S301 - the state torch's own handlers wrote here
    now = datetime.now(timezone.utc)
    ages = [(now - beat).total_seconds() for beat in state.last_heartbeats.values()]
    return {"state_bytes": len(raw), "participants": len(state.participants), "beats": len(ages),
            "oldest_beat_s": round(max(ages), 2) if ages else None}


# -- one size --------------------------------------------------------------------------------

def start_offsets(world: int, procs: int, spread: float) -> list[list[float]]:
    """Each process's nodes' start times after "go": node g of the job (dealt round the
    processes, so that every process starts nodes all along) starts at g * spread / world."""
    return [[g * spread / world for g in range(p, world, procs)] for p in range(procs)]


def measure(world: int, procs: int, conf: dict, late: float, steady: float, spread: float = 0.0) -> dict:
    # the server warns once per client that goes away: its stderr says nothing about the load
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    logs = [tempfile.TemporaryFile("w+") for _ in range(min(procs, world))]
    port = json.loads(server.stdout.readline())["port"]
    procs = min(procs, world)
    offsets = start_offsets(world, procs, spread)
    counts = [len(starts) for starts in offsets]
    workers = [subprocess.Popen([sys.executable, __file__, "--nodes-of", str(port), str(world), str(count),
                                 json.dumps(conf), str(late if i == procs - 1 else 0), str(steady),
                                 json.dumps(offsets[i])],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logs[i], text=True)
               for i, count in enumerate(counts)]
    for worker in workers:
        json.loads(worker.stdout.readline())  # ready
    cpu0, nodes_cpu0 = cpu_seconds(server.pid), sum(cpu_seconds(w.pid) for w in workers)
    t0 = time.time()
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    rows = []
    for worker, count in zip(workers, counts):
        rows.extend(json.loads(worker.stdout.readline()) for _ in range(count))
    t_done, cpu_done = time.time(), cpu_seconds(server.pid)
    nodes_cpu = sum(cpu_seconds(w.pid) for w in workers) - nodes_cpu0
    for worker in workers:
        json.loads(worker.stdout.readline())  # the steady stretch is over
    cpu_steady = cpu_seconds(server.pid)
    state = read_state(port)
    for proc in (*workers, server):
        proc.stdin.close()
        proc.terminate()
        proc.wait(timeout=30)
    missed = 0
    for log in logs:
        log.seek(0)
        missed += sum(MISSED_BEAT in line for line in log)
        log.close()
    ok = [r for r in rows if "rank" in r]
    waits = sorted(r["end"] - r["start"] for r in ok)
    errors = sorted({r["error"].split(":")[0] for r in rows if "error" in r})
    dead_after = conf["keep_alive_interval"] * conf["keep_alive_max_attempt"]
    return {"nodes": world, "procs": procs, "settings": conf, "late_s": late, "spread_s": spread,
            "complete_s": round(max(r["end"] for r in rows) - min(r["start"] for r in rows), 2),
            "after_last_start_s": round(max(r["end"] for r in rows) - max(r["start"] for r in rows), 2),
            "ranks_ok": sorted(r["rank"] for r in ok) == list(range(world)),
            "failed": len(rows) - len(ok), "errors": errors,
            "wait_median_s": round(statistics.median(waits), 2) if waits else None,
            "wait_p99_s": round(waits[min(len(waits) - 1, int(0.99 * len(waits)))], 2) if waits else None,
            "server_cpu_s": round(cpu_done - cpu0, 2), "nodes_cpu_s": round(nodes_cpu, 1),
            "wall_s": round(t_done - t0, 2),
            "steady_s": steady, "server_cpu_per_s_steady": round((cpu_steady - cpu_done) / steady, 3),
            "missed_beats": missed,
            **state, "dropped": len(ok) - state["participants"] if ok else 0,
            "beats_older_than_dead_after": state["oldest_beat_s"] is not None and state["oldest_beat_s"] > dead_after}


def settings_for(label: str, world: int, join: int, heartbeat: int, keep_alive: int = 5) -> dict:
    """The handlers' settings: torch's defaults, torchpod's for ``world`` nodes, or the given."""
    if label == "torch":
        return dict(TORCH_DEFAULTS)
    if label == "torchpod":
        chosen = rendezvous.settings(world)
        return {**TORCH_DEFAULTS, "join_timeout": chosen.join_s}
    if label == "custom":
        return {**TORCH_DEFAULTS, "join_timeout": join, "heartbeat_timeout": heartbeat,
                "keep_alive_interval": keep_alive}
    raise ValueError(f"settings {label!r}: expected one of {', '.join(SETTINGS)}")


def table(rows: list[dict]) -> str:
    head = (f"{'nodes':>5} {'settings':>8} {'join s':>6} {'beat wait s':>11} {'beat every s':>12} {'late s':>6} "
            f"{'spread s':>8} {'complete s':>10} {'after last s':>12} "
            f"{'wait p50':>8} {'failed':>6} {'nodes cpu s':>11} {'store cpu s':>11} {'store cpu/s':>11} "
            f"{'state KB':>8} {'missed beats':>12} {'dropped':>7}")
    out = [head]
    for r in rows:
        conf = r["settings"]
        out.append(f"{r['nodes']:>5} {r['label']:>8} {conf['join_timeout']:>6} {conf['heartbeat_timeout']:>11} "
                   f"{conf['keep_alive_interval']:>12} {r['late_s']:>6g} {r.get('spread_s', 0):>8g} "
                   f"{r['complete_s']:>10} {r.get('after_last_start_s', '')!s:>12} {r['wait_median_s']!s:>8} "
                   f"{r['failed']:>6} "
                   f"{r['nodes_cpu_s']:>11} {r['server_cpu_s']:>11} {r['server_cpu_per_s_steady']:>11} "
                   f"{r['state_bytes'] / 1024:>8.1f} {r['missed_beats']:>12} {r['dropped']:>7}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        serve()
        return 0
    if argv[:1] == ["--nodes-of"]:
        port, world, count, conf, late, steady, starts = argv[1:8]
        nodes(int(port), int(world), int(count), json.loads(conf), float(late), float(steady), json.loads(starts))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=node_counts(MOST_SIMULATED), default="8,64,128,256")
    parser.add_argument("--procs", type=whole_number(MOST_PROCS), default=8,
                        help=f"processes of nodes (1 to {MOST_PROCS})")
    parser.add_argument("--late-s", type=seconds, default=0.0)
    parser.add_argument("--spread-s", type=seconds, default=0.0,
                        help="the nodes start evenly over this many seconds (0: all at once)")
    parser.add_argument("--settings", default="torch,torchpod",
                        help="torch (its defaults), torchpod (torchpod.rendezvous.settings for each size), or "
                             "custom (the timeouts below); a list runs each at every size, side by side")
    for option in ("join_timeout", "heartbeat_timeout", "keep_alive_interval"):  # whole seconds, as torch takes
        parser.add_argument(f"--{option.replace('_', '-')}", type=whole_number(DAY_S), default=TORCH_DEFAULTS[option])
    parser.add_argument("--steady-s", type=seconds, default=20.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "rendezvous_scale.json")
    args = parser.parse_args(argv)
    labels = args.settings.split(",")
    if not all(label in SETTINGS for label in labels):
        parser.error(f"--settings={args.settings!r}: expected some of {', '.join(SETTINGS)}, separated by commas")
    import torch
    rows = []
    for world in args.nodes:
        for label in labels:
            conf = settings_for(label, world, args.join_timeout, args.heartbeat_timeout, args.keep_alive_interval)
            rows.append({"label": label, **measure(world, args.procs, conf, args.late_s, args.steady_s,
                                                   args.spread_s)})
            print(table(rows[-1:]).splitlines()[-1] if len(rows) > 1 else table(rows), flush=True)
    text = table(rows)
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"bench": "rendezvous_scale", "torch": torch.__version__,
                                    "machine": {"cpus": os.cpu_count(), "arch": platform.machine()},
                                    "procs": args.procs, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
