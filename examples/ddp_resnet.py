"""DDP training of torchvision's ResNet-18 on random images (the Run:ai multi-node
example, made device-agnostic).

What that example demonstrates is kept: every process wraps ``torchvision.models.resnet18``
in DistributedDataParallel, runs forward/backward/step on random inputs for a few steps
and prints its loss; gradients are all-reduced by DDP. What changed:

- The backend follows the device: NCCL on the local GPU, gloo on the CPU.
- Inputs default to 32x32 images in 10 classes (the example: 224x224, 1000 classes), so a
  CPU container runs a step in a fraction of a second; ``--image-size 224 --classes 1000``
  gives the original shapes.
- The optimizer is created once, not on every step, and inputs are seeded per rank.
- Each rank prints a ``TORCHPOD_RESULT`` line: steps/s, final loss, and a checksum of the
  parameters, which must be identical on every rank if DDP kept the replicas in sync.

Timings (wall clock, seconds since the epoch, comparable across containers of one host):
``t_start`` when this process began, ``t_imported`` once torch and torchvision are imported,
``t_init`` after init_process_group, ``t_first_allreduce`` after the first collective,
``t_first_step`` after the first optimizer step (the model built, wrapped and stepped once).

    torchpod run /opt/torchpod/examples/ddp_resnet.py --steps 10
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from common import first_allreduce, log, result, setup  # noqa: E402

T_IMPORTED = time.time()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="training steps")
    parser.add_argument("--batch-size", type=int, default=8, help="images per process per step")
    parser.add_argument("--image-size", type=int, default=32, help="random image height and width (example: 224)")
    parser.add_argument("--classes", type=int, default=10, help="output classes (ImageNet: 1000)")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep after each step (example: 1)")
    args = parser.parse_args(argv)

    device = setup()
    t_init = time.time()
    t_first = first_allreduce(device)
    rank, local_rank = dist.get_rank(), device.index
    torch.manual_seed(1234)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = torchvision.models.resnet18(num_classes=args.classes).to(device)
    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    gen = torch.Generator().manual_seed(rank)

    loss = torch.zeros(())
    t0, t_first_step = time.time(), None
    for step in range(args.steps):
        inputs = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen).to(device)
        target = torch.randint(0, args.classes, (args.batch_size,), generator=gen).to(device)
        loss = loss_fn(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        t_first_step = t_first_step or time.time()
        log(f"step {step + 1}/{args.steps} loss {loss.item():.4f}")
        if args.sleep:
            time.sleep(args.sleep)
    elapsed = time.time() - t0
    with torch.no_grad():
        checksum = float(sum(p.double().sum() for p in model.parameters()))
    result("ddp_resnet", ok=bool(torch.isfinite(loss).item()), steps=args.steps,
           steps_per_s=round(args.steps / elapsed, 3) if elapsed > 0 else None,
           final_loss=round(loss.item(), 6), param_checksum=checksum,
           t_start=T_START, t_imported=T_IMPORTED, t_init=t_init, t_first_allreduce=t_first,
           t_first_step=t_first_step)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
