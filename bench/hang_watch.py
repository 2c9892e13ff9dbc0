"""What the hang watch costs a training step: the DDP example's steps/s in three arms,
measured side by side in one run:

- off: TORCHPOD_STALL_WINDOW=off, no watch thread, torch's flight recorder as torch leaves it;
- fr: the same, with TORCH_FR_BUFFER_SIZE=2000 set as the watch sets it (torch 2.13 already
  keeps 2,000 collectives when the variable is unset: this arm shows whether setting it
  costs anything);
- on: the default window (300 s): each worker's thread beating every 5 s, its arrivals sent
  every 30 s, rank 0 judging and naming stragglers.

The arms take turns, round after round, in an order reversed every other round, so a
machine that slows down, or a run that suffers from following another, weighs on every arm.

    python bench/hang_watch.py [--rounds 4] [--steps 150] [--nproc 2] [--out bench/results/hang_watch.json]

Each run is `torchpod run --nproc-per-node NPROC /opt/torchpod/examples/ddp_resnet.py
--steps STEPS` in the image (`--image`, torch 2.13 with torchvision; the checkout's launcher
mounted over the image's), on NPROC of this machine's CPUs (gloo); its steps/s is what the
example reports (rank 0's, its training loop alone, without start-up). Prints a table
(median, min and max per arm; the on/off ratio of the medians) and writes ``--out``; docs/measurements.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from torchpod.contract import EXAMPLES_DIR  # noqa: E402

ARMS = {"off": ("off", []), "fr": ("off", ["-e", "TORCH_FR_BUFFER_SIZE=2000"]), "on": ("300", [])}


def one(image: str, arm: str, steps: int, nproc: int) -> float:
    """One run in the image (torch, torchvision), the checkout's launcher mounted over the image's."""
    site = "/opt/venv/lib/python3.11/site-packages/torchpod"
    window, extra = ARMS[arm]
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "--cpus", str(nproc),
                           "-v", f"{ROOT / 'entrypoints' / 'torchpod'}:{site}:ro",
                           "-e", f"TORCHPOD_STALL_WINDOW={window}", "-e", "CUDA_VISIBLE_DEVICES=",
                           "-e", "GLOO_SOCKET_IFNAME=lo", "-e", "OMP_NUM_THREADS=1", *extra, image,
                           "run", "--nproc-per-node", str(nproc), f"{EXAMPLES_DIR}/ddp_resnet.py",
                           "--steps", str(steps)], capture_output=True, text=True, timeout=600)
    results = [json.loads(ln.split(" ", 1)[1]) for ln in done.stdout.splitlines() if ln.startswith("TORCHPOD_RESULT")]
    rank0 = [r for r in results if r.get("rank") == 0 and r.get("workload") == "ddp_resnet"]
    if done.returncode != 0 or not rank0:
        raise SystemExit(f"bench/hang_watch.py: a run of arm {arm} failed "
                         f"(exit {done.returncode}): {done.stderr[-2000:]}")
    return float(rank0[0]["steps_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--image", default="torchpod/pytorch:2.13.0-cuda13.0-x86_64")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "hang_watch.json")
    args = parser.parse_args(argv)
    runs: dict[str, list[float]] = {arm: [] for arm in ARMS}
    started = time.time()
    for round_ in range(args.rounds):
        for arm in (list(ARMS) if round_ % 2 == 0 else list(reversed(ARMS))):
            runs[arm].append(one(args.image, arm, args.steps, args.nproc))
    median = {arm: statistics.median(v) for arm, v in runs.items()}
    # each round's own ratio, then their median: a round that ran slow for all arms cancels
    paired = {arm: statistics.median(a / b for a, b in zip(runs[arm], runs["off"])) for arm in ("fr", "on")}
    ratio = paired["on"]
    print(f"{'watch':<6} {'median steps/s':>15} {'min':>8} {'max':>8} {'/off, paired':>13}")
    for arm, values in runs.items():
        print(f"{arm:<6} {median[arm]:>15.3f} {min(values):>8.3f} {max(values):>8.3f} "
              f"{paired.get(arm, 1.0):>13.4f}")
    print(f"on/off: {ratio:.4f} (steps/s {(ratio - 1) * 100:+.2f} % with the watch; goal: no worse than -2 %)")
    record = {"bench": "hang_watch", "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "image": args.image,
              "workload": f"examples/ddp_resnet.py --steps {args.steps}, {args.nproc} ranks, gloo on CPU",
              "rounds": args.rounds, "steps": args.steps, "steps_per_s": runs, "median": median,
              "paired_over_off": {arm: round(v, 4) for arm, v in paired.items()}, "on_over_off": round(ratio, 4),
              "seconds": round(time.time() - started, 1)}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
