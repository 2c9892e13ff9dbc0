"""The hang watch on real gloo ranks: `torchpod run` starts two workers through torchrun with
a stall window of 10 s (TORCHPOD_STALL_WINDOW); each fault is injected by the script, and
the verdict is checked word for word against it: the rank that stopped before the
collective, or the rank that called another collective, with its host and its frame. The
job ends with exit 124 after the verdict, with every rank's evidence (stacks, flight
recorder, report) kept. A clean job whose first step is longer than half the window names
nobody and exits 0; a window out of its form is one line."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchpod_toolkit.kube.plane import free_ports

WINDOW = 10
# three collectives, then the fault; rank 1 is the culprit of each
SCRIPT = textwrap.dedent("""
    import sys, time
    import torch, torch.distributed as dist

    def load_the_next_batch():
        time.sleep(600)

    dist.init_process_group("gloo")
    rank, x = dist.get_rank(), torch.ones(10)
    time.sleep(float(sys.argv[2]))  # the first step: loading data, every rank alike
    for _ in range(3):
        dist.all_reduce(x)
    if sys.argv[1] in ("straggle", "steady"):  # steps of 0.25 s; rank 1's 0.5 s where it straggles
        for _ in range(80 if sys.argv[1] == "straggle" else 60):
            time.sleep(0.5 if sys.argv[1] == "straggle" and rank == 1 else 0.25)
            dist.all_reduce(x)
    if sys.argv[1] == "sleep" and rank == 1:
        load_the_next_batch()
    if sys.argv[1] == "mismatch" and rank == 1:
        dist.broadcast(x, src=0)
    else:
        dist.all_reduce(x)
    print(f"rank {rank} done", flush=True)
""")
SLEEP_LINE, BROADCAST_LINE = 6, 20  # counting the blank first line


def launch(tmp_path: Path, *args: str, window: str = str(WINDOW)) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_", "SLURM_", "PBS_"))}
    env.update(CUDA_VISIBLE_DEVICES="", GLOO_SOCKET_IFNAME="lo", TORCHPOD_RDZV_PORT=str(free_ports(1)[0]),
               TMPDIR=str(tmp_path), TORCHPOD_STALL_WINDOW=window)
    return subprocess.run([sys.executable, "-m", "torchpod", "run", "--nproc-per-node", "2", str(script), *args],
                          env=env, capture_output=True, text=True, timeout=240)


def said(done: subprocess.CompletedProcess[str], what: str = "hang") -> list[str]:
    return [ln for ln in done.stderr.splitlines() if ln.startswith(f"torchpod: {what}")]


@pytest.mark.parametrize("fault, culprit", [
    ("sleep", f"never entered it; last in collective 3 (gloo:all_reduce, sizes [[10]]); now in {{script}}:"
              f"{SLEEP_LINE} in load_the_next_batch"),
    ("mismatch", f"entered it as gloo:broadcast, sizes [[10]]; now in {{script}}:{BROADCAST_LINE} in <module>"),
])
def test_a_hang_names_its_culprit_with_its_frame_then_ends_the_job_with_124(tmp_path, fault, culprit):
    done = launch(tmp_path, fault, "0")
    script, host = tmp_path / "train.py", socket.gethostname()
    assert said(done)[:4] == [
        f"torchpod: hang: no rank went past collective 4 (gloo:all_reduce, sizes [[10]]) for {WINDOW} s; "
        "1 of 2 ranks wait in it (ranks 0)",
        f"torchpod: hang: culprit rank 1 on {host}: {culprit.format(script=script)}",
        "torchpod: hang: 2 of 2 ranks reported their stacks",
        said(done)[3],
    ], "\n".join(said(done)) + "\n" + done.stderr[-3000:]
    assert done.returncode == 124, done.stderr[-3000:]
    # the evidence, kept: every rank's stacks and flight recorder, and the bundle of reports
    (folder,) = [Path(ln.split("evidence kept in ", 1)[1].split(";")[0]) for ln in said(done) if "evidence" in ln]
    assert sorted(p.name.split(".")[0] for p in folder.glob("rank-*.hang.txt")) == ["rank-0", "rank-1"]
    frs = [json.loads(p.read_text()) for p in folder.glob("rank-*.fr.json")]
    assert len(frs) == 2 and all(fr["entries"] for fr in frs)
    bundle = json.loads((folder / "hang-bundle.json").read_text())
    assert sorted(r["rank"] for r in bundle["reports"]) == [0, 1] and bundle["verdict"] == said(done)[:3]
    assert "rank 0 done" not in done.stdout and "rank 1 done" not in done.stdout


def test_a_clean_job_whose_first_step_is_longer_than_half_the_window_names_nobody(tmp_path):
    done = launch(tmp_path, "clean", str(WINDOW * 0.7))
    assert done.returncode == 0 and said(done) == [], done.stderr[-3000:]
    assert "rank 0 done" in done.stdout and "rank 1 done" in done.stdout


def test_a_rank_that_keeps_the_other_waiting_is_named_while_it_does_and_over_the_run(tmp_path):
    done = launch(tmp_path, "straggle", "0")
    assert done.returncode == 0 and said(done) == [], done.stderr[-3000:]
    host, named = socket.gethostname(), said(done, "straggler")
    # a stretch of 20 or more collectives is judged each time the arrivals come (every 6 s,
    # about 12 collectives of 0.5 s): 80 of them make three stretches, two however the beats fall
    assert len(named) >= 3, done.stderr[-3000:]
    for line in named:
        counts = line.split(" entered ", 1)[1].split(" collectives")[0]
        last, judged = map(int, counts.split(" of "))
        late_ms = int(line.split("a median ", 1)[1].split(" ms")[0])
        over = r" over the run \(named in (\d+) of (\d+) stretch(es)?\)" if line is named[-1] else ""
        found = re.match(rf"torchpod: straggler{over}: rank 1 on {re.escape(host)} entered ", line)
        assert found and last >= 0.75 * judged >= 15 and 150 <= late_ms <= 400, line
        if over:  # every stretch named it before, and the run's stretches are at least those
            assert int(found[1]) == len(named) - 1 <= int(found[2]), named
    assert named[-1].endswith("after the first rank; the others waited for it"), named


def test_a_steady_job_names_no_straggler(tmp_path):
    done = launch(tmp_path, "steady", "0")
    assert done.returncode == 0 and said(done) == [] and said(done, "straggler") == [], done.stderr[-3000:]
    assert "the hang watch stopped" not in done.stderr, done.stderr[-3000:]  # both ranks were watched


@pytest.mark.parametrize("window", ["0", "-5", "9", "86401", "1e3", "30s", "\u0663\u0660"])
def test_a_stall_window_out_of_its_form_is_one_line(tmp_path, window):
    done = launch(tmp_path, "clean", "0", window=window)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("torchpod: error: TORCHPOD_STALL_WINDOW=") and "is not a stall window; expected off, " \
        "or a whole number of seconds from 10 to 86400" in line, line
