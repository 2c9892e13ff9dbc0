"""All-reduce bandwidth, as nccl-tests' all_reduce_perf reports it, over the process group
torchrun formed: a workload, so it runs on any scheduler through `torchpod run`.

    torchpod bench allreduce [--min-bytes 1K] [--max-bytes 64M] [--factor 4] [--iters 10]
                             [--warmup 3] [--json FILE]
    (= torchpod run -m torchpod.bench_allreduce ...)

For each size: time per all-reduce (float32, sum; the mean over ``--iters`` after
``--warmup``), algbw = bytes / time, busbw = algbw * 2(n-1)/n, the factor nccl-tests uses
for all-reduce (nccl-tests doc/PERFORMANCE.md) so a ring's wire rate can be compared with
a link's. NCCL on GPUs, gloo on CPUs. Rank 0 prints the table and writes ``--json``; every
rank prints a TORCHPOD_RESULT line for the containers-as-nodes harness.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from datetime import timedelta

from .contract import RESULT_PREFIX
from .errors import InputError, one_line
from .words import plural
from .workload_options import Parser, parse_bytes, whole


def sizes(lo: int, hi: int, factor: int) -> list[int]:
    out, size = [], lo
    while size <= hi:
        out.append(size - size % 4)  # whole float32 elements
        size *= factor
    return out


def bus_factor(world: int) -> float:
    return 2 * (world - 1) / world if world > 1 else 0.0


def table(rows: list[dict], world: int, backend: str) -> str:
    head = (f"# all_reduce, float32 sum, {plural(world, 'rank')}, {backend}; busbw = algbw * 2(n-1)/n\n"
            f"{'size (B)':>12} {'count':>11} {'time (us)':>11} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
    lines = [head] + [f"{r['bytes']:>12} {r['count']:>11} {r['time_us']:>11.1f} {r['algbw_gbps']:>13.3f} "
                      f"{r['busbw_gbps']:>13.3f}" for r in rows]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The bench's options, as its workers read them and `torchpod bench allreduce --help` shows them."""
    parser = Parser(prog="torchpod bench allreduce", description="All-reduce bandwidth over every rank of the "
                    "job, as nccl-tests' all_reduce_perf reports it (size, time, algbw, busbw).")
    parser.add_argument("--min-bytes", type=parse_bytes, default=parse_bytes("1K"), metavar="SIZE",
                        help="smallest message, e.g. 4, 1K, 64M (default 1K)")
    parser.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("64M"), metavar="SIZE",
                        help="largest message (default 64M)")
    parser.add_argument("--factor", type=whole, default=4, metavar="N", help="size step, at least 2 (default 4)")
    parser.add_argument("--iters", type=whole, default=10, metavar="N", help="timed all-reduces per size (default 10)")
    parser.add_argument("--warmup", type=whole, default=3, metavar="N",
                        help="untimed all-reduces before them (default 3)")
    parser.add_argument("--json", metavar="FILE", help="where rank 0 writes the results")
    return parser


def check_options(argv) -> argparse.Namespace:
    """The bench's options as its workers will read them; else one InputError."""
    checker = parser()
    args = checker.parse_args(list(argv))
    if args.factor < 2 or args.iters < 1 or args.warmup < 0 or args.min_bytes > args.max_bytes:
        checker.error("expected --factor >= 2, --iters >= 1, --warmup >= 0 and --min-bytes <= --max-bytes")
    return args


def measure_row(torch, dist, size: int, args: argparse.Namespace, device, world: int) -> dict:
    """One size: ``args.warmup`` untimed all-reduces, then the mean of ``args.iters`` (the
    bench's rows, and preflight's sweep between two nodes)."""
    cuda = device.type == "cuda"
    buf = torch.ones(size // 4, dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(buf)
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(buf)
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / args.iters
    # on the group's device: an NCCL-only group has no backend for a CPU tensor ("No backend
    # type associated with device type cpu", torch/distributed/distributed_c10d.py)
    took = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace, as in nccl-tests
    seconds = took.item()
    algbw = size / seconds / 1e9
    return {"bytes": size, "count": size // 4, "time_us": seconds * 1e6, "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(world)}


def main(argv=None) -> int:
    try:
        args = check_options(sys.argv[1:] if argv is None else argv)
    except InputError as exc:
        print(f"torchpod: error: {one_line(exc)}", file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist

    if "RANK" not in os.environ:
        print("torchpod: error: bench allreduce runs under torchrun; start it with `torchpod bench allreduce` "
              "or `torchpod run -m torchpod.bench_allreduce`", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda") if cuda else torch.device("cpu")
    rows = [measure_row(torch, dist, size, args, device, world)
            for size in sizes(args.min_bytes, args.max_bytes, args.factor)]
    # the numbers, not only the time: every rank contributes rank + 1
    check = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(check)
    ok = bool(torch.all(check == world * (world + 1) / 2).item())
    if rank == 0:
        print(table(rows, world, backend), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"world_size": world, "backend": backend, "rows": rows}, f, indent=2)
    peak = max(r["busbw_gbps"] for r in rows)
    print(RESULT_PREFIX + json.dumps({"workload": "allreduce_bench", "rank": rank, "world_size": world,
                                           "hostname": socket.gethostname(), "backend": backend, "ok": ok,
                                           "peak_busbw_gbps": peak, "rows": rows}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
