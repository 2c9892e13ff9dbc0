"""Rounds and time preflight needs to name every slow node, against N: torchpod.localise (the
code preflight runs) driven by synthetic fleets, with the time of a round taken from the
measured container runs in bench/results/preflight.json.

    python bench/localise.py [--trials 200] [--seed 1] [--out /tmp/localise.json]

Each fleet: N nodes, k of them slow (placed at random, every other place, or side by side),
healthy pairs anywhere in 0.51-1.0 (the rule's stated 2x spread), pairs touching a slow node
under 0.12 (a quarter of any best pair). For each N and k: the most rounds any trial needed
(first rounds plus retests), whether every slow node was named and no healthy one, and the
time: rounds x a round's time on containers. A round's time is what preflight itself timed
(each round's ``seconds`` in its report: the round's groups, pairs and gather), the median
over the measured runs at the smallest measured N at or above the row's; N above the
largest measured takes the largest's, since a round's pairs run at once. With slow nodes,
the round's time is the one measured in the runs with throttled nodes (every round of
those runs had a throttled pair in it).
Prints a table and writes ``--out``; the table in docs/launcher.md is copied from it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from torchpod import localise, readers  # noqa: E402
from torchpod.errors import InputError  # noqa: E402

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


def round_times(results: dict, what: str) -> dict[int, float]:
    """Seconds per round at each measured N: the median of every round preflight timed in the
    runs of kind ``what`` ("preflight": clean nodes; "slow": throttled ones)."""
    out = {}
    for row in results["rows"]:
        times = [r["seconds"] for run in row["runs"] if run["what"] == what for r in run.get("rounds", [])]
        if times:
            out[row["nodes"]] = statistics.median(times)
    if not out:
        raise SystemExit(f"bench/results/preflight.json has no timed rounds of {what!r} runs: "
                         "re-run python bench/preflight.py")
    return out


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


def _at(per_round: dict[int, float], n: int) -> float:
    return per_round[min((m for m in per_round if m >= n), default=max(per_round))]


def timed(rows: list[dict], clean: dict[int, float], slow: dict[int, float]) -> None:
    """Each row's time: rounds x a round at the smallest measured N at or above its own (or the
    largest measured N's), a clean round without slow nodes and a throttled one with them."""
    for row in rows:
        row["round_s"] = round(_at(slow if row["slow"] else clean, row["nodes"]), 3)
        row["seconds"] = round(row["rounds"] * row["round_s"], 1)


def eight_containers(results: dict) -> dict:
    """The measured run at 8 containers with throttled nodes, beside the plain job."""
    row = next((r for r in results["rows"] if r["nodes"] == 8 and "slow_median_s" in r), None)
    if row is None:
        raise SystemExit("bench/results/preflight.json has no 8-node run with throttled nodes: "
                         "re-run python bench/preflight.py --nodes 2 4 8")
    rounds = max(len(run["rounds"]) for run in row["runs"] if run["what"] == "slow")
    return {"slow": len(row["slow_nodes"]), "rounds": rounds, "measured_s": row["slow_median_s"],
            "plain_s": row["plain_median_s"], "goal_s": 60}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--results", default=str(ROOT / "bench" / "results" / "preflight.json"))
    parser.add_argument("--out", default="/tmp/localise.json")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("expected --trials >= 1")
    try:
        results = json.loads(readers.read_text(args.results, what=f"--results={args.results!r}",
                                               expected="the preflight bench's results JSON", cap=readers.DATA_CAP))
    except (InputError, ValueError) as exc:
        parser.exit(2, f"bench/localise.py: {exc}\n")
    clean, slow = round_times(results, "preflight"), round_times(results, "slow")
    rng = random.Random(args.seed)
    rows = [row for n in SIZES for row in cells(n, args.trials if n <= 128 else max(args.trials // 4, 1), rng)]
    timed(rows, clean, slow)
    print(f"{'N':>5} {'slow':>5} {'first':>6} {'rounds':>7} {'w/ floor':>9} {'right':>6} {'round s':>8} {'time s':>7}")
    for r in rows:
        print(f"{r['nodes']:>5} {r['slow']:>5} {r['first_rounds']:>6} {r['rounds']:>7} {r['rounds_with_floor']:>9} "
              f"{'yes' if r['exact'] and r['exact_with_floor'] else 'NO':>6} {r['round_s']:>8.3f} {r['seconds']:>7.1f}")
    eight = eight_containers(results)
    print(f"8 containers, {eight['slow']} slow: {eight['rounds']} rounds, measured {eight['measured_s']} s "
          f"(the plain job {eight['plain_s']} s; goal {eight['goal_s']} s)")
    Path(args.out).write_text(json.dumps({
        "benchmark": "torchpod.localise on synthetic fleets: rounds and time to name every slow node",
        "trials": args.trials, "seed": args.seed, "round_s_clean": clean, "round_s_slow": slow,
        "eight_containers": eight,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
