"""The requeue part of the generated Slurm script (hpc.SLURM_REQUEUE, ``--requeue-lead``), run
by bash against stand-ins for srun and scontrol: USR1 sent to the batch shell, as
``--signal=B:USR1@N`` does, reaches the running step; once the step has ended the job
requeues itself; without the signal the script ends with the step's status. The real Slurm
run of the same script is tests/cluster/test_slurm_cluster.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0"
LIMIT = 20  # seconds; a script that runs longer has hung

# srun: the image pull of --runtime docker takes a moment; the training step records that
# it started and each USR1 srun would forward to it, and ends after STEP_USR1 of them
# (torchrun exits 1 after a signal it handles) or on its own with STEP_EXIT.
SRUN = r"""#!/bin/bash
echo "srun $*" >> "$LOG"
case " $* " in *" docker pull "*) echo pulling >> "$LOG"; sleep 0.5; exit 0 ;; esac
got=0
on_usr1() { got=$((got + 1)); echo "step got USR1" >> "$LOG"; [ "$got" -lt "$STEP_USR1" ] || exit 1; }
trap on_usr1 USR1
echo "step started" >> "$LOG"
for _ in $(seq 200); do sleep 0.05; [ -e "$STOP" ] && exit "$STEP_EXIT"; done
exit 99
"""
SCONTROL = r"""#!/bin/bash
echo "scontrol $*" >> "$LOG"
if [ "$SCONTROL_EXIT" != 0 ]; then echo "scontrol: error: Requeue of JobId=7 disabled" >&2; fi
exit "$SCONTROL_EXIT"
"""


def _script(runtime: str = "none") -> str:
    (out,) = render(JobSpec("slurm", 2, IMAGE, ("train.py",), runtime=runtime, gpus_per_node=0,
                            walltime="02:00:00", requeue_lead=300))
    return out.text


def _start(tmp_path: Path, text: str, **env) -> tuple[subprocess.Popen, Path]:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in (("srun", SRUN), ("scontrol", SCONTROL)):
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    (tmp_path / "job.sbatch").write_text(text)
    log = tmp_path / "log"
    log.write_text("")
    full = {"PATH": f"{stubs}:/usr/bin:/bin", "LOG": str(log), "STOP": str(tmp_path / "stop"), "SLURM_JOB_ID": "7",
            "STEP_USR1": "1", "STEP_EXIT": "0", "SCONTROL_EXIT": "0", **env}
    proc = subprocess.Popen(["/bin/bash", str(tmp_path / "job.sbatch")], cwd=tmp_path, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, log


def _wait_for(log: Path, text: str) -> None:
    deadline = time.monotonic() + LIMIT
    while text not in log.read_text():
        if time.monotonic() > deadline:
            pytest.fail(f"{text!r} never appeared: {log.read_text()!r}")
        time.sleep(0.02)


def _end(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the job script ran past {LIMIT} s")
    return proc.returncode, err


def test_without_a_signal_the_script_ends_with_the_steps_status(tmp_path):
    proc, log = _start(tmp_path, _script(), STEP_EXIT="3")
    _wait_for(log, "step started")
    (tmp_path / "stop").touch()
    code, err = _end(proc)
    assert code == 3 and err == "", (code, err)
    assert "scontrol" not in log.read_text() and "USR1" not in log.read_text()


def test_usr1_reaches_the_step_and_the_job_requeues_after_it_ends(tmp_path):
    proc, log = _start(tmp_path, _script())
    _wait_for(log, "step started")
    proc.send_signal(signal.SIGUSR1)
    code, err = _end(proc)
    lines = log.read_text().splitlines()
    assert code == 0, (code, err, lines)
    assert lines[0].startswith("srun --ntasks-per-node=1 --kill-on-bad-exit=1 env CUDA_VISIBLE_DEVICES= "
                               "torchpod run -- train.py"), lines
    assert lines[1:] == ["step started", "step got USR1", "scontrol requeue 7"]  # the step ended first
    assert err.splitlines() == [
        "torchpod: job 7 got USR1 ahead of its time limit; passing it to the training step",
        "torchpod: requeueing job 7; its next run resumes from the snapshot"]


def test_a_second_usr1_is_passed_on_too_and_the_job_requeues_once(tmp_path):
    proc, log = _start(tmp_path, _script(), STEP_USR1="2")
    _wait_for(log, "step started")
    proc.send_signal(signal.SIGUSR1)
    _wait_for(log, "step got USR1")
    proc.send_signal(signal.SIGUSR1)
    code, err = _end(proc)
    assert code == 0, (code, err)
    assert log.read_text().splitlines()[1:] == ["step started", "step got USR1", "step got USR1",
                                                "scontrol requeue 7"]


def test_usr1_while_the_image_is_fetched_requeues_without_starting_the_step(tmp_path):
    proc, log = _start(tmp_path, _script("docker"))
    _wait_for(log, "pulling")
    proc.send_signal(signal.SIGUSR1)  # bash runs the trap once the pull has ended
    code, err = _end(proc)
    text = log.read_text()
    assert code == 0 and "step started" not in text and text.endswith("scontrol requeue 7\n"), (code, err, text)


def test_a_refused_requeue_fails_the_job_with_scontrols_message(tmp_path):
    proc, log = _start(tmp_path, _script(), SCONTROL_EXIT="1")
    _wait_for(log, "step started")
    proc.send_signal(signal.SIGUSR1)
    code, err = _end(proc)
    assert code == 1 and err.splitlines()[-1] == "scontrol: error: Requeue of JobId=7 disabled", (code, err)


def test_without_requeue_lead_the_script_has_no_trap_and_runs_the_step_in_the_foreground():
    (out,) = render(JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none", gpus_per_node=0))
    assert "trap" not in out.text and "scontrol" not in out.text and "--signal" not in out.text
    last = out.text.rstrip("\n").splitlines()[-1]
    assert last == "srun --ntasks-per-node=1 --kill-on-bad-exit=1 env CUDA_VISIBLE_DEVICES= torchpod run -- train.py"
