"""Typed findings: what a fabric detector, the site search or a doctor check found.

A finding carries a stable ``code`` (``<area>.<topic>.<what>``, e.g. ``roce.gid.differs``),
a ``severity``, a ``message`` for people and a ``fix``. Programs (the doctor's rows and exit
code) read the code and the severity, never the message: rewording a message changes no
verdict (tests/unit/torchpod/fabric/test_findings.py rewords every one). The plan's ``notes`` are the
messages, in order.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

_CODE_RE = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+){1,3}", re.ASCII)


class Severity(enum.Enum):
    OK = "ok"  # a choice made and why; a doctor row that passed
    INFO = "info"  # said in the plan's notes only
    WARN = "warn"  # likely wrong; the doctor warns, its exit code does not change
    FAIL = "fail"  # NCCL will not use the fabric as it should; the doctor exits 1


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    message: str
    fix: str = ""

    def __post_init__(self) -> None:
        # codes are written in this package, never built from input: a bad one is a bug here
        if not _CODE_RE.fullmatch(self.code) or not isinstance(self.severity, Severity):
            raise ValueError(f"finding code {self.code!r} / severity {self.severity!r}: expected "
                             "'<area>.<topic>[.<what>]' in lower-case ASCII and a Severity")

    @property
    def topic(self) -> str:
        """The code's second part: what the doctor groups its rows by (``user``, ``gid``)."""
        return self.code.split(".")[1]


def info(code: str, message: str) -> Finding:
    return Finding(code, Severity.INFO, message)


def ok(code: str, message: str) -> Finding:
    return Finding(code, Severity.OK, message)


# What the doctor tells a user whose variable contradicts the hardware.
USER_FIX = "unset it to let torchpod choose, or correct it"


def user(code: str, message: str) -> Finding:
    """A user's variable that contradicts the hardware: kept as set, and warned about."""
    return Finding(code, Severity.WARN, message, USER_FIX)
