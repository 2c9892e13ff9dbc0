"""torchpod.shim's sitecustomize, as the interpreter runs it at start-up: armed only in a
worker torchrun started (RANK, LOCAL_RANK and ROLE_RANK), never over a file already there,
and the image's own sitecustomize still runs after it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from torchpod import stacks

READY = textwrap.dedent("""
    import time
    print("ready", flush=True)
    time.sleep(120)
""")
WORKER = {"RANK": "5", "LOCAL_RANK": "0", "ROLE_RANK": "5"}


def run_until_ready(tmp_path: Path, pythonpath: str, env: dict[str, str]) -> int:
    script = tmp_path / "ready.py"
    script.write_text(READY)
    full = {"PATH": os.environ["PATH"], "PYTHONPATH": pythonpath, stacks.ENV_STACKS_DIR: str(tmp_path), **env}
    proc = subprocess.Popen([sys.executable, str(script)], env=full, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    finally:
        proc.kill()
        proc.wait(timeout=30)
    return proc.pid


def test_the_images_own_sitecustomize_still_runs(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    marker = tmp_path / "their-sitecustomize-ran"
    (theirs / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    pid = run_until_ready(tmp_path, f"{stacks.SHIM_DIR}:{theirs}", WORKER)
    assert marker.exists()
    armed = (tmp_path / f"rank-5.pid-{pid}.stacks").read_text()
    assert armed == f"torchpod: rank 5 pid {pid} armed\n"
    assert (tmp_path / f"rank-5.pid-{pid}.stacks").stat().st_mode & 0o777 == 0o600


def test_a_process_that_is_no_worker_is_left_alone(tmp_path):
    """Without torchrun's worker variables (its agent; a pod's launcher, which Kubeflow gives
    RANK alone) nothing is armed; a file that cannot be made (a folder that is no folder, a
    name already taken: it is opened O_EXCL and O_NOFOLLOW) leaves the dump unarmed and the
    worker running."""
    for env in ({}, {"RANK": "5"}, {"RANK": "5", "LOCAL_RANK": "x", "ROLE_RANK": "5"}):
        run_until_ready(tmp_path, str(stacks.SHIM_DIR), env)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready.py"]

    # a folder that cannot be written (a file stands at its path): unarmed, and the worker runs
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    run_until_ready(tmp_path, str(stacks.SHIM_DIR), {**WORKER, stacks.ENV_STACKS_DIR: str(blocked)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-folder", "ready.py"]
