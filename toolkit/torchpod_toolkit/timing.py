"""Where a build's time goes: the phases ``invoke build`` reports and the clock that adds them up.

It measures and reports only; which phase runs when is the pipeline's (:mod:`.imagebuild.pipeline`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Mapping

# The phases of a build, as `invoke build` reports them: the wheelhouse and the SBOM (before
# Docker), the Debian bases (bootstrapped at once with the wheels' download), the payload image
# (0 when an unchanged one is reused), the image's own layers, BuildKit's export of them, the
# probe (0 when remembered) and the labels.
PHASES = ("wheels", "sbom", "base", "payload", "layers", "export", "probe", "labels")


class Clock:
    """Seconds per build phase (:data:`PHASES`). Phases may run in two threads at once (the
    bases beside the wheels); a phase run twice adds up. It starts when it is made."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.started = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since the clock was made: the whole build, overlaps counted once."""
        return time.monotonic() - self.started

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def phases(self, exported: Mapping[str, float]) -> dict[str, float]:
        """Every phase of :data:`PHASES`, rounded; ``exported`` is BuildKit's export time within
        each build phase, shown as "export" and taken out of that phase."""
        seconds = {**self.seconds, "export": sum(exported.values())}
        for name, part in exported.items():
            seconds[name] = max(0.0, seconds.get(name, 0.0) - part)
        return {name: round(seconds.get(name, 0.0), 1) for name in PHASES}

    def __call__(self, name: str):
        @contextlib.contextmanager
        def phase():
            start = time.monotonic()
            try:
                yield
            finally:
                self.add(name, time.monotonic() - start)

        return phase()
