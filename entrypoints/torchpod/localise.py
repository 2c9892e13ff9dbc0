"""Which nodes are slow, from the bandwidth of pairs of nodes, without needing most nodes healthy.

Pure: a node count, a ``measure(pairs)`` callback that times one round of disjoint pairs at
once and returns GB/s per pair, and an optional floor; no torch, no clock, no environment.
torchpod.preflight passes a callback that runs the round over torch.distributed; the unit
tests and bench/localise.py pass synthetic fleets, so all of them drive this same code.
Deterministic (no randomness; sets of ints iterate alike in every process), so every rank
given the same gathered figures asks for the same next round.

The rule (docs/launcher.md, "Preflight", states its guarantee):

1. First rounds: ring neighbours ``(0,1),(2,3)...`` then ``(1,2),(3,4)...``, a third round
   with the pair ``(n-1,0)`` when N is odd and, when N is even and 4 or more, a round of
   pairs two apart ``(0,2),(1,3),(4,6),(5,7)...``. Ring pairs alone are all slow when N/2
   slow nodes alternate with healthy ones; ``(0,2)`` or ``(1,3)`` then joins two healthy
   nodes.
2. Thresholds: with a floor, the floor. Without one, the best pair of the first rounds is
   the reference: a slow node only makes a pair slower, so the best pair joins two healthy
   nodes whenever one pair of healthy nodes was measured, where a median would need most
   pairs healthy. A pair at or above half of it proves both its nodes fast; a pair under a
   quarter of it counts against a node; between the two it proves nothing either way, so
   noise a little over 2x never names a healthy node.
3. A node in a pair at or above the fast threshold is proven fast. A node that is not is
   named slow once it is under the slow threshold with two different proven-fast nodes, so
   one slow link (a cable, a switch port) never names a healthy node.
4. Retest rounds: each node neither proven nor named is paired with a proven-fast node it
   has not been measured with (having met them all, the one it met least), disjoint pairs
   all at once, until every node is decided or has had two retests.
5. Undecided, said and never a silent "none": two nodes without a floor (one pair, nothing
   to compare it with), no node proven fast (every pair under the floor, or no pair moved
   data), a node still between a quarter and half the best after two retests, or, without a
   floor, more than half the nodes named (a slow majority and one fast pair look alike).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .errors import InputError
from .words import plural

Pair = tuple[int, int]
Measure = Callable[[Sequence[Pair]], Mapping[Pair, Any]]
# Without a floor, against the best pair of the first rounds: at or above FAST proves a pair's
# nodes fast, under SLOW counts against them; between the two is neither (module doc, 2).
FAST = 0.5
SLOW = 0.25
CONFIRM = 2  # proven-fast partners a node must be slow with before it is named; also its most retests


def ring(n: int) -> list[list[Pair]]:
    """Rounds of disjoint ring neighbours: (0,1),(2,3)..., then (1,2),(3,4)...; an odd count
    adds a third round with the pair closing the ring, so every node is in two pairs (N >= 3)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise InputError(f"preflight nodes={n!r}; expected 2 or more nodes (a whole number)")
    if n == 2:
        return [[(0, 1)]]
    first = [(i, i + 1) for i in range(0, n - 1, 2)]
    second = [(i, (i + 1) % n) for i in range(1, n, 2)]
    return [first, second] if n % 2 == 0 else [first, second, [(n - 1, 0)]]


def two_apart(n: int) -> list[Pair]:
    """Even N >= 4: disjoint pairs (i, i+2) for i = 0, 1, 4, 5, 8, 9...; they break the one
    pattern the ring cannot see, N/2 slow nodes on every other place. Empty otherwise."""
    if n < 4 or n % 2:
        return []
    return [(i, i + 2) for i in range(n - 2) if i % 4 in (0, 1)]


def first_rounds(n: int) -> list[list[Pair]]:
    """The rounds every run measures before any retest."""
    rounds = ring(n)
    extra = two_apart(n)
    return rounds + [extra] if extra else rounds


def figure(what: str, value: Any) -> float:
    """A measured bandwidth: a finite number of GB/s, 0 or more; else one InputError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{what} busbw={value!r}; expected a finite number of GB/s, 0 or more")
    return float(value)


def checked_floor(floor: Any) -> float | None:
    """``--floor-gbps`` as the rule takes it: None, or a finite number above 0."""
    if floor is None:
        return None
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not math.isfinite(floor) or floor <= 0:
        raise InputError(f"preflight floor={floor!r}; expected a finite number of GB/s above 0, or no floor")
    return float(floor)


Round = tuple[tuple[Pair, float], ...]


def _measured(pairs: Sequence[Pair], got: Any) -> Round:
    """One round's figures, checked: exactly the pairs asked for, each a figure."""
    if not isinstance(got, Mapping) or set(got) != set(pairs):
        shown = sorted(got, key=repr) if isinstance(got, Mapping) else type(got).__name__
        raise InputError(f"preflight round {list(pairs)} measured {shown}; expected a figure for each of its pairs")
    return tuple((pair, figure(f"pair {pair}", got[pair])) for pair in pairs)


