"""torchpod.stacks and its shim: a worker started with the shim first on PYTHONPATH dumps
every thread's stack on SIGUSR2 while it runs (blocked in C too), the image's own
sitecustomize still runs, and `torchpod stacks` finds, signals and reads each worker, naming
one that does not answer. Real interpreters, real signals, the real /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from torchpod import stacks
from torchpod.cli import child_env, main
from torchpod.errors import InputError

from launcher_cases import plan_for

HANG = textwrap.dedent("""
    import sys, time

    def wait_here():
        print("ready", flush=True)
        time.sleep(120)

    wait_here()
""")


def start(tmp_path: Path, rank: str = "3", pythonpath: str = "", **env: str) -> subprocess.Popen:
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    path = str(stacks.SHIM_DIR) + (":" + pythonpath if pythonpath else "")
    full = {"PATH": os.environ["PATH"], "PYTHONPATH": path, "RANK": rank, "LOCAL_RANK": "1", "ROLE_RANK": rank,
            stacks.ENV_STACKS_DIR: str(tmp_path), **env}
    proc = subprocess.Popen([sys.executable, str(script)], env=full, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # past the print, into the sleep
    return proc


@pytest.fixture
def hung(tmp_path):
    procs: list[subprocess.Popen] = []

    def make(**kw) -> subprocess.Popen:
        procs.append(start(tmp_path, **kw))
        return procs[-1]
    yield make
    for p in procs:
        p.kill()
        p.wait(timeout=30)


def test_a_worker_blocked_in_sleep_dumps_its_stack_and_names_its_line(hung, tmp_path):
    proc = hung()
    (worker,) = [w for w in stacks.workers() if w.pid == proc.pid]
    assert (worker.rank, worker.local_rank, worker.folder) == (3, 1, str(tmp_path))
    (answer,) = stacks.collect([worker], wait=10)
    assert answer.dump is not None and "in wait_here" in answer.dump, answer.dump
    assert answer.innermost() == f"{tmp_path / 'hang.py'}:6 in wait_here"
    assert proc.poll() is None  # nothing was stopped
    again = stacks.collect([worker], wait=10)[0]  # a second dump is read on its own
    assert again.dump is not None and again.dump.count("in wait_here") == answer.dump.count("in wait_here")


def test_a_frozen_worker_is_named_as_not_answering(hung, tmp_path):
    proc = hung()
    (worker,) = [w for w in stacks.workers() if w.pid == proc.pid]
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        (answer,) = stacks.collect([worker], wait=1)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert answer.dump is None
    assert "rank 3 (local rank 1, pid" in stacks.report([answer], "n0", "text")
    assert "no answer (frozen" in stacks.report([answer], "n0", "text")
    assert json.loads(stacks.report([answer], "n0", "json"))[0]["answered"] is False


def test_environ_and_frames_are_read_as_the_kernel_and_faulthandler_write_them():
    env = stacks.parse_environ(b"RANK=2\0LOCAL_RANK=0\0ROLE_RANK=2\0TORCHPOD_STACKS_DIR=/tmp/s\0BAD\0X=\xff\0")
    assert stacks.worker_of(9, env) == stacks.Worker(9, 2, 0, "/tmp/s") and env["X"] == "\ufffd"
    assert stacks.worker_of(9, {**env, "RANK": "٣"}) is None and stacks.worker_of(9, {"RANK": "1"}) is None
    assert stacks.worker_of(9, {k: v for k, v in env.items() if k != "ROLE_RANK"}) is None
    dump = ('Thread 0x01 (most recent call first):\n'
            '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n'
            '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d.py", line 9 in all_reduce\n'
            '  File "/workspace/train.py", line 41 in step\n'
            '  File "/workspace/train.py", line 50 in <module>\n')
    assert stacks.innermost(dump) == "/workspace/train.py:41 in step"
    assert stacks.innermost("  File \"<frozen runpy>\", line 1 in x\n") == ""


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "601", "5s", ""])
def test_a_bad_wait_is_one_line(text):
    with pytest.raises(InputError, match=r"^--wait .* is not a time to wait"):
        stacks.check_wait(text)


@pytest.mark.parametrize("args, says", [
    (["stacks", "--wait", "0"], "--wait '0' is not a time to wait"),
    (["stacks", "--format", "xml"], "--format 'xml' is not a stacks format"),
    (["stacks", "--wiat", "3"], "unknown stacks option '--wiat'"),
])
def test_bad_stacks_options_are_one_line_and_exit_2(args, says, capsys):
    assert main(args, env={}) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_no_worker_here_is_one_line_and_exit_2(capsys, monkeypatch):
    monkeypatch.setattr(stacks, "workers", lambda *a, **k: [])
    assert main(["stacks"], env={}) == 2
    assert "no worker of `torchpod run` runs on this node" in capsys.readouterr().err


def test_the_plans_search_paths_go_first_and_keep_the_callers():
    plan = replace(plan_for({"CUDA_VISIBLE_DEVICES": ""}),
                   env=(("PYTHONPATH", f"{stacks.SHIM_DIR}:/mine"), ("LD_LIBRARY_PATH", "/site/lib:/u")))
    merged = child_env({"PYTHONPATH": "/mine", "LD_LIBRARY_PATH": "/u"}, plan)
    assert merged["PYTHONPATH"] == f"{stacks.SHIM_DIR}:/mine" and merged["LD_LIBRARY_PATH"] == "/site/lib:/u"
    # a value that does not end with the caller's is never forced over it
    assert child_env({"LD_LIBRARY_PATH": "/other"}, plan)["LD_LIBRARY_PATH"] == "/other"


def test_a_dump_that_never_comes_is_waited_for_at_most_the_wait(tmp_path):
    worker = stacks.Worker(os.getpid(), 0, 0, str(tmp_path))
    worker.file.write_text(f"torchpod: rank 0 pid {os.getpid()} armed\n")
    old = signal.signal(stacks.SIGNAL, lambda *_: None)  # this process answers nothing
    try:
        start_at = time.monotonic()
        (answer,) = stacks.collect([worker], wait=0.5)
    finally:
        signal.signal(stacks.SIGNAL, old)
    assert answer.dump is None and time.monotonic() - start_at < 5


def test_a_process_whose_dump_is_not_armed_is_never_signalled(tmp_path):
    """The signal's default action ends a process: one whose file lacks the armed line (it
    could not arm, or is no worker of ours) is named as not answering and left running."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        worker = stacks.Worker(proc.pid, 0, 0, str(tmp_path))
        for text in (None, "", "torchpod: rank 0 pid 1 armed\n"):
            if text is not None:
                worker.file.write_text(text)
            (answer,) = stacks.collect([worker], wait=0.3)
            assert answer.dump is None and proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=30)
