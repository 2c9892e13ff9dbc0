"""All-reduce bus bandwidth (gloo, `torchpod bench allreduce`) against the raw TCP
throughput between the same two containers (iperf3 from Debian), side by side in one run.

    python bench/allreduce.py [--repeats 3] [--max-bytes 64M]

Each repeat starts two containers of the default image as a Volcano job on their own
Docker network; node 1 first measures TCP to node 0 with iperf3 (5 s, one stream; the
host's /usr/bin/iperf3 and its two libraries are bind-mounted), then both run
`torchpod bench allreduce`. Reports per repeat and the median: iperf3 GB/s, gloo's peak
busbw GB/s (2 ranks: busbw = algbw), and their ratio. Writes bench/results/allreduce.json.
Timing lives here, not in tests. CPU only: on a GPU host the same workload runs NCCL.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod_toolkit.cluster import runner, topology  # noqa: E402
from torchpod_toolkit.imagebuild import host  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402

LABEL = "torchpod.bench"
# node 1 measures TCP to node 0 (iperf3 one-off server there), then both run the bench
SCRIPT = r"""
set -e
peer=${VC_WORKER_HOSTS%%,*}
if [ "$VC_TASK_INDEX" = 0 ]; then
  /opt/iperf/iperf3 -s -1 -p 5201 >/dev/null
else
  for i in $(seq 50); do /opt/iperf/iperf3 -c "$peer" -p 5201 -t 5 -J >/tmp/iperf.json 2>/dev/null && break; sleep 0.2; done
  python -c "import json; d=json.load(open('/tmp/iperf.json')); print('TORCHPOD_IPERF', d['end']['sum_received']['bits_per_second'])"
fi
exec torchpod bench allreduce --max-bytes {max_bytes} --iters 10
"""  # noqa: E501 - the shell lines read best whole


def iperf_volumes() -> dict:
    binary = shutil.which("iperf3")
    if binary is None:
        raise SystemExit("iperf3 is not installed on this host; apt-get install iperf3")
    libs = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    wanted = [m.group(1) for m in re.finditer(r"=> (\S*lib(?:iperf|sctp)\S*)", libs)]
    vols = {binary: {"bind": "/opt/iperf/iperf3", "mode": "ro"}}
    vols.update({lib: {"bind": f"/opt/iperf/{Path(lib).name}", "mode": "ro"} for lib in wanted})
    return vols


def one(client, image: str, max_bytes: str, vols: dict) -> dict:
    job = f"ar-{uuid.uuid4().hex[:6]}"
    topo = topology.build("volcano", 2, job)
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHPOD_RDZV_TIMEOUT": "120",
           "LD_LIBRARY_PATH": "/opt/iperf"}
    cl = runner.Cluster(client, image, topo, [SCRIPT.replace("{max_bytes}", max_bytes)], {LABEL: job},
                        env=env, entrypoint=["/bin/sh", "-c"], volumes=vols)
    try:
        cl.start()
        codes = cl.wait(600)
        logs = cl.all_logs()
        if codes != [0, 0]:
            raise SystemExit(f"bench job failed {codes}:\n{logs[-4000:]}")
        tcp_bps = float(re.search(r"TORCHPOD_IPERF (\S+)", cl.logs(1)).group(1))
        result = next(r for r in cl.results(0) if r.get("workload") == "allreduce_bench")
        return {"tcp_gbps": tcp_bps / 8e9, "busbw_gbps": result["peak_busbw_gbps"], "rows": result["rows"],
                "ok": all(r["ok"] for r in cl.results() if r.get("workload") == "allreduce_bench")}
    finally:
        cl.close()
        runner.sweep(client, LABEL, job)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-bytes", default="64M")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "allreduce.json"))
    args = parser.parse_args(argv)
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    image = defn.ref(defn.arch("x86_64"))
    client = host.docker_client()
    runner.image_or_error(client, image)
    vols = iperf_volumes()
    runs = []
    for i in range(args.repeats):
        row = one(client, image, args.max_bytes, vols)
        row["ratio"] = row["busbw_gbps"] / row["tcp_gbps"]
        runs.append(row)
        print(f"  run {i + 1}: iperf3 {row['tcp_gbps']:.3f} GB/s, gloo peak busbw {row['busbw_gbps']:.3f} GB/s, "
              f"ratio {row['ratio']:.3f}", flush=True)
    median = {k: statistics.median(r[k] for r in runs) for k in ("tcp_gbps", "busbw_gbps", "ratio")}
    print(f"\n{'':8} {'iperf3 TCP GB/s':>16} {'gloo busbw GB/s':>16} {'busbw / TCP':>12}")
    print(f"{'median':8} {median['tcp_gbps']:16.3f} {median['busbw_gbps']:16.3f} {median['ratio']:12.3f}")
    print("\nlast run's sweep (node 0):")
    for r in runs[-1]["rows"]:
        print(f"  {r['bytes']:>10} B  {r['time_us']:>10.1f} us  busbw {r['busbw_gbps']:.3f} GB/s")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"image": image, "nodes": 2, "repeats": args.repeats,
                                          "median": median, "runs": runs}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
