"""Run torchrun as a child and stay in front of it, as an init process should.

torchpod always supervises (not only as PID 1), so one code path is tested everywhere:

- the child gets its own process group and, on a terminal, the foreground, so Ctrl-C
  reaches torchrun and its workers once, from the terminal, not twice;
- SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to torchpod are forwarded
  to torchrun, which hands them to its workers (`docker stop` -> SIGTERM -> clean stop);
  a signal torchrun was not told to handle (SIGUSR1/SIGUSR2 under torch < 2.10, which
  lacks --signals-to-handle) would kill torchrun outright, so torchpod says so and drops it;
- every child is reaped (``waitpid(-1)``), including orphans re-parented to PID 1;
- the exit status is torchrun's, or 128 + N when a signal N killed it. torchrun turns
  a death signal (TERM, INT, HUP, QUIT) into its SignalException and exits 1, which
  reads like a training failure; when torchpod forwarded such a signal and torchrun
  then exits 1, torchpod reports 128 + N instead (`docker stop` -> 143), so schedulers
  and people see a job that was stopped, not one that broke. Other codes pass through.

A thread of torchpod's own that must stop the job (the hang watch) stops torchrun through
``Child.stop``, never by signalling torchpod: a signal torchpod sends itself after
``supervise`` has returned and put the previous handlers back would kill torchpod with it
(exit 143) instead of letting it exit with its own verdict.

Once torchrun has ended, a stop request has nothing left to stop, yet with the default
handlers back it would kill torchpod and replace the job's own exit code (0, or the hang
verdict's 124) with 143. That happens for real: srun's ``--kill-on-bad-exit`` signals the
whole step of every node as soon as one node's launcher exits non-zero, and a node whose
torchrun has just ended the same way receives it while it reports. So `torchpod run` asks
``supervise`` to leave the death signals ignored once the child has been reaped
(``then_ignore``); torchpod exits moments later with the code it has.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Collection, Mapping, Sequence

from .errors import RuntimeFailure

# The one list of signals, by name. FORWARDED reach torchrun; with torch >= 2.10 the plan
# passes the same names to torchrun's --signals-to-handle so they reach the workers
# (SIGUSR1/SIGUSR2: Slurm's `--signal`, preemption warnings).
FORWARDED_NAMES = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
# What torchrun handles without --signals-to-handle (torch < 2.10), and what
# torch.distributed.elastic turns into its SignalException (exit 1): the death signals.
TERMINATING_NAMES = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")

FORWARDED = tuple(signal.Signals[name] for name in FORWARDED_NAMES)
TERMINATING = tuple(signal.Signals[name] for name in TERMINATING_NAMES)


def exit_status(status: int) -> int:
    """Shell-style exit code from a ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def _foreground_child() -> None:  # runs in the child between fork and exec
    os.setpgid(0, 0)
    try:
        if os.isatty(0) and os.tcgetpgrp(0) == os.getpgid(os.getppid()):
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            os.tcsetpgrp(0, os.getpgrp())
            signal.signal(signal.SIGTTOU, old)
    except OSError:
        pass


def _reap(proc: subprocess.Popen) -> int | None:
    """Wait for ``proc`` as PID 1 must: reaping every child that exits meanwhile (orphans
    re-parented to us), then whatever is left without blocking. None: it was never seen."""
    code = None
    while code is None:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == proc.pid:
            code = exit_status(status)
            proc.returncode = code  # Popen must not wait for it again
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return code


class Child:
    """The supervised process, as another thread sees it: ``stop`` sends it SIGTERM while it
    runs, as a forwarded `docker stop` would, and does nothing before it started or once
    ``supervise`` has reaped it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None  # set by ``supervise`` alone

    def started(self, proc: subprocess.Popen) -> None:
        """Told once ``proc`` runs, after ``supervise`` has recorded it (nothing by default)."""

    def stop(self) -> bool:
        """True when a SIGTERM reached the running child."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return False
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True


def supervise(argv: Sequence[str], env: Mapping[str, str],
              handled: Collection[str] | None = None,
              child: Child | None = None,
              then_ignore: bool = False) -> int:
    """Start ``argv`` with ``env``, forward signals to it, reap, return its exit code.

    ``handled``: names of the signals the child catches (default: all of FORWARDED);
    the death signals are always forwarded, the others only when the child handles them.
    ``child``: where the running process is recorded (``Child.proc``, then ``Child.started``),
    so that another thread can stop it; by default a record of its own.
    ``then_ignore``: once the child has been reaped, the death signals stay ignored rather
    than handled as before the call (a caller that only reports and exits after it); a child
    that never started leaves them as they were.
    """
    pending: list[int] = []
    child = Child() if child is None else child
    child.proc = None  # a record reused from an earlier call names a reaped (or recycled) pid
    stopped_by: list[int] = []  # terminating signals forwarded, first one first
    dropped = {sig for sig in FORWARDED if handled is not None and sig not in TERMINATING and sig.name not in handled}

    def forward(signum, _frame):
        if signum in dropped:
            print(f"torchpod: {signal.Signals(signum).name} not forwarded: torchrun was not "
                  "told to handle it and would die of it (--signals-to-handle, torch >= 2.10)",
                  file=sys.stderr, flush=True)
            return
        if signum in TERMINATING:
            stopped_by.append(signum)
        if child.proc is not None:
            try:
                os.kill(child.proc.pid, signum)
            except ProcessLookupError:
                pass
        else:
            pending.append(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    reaped = False
    try:
        try:
            proc = subprocess.Popen(list(argv), env=dict(env), preexec_fn=_foreground_child)
        except OSError as exc:
            raise RuntimeFailure(
                f"cannot start {argv[0]!r}: {exc.strerror or exc}; expected a Python with "
                "torch installed (torchpod runs `python -m torch.distributed.run`)"
            ) from exc
        child.proc = proc
        child.started(proc)
        for signum in pending:
            forward(signum, None)
        code = _reap(proc)
        reaped = True
        if code == 1 and stopped_by:
            return 128 + stopped_by[0]
        return 1 if code is None else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if then_ignore and reaped and sig in TERMINATING else handler)
