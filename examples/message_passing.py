"""Message passing (Lambda Labs' multi-node PyTorch tutorial): rank 0 sends a tensor to every other rank, point to point.

As in the seed, rank 0 ``send``s to ranks 1..W-1 and each of them ``recv``s from 0. Two
changes: the backend follows the device (NCCL on a GPU, gloo on a CPU) instead of a
``--backend`` flag that has to match the machine, and the payload carries a value so the
receiver can check it (rank 0 sends ``1000 + dst``); each receiver then answers rank 0,
which checks every answer. One ``TORCHPOD_RESULT`` line per rank; exit 1 on a mismatch.

    torchpod run /opt/torchpod/examples/message_passing.py
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from common import log, result, setup


def main() -> int:
    device = setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    ok, seen = True, {}
    if rank == 0:
        for dst in range(1, world):
            dist.send(torch.tensor([1000.0 + dst], device=device), dst=dst)
            log(f"Rank 0 sent data to Rank {dst}")
        for src in range(1, world):
            reply = torch.zeros(1, device=device)
            dist.recv(reply, src=src)
            seen[src] = reply.item()
            ok = ok and reply.item() == 2000.0 + src
            log(f"Rank 0 has received the reply {reply.item():.0f} from rank {src}")
    else:
        tensor = torch.zeros(1, device=device)
        dist.recv(tensor, src=0)
        ok = tensor.item() == 1000.0 + rank
        seen[0] = tensor.item()
        log(f"Rank {rank} has received data {tensor.item():.0f} from rank 0")
        dist.send(torch.tensor([2000.0 + rank], device=device), dst=0)
    result("message_passing", ok=ok, received={str(k): v for k, v in seen.items()})
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
