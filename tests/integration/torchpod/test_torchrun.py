"""torchrun's bare RendezvousTimeoutError becomes one line that counts the arrivals
(torchpod.torchrun), with a real torchrun and c10d store on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap


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
