"""`torchpod doctor --nccl-log` on large and hostile logs: time and peak memory of the
streamed reader (torchpod.readers.Lines + nccl_log.analyze) beside the reader it replaced
(the whole file read as text, every NCCL line kept, a lazy `Using network` pattern).

    python bench/hostile_reads.py [--sizes 1,10,100] [--old-timeout 120]

Each measurement runs in a fresh child process that reports its own CPU time and peak
RSS (ru_maxrss), so one run's memory never hides another's. Logs are generated: a real
NCCL_DEBUG=INFO header, then ring/channel and collective lines repeated to the size
(MB = 10**6 bytes); the hostile case is one line of 200 KB of spaces after
`NCCL INFO Using network`. The old reader is taken from git (the commit before the
bounded reader) and given --old-timeout seconds per case. Prints a table and writes
bench/results/hostile_reads.json. Timing lives here, not in tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "0953c9c"  # the last commit with the unbounded reader
HEADER = (
    "node-0:112:112 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    "node-0:112:112 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB net1:172.18.128.3<0>\n"
    "node-0:112:112 [0] NCCL INFO Using network IB\n"
)
BODY = (
    "node-0:112:140 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA\n"
    "node-0:112:140 [0] NCCL INFO Channel 01/0 : 2[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
    "node-0:112:112 [0] NCCL INFO AllReduce: opCount 1a2b sendbuff 0x7f00 recvbuff 0x7f00 count 1048576 "
    "datatype 7 op 0 root 0 comm 0x55aa [nranks=16] stream 0x55bb\n"
    "epoch 3 step 1200 loss 2.3141 lr 3.0e-4 throughput 1432.1 samples/s\n"
)
SPACES = "node-0:1:1 [0] NCCL INFO Using network " + " " * 200_000 + "x\nnode-0:1:1 [0] NCCL INFO Using network IB\n"

CHILD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
start = time.process_time()
if mode == "new":
    sys.path.insert(0, sys.argv[3])
    from torchpod import doctor
    verdict = doctor.read_log(path)
else:
    import importlib.util, pathlib
    spec = importlib.util.spec_from_file_location("old_nccl_log", sys.argv[3])
    old = importlib.util.module_from_spec(spec); sys.modules["old_nccl_log"] = old; spec.loader.exec_module(old)
    verdict = old.analyze(pathlib.Path(path).read_text(errors="replace"))
print(json.dumps({"cpu_s": time.process_time() - start, "transport": verdict.transport,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_log(path: Path, megabytes: int) -> None:
    target = megabytes * 10**6
    block = BODY * max(1, (1 << 20) // len(BODY))
    with open(path, "w") as f:
        f.write(HEADER)
        written = len(HEADER)
        while written < target:
            f.write(block)
            written += len(block)


def measure(mode: str, log: Path, code: Path | str, timeout: float) -> dict:
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, mode, str(log), str(code)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"cpu_s": None, "peak_rss_mib": None, "transport": None, "note": f"did not end within {timeout:g} s"}
    if done.returncode != 0:
        return {"cpu_s": None, "peak_rss_mib": None, "transport": None, "note": done.stderr.strip()[-200:]}
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="log sizes in MB, comma-separated")
    parser.add_argument("--old-timeout", type=float, default=120.0, help="seconds the old reader gets per case")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        old_code = Path(tmp) / "old_nccl_log.py"
        old_code.write_text(subprocess.run(["git", "show", f"{OLD_COMMIT}:entrypoints/torchpod/nccl_log.py"],
                                           cwd=ROOT, capture_output=True, text=True, check=True).stdout)
        cases = [(f"{mb} MB log", lambda p, mb=mb: write_log(p, mb)) for mb in map(int, args.sizes.split(","))]
        cases.append(("200 KB line of spaces", lambda p: p.write_text(SPACES)))
        for name, make in cases:
            log = Path(tmp) / "nccl.log"
            make(log)
            new = measure("new", log, ROOT / "entrypoints", 600)
            old = measure("old", log, old_code, args.old_timeout)
            rows.append({"case": name, "bytes": log.stat().st_size, "new": new, "old": old})
            log.unlink()
    print(f"{'case':24} {'new cpu s':>10} {'new MiB':>8} {'old cpu s':>10} {'old MiB':>8}  verdict")
    for r in rows:
        def cell(v, fmt):
            return format(v, fmt) if v is not None else "-"
        print(f"{r['case']:24} {cell(r['new']['cpu_s'], '10.2f')} {cell(r['new']['peak_rss_mib'], '8.0f')} "
              f"{cell(r['old']['cpu_s'], '10.2f')} {cell(r['old']['peak_rss_mib'], '8.0f')}  "
              f"{r['new']['transport']} / {r['old']['transport'] or r['old'].get('note')}")
    out = ROOT / "bench" / "results" / "hostile_reads.json"
    out.write_text(json.dumps({"python": sys.version.split()[0], "rows": rows}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
