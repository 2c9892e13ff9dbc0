"""`torchpod preflight`'s options: its parser, the check its workers make, and the split of
``--then MODE TARGET [ARGS...]`` (the command preflight execs) from its own options.

Three readers share them: preflight's workers (torchpod.preflight), the launcher before
torchrun starts (torchpod.commands) and `invoke manifests --workload preflight` on the
build host. Standard library only, and none of preflight's measuring code (doctor, facts,
localise, torch), so that checking the options imports nothing the check does not need.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Sequence

from .contract import ENV_PREFLIGHT
from .errors import InputError
from .plan import THEN, THEN_MODES
from .workload_options import Parser, parse_bytes, whole


def parser() -> argparse.ArgumentParser:
    """Preflight's options, as its workers read them and `torchpod preflight --help` shows them."""
    parser = Parser(prog="torchpod preflight", description="Before a job trains, check every node and name "
                    "every slow one: each node's doctor checks, pairs of nodes timed, an all-reduce sweep.",
                    epilog=f"{THEN} {'|'.join(THEN_MODES)} TARGET [ARGS...]: when no node failed, every worker "
                           "replaces itself with that command, in the job's own process group, as "
                           f"{ENV_PREFLIGHT.name}=1 runs a job (what follows {THEN} is the command's own)")
    parser.add_argument("--pair-bytes", type=parse_bytes, default=parse_bytes("4M"), metavar="SIZE",
                        help="message size each pair of nodes is timed at (default 4M)")
    parser.add_argument("--min-bytes", type=parse_bytes, default=parse_bytes("1K"), metavar="SIZE",
                        help="smallest size of the all-reduce sweep (default 1K)")
    parser.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("4M"), metavar="SIZE",
                        help="largest size of the sweep (default 4M)")
    parser.add_argument("--iters", type=whole, default=5, metavar="N", help="timed all-reduces per size (default 5)")
    parser.add_argument("--warmup", type=whole, default=2, metavar="N",
                        help="untimed all-reduces before them (default 2)")
    parser.add_argument("--floor-gbps", type=_gbps, default=None, metavar="GBPS",
                        help="a pair under this busbw (GB/s) is slow")
    parser.add_argument("--allow-undecided", action="store_true",
                        help="exit 0 when the pairs cannot tell slow nodes from fast (e.g. two nodes, no floor)")
    parser.add_argument("--json", metavar="FILE", help="where rank 0 writes the report")
    parser.add_argument("--svg", metavar="FILE", help="where rank 0 writes busbw against size")
    return parser


def _gbps(text: str) -> float:
    """A bandwidth typed on the command line: an ASCII decimal number (float() takes '١٢')."""
    if not re.fullmatch(r"[0-9]{1,12}(\.[0-9]{1,12})?", text, flags=re.A):
        raise argparse.ArgumentTypeError(f"{text!r} is not a bandwidth; expected GB/s as a number, e.g. 40 or 12.5")
    return float(text)


def check_options(argv: Sequence[str]) -> argparse.Namespace:
    """Preflight's options as its workers will read them (``--then`` and what follows it left
    out); else one InputError. The launcher and `invoke manifests --workload preflight` check
    them before anything starts."""
    return _checked(split_then(argv)[0])


def _checked(argv: Sequence[str] | None) -> argparse.Namespace:
    checker = parser()
    args = checker.parse_args(argv)
    floor_ok = args.floor_gbps is None or (math.isfinite(args.floor_gbps) and args.floor_gbps > 0)
    if args.iters < 1 or args.warmup < 0 or args.min_bytes > args.max_bytes or not floor_ok:
        checker.error("expected --iters >= 1, --warmup >= 0, --min-bytes <= --max-bytes and --floor-gbps > 0")
    return args


def split_then(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """preflight's own options, and the command after ``--then MODE TARGET [ARGS...]``
    (plan.preflight_first writes it; MODE is script, module or program)."""
    words = list(argv)
    if THEN not in words:
        return words, None
    at = words.index(THEN)
    then = words[at + 1:]
    if len(then) < 2 or then[0] not in THEN_MODES:
        raise InputError(f"preflight {THEN} {' '.join(then)[:80]!r}; "
                         f"expected {THEN} {'|'.join(THEN_MODES)} TARGET [ARGS...]")
    return words[:at], then
