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
- The loss is mean squared error: a cross-entropy over a single output is always
  zero. ``--epoch-seconds`` slows an epoch down (spread over its steps) so a fault can land
  mid-training.
- SIGUSR1 asks for a stop (Slurm's ``--signal`` ahead of the time limit, which torchpod's
  sbatch script passes to the step and torchrun, with ``--signals-to-handle``, to its
  workers). The handler only sets a flag; at every step boundary the ranks all-reduce it
  (MAX), so all of them stop before the same step, even if the signal reached them at
  different times. Rank 0 then saves a snapshot with ``EPOCH_STEPS_RUN`` (the steps of the
  unfinished epoch already run) and every rank exits with REQUEUE_EXIT. A run that loads such
  a snapshot skips those steps of that epoch (the sampler's order is fixed per epoch), so
  every step runs exactly once across the runs. (Lightning saves from its SIGUSR1 handler
  itself: Lightning-AI/pytorch-lightning, src/lightning/pytorch/trainer/connectors/
  signal_connector.py; a flag agreed at a step boundary never saves half a step.)

    torchpod run /opt/torchpod/examples/snapshot_trainer.py 10 1 --snapshot-path /shared/snapshot.pt
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

from common import first_allreduce, log, result, setup  # noqa: E402

# The exit code of a run stopped by SIGUSR1 after its snapshot: sysexits.h's EX_TEMPFAIL
# ("temporary failure; the user is invited to retry"). Under torchrun it shows in torchrun's
# own log only: torchrun exits 1 after any signal it handles, which is why torchpod's sbatch
# script requeues on the signal it passed on, not on an exit code.
REQUEUE_EXIT = 75


class StopRequest:
    """A SIGUSR1 handler that only records the signal (a handler runs between any two
    bytecodes: saving there could catch a half-finished step)."""

    def __init__(self) -> None:
        self.signum = 0

    def __call__(self, signum: int, _frame) -> None:
        self.signum = signum


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
                 snapshot_path: str, device: torch.device, epoch_seconds: float,
                 stop: StopRequest | None = None) -> None:
        self.device = device
        self.global_rank = dist.get_rank()
        self.model = model.to(device)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epoch_seconds = epoch_seconds
        self.epochs_run = 0
        self.steps_run = 0  # steps of epoch `epochs_run` run before a stop (EPOCH_STEPS_RUN)
        self.steps_this_run = 0
        self.stop = stop or StopRequest()
        self.stopped_at: tuple[int, int] | None = None  # (epoch, step) this run stopped before
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
        self.steps_run = snapshot.get("EPOCH_STEPS_RUN", 0)
        self.epoch_log = list(snapshot.get("EPOCH_LOG", range(self.epochs_run)))
        self.resumed_from = self.epochs_run
        log(f"Resuming training from snapshot at Epoch {self.epochs_run}"
            + (f", step {self.steps_run}" if self.steps_run else ""))

    def _run_batch(self, source, targets) -> float:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _agree_to_stop(self) -> bool:
        """Whether any rank was asked to stop: one 4-byte all-reduce (MAX) per step, so that
        every rank stops before the same step."""
        flag = torch.tensor([1 if self.stop.signum else 0], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _run_epoch(self, epoch: int) -> bool:
        """The epoch's steps from ``steps_run`` on; False when the ranks agreed to stop first."""
        steps = len(self.train_data)
        b_sz = len(next(iter(self.train_data))[0])
        log(f"[GPU{self.global_rank}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {steps}")
        self.train_data.sampler.set_epoch(epoch)
        for step, (source, targets) in enumerate(self.train_data):
            if step < self.steps_run:
                continue  # run before the last stop: the sampler gives the same batches in the same order
            if self._agree_to_stop():
                self._stop(epoch, step)
                return False
            self.loss = self._run_batch(source.to(self.device), targets.to(self.device))
            self.steps_this_run += 1
            if self.epoch_seconds:
                time.sleep(self.epoch_seconds / steps)
        self.steps_run = 0
        return True

    def _stop(self, epoch: int, step: int) -> None:
        self.stopped_at = (epoch, step)
        name = signal.Signals(self.stop.signum).name if self.stop.signum else "a peer's request"
        log(f"Stopping before epoch {epoch} step {step} on {name}")
        if self.global_rank == 0:
            self._save_snapshot(epoch, step)
        dist.barrier()  # no rank leaves before the snapshot is in place

    def _save_snapshot(self, epochs_run: int, steps_run: int = 0) -> None:
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "EPOCHS_RUN": epochs_run,
            "EPOCH_STEPS_RUN": steps_run,
            "EPOCH_LOG": self.epoch_log,
        }
        tmp = f"{self.snapshot_path}.tmp{os.getpid()}"
        torch.save(snapshot, tmp)
        os.replace(tmp, self.snapshot_path)
        if steps_run:
            log(f"Epoch {epochs_run} | Training snapshot saved at {self.snapshot_path} "
                f"(EPOCHS_RUN={epochs_run}, EPOCH_STEPS_RUN={steps_run})")
        else:
            log(f"Epoch {epochs_run - 1} | Training snapshot saved at {self.snapshot_path} (EPOCHS_RUN={epochs_run})")

    def train(self, max_epochs: int) -> list[int]:
        """The epochs this run finished; it ends early (``stopped_at``) when asked to stop."""
        done = []
        for epoch in range(self.epochs_run, max_epochs):
            if not self._run_epoch(epoch):
                break
            done.append(epoch)
            self.epoch_log.append(epoch)
            dist.barrier()  # every rank finished this epoch before it counts as done
            if self.global_rank == 0 and ((epoch + 1) % self.save_every == 0 or epoch + 1 == max_epochs):
                self._save_snapshot(epoch + 1)
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
    stop = StopRequest()
    signal.signal(signal.SIGUSR1, stop)  # first: the default action of SIGUSR1 ends the process
    args = parser.parse_args(argv)

    device = setup(timeout_s=60)
    t_first = first_allreduce(device)
    torch.manual_seed(0)
    dataset = MyTrainDataset(args.dataset_size)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                        pin_memory=device.type == "cuda", sampler=DistributedSampler(dataset))
    trainer = Trainer(model, loader, optimizer, args.save_every, args.snapshot_path, device, args.epoch_seconds,
                      stop)
    t0 = time.time()
    done = trainer.train(args.total_epochs)
    elapsed = time.time() - t0
    steps = trainer.steps_this_run
    result("snapshot_trainer", ok=trainer.epoch_log == list(range(args.total_epochs)),
           epochs_this_run=done, epoch_log=trainer.epoch_log, resumed_from=trainer.resumed_from,
           total_epochs=args.total_epochs, final_loss=round(trainer.loss, 6),
           steps=steps, steps_per_epoch=len(loader), stopped_at=trainer.stopped_at,
           steps_per_s=round(steps / elapsed, 3) if elapsed > 0 and steps else None,
           t_start=T_START, t_first_allreduce=t_first)
    dist.destroy_process_group()
    return REQUEUE_EXIT if trainer.stopped_at else 0


if __name__ == "__main__":
    sys.exit(main())