@dataclass(frozen=True)
class Verdict:
    """What the pairs say: each node proven fast, named slow or undecided, and why."""

    nodes: int
    threshold: float  # GB/s; a pair at or above it proves its nodes fast
    slow_under: float  # GB/s; a pair under it counts against a node (the floor: the same)
    rule: str
    rounds: tuple[Round, ...]  # every round measured, in order; the first ``first`` are first_rounds
    first: int
    fast: tuple[int, ...]
    slow: tuple[int, ...]
    undecided: tuple[int, ...]
    why: str = ""  # why some nodes are undecided; "" when every node is decided

    @property
    def decided(self) -> bool:
        return not self.undecided

    def pairs_of(self, node: int) -> list[tuple[Pair, float]]:
        """Every pair the node was measured in, in the order measured."""
        return [(p, v) for rnd in self.rounds for p, v in rnd if node in p]

    def slow_links(self) -> list[tuple[Pair, float]]:
        """Pairs under the slow threshold whose nodes are both proven fast: the link, not a node.
        The slow threshold, as for a node: a pair between a quarter and half of the best proves
        nothing (healthy pairs of containers sharing two cores were measured twice apart)."""
        fast = set(self.fast)
        return [(p, v) for rnd in self.rounds for p, v in rnd if v < self.slow_under and set(p) <= fast]


def _fast_and_named(n: int, rounds: Sequence[Round], fast_at: float, slow_under: float) -> tuple[set[int], set[int]]:
    """Nodes proven fast (in a pair at or above ``fast_at`` that moved data) and nodes named
    slow (not fast, under ``slow_under`` with CONFIRM different fast partners)."""
    fast = {node for rnd in rounds for p, v in rnd if v >= fast_at and v > 0 for node in p}
    against: dict[int, set[int]] = {}
    for rnd in rounds:
        for (a, b), v in rnd:
            if v < slow_under:
                against.setdefault(a, set()).add(b)
                against.setdefault(b, set()).add(a)
    named = {node for node in range(n) if node not in fast and len(against.get(node, set()) & fast) >= CONFIRM}
    return fast, named


def _retest_round(n: int, rounds: Sequence[Round], first: int, fast: set[int], named: set[int]) -> list[Pair]:
    """Each node neither fast nor named, and retested fewer than CONFIRM times, with a fast
    node it has not met; having met them all, with the one it met least (a fresh figure can
    prove it fast; the same partner never counts twice against it). Each node once a round;
    a retest pair is (node, proven partner)."""
    times: dict[frozenset[int], int] = {}
    for rnd in rounds:
        for p, _ in rnd:
            times[frozenset(p)] = times.get(frozenset(p), 0) + 1
    retests = [p[0] for rnd in rounds[first:] for p, _ in rnd]
    free = sorted(fast)
    out: list[Pair] = []
    for node in range(n):
        if node in fast or node in named or retests.count(node) >= CONFIRM or not free:
            continue
        at = next((i for i, f in enumerate(free) if frozenset((node, f)) not in times), None)
        if at is None:
            if any(frozenset((node, f)) not in times for f in fast):
                continue  # an unmet proven node is busy this round: wait for it
            at = min(range(len(free)), key=lambda i: times[frozenset((node, free[i]))])
        out.append((node, free.pop(at)))
    return out


def _pair_list(pairs: Sequence[tuple[Pair, float]], limit: int = 8) -> str:
    shown = [f"{p} {v:.3f} GB/s" for p, v in pairs]
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more


def _undecided(n: int, floor: float | None, rounds: Sequence[Round], fast: set[int],
               named: set[int]) -> tuple[set[int], set[int], str]:
    """(named, undecided, why) once the retests are done: the cases the pairs cannot decide."""
    every = [(p, v) for rnd in rounds for p, v in rnd]
    if floor is None and n == 2:
        return set(), {0, 1}, f"two nodes: one pair ({_pair_list(every)}) has nothing to be compared with"
    if not fast:
        return set(), set(range(n)), (f"no pair reached the fast threshold ({_pair_list(every)}): no node is "
                                      "proven fast to retest the others against")
    left = set(range(n)) - fast - named
    if floor is None and len(named) > n // 2:
        return set(), named | left, (f"{len(named)} of {plural(n, 'node')} are under a quarter of the best pair: "
                                     "without a floor a slow majority and one fast pair look alike "
                                     f"({_pair_list(every)})")
    if not left:
        return named, left, ""
    theirs = [(p, v) for p, v in every if set(p) & left]
    return named, left, (f"nodes {sorted(left)} are neither proven fast nor clearly slow after their retests "
                         f"({_pair_list(theirs)})")


def localise(n: int, measure: Measure, floor: float | None = None) -> Verdict:
    """Run the first rounds, then retest rounds until every node is decided (module doc)."""
    limit = checked_floor(floor)
    rounds = [_measured(rnd, measure(rnd)) for rnd in first_rounds(n)]
    first = len(rounds)
    best = max(v for rnd in rounds for _, v in rnd)
    fast_at, slow_under = (limit, limit) if limit is not None else (FAST * best, SLOW * best)
    fast, named = _fast_and_named(n, rounds, fast_at, slow_under)
    retest = [] if limit is None and n == 2 else _retest_round(n, rounds, first, fast, named)
    while retest:
        rounds.append(_measured(retest, measure(retest)))
        fast, named = _fast_and_named(n, rounds, fast_at, slow_under)
        retest = _retest_round(n, rounds, first, fast, named)
    named, left, why = _undecided(n, limit, rounds, fast, named)
    if limit is None and n == 2:
        fast = set()
    rule = (f"under the floor {limit:g} GB/s" if limit is not None else
            f"fast at or above {FAST:g} x the best pair ({best:.3f} GB/s), slow under {SLOW:g} x")
    return Verdict(nodes=n, threshold=fast_at, slow_under=slow_under, rule=rule, rounds=tuple(rounds), first=first,
                   fast=tuple(sorted(fast)), slow=tuple(sorted(named)), undecided=tuple(sorted(left)), why=why)
