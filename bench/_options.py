"""Command-line values the bench programs share, each checked against its form in one place.

An argparse ``type`` that raises ``argparse.ArgumentTypeError`` becomes argparse's one line,
naming the option and the value (``--nodes: invalid node_counts value: '8,x' ...``), and
exit 2: never a traceback, and never a value read later and dropped.

Programs (bench/first_step.py, bench/rendezvous.py, bench/rendezvous_scale.py) import this
module by name: bench/ is on ``sys.path`` when a script in it runs by path. The name starts
with ``_``: a helper, not a program of its own, so it has no invoke task.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

NODE_COUNT_DIGITS = 7  # more than any cluster has nodes; keeps int() off pathological input
# containers as nodes on one machine, each a launcher and its torch process
# (bench/first_step.py, bench/rendezvous.py)
MOST_CONTAINERS = 64
# simulated nodes, each a process of torch's rendezvous alone (bench/rendezvous_scale.py)
MOST_SIMULATED = 4096
# nodes whose entries one rendezvous state holds, timed from one process (bench/rendezvous_cost.py)
MOST_IN_STATE = 65536


def node_counts(most: int) -> Callable[[str], list[int]]:
    """``--nodes``: node counts from 1 to ``most``, separated by commas, no repeats; sorted."""

    def parse(text: str) -> list[int]:
        words = text.split(",")
        fine = all(word.isascii() and word.isdigit() and len(word) <= NODE_COUNT_DIGITS
                   and 1 <= int(word) <= most for word in words)
        if not fine or len(set(map(int, words))) != len(words):
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected node counts from 1 to {most}, separated by commas, each once")
        return sorted(int(word) for word in words)

    parse.__name__ = "node_counts"  # argparse names the type in its message
    return parse


def seconds(text: str) -> float:
    """Seconds: a finite number, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, a number 0 or more")
    return value


def whole_number(most: int) -> Callable[[str], int]:
    """A whole number from 1 to ``most`` (repeats, rounds)."""

    def parse(text: str) -> int:
        if not (text.isascii() and text.isdigit() and len(text) <= NODE_COUNT_DIGITS and 1 <= int(text) <= most):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number from 1 to {most}")
        return int(text)

    parse.__name__ = "whole_number"
    return parse
