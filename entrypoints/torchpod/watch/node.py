"""What `torchpod run` does with a hang verdict its workers wrote.

A worker's watch thread (torchpod.watch.worker) writes the job's verdict as
``verdict.json`` into the node's private folder (TORCHPOD_STACKS_DIR). ``Watcher`` polls
for it beside the supervised torchrun; once there it prints the verdict on stderr (the HPC
job's output, the pod's log), writes it as the container's termination message where
Kubernetes gave one (``/dev/termination-log``, the default terminationMessagePath, which
`kubectl describe pod` shows as the container's Message; the kubelet reads the file's last
4096 bytes, kubernetes v1.37.2 pkg/kubelet/kuberuntime/kuberuntime_container.go
``getTerminationMessage`` with ``MaxContainerTerminationMessageLength``, so at most that
much is written and the verdict's first lines are kept), and only then stops torchrun with
SIGTERM, as `docker stop` would: every rank's stacks and flight recorder are already on
disk. The signal goes to torchrun (``supervise.Child.stop``), never to torchpod itself, so
a job that ended meanwhile still exits with the verdict. `torchpod run` then exits EXIT_HANG. Every rank wrote
its node's verdict file before any node could stop (torchpod.watch.worker waits for them
all), so a node whose job ended before its poll came round (the node hosting the store
stopped first) reads the file as it closes, and ends as a hang too.

The verdict file is read as any file the launcher did not write: bounded and checked
(torchpod.readers); one that is not a verdict is one line, and the job goes on.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Callable

from .. import readers
from ..errors import InputError

VERDICT = "verdict.json"
VERDICT_CAP = 64 * readers.KiB
TERMINATION_LOG = "/dev/termination-log"
TERMINATION_CAP = 4096  # what the kubelet reads of a container's message
POLL_S = 1.0


def parse(data: str) -> list[str]:
    """The verdict's lines, or InputError naming what the file holds instead."""
    try:
        value = json.loads(data)
    except ValueError:
        raise InputError("the hang verdict is not JSON") from None
    said = value.get("lines") if isinstance(value, dict) else None
    if not (isinstance(said, list) and said and len(said) <= 1000
            and all(isinstance(x, str) and x.isprintable() for x in said)):
        raise InputError("the hang verdict holds no lines of printable text")
    return said


def termination_message(said: list[str], path: str = TERMINATION_LOG) -> bool:
    """The verdict as the container's termination message, where the file Kubernetes made is."""
    try:
        if not Path(path).is_file():
            return False
        data = "\n".join(said).encode()[:TERMINATION_CAP]
        with open(path, "wb") as out:
            out.write(data)
        return True
    except OSError:
        return False


class Watcher:
    """Polls ``folder`` for the verdict; on one, says it and calls ``stop`` once."""

    def __init__(self, folder: str, stop: Callable[[], object],
                 termination_log: str = TERMINATION_LOG, poll_s: float = POLL_S):
        """``stop`` ends the job: `torchpod run` passes ``supervise.Child.stop``, which signals
        torchrun itself and nothing once it has ended."""
        self.path = Path(folder) / VERDICT
        self.stop_job = stop
        self.termination_log, self.poll_s = termination_log, poll_s
        self.verdict: list[str] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torchpod-hang", daemon=True)

    def start(self) -> "Watcher":
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop polling; a verdict its workers wrote that the poll had not read yet (the job
        ended first: another node stopped, and with it the job's store) is read now, so the
        job still ends as a hang."""
        self._done.set()
        self._thread.join(timeout=5)
        if self.verdict is None and not self._thread.is_alive():
            self._look(stop=False)

    def _loop(self) -> None:
        while not self._done.wait(self.poll_s):
            if self._look(stop=True):
                return

    def _look(self, stop: bool) -> bool:
        """Read the verdict file if there is one: say it, then stop the job (``stop``)."""
        if not self.path.exists():
            return False
        try:
            said = parse(readers.read_text(self.path, what="the hang verdict", expected="a verdict its "
                                           "workers wrote", cap=VERDICT_CAP))
        except InputError as exc:
            print(f"torchpod: {exc}; the job goes on", file=sys.stderr, flush=True)
            self.path.unlink(missing_ok=True)
            return False
        self.verdict = said
        for line in said:
            print(line, file=sys.stderr, flush=True)
        if termination_message(said, self.termination_log):
            print(f"torchpod: hang: the verdict is the container's termination message "
                  f"({self.termination_log})", file=sys.stderr, flush=True)
        print(f"torchpod: hang: evidence kept in {self.path.parent}{'; stopping the job' if stop else ''}",
              file=sys.stderr, flush=True)
        if stop:
            self.stop_job()
        return True
