"""Every worker's Python stacks on this node, while the job runs: `torchpod stacks`.

A hung collective leaves every rank waiting and, minutes later, a watchdog or the
scheduler kills them all, stacks and all (torchrun's agent kills the workers before anyone
reads them: pytorch/pytorch#122694). `torchpod run` arms each worker instead: it puts
torchpod.shim first on the workers' PYTHONPATH, whose sitecustomize registers a stack dump
on SIGNAL, a real-time signal nothing else in a job sends (faulthandler, written from the
signal handler in C, so a rank blocked in C++ answers too) into
``rank-<RANK>.pid-<PID>.stacks`` of a private folder `run` made (TORCHPOD_STACKS_DIR).
Nothing in the training script changes, and nothing is stopped.

`torchpod stacks` finds this user's workers on the node (``/proc/<pid>/environ`` holding
TORCHPOD_STACKS_DIR and the RANK, LOCAL_RANK and ROLE_RANK torchrun gives a worker),
signals each, waits for what each appends (SETTLE_S of quiet after the first bytes, at most
``wait`` seconds in all), and prints each rank's threads with its innermost frame outside
the interpreter and its packages (the script's line a rank is at). A worker that does not
answer in time is named: frozen (SIGSTOP, a paused container) or its handler never armed.
Why faulthandler rather than py-spy: it needs no ptrace permission (containers and Yama's
ptrace_scope deny it to a non-parent) and no package in the image.

Pure below ``collect``: ``parse_environ``, ``innermost`` and ``report`` take text.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import frames, readers
from .contract import ENV_STACKS_DIR
from .errors import InputError

SHIM_DIR = Path(__file__).resolve().with_name("shim")
# the shim's (torchpod/shim/sitecustomize.py): neither SIGUSR1/2, which schedulers and
# torchrun's --signals-to-handle send, nor SIGRTMIN..+1, which glibc keeps for its threads
SIGNAL = signal.SIGRTMIN + 5
SETTLE_S = 0.2  # a dump is written at once; this much quiet after its first bytes ends it
ENVIRON_CAP = 1 * readers.MiB
DUMP_CAP = 4 * readers.MiB  # a dump of thousands of threads still fits
WAIT_DEFAULT_S = 5.0
WAIT_MAX_S = 600.0
_FRAME = re.compile(r'\s*File "(?P<file>[^"]*)", line (?P<line>[0-9]+) in (?P<func>\S+)')


@dataclass(frozen=True)
class Worker:
    pid: int
    rank: int
    local_rank: int
    folder: str
    run_id: str = ""  # torchrun's TORCHELASTIC_RUN_ID: the job's rendezvous id, as the plan names it

    @property
    def file(self) -> Path:
        return Path(self.folder) / f"rank-{self.rank}.pid-{self.pid}.stacks"


@dataclass(frozen=True)
class Answer:
    worker: Worker
    dump: str | None  # None: no answer within the wait

    def innermost(self) -> str:
        return innermost(self.dump or "")


def parse_environ(data: bytes) -> dict[str, str]:
    """``/proc/<pid>/environ``: NUL-separated NAME=VALUE, undecodable bytes replaced."""
    out = {}
    for item in data.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and name:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def worker_of(pid: int, env: dict[str, str]) -> Worker | None:
    """The worker a process is, from its environment; None for any other process."""
    folder, rank, local = env.get(ENV_STACKS_DIR, ""), env.get("RANK", ""), env.get("LOCAL_RANK", "")
    if not folder.startswith("/") or not all(n.isascii() and n.isdigit() for n in (rank, local,
                                                                                    env.get("ROLE_RANK", ""))):
        return None
    return Worker(pid, int(rank), int(local), folder, env.get("TORCHELASTIC_RUN_ID", ""))


def workers(proc: Path = Path("/proc"), uid: int | None = None, run_id: str = "") -> list[Worker]:
    """This user's workers of `torchpod run` on the node (of the run ``run_id`` names, when
    given: two jobs of one user may share a node), by rank."""
    uid = os.getuid() if uid is None else uid
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            data = readers.read_bytes(entry / "environ", what=f"{entry}/environ", expected="a process environment",
                                      cap=ENVIRON_CAP)
        except (OSError, InputError):  # gone meanwhile, or not ours to read
            continue
        worker = worker_of(int(entry.name), parse_environ(data))
        if worker is not None and (not run_id or worker.run_id == run_id):
            found.append(worker)
    return sorted(found, key=lambda w: (w.rank, w.pid))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def armed(worker: Worker) -> bool:
    """Whether the worker's handler is in place: its file begins with the shim's armed line.
    No other process is signalled, since the signal's default action would end it."""
    try:
        with open(readers.open_regular(worker.file, str(worker.file), "a stack dump", cap=None), "rb") as f:
            first = f.readline(256).decode("ascii", "replace")
        return first == f"torchpod: rank {worker.rank} pid {worker.pid} armed\n"
    except (OSError, InputError):
        return False


