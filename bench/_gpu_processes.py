"""bench/gpu_check.py's edge: one command run under a time limit with its output in two new
files, its whole process tree stopped when it runs past the limit or on Ctrl-C, and its
logs read back through the launcher's bounded reader.

The process tree is read from /proc: torchrun starts its workers in sessions of their own,
so a kill of the process group would leave them running on the GPU. A log that cannot be
read is one line saying why, never an exception: the check goes on and records what it can.

Standard library only, plus the launcher's bounded reader (standard library only as well);
the program puts entrypoints/ on ``sys.path`` before it imports this helper (a name starting
with ``_``: no task of its own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from torchpod import readers  # the bounded reader
from torchpod.errors import InputError

KILL_GRACE_S = 5.0  # from SIGTERM to SIGKILL; torchpod forwards SIGTERM to torchrun, which stops its workers
TAIL_CHARS = 3000  # per stream, in summary.json
READ_CAP = 1 << 20  # the most of a step's stdout read to judge it (the plan and doctor JSON are a few KiB)


@dataclass(frozen=True)
class Ran:
    """What one command did; its output is in the two files."""

    argv: tuple[str, ...]
    exit_code: int | None  # None: it could not start
    wall_s: float
    timed_out: bool
    stdout: Path
    stderr: Path


def process_tree(root: int) -> list[tuple[int, str]]:
    """(pid, start time) of ``root`` and every descendant, read from /proc: torchrun starts
    its workers in sessions of their own, so a process group does not hold them."""
    children: dict[int, list[tuple[int, str]]] = {}
    start_of: dict[int, str] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        fields = _proc_stat(entry)
        if fields is None:
            continue
        pid, ppid = int(entry), int(fields[1])
        start_of[pid] = fields[19]
        children.setdefault(ppid, []).append((pid, fields[19]))
    tree, todo = [(root, start_of.get(root, ""))], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            tree.append(child)
            todo.append(child[0])
    return tree


def _proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold any bytes, ")" too),
    through the bounded reader; None for a process gone or a line not of that form."""
    path = f"/proc/{pid}/stat"
    try:
        text = readers.read_bytes(path, what=path, expected="procfs's stat", cap=readers.ATTR_CAP)
    except InputError:
        return None
    _, paren, tail = text.decode("utf-8", "replace").rpartition(")")
    fields = tail.split()
    return fields if paren and len(fields) > 19 else None


def _alive(pid: int, started: str) -> bool:
    fields = _proc_stat(pid)
    if fields is None:
        return False
    return fields[0] != "Z" and (not started or fields[19] == started)  # the same process, not a reused pid


def _signal(tree: Sequence[tuple[int, str]], sig: int) -> None:
    for pid, started in tree:
        if _alive(pid, started):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to ``proc``'s whole tree, then SIGKILL to what is left after KILL_GRACE_S."""
    tree = process_tree(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass
    _signal(tree, signal.SIGTERM)
    end = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < end and (proc.poll() is None or any(_alive(p, s) for p, s in tree[1:])):
        time.sleep(0.1)
    _signal(tree, signal.SIGKILL)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:  # bounded even here: a process stuck in the kernel (a wedged GPU driver) survives SIGKILL
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass


def execute(argv: Sequence[str], env: Mapping[str, str], cwd: Path, limit_s: float, stdout: Path,
            stderr: Path) -> Ran:
    """Run ``argv`` with its output in two new files; stop its tree at ``limit_s`` or Ctrl-C."""
    started = time.monotonic()
    with open(stdout, "xb") as out, open(stderr, "xb") as err:
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=dict(env),
                                    cwd=cwd, start_new_session=True)
        except OSError as exc:
            err.write(f"gpu_check: {argv[0]!r} could not start: {exc.strerror or exc}\n".encode())
            return Ran(tuple(argv), None, time.monotonic() - started, False, stdout, stderr)
        timed_out = False
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop(proc)
        except BaseException:  # Ctrl-C: never leave a torchrun and its workers behind
            stop(proc)
            raise
    return Ran(tuple(argv), proc.returncode, time.monotonic() - started, timed_out, stdout, stderr)


# A step's logs are read through the launcher's bounded reader, undecodable bytes replaced; a
# log that cannot be read (gone, or something else in its place) is recorded as one line
# saying why, never raised: the check goes on and records what it can.
LOG = "a step's log (gpu_check opens it for the command's output)"


def read_head(path: Path, cap: int = READ_CAP) -> str:
    try:
        return readers.read_head(path, what=str(path), expected=LOG, limit=cap).decode("utf-8", "replace")
    except InputError as exc:
        return f"(gpu_check: {exc})"


def read_tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        return readers.tail_text(path, what=str(path), expected=LOG, chars=chars)
    except InputError as exc:
        return f"(gpu_check: {exc})"
