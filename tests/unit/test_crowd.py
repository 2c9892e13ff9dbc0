"""tests/crowd.py: the cluster tier's crowded tests take one turn at a time across the
pytest-xdist workers, each a process of its own; a killed holder frees the turn; a turn not
given within its limit fails naming its holder."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import crowd

TESTS = Path(crowd.__file__).parent
HOLD = """
import sys, time
sys.path.insert(0, {tests!r})
import crowd
with crowd.turn("test_other_worker[8]", {path!r}):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
    open({released!r}, "w").write(repr(time.time()))
"""


def _holder(tmp_path: Path, seconds: float) -> tuple[subprocess.Popen, Path]:
    released = tmp_path / "released"
    code = HOLD.format(tests=str(TESTS), path=str(tmp_path / "lock"), released=str(released))
    child = subprocess.Popen([sys.executable, "-c", code, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child, released


def test_a_turn_waits_for_the_other_workers_turn_to_end(tmp_path):
    child, released = _holder(tmp_path, 1.5)
    try:
        with crowd.turn("test_mine", tmp_path / "lock") as waited:
            got = time.time()
            assert crowd.holder(tmp_path / "lock") == "test_mine"
        assert got >= float(released.read_text()) and waited > 1.0
    finally:
        child.wait(timeout=30)


def test_a_killed_holder_frees_the_turn_at_once(tmp_path):
    child, _ = _holder(tmp_path, 600)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    with crowd.turn("test_mine", tmp_path / "lock") as waited:
        assert waited < 1.0


def test_a_turn_not_given_within_its_limit_fails_naming_the_holder(tmp_path):
    child, _ = _holder(tmp_path, 600)
    try:
        holds = r"^no turn for test_mine within 0.5 s: test_other_worker\[8\] holds it$"
        with pytest.raises(TimeoutError, match=holds):
            with crowd.turn("test_mine", tmp_path / "lock", limit=0.5):
                pytest.fail("the turn was given while another process held it")
    finally:
        child.kill()
        child.wait(timeout=30)
