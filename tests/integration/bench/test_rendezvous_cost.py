"""bench/rendezvous_cost.py for real, small: torch's own state holder over a real TCPStore.
The state grows with the nodes, a beat costs more than a poll (it is a poll and a
compare-and-set), and the cores it derives are the nodes times the operation's time over
its period, as its docstring says."""

from __future__ import annotations

import json
import subprocess
import sys

from needs import module
from paths import ROOT

SCRIPT = ROOT / "bench" / "rendezvous_cost.py"


def test_the_cost_of_a_node_grows_with_the_state_and_the_cores_follow_from_it(tmp_path):
    module("torch", "PyTorch on the host (./setup.sh --tests installs the default image's torch)")
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--nodes", "512,8", "--repeats", "15", "--out", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    small, big = report["rows"]
    assert (small["nodes"], big["nodes"]) == (8, 512)  # sorted, whatever order they were asked in
    assert big["state_bytes"] > 40 * small["state_bytes"], report  # every node's entry is in the state
    assert big["poll_ms"] > small["poll_ms"] and big["beat_ms"] > big["poll_ms"], report
    for row in (small, big):
        assert abs(row["poll_cores"] - row["nodes"] * row["poll_ms"] / 1e3 / report["poll_every_s"]) < 1e-3, row
        beat = row["nodes"] * (row["beat_ms"] + row["record_ms"]) / 1e3 / report["keep_alive_interval_s"]
        assert abs(row["beat_cores"] - beat) < 1e-3, row
    assert "512" in done.stdout.splitlines()[-1], done.stdout
