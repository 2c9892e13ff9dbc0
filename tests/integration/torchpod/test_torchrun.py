"""torchrun's bare RendezvousTimeoutError becomes one line that counts the arrivals
(torchpod.torchrun), with a real torchrun and c10d store on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rendezvous_timeout_says_how_many_nodes_came(tmp_path):
    """One node of two starts; torchrun's bare RendezvousTimeoutError becomes one line."""
    script = tmp_path / "w.py"
    script.write_text("print('never')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_"))}
    cmd = [sys.executable, "-m", "torchpod.torchrun", "--nnodes=2", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=localhost:{_free_port()}", "--rdzv-id=t1",
           "--rdzv-conf=join_timeout=3,is_host=true", str(script)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    want = "torchpod: error: rendezvous 't1' timed out after 3 s: expected 2 nodes, 1 arrived"
    assert last.startswith(want), done.stderr[-2000:]
    assert "Traceback" not in done.stderr, textwrap.shorten(done.stderr, 400)


WORKER = textwrap.dedent(
    """
    import signal, sys, time
    log, asked = open(sys.argv[1], "a", buffering=1), []
    def note(signum, frame):
        log.write(signal.Signals(signum).name + "\\n")
        if signum != signal.SIGUSR1:
            sys.exit(128 + signum)
        asked.append(signum)
    signal.signal(signal.SIGUSR1, note)
    signal.signal(signal.SIGTERM, note)
    log.write("ready\\n")
    while not asked:
        time.sleep(0.05)
    time.sleep(1.5)  # a snapshot being written
    log.write("saved\\n")
    sys.exit(75)
    """
)


def test_a_repeated_signal_does_not_cut_the_workers_stop_short(tmp_path):
    """Slurm signals every process of a step, so torchrun gets USR1 itself and again from
    torchpod: the workers are stopped with USR1 and given their time, never SIGTERM'd."""
    (tmp_path / "w.py").write_text(WORKER)
    log = tmp_path / "log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_"))}
    cmd = [sys.executable, "-m", "torchpod.torchrun", "--nnodes=1", "--nproc-per-node=1", "--rdzv-backend=c10d",
           f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--rdzv-conf=is_host=true", "--local-addr=127.0.0.1",
           "--signals-to-handle=SIGTERM,SIGINT,SIGUSR1", str(tmp_path / "w.py"), str(log)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "ready" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.3)  # inside torchrun's wait for the worker
        proc.send_signal(signal.SIGUSR1)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert log.read_text().splitlines() == ["ready", "SIGUSR1", "saved"], (log.read_text(), err[-3000:])
    assert "torchpod: torchrun got SIGUSR1 again while stopping its workers on SIGUSR1; ignored" in err
    assert proc.returncode == 1  # torchrun's own exit after a handled signal
