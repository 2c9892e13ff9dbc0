"""The one way the launcher reads a file it did not write: bounded, regular files only.

Node files, host files, sysfs attributes, presets and NCCL logs come from schedulers,
kernels, volumes and users: any of them may be a FIFO (an open that never returns), a
device (``/dev/zero`` never ends), a directory, a sparse 1 GB file or binary data. So:

- the path is ``os.stat``-ed first, following symlinks (sysfs is made of device links), and
  anything but a regular file is one error naming the path and what it is;
- it is opened with O_NONBLOCK, so a file swapped for a FIFO after the check cannot block
  the open, and ``fstat``-ed again on the descriptor: what is read is what was checked;
- a file over its kind's cap is refused from its size, before a byte is read; procfs and
  sysfs report sizes of 0 or 4096 whatever they hold, so the read itself stops at cap + 1;
- text must be UTF-8; undecodable bytes are one error naming the file and the offset;
- where only the start or the end of a file matters (``read_head``, ``read_tail``), the
  file may be any size: only that much is read, and memory stays within it;
- every OSError is one error naming the file and the system's reason (``Unreadable``, so
  a caller for whom "unreadable" is a fact, such as sysfs, can tell it from hostility);
- logs are streamed line by line (``Lines``) with a per-line cap: an over-long line is cut
  at the cap and the rest skipped up to its newline, so work and memory stay linear in the
  input and bounded by the cap, whatever the file holds;
- what a helper tool prints (`nvidia-smi`, `scontrol`, `fi_info`) is read by ``run_helpers``:
  the tools of one reading run side by side under one deadline (HELPER_TIMEOUT_S), in any
  encoding (undecodable bytes replaced).

Errors are InputError (exit 2): every file read here is an input of the launch.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from typing import Iterator, Mapping, Sequence

from .errors import InputError
from .words import plural

KiB, MiB = 1 << 10, 1 << 20
NODE_FILE_CAP = 16 * MiB  # PBS_NODEFILE, /etc/volcano/*.host: ~100 bytes per slot line
ATTR_CAP = 64 * KiB  # one sysfs attribute (the kernel's own limit is a page, 4 KiB)
TABLE_CAP = 16 * MiB  # procfs tables (/proc/net/route)
DATA_CAP = 1 * MiB  # files torchpod ships (presets.json)
LIBRARY_CAP = 512 * MiB  # a shared library whose ELF headers are read (libfabric.so.1)
LINE_CAP = 16 * KiB  # one log line; NCCL's INFO lines are a few hundred bytes
_CHUNK = 1 * MiB
TAIL_GROWTH = 16 * MiB  # read_tail: the most it reads past the end a growing file reported
# No reading of the machine waits longer than this for a helper tool: `scontrol` without a
# readable slurm.conf retries for ~20 s, a wedged driver can hang `nvidia-smi`. Each answer
# has a fallback of its own (torchpod's host-list parser, the CUDA variables, one process;
# the doctor reports a tool that did not answer).
HELPER_TIMEOUT_S = 2.0

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class Unreadable(InputError):
    """The file could not be stat-ed, opened or read (an OSError); ``errno`` says why."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


def size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= MiB and n % MiB == 0 else f"{n >> 10} KiB" if n >= KiB else plural(n, 'byte')


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _unreadable(what: str, expected: str, exc: OSError) -> Unreadable:
    reason = exc.strerror or type(exc).__name__
    return Unreadable(f"{what} cannot be read ({reason}); expected {expected}", exc.errno)


def _check(st: os.stat_result, what: str, expected: str, cap: int | None) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} is {kind_of(st.st_mode)}; expected a regular file: {expected}")
    if cap is not None and st.st_size > cap:
        raise InputError(f"{what} is {plural(st.st_size, 'byte')}, over the {size_text(cap)} cap for this file; "
                         f"expected {expected}")


def open_regular(path: str | os.PathLike, what: str, expected: str, cap: int | None) -> int:
    """A read-only descriptor on ``path``, a regular file within ``cap`` bytes (module docstring)."""
    try:
        _check(os.stat(path), what, expected, cap)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        if isinstance(exc, ValueError):
            raise InputError(f"{what} is not a usable path ({exc}); expected {expected}") from None
        raise _unreadable(what, expected, exc) from None
    try:
        _check(os.fstat(fd), what, expected, cap)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_upto(fd: int, limit: int, what: str, expected: str) -> bytes:
    """At most ``limit`` bytes from ``fd``'s position, fewer at the end of the file."""
    parts, total = [], 0
    try:
        while total < limit:
            chunk = os.read(fd, min(_CHUNK, limit - total))
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise _unreadable(what, expected, exc) from None
    return b"".join(parts)


def read_bytes(path: str | os.PathLike, *, what: str, expected: str, cap: int) -> bytes:
    """The whole file, at most ``cap`` bytes; over it (however the size was reported) an error."""
    fd = open_regular(path, what, expected, cap)
    try:
        data = _read_upto(fd, cap + 1, what, expected)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise InputError(f"{what} holds more than {size_text(cap)}, the cap for this file; expected {expected}")
    return data


def read_head(path: str | os.PathLike, *, what: str, expected: str, limit: int) -> bytes:
    """The first ``limit`` bytes of a regular file of any size (all of a shorter one): for a
    reader that needs only the start, or that compares a file with ``limit - 1`` known bytes."""
    fd = open_regular(path, what, expected, None)
    try:
        return _read_upto(fd, limit, what, expected)
    finally:
        os.close(fd)


