"""What ``torchpod.schedulers`` expects of each detector module, as a type the checker
holds every module in ``SCHEDULERS`` to (mypy accepts a module where a Protocol is
expected when its top-level names match the members: mypy docs, "Protocols and
structural subtyping", "Using modules as protocol implementations").

The members are read-only properties so a module's ``MARKERS = ("A", "B")`` (inferred
``tuple[str, str]``) satisfies ``tuple[str, ...]``: a plain attribute member would be
invariant. Nothing here runs at import time beyond the class itself.
"""

from __future__ import annotations

from typing import Protocol

from ..options import UserOptions
from .common import Detection, Env, Facts


class Detector(Protocol):
    """One scheduler: whether it claims the environment and what it says about this node."""

    @property
    def NAME(self) -> str:
        """The scheduler's name: TORCHPOD_SCHEDULER's value and the plan's ``scheduler``."""

    @property
    def STRONG(self) -> bool:
        """True when its markers are set by nothing else, so two strong claims conflict."""

    @property
    def MARKERS(self) -> tuple[str, ...]:
        """The variables whose presence claims the environment, in the order notes list them."""

    def claims(self, env: Env, user: UserOptions) -> bool:
        """A cheap check: does this scheduler own the environment?"""

    def detect(self, env: Env, facts: Facts, user: UserOptions) -> Detection:
        """This node's view of the job; InputError when the markers are there but the
        variables are broken (never a fallback to a world of one)."""


__all__ = ["Detector"]
