"""Rendezvous benchmark: seconds from `docker run` to the first completed all-reduce, for
N containers as nodes, through `torchpod run` vs a hand-written torchrun command with the
same rendezvous settings (oracle-quickstart/oci-hpc-oke's Volcano recipe), measured side by side: the two
launchers alternate within one run so that both see the same machine state.

Both use a Volcano worker-only job (VC_TASK_INDEX, VC_WORKER_HOSTS), c10d on the first
listed host, is_host from the task index, --local-addr from the host list, join_timeout 120,
one CPU process per node (gloo). The clock starts before the network and containers are
created and stops at the last rank's first all-reduce (examples/allreduce_check.py).

    python bench/rendezvous.py --nodes 2,4,8 --repeats 1     (or: invoke bench-rendezvous)

Prints a table and writes bench/results/rendezvous.json. Timing lives here, not in tests.
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

from _options import MOST_CONTAINERS, node_counts, whole_number  # noqa: E402  (bench/ is on sys.path: run by path)

from torchpod.contract import RDZV_PORT_DEFAULT  # noqa: E402
from torchpod_toolkit.cluster import runner, topology  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402

LABEL = "torchpod.bench"
CHECK = f"{runner.EXAMPLES}/allreduce_check.py"
# oci-hpc-oke's Volcano recipe, "Using c10d as the backend", with the port torchpod uses and the same timeout.
HAND_WRITTEN = (
    "exec torchrun --rdzv-id=$JOB_ID --rdzv-backend=c10d "
    f"--rdzv-endpoint=$(IFS=',' read -ra w <<< \"$VC_WORKER_HOSTS\"; echo ${{w[0]}}):{RDZV_PORT_DEFAULT} "
    "--rdzv-conf=join_timeout=120,is_host=$(if [ $VC_TASK_INDEX == 0 ]; then echo true; else echo false; fi) "
    "--local_addr=$(IFS=',' read -ra w <<< \"$VC_WORKER_HOSTS\"; echo ${w[VC_TASK_INDEX]}) "
    "--nproc_per_node=1 --nnodes=$VC_WORKER_NUM " + CHECK + " --size 1"
)


def one(client, image: str, launcher: str, n: int, dev: dict) -> dict:
    job = f"b{n}-{launcher[:2]}-{uuid.uuid4().hex[:4]}"
    topo = topology.build("volcano", n, job)
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHPOD_RDZV_TIMEOUT": "120",
           "JOB_ID": job}
    if launcher == "torchpod":
        cmd, entry = [CHECK, "--size", "1"], None
    else:
        cmd, entry = [HAND_WRITTEN], ["/bin/bash", "-c"]
    cl = runner.Cluster(client, image, topo, cmd, {LABEL: job}, env=env, entrypoint=entry, volumes=dev)
    t0 = time.time()
    try:
        cl.start()
        codes = cl.wait(600)
        results = cl.results()
        ok = codes == [0] * n and len(results) == n and all(r["ok"] for r in results)
        first = max(r["t_first_allreduce"] for r in results) - t0 if ok else None
        if not ok:
            print(cl.all_logs()[-3000:], file=sys.stderr)
        return {"launcher": launcher, "nodes": n, "ok": ok, "seconds": first, "exit_codes": codes}
    finally:
        cl.close()
        runner.sweep(client, LABEL, job)


def table(rows: list[dict], counts: list[int]) -> str:
    out = ["nodes  torchpod run s  hand-written torchrun s  torchpod/hand  runs",
           "-----  --------------  -----------------------  -------------  ----"]
    summary = []
    for n in counts:
        tp = [r["seconds"] for r in rows if r["nodes"] == n and r["launcher"] == "torchpod" and r["ok"]]
        hw = [r["seconds"] for r in rows if r["nodes"] == n and r["launcher"] == "torchrun" and r["ok"]]
        a = statistics.median(tp) if tp else None
        b = statistics.median(hw) if hw else None
        ratio = a / b if a and b else None
        summary.append({"nodes": n, "torchpod_s": a, "torchrun_s": b, "ratio": ratio,
                        "runs": [len(tp), len(hw)]})
        out.append(f"{n:>5}  {a if a is None else f'{a:.2f}':>14}  {b if b is None else f'{b:.2f}':>23}  "
                   f"{'-' if ratio is None else f'{ratio:.3f}':>13}  {len(tp)}+{len(hw)}")
    return "\n".join(out), summary


def main(argv=None) -> int:
    import docker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=node_counts(MOST_CONTAINERS), default="2,4,8",
                        help="comma-separated node counts")
    parser.add_argument("--repeats", type=whole_number(100), default=1, help="runs per node count and launcher")
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    parser.add_argument("--image", default=defn.ref(defn.arch("x86_64")))
    parser.add_argument("--dev-mount", action="store_true", help="bind-mount this checkout's launcher/examples")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "rendezvous.json"))
    args = parser.parse_args(argv)
    counts = args.nodes
    client = docker.from_env()
    runner.image_or_error(client, args.image)
    dev = runner.dev_mounts(ROOT, defn.python) if args.dev_mount else {}
    rows = []
    for rep in range(args.repeats):
        for n in counts:
            order = ["torchpod", "torchrun"] if rep % 2 == 0 else ["torchrun", "torchpod"]
            for launcher in order:  # interleaved: each pair runs back to back
                row = one(client, args.image, launcher, n, dev)
                took = row["seconds"] if row["seconds"] is None else round(row["seconds"], 2)
                print(f"  {launcher:8} nodes={n} -> {took} s"
                      f" exit={row['exit_codes']}", flush=True)
                rows.append(row)
    text, summary = table(rows, counts)
    print(text)
    info = client.info()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "docker run -> first completed all-reduce",
        "image": args.image, "repeats": args.repeats,
        "host": {"cpus": info.get("NCPU"), "mem_bytes": info.get("MemTotal"),
                 "docker": info.get("ServerVersion"), "python": platform.python_version()},
        "summary": summary, "runs": rows,
    }, indent=2))
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
