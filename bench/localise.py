"""Rounds and time preflight needs to name every slow node, against N: torchpod.localise (the
code preflight runs) driven by synthetic fleets, with the time of a round taken from the
measured container runs in bench/results/preflight.json.

    python bench/localise.py [--trials 200] [--seed 1] [--slow-gbps 0.018] [--out /tmp/localise.json]

Each fleet: N nodes, k of them slow (placed at random, every other place, or side by side),
healthy pairs anywhere in 0.51-1.0 (the rule's stated 2x spread), pairs touching a slow node
under 0.12 (a quarter of any best pair). For each N and k: the most rounds any trial needed (first rounds
plus retests), whether every slow node was named and no healthy one, and the time: rounds x
(a round's time on containers + the slow pair's transfer). A round's time is the preflight
run's extra over the plain job, divided by the ring rounds it ran (an upper bound: it also
holds the doctor), at the smallest measured N at or above the row's; N above the largest
measured takes the largest's, since a round's pairs run at once. The slow pair's transfer
is (warmup + iters) x pair bytes at ``--slow-gbps`` (0.018 GB/s: what a 100 Mbit/s tc
throttle measured on containers).
Prints a table and writes ``--out``; the table in docs/launcher.md is copied from it.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from torchpod import localise  # noqa: E402
from torchpod.bench_allreduce import parse_bytes  # noqa: E402

SIZES = (2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512, 1024)
PLACEMENTS = ("random", "every other", "side by side")


def slow_set(n: int, k: int, placement: str, rng: random.Random) -> set[int]:
    if placement == "every other" and k == n // 2 and n % 2 == 0:
        return set(range(rng.randrange(2), n, 2))
    if placement == "side by side":
        start = rng.randrange(n)
        return {(start + i) % n for i in range(k)}
    return set(rng.sample(range(n), k))


def one(n: int, slow: set[int], floor: float | None, rng: random.Random) -> tuple[int, bool]:
    """(rounds measured, right): right is every slow node named and every healthy one proven
    fast, or, for two nodes that cannot be told apart (no floor, or a slow pair), undecided."""
    speed = {node: rng.uniform(0.0, 0.12) for node in slow}

    def measure(pairs):
        return {p: (min(speed.get(p[0], 1.0), speed.get(p[1], 1.0)) if set(p) & slow else rng.uniform(0.51, 1.0))
                for p in pairs}

    verdict = localise.localise(n, measure, floor)
    if n == 2 and (floor is None or slow):
        return len(verdict.rounds), not verdict.decided
    exact = verdict.slow == tuple(sorted(slow)) and verdict.fast == tuple(sorted(set(range(n)) - slow))
    return len(verdict.rounds), exact


def round_times(results: dict) -> dict[int, float]:
    """Seconds per ring round at each measured N: the preflight run's extra over the plain job."""
    rows = results["rows"]
    return {r["nodes"]: max(r["median_s"] - r["plain_median_s"], 0.0) / len(localise.ring(r["nodes"]))
            for r in rows}


def slow_transfer(results: dict, slow_gbps: float) -> float:
    """Seconds a slow pair takes in one round: (warmup + iters) x pair bytes at slow_gbps."""
    words = results["command"]
    value = {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}
    sends = int(value.get("--warmup", "2")) + int(value.get("--iters", "5"))
    return sends * parse_bytes(value.get("--pair-bytes", "4M")) / (slow_gbps * 1e9)


def cells(n: int, trials: int, rng: random.Random) -> list[dict]:
    """Per slow count k (0 to 3, N/4, N/2; at most N/2): the worst rounds over trials, without
    and with a floor."""
    out = []
    for k in sorted(k for k in {0, 1, 2, 3, n // 4, n // 2} if k <= n // 2):
        worst = {"no floor": 0, "floor": 0}
        exact = {"no floor": True, "floor": True}
        for trial in range(trials):
            slow = slow_set(n, k, PLACEMENTS[trial % len(PLACEMENTS)], rng)
            for name, floor in (("no floor", None), ("floor", 0.5)):
                rounds, right = one(n, slow, floor, rng)
                worst[name] = max(worst[name], rounds)
                exact[name] = exact[name] and right
        out.append({"nodes": n, "slow": k, "rounds": worst["no floor"], "rounds_with_floor": worst["floor"],
                    "first_rounds": len(localise.first_rounds(n)), "exact": exact["no floor"],
                    "exact_with_floor": exact["floor"]})
    return out


def timed(rows: list[dict], per_round: dict[int, float], slow_s: float) -> None:
    """Each row's time: rounds x (a round at the smallest measured N at or above its own, or the
    largest measured N's) + slow transfers."""
    for row in rows:
        base = per_round[min((m for m in per_round if m >= row["nodes"]), default=max(per_round))]
        row["round_s"] = round(base, 3)
        row["seconds"] = round(row["rounds"] * (base + (slow_s if row["slow"] else 0.0)), 1)


def eight_containers(results: dict, per_round: dict[int, float], slow_s: float, rows: list[dict]) -> dict:
    """The whole run at 8 containers with its slowest slow count: the measured run (two ring
    rounds in it) plus the rounds localisation adds and every round's slow transfer."""
    measured = next(r["median_s"] for r in results["rows"] if r["nodes"] == 8)
    worst = max((r for r in rows if r["nodes"] == 8), key=lambda r: (r["rounds"], r["slow"]))
    extra = (worst["rounds"] - len(localise.ring(8))) * per_round[8] + worst["rounds"] * slow_s
    return {"slow": worst["slow"], "rounds": worst["rounds"], "measured_s": measured,
            "estimated_s": round(measured + extra, 1), "goal_s": 60}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slow-gbps", type=float, default=0.018)
    parser.add_argument("--results", default=str(ROOT / "bench" / "results" / "preflight.json"))
    parser.add_argument("--out", default="/tmp/localise.json")
    args = parser.parse_args(argv)
    if args.trials < 1 or not args.slow_gbps > 0:
        parser.error("expected --trials >= 1 and --slow-gbps > 0")
    results = json.loads(Path(args.results).read_text())
    per_round, slow_s = round_times(results), slow_transfer(results, args.slow_gbps)
    rng = random.Random(args.seed)
    rows = [row for n in SIZES for row in cells(n, args.trials if n <= 128 else max(args.trials // 4, 1), rng)]
    timed(rows, per_round, slow_s)
    print(f"{'N':>5} {'slow':>5} {'first':>6} {'rounds':>7} {'w/ floor':>9} {'right':>6} {'round s':>8} {'time s':>7}")
    for r in rows:
        print(f"{r['nodes']:>5} {r['slow']:>5} {r['first_rounds']:>6} {r['rounds']:>7} {r['rounds_with_floor']:>9} "
              f"{'yes' if r['exact'] and r['exact_with_floor'] else 'NO':>6} {r['round_s']:>8.3f} {r['seconds']:>7.1f}")
    eight = eight_containers(results, per_round, slow_s, rows)
    print(f"8 containers, {eight['slow']} slow: {eight['rounds']} rounds, about {eight['estimated_s']} s "
          f"(measured run {eight['measured_s']} s; goal {eight['goal_s']} s)")
    Path(args.out).write_text(json.dumps({
        "benchmark": "torchpod.localise on synthetic fleets: rounds and time to name every slow node",
        "trials": args.trials, "seed": args.seed, "slow_gbps": args.slow_gbps, "slow_transfer_s": round(slow_s, 3),
        "round_s_measured": per_round, "eight_containers": eight,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
