"""DDP training of a small ResNet on random images (the Run:ai
multi-node example, made device-agnostic).

What that example demonstrates is kept: every process wraps a ResNet in
DistributedDataParallel, runs forward/backward/step on random inputs for a few steps and
prints its loss; gradients are all-reduced by DDP. What changed:

- torchvision is not in the torchpod image, so the model is a ResNet-style network written
  here in plain torch (a stem, BasicBlocks with identity/downsample shortcuts, global
  pooling, a linear head); ``--width 64 --blocks 2,2,2,2 --image-size 224 --classes 1000``
  gives ResNet-18's shape, the defaults a tiny one that runs in seconds on a CPU.
- The backend follows the device: NCCL on the local GPU, gloo on the CPU.
- The optimizer is created once, not on every step, and inputs are seeded per rank.
- Each rank prints a ``TORCHPOD_RESULT`` line: steps/s, final loss, and a checksum of the
  parameters, which must be identical on every rank if DDP kept the replicas in sync.

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
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from common import first_allreduce, log, result, setup  # noqa: E402


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, width: int, blocks: list[int], classes: int):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, cin = [], width
        for stage, count in enumerate(blocks):
            cout = width * 2 ** stage
            for i in range(count):
                layers.append(BasicBlock(cin, cout, 2 if (i == 0 and stage > 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="training steps")
    parser.add_argument("--batch-size", type=int, default=8, help="images per process per step")
    parser.add_argument("--image-size", type=int, default=32, help="random image height and width")
    parser.add_argument("--width", type=int, default=8, help="channels of the first stage (ResNet-18: 64)")
    parser.add_argument("--blocks", default="1,1,1,1", help="BasicBlocks per stage (ResNet-18: 2,2,2,2)")
    parser.add_argument("--classes", type=int, default=10, help="output classes (ImageNet: 1000)")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep after each step (the seed: 1)")
    args = parser.parse_args(argv)

    device = setup()
    t_first = first_allreduce(device)
    rank, local_rank = dist.get_rank(), device.index
    torch.manual_seed(1234)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = ResNet(args.width, [int(b) for b in args.blocks.split(",")], args.classes).to(device)
    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    gen = torch.Generator().manual_seed(rank)

    loss = torch.zeros(())
    t0 = time.time()
    for step in range(args.steps):
        inputs = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=gen).to(device)
        target = torch.randint(0, args.classes, (args.batch_size,), generator=gen).to(device)
        loss = loss_fn(model(inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log(f"step {step + 1}/{args.steps} loss {loss.item():.4f}")
        if args.sleep:
            time.sleep(args.sleep)
    elapsed = time.time() - t0
    with torch.no_grad():
        checksum = float(sum(p.double().sum() for p in model.parameters()))
    result("ddp_resnet", ok=bool(torch.isfinite(loss).item()), steps=args.steps,
           steps_per_s=round(args.steps / elapsed, 3) if elapsed > 0 else None,
           final_loss=round(loss.item(), 6), param_checksum=checksum,
           t_start=T_START, t_first_allreduce=t_first)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
