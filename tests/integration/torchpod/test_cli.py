"""No launch waits longer than HELPER_TIMEOUT_S for the helper tools it asks (`scontrol`,
`nvidia-smi`), however they hang, and a hung tool's children are killed with it."""

from __future__ import annotations

import os
import time

from torchpod.cli import HELPER_TIMEOUT_S, gather_facts

# A tool that forks a child holding its stdout and then hangs: what a wedged driver call or
# an `scontrol` retrying an unreachable controller looks like from outside.
HANGING = """#!/bin/sh
sleep 300 &
echo $! >> "{pids}"
echo $$ >> "{pids}"
sleep 300
"""


def _tool(folder, name: str, pids) -> None:
    path = folder / name
    path.write_text(HANGING.format(pids=pids))
    path.chmod(0o755)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child not yet reaped by its (killed) parent's reaper is a zombie: dead
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_hanging_helpers_cost_one_bound_and_leave_nothing_running(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pids = tmp_path / "pids"
    for name in ("scontrol", "nvidia-smi"):
        _tool(bin_dir, name, pids)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    facts = gather_facts({"SLURM_JOB_NODELIST": "gpu[001-002]", "TORCHPOD_HOSTNAME": "gpu001"})
    waited = time.monotonic() - started
    # both tools hang; they share one deadline, so the launch waits ~one bound, not two
    assert waited < 2 * HELPER_TIMEOUT_S, f"gather_facts waited {waited:.1f} s"
    assert facts.slurm_hosts is None and facts.gpu_count is None  # fallbacks take over
    assert any("scontrol show hostnames did not answer" in n for n in facts.notes), facts.notes
    assert any("nvidia-smi -L did not answer" in n for n in facts.notes), facts.notes
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 4  # each tool and the child it forked
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in recorded) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in recorded if _alive(p)], "a hung helper's process group survived"


def test_a_tool_that_answers_is_used(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA GH200 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA GH200 (UUID: GPU-2)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert gather_facts({}).gpu_count == 2
