"""What a fabric detector returns (its own module so the detectors can import it)."""

from __future__ import annotations

from dataclasses import dataclass

from .findings import Finding


@dataclass(frozen=True)
class FabricReport:
    fabric: str | None = None  # a Fabric record's name (torchpod.fabric.registry)
    env: tuple[tuple[str, str], ...] = ()  # NCCL_* additions; never over a user's variable
    findings: tuple[Finding, ...] = ()  # the first one says what was found

    @property
    def notes(self) -> tuple[str, ...]:
        """The findings' messages: the plan's notes."""
        return tuple(f.message for f in self.findings)
