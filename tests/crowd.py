"""One turn at a time for the cluster tier's crowded tests: those that start many torch
processes at once (eight containers as nodes or more, a first-job page's several jobs side
by side).

On two cores, two such tests beside each other (twenty-odd processes importing torch at
once) once starved a pod's `import torch` for a hundred seconds and a job missed its bound.
pytest-xdist's groups keep tests on one worker, but a module's tests must stay on the worker
that holds its control plane: so the turn is a lock every worker shares, a file ``flock``ed
by the test that holds it. The kernel releases it when its holder's process ends, so a
killed worker never leaves it held.

Fairness: a worker that has just released the turn and asks again at once would win every
race against a worker polling for it, so the releaser steps aside for ``STEP_ASIDE``
seconds, longer than the waiters' ``POLL``. A turn not given within ``limit`` seconds fails
the test with what holds it, never a hang.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# one per user on the machine: two test sessions' crowds starve each other as two workers' do
LOCK = Path(tempfile.gettempdir()) / f"torchpod-crowd-{os.getuid()}.lock"
LIMIT = 3600.0  # seconds a test waits for its turn (a crowded test holds it for minutes)
POLL, STEP_ASIDE = 0.2, 1.0


@contextmanager
def turn(who: str, path: Path = LOCK, limit: float = LIMIT) -> Iterator[float]:
    """Hold the one turn while the block runs; yields the seconds waited for it. ``who``
    (the test's id) is written into the file for whoever waits to read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start > limit:
                    raise TimeoutError(f"no turn for {who} within {limit:g} s: {holder(path)} holds it") from None
                time.sleep(POLL)
        waited = time.monotonic() - start
        os.ftruncate(fd, 0)
        os.pwrite(fd, who.encode(), 0)
        try:
            yield waited
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            time.sleep(STEP_ASIDE)
    finally:
        os.close(fd)


def holder(path: Path = LOCK) -> str:
    """The id the turn's holder wrote (the file is its own: read whole, a test id's length)."""
    try:
        with open(path, "rb") as held:
            return held.read(4096).decode(errors="replace") or "(nobody named)"
    except OSError as exc:
        return f"(unreadable: {exc.strerror})"
