"""bench/gpu_check.py for real on a machine without a GPU: the whole check says "no GPU"
(exit 3) with the GPU steps skipped and the doctor and the plan run; a Python without torch
is one line and exit 4; a step that hangs, with workers in sessions of their own as
torchrun starts them, is stopped with its whole tree inside its limit; the doctor judges an
NCCL log through the launcher as the GPU run will hand it one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from needs import module
from paths import ROOT, bench_helper, bench_script

SCRIPT = ROOT / "bench" / "gpu_check.py"

gc = bench_script("gpu_check")  # the options, the report, main
# its helpers, the very modules it imports (a patch of one is what the program runs)
gsteps = bench_helper("_gpu_steps")  # the steps, their runners, skip_reason, run_steps
processes = bench_helper("_gpu_processes")  # a command under a limit, its tree stopped, its logs read
SPECS = {s.name: s for s in gsteps.STEPS}


def _env() -> dict[str, str]:
    """This process's environment without a scheduler's or NCCL's variables or a PYTHONPATH."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PET_", "TORCHPOD_", "SLURM_", "NCCL_", "MASTER_")) and k != "PYTHONPATH"}


def test_on_a_machine_without_a_gpu_the_check_says_so_and_runs_what_it_can(tmp_path):
    module("torch", "PyTorch on the host (./setup.sh --tests installs the default image's torch)")
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi: run `python bench/gpu_check.py --out DIR` on it for real")
    out = tmp_path / "out"
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == gc.EXIT_NO_GPU, done.stderr[-3000:]
    assert time.monotonic() - started < gc.DEFAULT_TIMEOUT_S and "Traceback" not in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    steps = {s["name"]: s for s in summary["steps"]}
    assert (summary["verdict"], summary["exit_code"], summary["gpus"], summary["device"]) == ("no-gpu", 3, 0, None)
    assert list(steps) == [s.name for s in gsteps.STEPS]
    gpu_only = [s.name for s in gsteps.STEPS if s.gpu_only]
    assert {n: (steps[n]["verdict"], steps[n]["reason"]) for n in gpu_only} == \
        {n: ("skipped", "no CUDA device visible") for n in gpu_only}
    for name, argv in (("doctor", ["-m", "torchpod", "doctor"]), ("plan", ["-m", "torchpod", "plan"])):
        assert (steps[name]["verdict"], steps[name]["exit_code"]) == ("ok", 0), steps[name]
        assert steps[name]["argv"][1:4] == argv
    assert steps["doctor"]["facts"]["rows"]["gpus"] == "warn"  # the doctor ran on this machine and saw no GPU
    assert steps["plan"]["facts"]["nproc_per_node"] == "1" and steps["plan"]["facts"]["expected_backend"] == "gloo"
    env = steps["environment"]
    assert env["verdict"] == "ok" and env["facts"]["device_count"] == 0 and env["facts"]["torch"]
    assert (out / "summary.txt").read_text() == done.stdout
    assert (out / "logs" / "doctor.stdout").stat().st_size > 0


