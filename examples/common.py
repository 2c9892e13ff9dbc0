"""Shared by the example workloads: pick the device and backend, time the first
collective, and print one machine-readable result line per rank.

Device-agnostic on purpose: NCCL on the local GPU when CUDA is available, gloo on the CPU
otherwise, so the same script runs on a GH200 node and in a CPU-only container. The
torchpod demo, tests and benchmark read the ``TORCHPOD_RESULT {json}`` lines; people read
the rest. This module must stay import-light (torch only) and never read a scheduler's
variables: torchrun has already turned those into RANK/LOCAL_RANK/WORLD_SIZE.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

RESULT_PREFIX = "TORCHPOD_RESULT "


def setup(timeout_s: float = 120.0) -> torch.device:
    """init_process_group with the backend this machine supports; returns the device.

    ``timeout_s`` bounds every collective (gloo's default is 30 minutes): a peer that
    dies mid-step then fails this rank quickly, so torchrun can restart the group.
    """
    signal.signal(signal.SIGTERM, _on_sigterm)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    return device


def _on_sigterm(signum, _frame) -> None:
    """torchrun forwards `docker stop`/scheduler SIGTERM to workers: say so and exit."""
    log(f"received signal {signum}; exiting")
    raise SystemExit(128 + signum)


def first_allreduce(device: torch.device) -> float:
    """One tiny all-reduce that every rank waits on; returns the wall clock after it."""
    probe = torch.ones(1, device=device)
    dist.all_reduce(probe)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.time()


def gather_hostnames(device: torch.device) -> list[str]:
    """Every rank's hostname, in rank order.

    Done with a fixed-width byte tensor rather than ``all_gather_object``, which needs
    numpy (not a torch dependency, and not in every image).
    """
    width = 256
    mine = torch.zeros(width, dtype=torch.uint8)
    raw = socket.gethostname().encode()[:width]
    mine[: len(raw)] = torch.tensor(list(raw), dtype=torch.uint8)
    mine = mine.to(device)
    everyone = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for t in everyone]


def identity() -> dict:
    """Who this process is, as torchrun told it (and where it runs)."""
    env = os.environ
    return {
        "rank": dist.get_rank() if dist.is_initialized() else int(env.get("RANK", "0")),
        "world_size": dist.get_world_size() if dist.is_initialized() else int(env.get("WORLD_SIZE", "1")),
        "local_rank": int(env.get("LOCAL_RANK", "0")),
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", "1")),
        "group_rank": int(env.get("GROUP_RANK", "0")),
        "restart_count": int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
        "run_id": env.get("TORCHELASTIC_RUN_ID", ""),
        "hostname": socket.gethostname(),
        "backend": dist.get_backend() if dist.is_initialized() else None,
    }


def result(workload: str, **fields) -> None:
    """Print this rank's result line (flushed: container logs are read while running)."""
    line = {"workload": workload, **identity(), **fields}
    # One write per line: ranks of one node share the container's stdout, and print()
    # writes text and newline separately, so unbuffered lines could interleave.
    sys.stdout.write(RESULT_PREFIX + json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()


def log(message: str) -> None:
    rank = dist.get_rank() if dist.is_initialized() else os.environ.get("RANK", "?")
    sys.stdout.write(f"[rank {rank}] {message}\n")
    sys.stdout.flush()
