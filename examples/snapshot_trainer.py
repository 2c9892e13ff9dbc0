"""Fault-tolerant DDP training with snapshots (PyTorch's ddp-tutorial-series
multinode_torchrun.py, made device-agnostic).

Upstream's ``multinode_torchrun.py``: a Trainer that saves ``{"MODEL_STATE", "EPOCHS_RUN"}``
every ``save_every`` epochs and, when the snapshot exists at start, loads it and continues
from there, so that torchrun can restart the whole group after a node fails
(``--max-restarts``) without losing finished work. What changed, and why:

- Backend follows the device: NCCL on the local GPU, gloo on the CPU.
- ``--snapshot-path`` may point at a volume every node shares; then only global rank 0
  writes it, atomically (write + rename), so a crash mid-write never leaves half a file.
  (Upstream writes one snapshot per machine from local rank 0.)
- ``EPOCHS_RUN`` counts finished epochs (``epoch + 1``). Upstream stores the index of the
  last finished epoch and resumes *at* it, running that epoch twice after every restart.
- The snapshot also keeps ``EPOCH_LOG`` (every epoch finished, in order, across restarts),
  so a test can prove that no finished epoch was lost or repeated.
- The loss is mean squared error: the seed's cross-entropy over a single output is always
  zero. ``--epoch-seconds`` slows an epoch down so a fault can land mid-training.

    torchpod run /opt/torchpod/examples/snapshot_trainer.py 10 1 --snapshot-path /shared/snapshot.pt
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

from common import first_allreduce, log, result, setup  # noqa: E402


class MyTrainDataset(Dataset):
    def __init__(self, size: int):
        gen = torch.Generator().manual_seed(0)  # the same data on every node
        self.data = [(torch.rand(20, generator=gen), torch.rand(1, generator=gen)) for _ in range(size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


class Trainer:
    def __init__(self, model, train_data: DataLoader, optimizer, save_every: int,
                 snapshot_path: str, device: torch.device, epoch_seconds: float) -> None:
        self.device = device
        self.global_rank = dist.get_rank()
        self.model = model.to(device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epoch_seconds = epoch_seconds
        self.epochs_run = 0
        self.epoch_log: list[int] = []
        self.resumed_from = None
        self.snapshot_path = snapshot_path
        self.loss = float("nan")
        if os.path.exists(snapshot_path):
            log("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model, device_ids=[device.index] if device.type == "cuda" else None)

    def _load_snapshot(self, snapshot_path: str) -> None:
        snapshot = torch.load(snapshot_path, map_location=self.device)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        self.epoch_log = list(snapshot.get("EPOCH_LOG", range(self.epochs_run)))
        self.resumed_from = self.epochs_run
        log(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets) -> float:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        b_sz = len(next(iter(self.train_data))[0])
        log(f"[GPU{self.global_rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self.loss = self._run_batch(source.to(self.device), targets.to(self.device))
        if self.epoch_seconds:
            time.sleep(self.epoch_seconds)

    def _save_snapshot(self, epoch: int) -> None:
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "EPOCHS_RUN": epoch + 1,
            "EPOCH_LOG": self.epoch_log,
        }
        tmp = f"{self.snapshot_path}.tmp{os.getpid()}"
        torch.save(snapshot, tmp)
        os.replace(tmp, self.snapshot_path)
        log(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path} (EPOCHS_RUN={epoch + 1})")

    def train(self, max_epochs: int) -> list[int]:
        done = []
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            done.append(epoch)
            self.epoch_log.append(epoch)
            dist.barrier()  # every rank finished this epoch before it counts as done
            if self.global_rank == 0 and ((epoch + 1) % self.save_every == 0 or epoch + 1 == max_epochs):
                self._save_snapshot(epoch)
        return done


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", "--batch-size", default=32, type=int,
                        help="Input batch size on each device (default: 32)")
    parser.add_argument("--snapshot-path", "--snapshot_path", default="snapshot.pt",
                        help="where the snapshot lives; a shared volume for several nodes")
    parser.add_argument("--dataset-size", type=int, default=2048, help="random samples in the dataset")
    parser.add_argument("--epoch-seconds", type=float, default=0.0, help="extra seconds per epoch")
    args = parser.parse_args(argv)

    device = setup(timeout_s=60)
    t_first = first_allreduce(device)
    torch.manual_seed(0)
    dataset = MyTrainDataset(args.dataset_size)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                        pin_memory=device.type == "cuda", sampler=DistributedSampler(dataset))
    trainer = Trainer(model, loader, optimizer, args.save_every, args.snapshot_path, device, args.epoch_seconds)
    t0 = time.time()
    done = trainer.train(args.total_epochs)
    elapsed = time.time() - t0
    steps = len(done) * len(loader)
    result("snapshot_trainer", ok=trainer.epoch_log == list(range(args.total_epochs)),
           epochs_this_run=done, epoch_log=trainer.epoch_log, resumed_from=trainer.resumed_from,
           total_epochs=args.total_epochs, final_loss=round(trainer.loss, 6),
           steps=steps, steps_per_s=round(steps / elapsed, 3) if elapsed > 0 and steps else None,
           t_start=T_START, t_first_allreduce=t_first)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
