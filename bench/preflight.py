"""How long `torchpod run -m torchpod.preflight` takes on 2, 4 and 8 containers as nodes,
beside the same job running only the all-reduce check (examples/allreduce_check.py).

    python bench/preflight.py [--nodes 2 4 8] [--repeats 1] [--out FILE]

Each run starts N containers of the default image as a Slurm job on their own Docker
network, with this checkout's launcher bind-mounted over the image's (runner.dev_mounts:
the preflight is measured as the tree has it, no rebuild), and times from the first
container's start to the last one's exit: rendezvous, the doctor on every node, the pair
rounds (two, three for an odd count) and the sweep. The plain job runs alternately with it
on the same machine, so the ratio (what preflight adds to a job's start) is measured side
by side. Prints a table and writes bench/results/preflight.json (``--out``), which
docs/measurements.md renders. Timing lives here, not in the tests.
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
from torchpod_toolkit import engine  # noqa: E402
from torchpod_toolkit.cluster import runner, topology  # noqa: E402
from torchpod_toolkit.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402

LABEL = "torchpod.bench"
# --allow-undecided: two containers without a floor cannot be told apart and would exit 1;
# the bench times the run, it does not judge the nodes
PREFLIGHT_ARGS = ["--pair-bytes", "4M", "--max-bytes", "1M", "--iters", "3", "--warmup", "1", "--allow-undecided"]
COMMANDS = {"preflight": ["-m", PREFLIGHT_MODULE, *PREFLIGHT_ARGS],
            "plain": [f"{runner.EXAMPLES}/allreduce_check.py"]}


def one(client, image: str, nodes: int, vols: dict, what: str) -> dict:
    job = f"pf-{uuid.uuid4().hex[:6]}"
    topo = topology.build("slurm", nodes, job)
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHPOD_RDZV_TIMEOUT": "120"}
    cl = runner.Cluster(client, image, topo, COMMANDS[what], {LABEL: job}, env=env, volumes=vols)
    try:
        t0 = time.time()
        cl.start()
        codes = cl.wait(600)
        seconds = time.time() - t0
        found = [r for r in cl.results() if r.get("workload") == "preflight"]
        if codes != [0] * nodes or (what == "preflight" and len(found) != 1):
            raise SystemExit(f"{what} on {nodes} nodes failed {codes}:\n{cl.all_logs()[-4000:]}")
        run = {"what": what, "nodes": nodes, "seconds": round(seconds, 2)}
        if found:
            run.update(failing=found[0]["failing"], pairs=found[0]["pairs"])
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
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "preflight.json"))
    args = parser.parse_args(argv)
    if args.repeats < 1 or any(n < 2 for n in args.nodes):
        parser.error("expected --repeats >= 1 and every --nodes value >= 2")
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    image = defn.ref(defn.arch("x86_64"))
    client = engine.docker_client()
    runner.image_or_error(client, image)
    vols = runner.dev_mounts(ROOT, defn.python)
    rows = []
    for nodes in args.nodes:
        runs = [one(client, image, nodes, vols, what) for _ in range(args.repeats) for what in COMMANDS]
        median = {w: statistics.median(r["seconds"] for r in runs if r["what"] == w) for w in COMMANDS}
        rows.append({"nodes": nodes, "median_s": round(median["preflight"], 2),
                     "plain_median_s": round(median["plain"], 2),
                     "ratio": round(median["preflight"] / median["plain"], 3), "runs": runs})
        print(f"  {nodes} nodes: preflight {median['preflight']:.1f} s, plain job {median['plain']:.1f} s", flush=True)
    print(f"\n{'nodes':>6} {'preflight s':>12} {'plain job s':>12} {'ratio':>7}")
    for row in rows:
        print(f"{row['nodes']:>6} {row['median_s']:>12.1f} {row['plain_median_s']:>12.1f} {row['ratio']:>7.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "torchpod.preflight on N containers as nodes (gloo) beside the plain all-reduce check",
        "image": image, "repeats": args.repeats, "command": COMMANDS["preflight"], "host": host(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
