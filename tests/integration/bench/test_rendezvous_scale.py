"""bench/rendezvous_scale.py for real, small: torch's own rendezvous handlers over a real
TCPStore give every node one rank; a node that starts late is waited for; one later than
the join timeout fails every node with torch's RendezvousTimeoutError, and the bench says
so instead of reporting a time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from needs import module
from paths import ROOT

SCRIPT = ROOT / "bench" / "rendezvous_scale.py"


def bench(tmp_path, *args: str) -> dict:
    module("torch", "PyTorch on the host (./setup.sh --tests installs the default image's torch)")
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--nodes", "4", "--procs", "2", "--steady-s", "1",
                           "--out", str(out), *args], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["nodes"] == 4 and row["procs"] == 2, row
    return row


def test_every_node_gets_one_rank_and_a_late_one_is_waited_for(tmp_path):
    row = bench(tmp_path, "--late-s", "3", "--settings", "torchpod")
    assert row["ranks_ok"] and row["failed"] == 0 and row["errors"] == [], row
    assert row["complete_s"] >= 3 and row["wait_median_s"] >= 2, row  # the others waited for the late node
    assert row["participants"] == 4 and row["dropped"] == 0 and row["state_bytes"] > 0, row
    assert (row["settings"]["join_timeout"], row["settings"]["heartbeat_timeout"]) == (600, 5), row  # torch's, at 4
    assert row["settings"]["keep_alive_interval"] == 5, row


@pytest.mark.parametrize("late, join", [("6", "2")])
def test_a_node_later_than_the_join_timeout_fails_the_rendezvous_and_the_bench_says_so(tmp_path, late, join):
    row = bench(tmp_path, "--late-s", late, "--settings", "custom", "--join-timeout", join)
    assert not row["ranks_ok"] and row["failed"] >= 3 and row["errors"] == ["RendezvousTimeoutError"], row
    assert row["wait_median_s"] is None or row["failed"] < 4, row


def test_nodes_started_over_a_spread_all_get_a_rank_and_the_bench_times_the_last_one(tmp_path):
    row = bench(tmp_path, "--spread-s", "3", "--settings", "torchpod")
    assert row["ranks_ok"] and row["failed"] == 0 and row["spread_s"] == 3, row
    assert row["complete_s"] >= 3 * 3 / 4, row  # the last of 4 nodes starts 3/4 of the spread in
    assert 0 <= row["after_last_start_s"] <= row["complete_s"] - 3 * 3 / 4 + 0.5, row
