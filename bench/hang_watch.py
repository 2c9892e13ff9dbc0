"""What the hang watch costs a training step: the DDP example's steps/s with the watch off
(TORCHPOD_STALL_WINDOW=off: no flight recorder, no thread) and on (the default: torch's
flight recorder keeping 2,000 collectives, each worker's thread beating every 5 s, rank 0
judging), measured side by side in one run: the two arms alternate, round after round, so
a machine that slows down slows both.

    python bench/hang_watch.py [--rounds 5] [--steps 60] [--nproc 2] [--out bench/results/hang_watch.json]

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

ARMS = {"off": "off", "on": "300"}


def one(image: str, window: str, steps: int, nproc: int) -> float:
    """One run in the image (torch, torchvision), the checkout's launcher mounted over the image's."""
    site = "/opt/venv/lib/python3.11/site-packages/torchpod"
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", "--cpus", str(nproc),
                           "-v", f"{ROOT / 'entrypoints' / 'torchpod'}:{site}:ro",
                           "-e", f"TORCHPOD_STALL_WINDOW={window}", "-e", "CUDA_VISIBLE_DEVICES=",
                           "-e", "GLOO_SOCKET_IFNAME=lo", "-e", "OMP_NUM_THREADS=1", image,
                           "run", "--nproc-per-node", str(nproc), f"{EXAMPLES_DIR}/ddp_resnet.py",
                           "--steps", str(steps)], capture_output=True, text=True, timeout=600)
    results = [json.loads(ln.split(" ", 1)[1]) for ln in done.stdout.splitlines() if ln.startswith("TORCHPOD_RESULT")]
    rank0 = [r for r in results if r.get("rank") == 0 and r.get("workload") == "ddp_resnet"]
    if done.returncode != 0 or not rank0:
        raise SystemExit(f"bench/hang_watch.py: a run with TORCHPOD_STALL_WINDOW={window} failed "
                         f"(exit {done.returncode}): {done.stderr[-2000:]}")
    return float(rank0[0]["steps_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--image", default="torchpod/pytorch:2.13.0-cuda13.0-x86_64")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "hang_watch.json")
    args = parser.parse_args(argv)
    runs: dict[str, list[float]] = {arm: [] for arm in ARMS}
    started = time.time()
    for _ in range(args.rounds):
        for arm, window in ARMS.items():
            runs[arm].append(one(args.image, window, args.steps, args.nproc))
    median = {arm: statistics.median(v) for arm, v in runs.items()}
    ratio = median["on"] / median["off"]
    print(f"{'watch':<6} {'median steps/s':>15} {'min':>8} {'max':>8}")
    for arm, values in runs.items():
        print(f"{arm:<6} {median[arm]:>15.3f} {min(values):>8.3f} {max(values):>8.3f}")
    print(f"on/off: {ratio:.4f} (steps/s {(ratio - 1) * 100:+.2f} % with the watch; goal: no worse than -2 %)")
    record = {"bench": "hang_watch", "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "image": args.image,
              "workload": f"examples/ddp_resnet.py --steps {args.steps}, {args.nproc} ranks, gloo on CPU",
              "rounds": args.rounds, "steps_per_s": runs, "median": median, "on_over_off": round(ratio, 4),
              "seconds": round(time.time() - started, 1)}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
