"""All-reduce check: every rank proves the group it joined is the one it expected.

Each rank contributes ``rank + 1 + i`` at position ``i`` of a vector; after a SUM
all-reduce every element must equal ``W(W+1)/2 + W*i`` exactly (small integers are exact
in float32). The hostnames of all ranks are gathered too, so a caller can tell how many
nodes (containers, machines) really took part. Prints one ``TORCHPOD_RESULT`` line per rank
with world size, node count, the timings below, and ``ok``; exits 1 when the check fails.

Timings (wall clock, seconds since the epoch, comparable across containers of one host):
``t_start`` when this process began, ``t_init`` after init_process_group, ``t_first_allreduce``
after the first collective completed.

    torchpod run /opt/torchpod/examples/allreduce_check.py --expect-world 4
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from common import first_allreduce, gather_hostnames, log, result, setup  # noqa: E402


def stall_before_the_collective(seconds: float) -> None:
    log(f"stalling {seconds:g} s before the all-reduce the others wait in")
    time.sleep(seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-world", type=int, default=None, help="fail unless the world has this many ranks")
    parser.add_argument("--expect-nodes", type=int, default=None, help="fail unless ranks span this many hosts")
    parser.add_argument("--size", type=int, default=1024, help="elements in the checked vector")
    parser.add_argument("--steps", type=int, default=1, help="repeat the checked all-reduce this many times")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep between steps (keeps the job running)")
    parser.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    parser.add_argument("--report-env", action="append", default=[], metavar="NAME",
                        help="put this variable's value in the result (did the job's environment reach the worker?)")
    parser.add_argument("--stall-rank", type=int, default=None, metavar="RANK",
                        help="this rank stalls before the checked all-reduce (a hang for torchpod's watch to name)")
    parser.add_argument("--stall-seconds", type=float, default=600.0, help="how long --stall-rank stalls")
    args = parser.parse_args(argv)

    device = setup(args.timeout)
    t_init = time.time()
    t_first = first_allreduce(device)
    rank, world = dist.get_rank(), dist.get_world_size()

    hosts = gather_hostnames(device)
    index = torch.arange(args.size, dtype=torch.float32, device=device)
    expected = world * (world + 1) / 2 + world * index
    ok, bad = True, 0
    if rank == args.stall_rank:
        stall_before_the_collective(args.stall_seconds)
    for step in range(args.steps):
        t = rank + 1 + index
        dist.all_reduce(t)
        wrong = int((t != expected).sum().item())
        bad += wrong
        ok = ok and wrong == 0
        if args.step_seconds:
            log(f"step {step + 1}/{args.steps} all-reduce {'ok' if wrong == 0 else 'WRONG'}")
            time.sleep(args.step_seconds)
    reasons = []
    if bad:
        reasons.append(f"{bad} elements differ from W(W+1)/2 + W*i")
    if args.expect_world is not None and world != args.expect_world:
        reasons.append(f"world size {world}, expected {args.expect_world}")
    nodes = len(set(hosts))
    if args.expect_nodes is not None and nodes != args.expect_nodes:
        reasons.append(f"ranks span {nodes} hosts, expected {args.expect_nodes}")
    ok = not reasons
    log(f"all-reduce check {'passed' if ok else 'FAILED: ' + '; '.join(reasons)} "
        f"(world {world} on {nodes} hosts)")
    # cpus: the CPUs this worker may run on (its affinity mask: what the batch system bound it to)
    result("allreduce_check", ok=ok, reasons=reasons, nodes=nodes, hosts=sorted(set(hosts)),
           cpus=len(os.sched_getaffinity(0)), env={name: os.environ.get(name) for name in args.report_env},
           size=args.size, steps=args.steps, t_start=T_START, t_init=t_init,
           t_first_allreduce=t_first, init_s=round(t_init - T_START, 3))
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
