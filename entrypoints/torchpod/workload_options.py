"""How torchpod's own workloads (the all-reduce bench, preflight) read their options: an
argparse parser whose errors are one InputError, and the value types its options take.

Standard library only, and no measuring code: the launcher checks a workload's options with
these before torchrun starts (torchpod.commands), and `invoke manifests --workload preflight`
checks preflight's on the build host (torchpod.preflight_options), where neither torch nor
the workloads' collectives are to be imported.
"""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from .errors import InputError

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text: str) -> int:
    """A message size typed on the command line: ASCII digits and an optional binary unit
    (K, M or G, with or without ``iB``/``B``), at least 4 bytes (one float32)."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([KMG]?)i?B?\s*", text, flags=re.I | re.A)  # ASCII digits only
    value = int(m.group(1)) * UNITS[m.group(2).upper()] if m else 0
    if value < 4:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; expected e.g. 4, 1K, 64M (at least 4 bytes)")
    return value


class Parser(argparse.ArgumentParser):
    """argparse for a workload's options, whose errors are one InputError (one line, exit 2)
    instead of a usage block and SystemExit: the launcher checks them before torchrun starts."""

    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog}: {message}")


def whole(text: str) -> int:
    """A whole number typed on the command line: ASCII digits only (int() takes '٣' too)."""
    if not re.fullmatch(r"-?[0-9]{1,18}", text, flags=re.A):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; expected ASCII digits, e.g. 10")
    return int(text)