def collect(found: Sequence[Worker], wait: float, clock=time.monotonic, sleep=time.sleep) -> list[Answer]:
    """Signal every armed worker, then read what each appended to its file."""
    before = {w.pid: _size(w.file) if armed(w) else -1 for w in found}
    for w in found:
        if before[w.pid] < 0:
            continue  # not armed: it answers nothing, and is not signalled
        try:
            os.kill(w.pid, SIGNAL)
        except OSError:
            before[w.pid] = -1  # gone: it answers nothing
    deadline, pending = clock() + wait, {w.pid for w in found if before[w.pid] >= 0}
    last: dict[int, tuple[int, float]] = {}
    while pending and clock() < deadline:
        now = clock()
        for w in found:
            if w.pid in pending:
                size = _size(w.file)
                seen = last.get(w.pid)
                if size > before[w.pid] and seen and seen[0] == size and now - seen[1] >= SETTLE_S:
                    pending.discard(w.pid)
                elif not seen or seen[0] != size:
                    last[w.pid] = (size, now)
        sleep(0.05)
    answers = []
    for w in found:
        if before[w.pid] < 0 or w.pid in pending:
            answers.append(Answer(w, None))
            continue
        with open(readers.open_regular(w.file, str(w.file), "a stack dump", cap=None), "rb") as f:
            f.seek(before[w.pid])
            answers.append(Answer(w, f.read(DUMP_CAP).decode("utf-8", "replace")))
    return answers


def innermost(dump: str) -> str:
    """``FILE:LINE in FUNC``, the innermost frame of the first thread that has one of the
    user's own (torchpod.frames; faulthandler prints each thread innermost first); "" when
    no frame is."""
    for line in dump.splitlines():
        frame = _FRAME.match(line)
        if frame and frames.users(frame["file"]):
            return f"{frame['file']}:{frame['line']} in {frame['func']}"
    return ""


def report(answers: Sequence[Answer], host: str, fmt: str) -> str:
    if fmt == "json":
        return json.dumps([{"rank": a.worker.rank, "local_rank": a.worker.local_rank, "pid": a.worker.pid,
                            "run_id": a.worker.run_id, "host": host, "answered": a.dump is not None,
                            "innermost": a.innermost(),
                            "stacks": a.dump} for a in answers], indent=2)
    out = []
    for a in answers:
        w = a.worker
        head = f"rank {w.rank} (local rank {w.local_rank}, pid {w.pid}, {host}, run {w.run_id or '?'})"
        if a.dump is None:
            out.append(f"{head}: no answer (frozen, stopped, or its dump not armed)")
            continue
        out.append(f"{head}: at {a.innermost() or 'no frame of its own'}")
        out += ["  " + line for line in a.dump.rstrip("\n").splitlines()]
    return "\n".join(out)


def check_wait(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= WAIT_MAX_S or value != value:
        raise InputError(f"--wait {text!r} is not a time to wait; expected seconds above 0 and at most "
                         f"{WAIT_MAX_S:.0f}, e.g. 5")
    return value
