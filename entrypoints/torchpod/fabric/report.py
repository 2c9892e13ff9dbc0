"""What a fabric detector returns (its own module so the detectors can import it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FabricReport:
    fabric: str | None = None  # "roce", "infiniband", "efa", "slingshot"
    env: tuple[tuple[str, str], ...] = ()  # NCCL_* additions; never over a user's variable
    notes: tuple[str, ...] = ()
