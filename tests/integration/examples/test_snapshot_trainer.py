"""examples/snapshot_trainer.py stopped by SIGUSR1 and resumed, with real processes on the
host's CPU torch (gloo on 127.0.0.1, no torchrun): the ranks stop before the same step, rank
0 saves the snapshot with the unfinished epoch's steps, every rank exits REQUEUE_EXIT, and
the next run finishes with every epoch logged once and every step run exactly once. (The
cluster tier runs the same under torchrun on a real Slurm cluster: tests/cluster/
test_slurm_cluster.py.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs import module
from paths import ROOT

torch = module("torch", "torch on the host: the example needs it (./setup.sh --tests installs the image's)")

SCRIPT = ROOT / "examples" / "snapshot_trainer.py"
REQUEUE_EXIT = 75  # the example's REQUEUE_EXIT (sysexits.h EX_TEMPFAIL)
EPOCHS, STEPS = 5, 8  # --dataset-size 64, --batch-size 8: 8 steps per epoch on one rank
RUN_LIMIT = 120  # seconds; a run that takes longer has hung


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(tmp_path: Path, rank: int, world: int, port: int, epoch_seconds: float) -> subprocess.Popen:
    env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(world),
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, str(SCRIPT), str(EPOCHS), "1", "--snapshot-path", str(tmp_path / "snapshot.pt"),
            "--dataset-size", str(STEPS * 8 * world), "--batch-size", "8", "--epoch-seconds", str(epoch_seconds)]
    return subprocess.Popen(args, env=env, stdout=open(tmp_path / f"rank{rank}.log", "a"), stderr=subprocess.STDOUT)


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    pytest.fail(f"{text!r} never appeared in {path.name}:\n{path.read_text()[-3000:]}")


def _finish(procs: list[subprocess.Popen]) -> list[int]:
    try:
        return [p.wait(timeout=RUN_LIMIT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _results(path: Path) -> list[dict]:
    prefix = "TORCHPOD_RESULT "
    return [json.loads(ln.split(prefix, 1)[1]) for ln in path.read_text().splitlines() if prefix in ln]


def _snapshot(tmp_path: Path) -> dict:
    snap = torch.load(tmp_path / "snapshot.pt", map_location="cpu")
    return {k: v for k, v in snap.items() if k != "MODEL_STATE"}


def _run_to_the_end(tmp_path: Path, world: int) -> list[dict]:
    port = _free_port()
    procs = [_start(tmp_path, r, world, port, 0.0) for r in range(world)]
    codes = _finish(procs)
    assert codes == [0] * world, [(tmp_path / f"rank{r}.log").read_text()[-3000:] for r in range(world)]
    return [_results(tmp_path / f"rank{r}.log")[-1] for r in range(world)]


def test_usr1_saves_mid_epoch_and_the_next_run_resumes_at_that_step(tmp_path):
    proc = _start(tmp_path, 0, 1, _free_port(), epoch_seconds=0.8)
    _wait_for(tmp_path / "rank0.log", "Epoch 1 | Batchsize", proc)  # epoch 0 done and saved
    time.sleep(0.35)  # a few steps into epoch 1
    proc.send_signal(signal.SIGUSR1)
    assert _finish([proc]) == [REQUEUE_EXIT], (tmp_path / "rank0.log").read_text()[-3000:]
    log = (tmp_path / "rank0.log").read_text()
    (stopped,) = _results(tmp_path / "rank0.log")
    epoch, step = stopped["stopped_at"]
    assert f"Stopping before epoch {epoch} step {step} on SIGUSR1" in log, log[-2000:]
    assert 1 <= epoch < EPOCHS and not stopped["ok"], stopped
    assert _snapshot(tmp_path) == {"EPOCHS_RUN": epoch, "EPOCH_STEPS_RUN": step, "EPOCH_LOG": list(range(epoch))}
    assert stopped["steps"] == epoch * STEPS + step  # the steps before the stop, no more

    (final,) = _run_to_the_end(tmp_path, 1)
    assert final["ok"] and final["epoch_log"] == list(range(EPOCHS)) and final["resumed_from"] == epoch, final
    assert final["stopped_at"] is None
    assert _snapshot(tmp_path) == {"EPOCHS_RUN": EPOCHS, "EPOCH_STEPS_RUN": 0, "EPOCH_LOG": list(range(EPOCHS))}
    assert f"Resuming training from snapshot at Epoch {epoch}" in (tmp_path / "rank0.log").read_text()
    # every step exactly once across the two runs: the resumed run skipped the `step` already run
    assert stopped["steps"] + final["steps"] == EPOCHS * STEPS, (stopped, final)


def test_a_signal_to_one_rank_stops_both_before_the_same_step(tmp_path):
    port = _free_port()
    procs = [_start(tmp_path, r, 2, port, epoch_seconds=0.8) for r in range(2)]
    _wait_for(tmp_path / "rank1.log", "Epoch 1 | Batchsize", procs[1])
    time.sleep(0.35)
    procs[1].send_signal(signal.SIGUSR1)  # rank 1 only; rank 0 learns it from the all-reduce
    assert _finish(procs) == [REQUEUE_EXIT, REQUEUE_EXIT], (tmp_path / "rank0.log").read_text()[-3000:]
    stops = [_results(tmp_path / f"rank{r}.log")[-1]["stopped_at"] for r in range(2)]
    assert stops[0] == stops[1], stops
    epoch, step = stops[0]
    assert f"Stopping before epoch {epoch} step {step} on a peer's request" in (tmp_path / "rank0.log").read_text()
    assert _snapshot(tmp_path) == {"EPOCHS_RUN": epoch, "EPOCH_STEPS_RUN": step, "EPOCH_LOG": list(range(epoch))}
