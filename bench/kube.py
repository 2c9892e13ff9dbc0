"""The Kubernetes control plane's cost: a cold build of its programs, its start, its memory.

    python bench/kube.py [--repeats 3] [--settle 20]

Builds the programs kube/tools.go names from nothing, as `invoke kube.build` does (one
niced `go build -p 1` each, torchpod_toolkit.kube.build), into a throwaway Go build cache
and a throwaway binary folder: Go's module cache is kept, so downloads are not timed, and
the standard library is compiled as on a new machine. Records each program's seconds, the
build cache's and the binaries' size, and the 1-minute load average sampled every 10 s
during the build, mean and peak (the host is shared). Then starts the control plane
``--repeats`` times from those programs (torchpod_toolkit.kube.planestart), timing each start to
every health check and reading each component's resident memory ``--settle`` seconds
later. Writes bench/results/kube.json and removes everything it built.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod_toolkit.kube import build, plane, planestart  # noqa: E402


def folder_bytes(folder: Path) -> int:
    """The bytes of the regular files under ``folder`` (links not followed)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


class LoadSampler:
    """The 1-minute load average every ``period`` seconds while it runs: the host is shared,
    and a build's time says little without the load beside it."""

    def __init__(self, period: float = 10.0):
        self.period, self.samples = period, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def cold_build(work: Path) -> tuple[build.Plan, dict]:
    """Build every program into ``work`` with an empty Go build cache; the figures."""
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache"), "GOCACHE": str(work / "gocache")}
    go = build.find_go(env)
    plan = build.make_plan(ROOT, env, go, build.go_version(go, env))
    with LoadSampler() as load:
        done = build.build(plan, env)
    seconds = {b.name: round(b.seconds or 0.0, 1) for b in done}
    return plan, {"release": plan.kubernetes, "go": build.go_version(go, env), "build_seconds": seconds,
                  "build_total_seconds": round(sum(seconds.values()), 1),
                  "build_cache_bytes": folder_bytes(work / "gocache"), "binaries_bytes": folder_bytes(plan.bindir),
                  "load_average": [round(statistics.mean(load.samples), 2), round(max(load.samples), 2)]}


def starts(plan: build.Plan, work: Path, repeats: int, settle: float) -> dict:
    """Start and stop the control plane ``repeats`` times; each start's seconds and memory."""
    seconds, memory = [], []
    for i in range(repeats):
        started = planestart.start(plan.bindir, work / f"plane-{i}")
        try:
            time.sleep(settle)
            memory.append(plane.rss_bytes(started.pids))
        finally:
            plane.stop(started)
        seconds.append(round(started.seconds, 2))
        print(f"start {i + 1}: {started.seconds:.1f} s, {sum(memory[-1].values()) / 2**20:.0f} MiB", flush=True)
    return {"start_seconds": seconds, "settle_seconds": settle, "rss_bytes": memory}


def table(row: dict) -> str:
    lines = [f"{'program':<26}{'cold build s':>14}"]
    lines += [f"{name:<26}{s:>14.1f}" for name, s in row["build_seconds"].items()]
    lines += [f"{'total':<26}{row['build_total_seconds']:>14.1f}",
              f"load average during the build: mean {row['load_average'][0]}, peak {row['load_average'][1]}",
              f"Go build cache {row['build_cache_bytes'] / 1e9:.1f} GB, binaries {row['binaries_bytes'] / 1e6:.0f} MB",
              f"start to every health check: {statistics.median(row['start_seconds']):.1f} s (median)",
              f"resident after {row['settle_seconds']:.0f} s: "
              f"{statistics.median(sum(m.values()) for m in row['rss_bytes']) / 2**20:.0f} MiB (median)"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="control plane starts (default 3)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds after a start before memory is read")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "kube.json"))
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.settle < 0:
        parser.error("--repeats must be at least 1 and --settle not negative")
    with tempfile.TemporaryDirectory(prefix="torchpod-bench-kube-") as tmp:
        plan, row = cold_build(Path(tmp))
        row.update(starts(plan, Path(tmp), args.repeats, args.settle))
    print(table(row))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(row, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
