"""Signal forwarding and exit codes with a real child process (no torch involved)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from torchpod.errors import RuntimeFailure
from torchpod.supervise import Child, exit_status, supervise

CHILD = textwrap.dedent(
    """
    import signal, sys, time
    out = open(sys.argv[1], "a", buffering=1)
    def note(signum, frame):
        out.write(signal.Signals(signum).name + "\\n")
        if signum == signal.SIGTERM:
            sys.exit(int(sys.argv[3]))
    for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):
        signal.signal(s, note)
    if sys.argv[2] == "handle-term":
        signal.signal(signal.SIGTERM, note)
    out.write("ready\\n")
    while True:
        time.sleep(0.05)
    """
)

DRIVER = (
    "import os, sys; from torchpod.supervise import supervise; h = os.environ.get('HANDLED'); "
    "sys.exit(supervise(sys.argv[1:], dict(os.environ), handled=h.split(',') if h else None))"
)


def _wait_for(path: Path, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}: {path.read_text() if path.exists() else ''}")


def _start(tmp_path: Path, mode: str, term_code: int = 7, handled: str = "", **popen):
    (tmp_path / "child.py").write_text(CHILD)
    log = tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, sys.executable, str(tmp_path / "child.py"), str(log), mode, str(term_code)],
        env={**os.environ, "HANDLED": handled}, **popen,
    )
    _wait_for(log, "ready")
    return proc, log


def test_signals_are_forwarded_and_child_exit_code_returned(tmp_path):
    proc, log = _start(tmp_path, "handle-term")
    for sig, name in ((signal.SIGUSR1, "SIGUSR1"), (signal.SIGUSR2, "SIGUSR2"), (signal.SIGINT, "SIGINT")):
        proc.send_signal(sig)
        _wait_for(log, name)
    assert proc.poll() is None  # the supervisor survived all of them
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 7
    assert log.read_text().splitlines()[-1] == "SIGTERM"


def test_signal_the_child_does_not_handle_is_dropped_with_a_line(tmp_path):
    # torch < 2.10: torchrun handles TERM/INT/HUP/QUIT only, and SIGUSR1 would kill it
    proc, log = _start(tmp_path, "handle-term", handled="SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2",
                       stderr=subprocess.PIPE, text=True)
    proc.send_signal(signal.SIGUSR1)
    proc.send_signal(signal.SIGUSR2)
    _wait_for(log, "SIGUSR2")
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 7
    assert log.read_text().splitlines()[1:] == ["SIGUSR2", "SIGTERM"]  # never SIGUSR1
    assert "SIGUSR1 not forwarded" in proc.stderr.read()


@pytest.mark.parametrize("term_code, expected", [(1, 143), (0, 0), (7, 7)])
def test_stop_request_reported_as_128_plus_signal_only_over_torchruns_exit_1(tmp_path, term_code, expected):
    # torchrun exits 1 after a forwarded SIGTERM (SignalException): that becomes 143;
    # a clean finish (0) or any other code the child chose is passed on unchanged.
    proc, log = _start(tmp_path, "handle-term", term_code)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == expected
    assert log.read_text().splitlines()[-1] == "SIGTERM"


def test_exit_1_without_a_stop_request_stays_1():
    assert supervise([sys.executable, "-c", "raise SystemExit(1)"], dict(os.environ)) == 1


def test_child_killed_by_signal_gives_128_plus_signal(tmp_path):
    proc, _ = _start(tmp_path, "default-term")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM


def test_exit_code_passthrough_in_process():
    assert supervise([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ)) == 3
    assert supervise([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], dict(os.environ)) == 137


def test_a_child_record_used_twice_names_only_the_process_that_runs():
    """A record reused for a second run forgets the first, reaped process (whose pid may be
    another process's by then) before the second starts; a ``started`` that records nothing
    itself changes nothing."""
    seen = []

    class Told(Child):
        def started(self, proc):
            seen.append((proc.pid, self.proc is proc))

    child = Told()
    assert supervise([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), child=child) == 3
    first = child.proc
    assert first is not None and first.returncode == 3 and child.stop() is False
    with pytest.raises(RuntimeFailure, match="cannot start"):
        supervise(["/nonexistent/torchrun"], {}, child=child)
    assert child.proc is None  # the failed start left no stale process behind
    assert supervise([sys.executable, "-c", "raise SystemExit(4)"], dict(os.environ), child=child) == 4
    assert child.proc is not first and seen == [(first.pid, True), (child.proc.pid, True)]


def test_missing_program_is_a_runtime_failure():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeFailure, match="cannot start"):
        supervise(["/nonexistent/torchrun"], {}, then_ignore=True)
    assert signal.getsignal(signal.SIGTERM) == before  # no child ended: the handlers are as they were


def test_exit_status_decoding():
    assert exit_status(0) == 0
    assert exit_status(3 << 8) == 3
    assert exit_status(signal.SIGKILL) == 137


STOPPER = textwrap.dedent(
    """
    import os, sys, threading, time
    from torchpod.supervise import Child, supervise
    running, ended = threading.Event(), threading.Event()
    said = []
    def later():
        (running if sys.argv[1] == "running" else ended).wait(60)
        said.append("stopped" if child.stop() else "nothing to stop")
        stopped.set()
    stopped = threading.Event()
    threading.Thread(target=later, daemon=True).start()
    class Seen(Child):
        def started(self, proc):
            running.set()
    child = Seen()
    assert child.stop() is False  # nothing runs yet
    body = "import time; time.sleep(60)" if sys.argv[1] == "running" else "pass"
    code = supervise([sys.executable, "-c", body], dict(os.environ), child=child)
    ended.set()  # supervise has returned and put the handlers back
    stopped.wait(60)
    print(*said, f"child {code}", sep=chr(10), flush=True)
    sys.exit(124)
    """
)


def test_a_thread_stops_the_running_child_and_the_supervisor_lives_on():
    """Child.stop sends SIGTERM to the child, which dies of it (143); the supervisor does not."""
    done = subprocess.run([sys.executable, "-c", STOPPER, "running"], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["stopped", f"child {128 + signal.SIGTERM}"], done.stderr
    assert done.returncode == 124, done.stderr


def test_a_stop_after_the_child_ended_signals_nobody():
    """The job ended before the stop came (another node's stop ended torchrun first): the stop,
    arriving once supervise has put the default handlers back, reaches no process and the
    supervisor exits with its own code, not 143."""
    done = subprocess.run([sys.executable, "-c", STOPPER, "ended"], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["nothing to stop", "child 0"], done.stderr
    assert done.returncode == 124, done.stderr


LATE_STOP = textwrap.dedent(
    """
    import os, signal, sys, time
    from torchpod.supervise import supervise
    code = supervise([sys.executable, "-c", "pass"], dict(os.environ), then_ignore=sys.argv[1] == "ignore")
    os.kill(os.getpid(), signal.SIGTERM)  # srun tearing the step down as the launcher reports
    time.sleep(0.5)
    sys.exit(124 if code == 0 else code)
    """
)


@pytest.mark.parametrize("mode, expected", [("ignore", 124), ("restore", -signal.SIGTERM)])
def test_a_stop_request_after_the_child_ended_keeps_the_code_only_where_asked(mode, expected):
    """With then_ignore (what `torchpod run` asks) a SIGTERM after the child was reaped leaves
    the launcher's own exit code; with the previous handlers restored it kills the launcher."""
    done = subprocess.run([sys.executable, "-c", LATE_STOP, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == expected, done.stderr