def read_tail(path: str | os.PathLike, *, what: str, expected: str, limit: int) -> bytes:
    """The last ``limit`` bytes of a regular file of any size, such as a log being written.
    The read starts ``limit`` bytes before the end the file's size reports and goes on to
    where the file ends then, keeping only the last ``limit`` bytes, so a file that grows or
    reports no size (procfs) costs no more memory. A file that keeps growing is read at most
    TAIL_GROWTH bytes past the end it reported, so the read ends however fast it is written."""
    fd = open_regular(path, what, expected, None)
    try:
        try:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - limit), os.SEEK_SET)
        except OSError as exc:
            raise _unreadable(what, expected, exc) from None
        data, budget = b"", min(size, limit) + TAIL_GROWTH
        while budget > 0 and (chunk := _read_upto(fd, min(_CHUNK, budget), what, expected)):
            budget -= len(chunk)
            data = (data + chunk)[-limit:] if limit else b""
        return data
    finally:
        os.close(fd)


def tail_text(path: str | os.PathLike, *, what: str, expected: str, chars: int) -> str:
    """The last ``chars`` characters of a regular file of any size, from its last ``4 * chars``
    bytes (a character is at most 4 bytes of UTF-8; ``read_tail``), undecodable bytes replaced
    with U+FFFD: the cut may split a character, and a log interleaves programs that are not
    all UTF-8."""
    data = read_tail(path, what=what, expected=expected, limit=4 * chars)
    return data.decode("utf-8", errors="replace")[-chars:] if chars else ""


def decode(data: bytes, what: str, expected: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} holds bytes that are not UTF-8 text (first at byte {exc.start}); "
                         f"expected {expected}") from None


def read_text(path: str | os.PathLike, *, what: str, expected: str, cap: int) -> str:
    """``read_bytes`` decoded as strict UTF-8."""
    return decode(read_bytes(path, what=what, expected=expected, cap=cap), what, expected)


class Lines:
    """The lines of a log, streamed: each at most ``line_cap`` bytes (the rest of a longer
    line is skipped; ``truncated`` counts them), decoded with U+FFFD for stray bytes, as a
    log interleaves the output of programs that are not all UTF-8. No total cap: memory is
    bounded by the chunk and the line cap, time is linear in the file's size."""

    def __init__(self, path: str | os.PathLike, *, what: str, expected: str, line_cap: int = LINE_CAP,
                 chunk: int = _CHUNK):
        self.path, self.what, self.expected, self.line_cap, self.chunk = path, what, expected, line_cap, chunk
        self.truncated = 0
        self._fd: int | None = open_regular(path, what, expected, None)  # errors now, not at first next()

    def _cut(self, line: bytes) -> str:
        if len(line) > self.line_cap:
            self.truncated += 1
            line = line[: self.line_cap]
        return line.rstrip(b"\r").decode("utf-8", errors="replace")

    def __iter__(self) -> Iterator[str]:
        if self._fd is None:
            raise RuntimeError("Lines is read once")
        fd, self._fd = self._fd, None
        pending, skipping = b"", False
        try:
            while True:
                try:
                    data = os.read(fd, self.chunk)
                except OSError as exc:
                    raise _unreadable(self.what, self.expected, exc) from None
                if not data:
                    break
                parts = data.split(b"\n")
                tail = parts.pop()  # not ended by a newline (yet)
                for i, part in enumerate(parts):
                    if i == 0:
                        if skipping:  # the end of an over-long line already cut
                            skipping = False
                            continue
                        part, pending = pending + part, b""
                    yield self._cut(part)
                if skipping:
                    continue
                pending += tail
                if len(pending) > self.line_cap:
                    yield self._cut(pending)
                    pending, skipping = b"", True
            if pending and not skipping:
                yield self._cut(pending)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def run_helpers(commands: Mapping[str, Sequence[str]], timeout: float = HELPER_TIMEOUT_S,
              env: Mapping[str, str] | None = None) -> dict[str, tuple[str | None, str]]:
    """Run helper tools side by side; key -> (stdout, why): why is "" for a tool that exited 0
    within ``timeout`` of the start; a tool that exited non-zero keeps its stdout, one that
    could not start or missed the deadline has None. ``env``: the tools' environment (None: ours).

    Each tool runs in a session of its own, and one that misses the deadline has its whole
    process group killed: a child it forked cannot keep the pipe (and this launch) open.
    """
    answers: dict[str, tuple[str | None, str]] = {}
    started: dict[str, subprocess.Popen] = {}
    for key, argv in commands.items():
        try:
            started[key] = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL, text=True, errors="replace",
                                            start_new_session=True, env=None if env is None else dict(env))
        except (OSError, ValueError) as exc:  # ValueError: a NUL in an argument (a variable's value)
            answers[key] = (None, f"could not start ({getattr(exc, 'strerror', None) or exc})")
    deadline = time.monotonic() + timeout
    for key, proc in started.items():
        try:
            out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            answers[key] = (None, f"did not answer within {timeout:g} s")
            continue
        answers[key] = (out, "") if proc.returncode == 0 else (out, f"failed (exit {proc.returncode})")
    return answers