def test_a_python_without_torch_is_one_line_and_exit_4(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--python", str(venv / "bin" / "python")],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == gc.EXIT_NO_TORCH, done.stderr[-3000:]
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("gpu_check: error:")]
    assert len(said) == 1 and "torch is not importable" in said[0] and "No module named 'torch'" in said[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "no-torch"
    reasons = {s["name"]: s["reason"] for s in summary["steps"] if s["verdict"] == "skipped"}
    assert reasons["doctor"].startswith("torch is not importable") and reasons["allreduce"] == reasons["doctor"]


# torchrun's workers run in sessions of their own (torch.distributed.elastic's SubprocessHandler,
# start_new_session=True): a process group kill would miss this grandchild. Both ignore SIGTERM.
HANGS = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                               "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                              start_new_session=True)
    print(worker.pid, flush=True)
    time.sleep(600)
""")


def _gone(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # dead, waiting for a parent (PID 1 in a container may never reap it)


def test_a_step_over_its_limit_is_stopped_with_its_whole_tree(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "KILL_GRACE_S", 1.0)
    started = time.monotonic()
    ran = processes.execute([sys.executable, "-c", HANGS], _env(), tmp_path, 3.0, tmp_path / "out", tmp_path / "err")
    took = time.monotonic() - started
    assert ran.timed_out and ran.exit_code == -9 and 3.0 <= took < 3.0 + 1.0 + 3.0, (ran, took)
    worker = int((tmp_path / "out").read_text().split()[0])
    deadline = time.monotonic() + 5
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(worker)


def test_a_hanging_step_cannot_hold_the_check_past_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "KILL_GRACE_S", 1.0)
    monkeypatch.setattr(gsteps, "MIN_STEP_S", 1.0)
    python = tmp_path / "python"  # a "Python" that ignores SIGTERM and never answers
    python.write_text("#!/bin/sh\ntrap '' TERM\nexec sleep 600\n")
    python.chmod(0o755)
    (tmp_path / "out" / "logs").mkdir(parents=True)
    ctx = gsteps.Context(tmp_path / "out", str(python), _env(), time.monotonic() + 2.5)
    started = time.monotonic()
    steps = gsteps.run_steps(ctx, (SPECS["environment"], SPECS["doctor"], SPECS["allreduce"]))
    assert time.monotonic() - started < 2.5 + 1.0 + 3.0
    assert [(s.verdict, s.timed_out) for s in steps] == [("failed", True), ("skipped", False), ("skipped", False)]
    assert steps[0].reason.startswith("did not end within") and steps[1].reason.startswith("the environment step")
    assert gc.overall([s.as_dict() for s in steps], ctx.facts) == ("failed", gc.EXIT_FAILED)


# A "Python" that answers the launcher's `run` with one DDP result line whose steps/s says the
# watch's arm (TORCHPOD_STALL_WINDOW), and fails one run in the `on` arm when told to.
ARMED_PYTHON = """#!/bin/sh
case "$TORCHPOD_STALL_WINDOW" in off) rate=20.0 ;; *) rate=19.0 ;; esac
if [ -n "$FAIL_ON" ] && [ "$TORCHPOD_STALL_WINDOW" != off ] && [ ! -e "$FAIL_ON" ]; then : > "$FAIL_ON"; exit 1; fi
echo "TORCHPOD_RESULT {\\"workload\\": \\"ddp\\", \\"ok\\": true, \\"steps_per_s\\": $rate}"
"""


@pytest.mark.parametrize("fail", [False, True])
def test_the_watch_cost_runs_each_arm_twice_with_its_window_and_keeps_each_runs_logs(tmp_path, fail):
    python = tmp_path / "python"
    python.write_text(ARMED_PYTHON)
    python.chmod(0o755)
    (tmp_path / "out" / "logs").mkdir(parents=True)
    env = {**_env(), **({"FAIL_ON": str(tmp_path / "failed-once")} if fail else {})}
    ctx = gsteps.Context(tmp_path / "out", str(python), env, time.monotonic() + 60)
    step = gsteps.step_watch_cost(ctx, SPECS["watch-cost"])
    runs = step.facts["runs"]
    assert [r["arm"] for r in runs] == list(gsteps.WATCH_ARMS)
    assert all((tmp_path / "out" / r["logs"]["stdout"]).is_file() for r in runs)
    if fail:  # one run of the `on` arm failed: the step fails naming it, the others' figures kept
        assert [r["exit_code"] for r in runs] == [0, 1, 0, 0] and step.exit_code == 1
        assert (step.verdict, step.reason) == ("failed", "run 1 (on): exit 1"), step
        assert step.facts["steps_per_s"] == {"off": [20.0, 20.0], "on": [19.0]}
    else:
        assert step.verdict == "ok" and step.facts["on_over_off"] == 0.95, step


SOCKET_LOG = """\
gpu-box:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>
gpu-box:4242:4242 [0] NCCL INFO NCCL version 2.27.7+cuda12.9
gpu-box:4242:4260 [0] NCCL INFO NET/IB : No device found.
gpu-box:4242:4260 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0>
gpu-box:4242:4260 [0] NCCL INFO Using network Socket
gpu-box:4242:4260 [0] NCCL INFO comm 0x55d0 rank 0 nranks 1 cudaDev 0 busId 18000 commId 0x1 - Init COMPLETE
"""


@pytest.mark.parametrize("log, verdict, reason", [
    (SOCKET_LOG, "ok", "exit 0, transport socket"),
    ("step 1 loss 2.3\n", "failed", "exit 2: torchpod: error: --nccl-log="),  # no NCCL line: the doctor refuses it
])
def test_the_doctor_judges_a_runs_nccl_log_through_the_launcher(tmp_path, log, verdict, reason):
    out = tmp_path / "out"
    (out / "logs").mkdir(parents=True)
    (out / "nccl").mkdir()
    (out / "nccl" / "ddp.gpu-box.4242.log").write_text(log)
    ctx = gsteps.Context(out, sys.executable, {**_env(), "PYTHONPATH": str(gc.LAUNCHER)}, time.monotonic() + 120)
    ctx.done["ddp"] = gsteps.Step("ddp", "", "ok", facts={"nccl_log": "nccl/ddp.gpu-box.4242.log"})
    step = gsteps.step_nccl_log(ctx, SPECS["ddp-nccl-log"])
    assert (step.verdict, step.reason[:len(reason)]) == (verdict, reason), step
    assert step.argv[1:5] == ["-m", "torchpod", "doctor", "--nccl-log"]
    if verdict == "ok":
        assert step.facts["nccl_version"] == "2.27.7" and step.facts["evidence"]
