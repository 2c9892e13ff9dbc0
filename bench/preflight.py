"""How long `torchpod run -m torchpod.preflight` takes on 2, 4 and 8 containers as nodes,
beside the same job running only the all-reduce check (examples/allreduce_check.py).

    python bench/preflight.py [--nodes 2 4 8] [--repeats 1] [--slow 4 5 7] [--out FILE]

Each run starts N containers of the default image as a Slurm job on their own Docker
network, with this checkout's launcher bind-mounted over the image's (runner.dev_mounts:
the preflight is measured as the tree has it, no rebuild), and times from the first
container's start to the last one's exit: rendezvous, the doctor on every node, the pair
rounds and the sweep. The plain job runs alternately with it on the same machine, so the
ratio (what preflight adds to a job's start) is measured side by side. Where N is larger
than every ``--slow`` node, a third run throttles those nodes' links as each starts
(torchpod_toolkit.cluster.throttle: needs root, nsenter and tc) and times the verdict with
its retest round: with 4, 5 and 7 of 8 slow, node 5 has no proven partner after the first
rounds, 4 and 7 one each and healthy 6 none, so one retest round runs; the run fails
unless exactly those nodes are named. Prints a table and writes
bench/results/preflight.json (``--out``), which docs/measurements.md renders. Timing lives here, not in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod.contract import PREFLIGHT_MODULE  # noqa: E402
from torchpod_toolkit.cluster import runner, throttle, topology  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402
from torchpod_toolkit.imagebuild.host import docker_client  # noqa: E402

LABEL = "torchpod.bench"
# --allow-undecided: two containers without a floor cannot be told apart and would exit 1;
# the bench times the run, it does not judge the nodes
PREFLIGHT_ARGS = ["--pair-bytes", "4M", "--max-bytes", "1M", "--iters", "3", "--warmup", "1", "--allow-undecided"]
COMMANDS = {"preflight": ["-m", PREFLIGHT_MODULE, *PREFLIGHT_ARGS],
            "plain": [f"{runner.EXAMPLES}/allreduce_check.py"]}
COMMANDS["slow"] = COMMANDS["preflight"]


def one(client, image: str, nodes: int, vols: dict, what: str, slow: tuple[int, ...] = ()) -> dict:
    job = f"pf-{uuid.uuid4().hex[:6]}"
    topo = topology.build("slurm", nodes, job)
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHPOD_RDZV_TIMEOUT": "120"}
    cl = runner.Cluster(client, image, topo, COMMANDS[what], {LABEL: job}, env=env, volumes=vols)
    try:
        t0 = time.time()
        for node in range(nodes):  # throttled as each starts, before its torch import ends
            cl.start(only=[node])
            if node in slow:
                throttle.node(cl.nodes[node].container)
        codes = cl.wait(600)
        seconds = time.time() - t0
        found = [r for r in cl.results() if r.get("workload") == "preflight"]
        expected = [1 if slow else 0] * nodes
        if codes != expected or (what != "plain" and len(found) != 1) or \
                (found and found[0]["slow_nodes"] != sorted(slow)):
            verdict = {k: found[0][k] for k in ("slow_nodes", "undecided_nodes", "failing", "rounds")} if found else {}
            raise SystemExit(f"{what} on {nodes} nodes failed {codes}: {json.dumps(verdict)}\n{cl.all_logs()[-4000:]}")
        run = {"what": what, "nodes": nodes, "seconds": round(seconds, 2)}
        if found:
            run.update(failing=found[0]["failing"], pairs=found[0]["pairs"],
                       rounds=[{"kind": r["kind"], "pairs": len(r["pairs"]), "seconds": r["seconds"]}
                               for r in found[0]["rounds"]])
        return run
    finally:
        cl.close()
        runner.sweep(client, LABEL, job)


def host() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--slow", type=int, nargs="+", default=[4, 5, 7],
                        help="nodes throttled in a third run, where N is larger than each")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "preflight.json"))
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(n < 2 for n in args.nodes) or any(n < 0 for n in args.slow):
        parser.error("expected --repeats >= 1, every --nodes value >= 2 and every --slow node >= 0")
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    image = defn.ref(defn.arch("x86_64"))
    client = docker_client()
    runner.image_or_error(client, image)
    vols = runner.dev_mounts(ROOT, defn.python)
    rows = []
    for nodes in args.nodes:
        slow = tuple(sorted(set(args.slow))) if max(args.slow) < nodes else ()
        kinds = [w for w in COMMANDS if w != "slow" or slow]
        runs = [one(client, image, nodes, vols, what, slow if what == "slow" else ())
                for _ in range(args.repeats) for what in kinds]
        median = {w: statistics.median(r["seconds"] for r in runs if r["what"] == w) for w in kinds}
        row = {"nodes": nodes, "median_s": round(median["preflight"], 2), "plain_median_s": round(median["plain"], 2),
               "ratio": round(median["preflight"] / median["plain"], 3), "runs": runs}
        if slow:
            row.update(slow_nodes=list(slow), slow_median_s=round(median["slow"], 2),
                       slow_ratio=round(median["slow"] / median["plain"], 3))
        rows.append(row)
        print(f"  {nodes} nodes: preflight {median['preflight']:.1f} s, plain job {median['plain']:.1f} s"
              + (f", {len(slow)} slow {median['slow']:.1f} s" if slow else ""), flush=True)
    print(f"\n{'nodes':>6} {'preflight s':>12} {'plain job s':>12} {'ratio':>7} {'slow nodes s':>13}")
    for row in rows:
        slow_s = f"{row['slow_median_s']:.1f}" if "slow_median_s" in row else "-"
        print(f"{row['nodes']:>6} {row['median_s']:>12.1f} {row['plain_median_s']:>12.1f} {row['ratio']:>7.2f} "
              f"{slow_s:>13}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "torchpod.preflight on N containers as nodes (gloo) beside the plain all-reduce check",
        "image": image, "repeats": args.repeats, "command": COMMANDS["preflight"], "host": host(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
