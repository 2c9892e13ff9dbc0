"""Slurm benchmark: seconds from submission to the first completed all-reduce of a 2-node
job, on a real Slurm cluster in containers (`sbatch` of the script `invoke manifests
--scheduler slurm --runtime none` writes, real `srun`) vs the same job through the
containers-as-nodes harness (`invoke demo --scheduler slurm`: the model's Slurm variables,
containers created and started per job). Measured side by side, alternating.

The Slurm clock starts just before `sbatch` (the cluster's daemons are already up, as on a
real cluster); the harness clock starts before its network and containers are created (as
`invoke demo` reports). Both stop at the last rank's first all-reduce
(examples/allreduce_check.py; the containers share this host's clock).

    python bench/slurm.py --repeats 3

Prints a table and writes bench/results/slurm.json. Timing lives here, not in tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod_toolkit.cluster import runner, slurm, topology  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402
from torchpod_toolkit.manifests.render import render  # noqa: E402
from torchpod_toolkit.manifests.spec import JobSpec  # noqa: E402

LABEL = "torchpod.bench"
CHECK = (f"{runner.EXAMPLES}/allreduce_check.py", "--size", "1")
ENV = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHPOD_RDZV_TIMEOUT": "120"}


def first_allreduce(results: list[dict], t0: float, n: int) -> float | None:
    done = [r for r in results if r.get("workload") == "allreduce_check" and r.get("ok")]
    return max(r["t_first_allreduce"] for r in done) - t0 if len(done) == n else None


def via_sbatch(cluster: slurm.SlurmCluster, n: int) -> float | None:
    (script,) = render(JobSpec("slurm", n, "registry.example.com/torchpod/pytorch:bench", CHECK, name="bench",
                               gpus_per_node=0, runtime="none", walltime="00:10:00"))
    t0 = time.time()
    jobid = cluster.submit(script.text, script.name)
    state = cluster.wait(jobid, 300)
    out = cluster.read(f"{slurm.SHARED}/bench-{jobid}.out")
    if state != "COMPLETED":
        print(out[-3000:], file=sys.stderr)
    return first_allreduce(runner.parse_results(out), t0, n)


def via_harness(client, image: str, n: int) -> float | None:
    job = f"bs-{uuid.uuid4().hex[:4]}"
    cl = runner.Cluster(client, image, topology.build("slurm", n, job), list(CHECK), {LABEL: job}, env=ENV)
    t0 = time.time()
    try:
        cl.start()
        cl.wait(300)
        return first_allreduce(cl.results(), t0, n)
    finally:
        cl.close()
        runner.sweep(client, LABEL, job)


def main(argv=None) -> int:
    import docker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2)
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    parser.add_argument("--image", default=defn.ref(defn.arch("x86_64")))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "slurm.json"))
    args = parser.parse_args(argv)
    client = docker.from_env()
    runner.image_or_error(client, args.image)
    node_image = slurm.node_image(client, args.image)
    rows = []
    label = {LABEL: f"slurm-{uuid.uuid4().hex[:6]}"}
    with slurm.SlurmCluster(client, node_image, args.nodes, label, env=ENV) as cluster:
        cluster.start()
        for rep in range(args.repeats):
            order = ["sbatch", "harness"] if rep % 2 == 0 else ["harness", "sbatch"]
            for how in order:
                s = via_sbatch(cluster, args.nodes) if how == "sbatch" else via_harness(client, args.image, args.nodes)
                print(f"  {how:8} -> {s if s is None else round(s, 2)} s", flush=True)
                rows.append({"how": how, "seconds": s})
    a = [r["seconds"] for r in rows if r["how"] == "sbatch" and r["seconds"] is not None]
    b = [r["seconds"] for r in rows if r["how"] == "harness" and r["seconds"] is not None]
    ma, mb = (statistics.median(a) if a else None), (statistics.median(b) if b else None)
    ratio = ma / mb if ma and mb else None
    print("how                                   median s  runs")
    print(f"sbatch on the Slurm cluster           {ma if ma is None else f'{ma:8.2f}'}  {len(a)}")
    print(f"invoke demo --scheduler slurm harness {mb if mb is None else f'{mb:8.2f}'}  {len(b)}")
    print(f"ratio sbatch/harness                  {'-' if ratio is None else f'{ratio:8.3f}'}")
    info = client.info()
    Path(args.out).write_text(json.dumps({
        "benchmark": "submission -> first completed all-reduce, 2-node Slurm job",
        "image": args.image, "node_image": node_image, "nodes": args.nodes, "repeats": args.repeats,
        "host": {"cpus": info.get("NCPU"), "mem_bytes": info.get("MemTotal"),
                 "docker": info.get("ServerVersion"), "python": platform.python_version()},
        "rows": rows, "median_s": {"sbatch": ma, "harness": mb}, "ratio_sbatch_over_harness": ratio,
    }, indent=2) + "\n")
    return 0 if a and b else 1


if __name__ == "__main__":
    sys.exit(main())
