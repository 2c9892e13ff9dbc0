"""torchpod.watch.node: a verdict file is said, written as the termination message and stops
the job once; a file that is not a verdict is one line and the job goes on."""

from __future__ import annotations

import json
import os
import time

import pytest

from torchpod.watch import node

LINES = ["torchpod: hang: no rank went past collective 4 (gloo:all_reduce, sizes [[10]]) for 10 s; 1 of 2 ranks "
         "wait in it (ranks 0)", "torchpod: hang: culprit rank 1 on vm: never entered it"]


def watch(folder, log) -> tuple[node.Watcher, list[int]]:
    stops: list[int] = []
    return node.Watcher(str(folder), stop=lambda: stops.append(1), termination_log=str(log), poll_s=0.05), stops


def until(check, seconds=10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_verdict_is_said_kept_as_the_termination_message_and_stops_the_job_once(tmp_path, capsys):
    log = tmp_path / "termination-log"
    log.write_text("")
    watcher, stops = watch(tmp_path, log)
    watcher.start()
    (tmp_path / node.VERDICT).write_text(json.dumps({"lines": LINES}))
    until(lambda: stops)
    watcher.close()
    assert stops == [1] and watcher.verdict == LINES
    assert log.read_text() == "\n".join(LINES)
    err = capsys.readouterr().err
    assert err.startswith("\n".join(LINES) + "\n") and f"evidence kept in {tmp_path}" in err


def test_without_a_kubernetes_message_file_none_is_made(tmp_path):
    assert node.termination_message(LINES, str(tmp_path / "absent")) is False
    assert not (tmp_path / "absent").exists()


def test_the_termination_message_keeps_what_the_kubelet_keeps(tmp_path):
    log = tmp_path / "log"
    log.write_text("")
    assert node.termination_message(["x" * 10_000], str(log))
    assert log.stat().st_size == node.TERMINATION_CAP


@pytest.mark.parametrize("content", [b"\xff\xfe", b"[]", b'{"lines": []}', b'{"lines": ["a\\u001b[2J"]}',
                                     b'{"lines": [1]}', b"x" * (node.VERDICT_CAP + 1), b"{"])
def test_a_file_that_is_not_a_verdict_is_one_line_and_the_job_goes_on(tmp_path, capsys, content):
    watcher, stops = watch(tmp_path, tmp_path / "none")
    watcher.start()
    (tmp_path / node.VERDICT).write_bytes(content)
    until(lambda: not (tmp_path / node.VERDICT).exists())
    watcher.close()
    assert stops == [] and watcher.verdict is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchpod: ") and err[0].endswith("; the job goes on"), err


def test_a_fifo_in_place_of_the_verdict_never_blocks_the_watcher(tmp_path, capsys):
    os.mkfifo(tmp_path / node.VERDICT)
    watcher, stops = watch(tmp_path, tmp_path / "none")
    watcher.start()
    until(lambda: not (tmp_path / node.VERDICT).exists())
    watcher.close()
    assert stops == [] and "FIFO" in capsys.readouterr().err


def test_a_verdict_the_poll_had_not_read_when_the_job_ended_is_read_as_the_watcher_closes(tmp_path, capsys):
    watcher = node.Watcher(str(tmp_path), stop=lambda: pytest.fail("a job already over is not stopped"),
                           termination_log=str(tmp_path / "none"), poll_s=3600)
    watcher.start()
    (tmp_path / node.VERDICT).write_text(json.dumps({"lines": LINES}))
    watcher.close()
    assert watcher.verdict == LINES
    err = capsys.readouterr().err
    assert err.startswith("\n".join(LINES)) and err.rstrip().endswith(f"evidence kept in {tmp_path}")
