"""torchpod_toolkit.kube.podstatus: the phase, conditions and container states the kubelet
reports (kubernetes v1.37.2, getPhase and pkg/kubelet/status/generate.go)."""

from __future__ import annotations

import os

import pytest

from torchpod_toolkit.kube import podstatus
from torchpod_toolkit.kube.podstatus import Record

T = "2026-11-27T04:00:00Z"


def rec(name, state, last=None, restarts=0):
    return Record(name, "img", state=state, last=last or {}, restarts=restarts)


RUNNING = podstatus.running(T)
OK = podstatus.terminated(0, T, T)
BAD = podstatus.terminated(3, T, T)
WAITING = podstatus.waiting(podstatus.CREATING)


@pytest.mark.parametrize("inits, apps, policy, expected", [
    ([], [WAITING], "Never", "Pending"), ([], [RUNNING], "Never", "Running"), ([], [OK], "Never", "Succeeded"),
    ([], [BAD], "Never", "Failed"), ([], [BAD], "OnFailure", "Running"), ([], [OK], "Always", "Running"),
    ([], [OK, RUNNING], "Never", "Running"), ([], [OK, BAD], "Never", "Failed"), ([BAD], [WAITING], "Never", "Failed"),
    ([RUNNING], [WAITING], "Never", "Pending"), ([OK], [RUNNING], "Never", "Running"),
    ([BAD], [WAITING], "OnFailure", "Pending"), ([], [], "Never", "Pending"),
])
def test_phase(inits, apps, policy, expected):
    made = podstatus.phase([rec("i", s) for s in inits], [rec("a", s) for s in apps], policy)
    assert made == expected


def test_a_waiting_container_that_ran_before_counts_as_stopped():
    crashed = rec("a", podstatus.waiting("CrashLoopBackOff"), last=BAD, restarts=1)
    assert podstatus.phase([], [crashed], "Always") == "Running"


def test_terminated_reasons():
    assert OK["terminated"]["reason"] == "Completed" and BAD["terminated"]["reason"] == "Error"
    assert podstatus.terminated(137, T, T, oom=True)["terminated"]["reason"] == "OOMKilled"


def test_pod_status_keeps_pod_scheduled_and_reports_addresses_and_containers():
    pod = {"spec": {"restartPolicy": "Never"},
           "status": {"conditions": [{"type": "PodScheduled", "status": "True"}], "qosClass": "Burstable"}}
    status = podstatus.pod_status(pod, [], [rec("main", RUNNING)], pod_ip="172.18.0.3", host_ip="172.18.0.1",
                                  start_time=T, now=T)
    kinds = {c["type"]: c["status"] for c in status["conditions"]}
    assert kinds == {"PodScheduled": "True", "PodReadyToStartContainers": "True", "Initialized": "True",
                     "ContainersReady": "True", "Ready": "True"}
    assert status["phase"] == "Running" and status["podIPs"] == [{"ip": "172.18.0.3"}]
    main = status["containerStatuses"][0]
    assert main["ready"] and main["restartCount"] == 0 and main["state"] == RUNNING
    assert status["qosClass"] == "Burstable"


def test_a_finished_pod_is_not_ready_because_it_completed():
    status = podstatus.pod_status({"spec": {"restartPolicy": "Never"}}, [], [rec("main", OK)], pod_ip="",
                                  host_ip="h", start_time=T, now=T)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert status["phase"] == "Succeeded" and ready["status"] == "False" and ready["reason"] == "PodCompleted"
    assert "podIP" not in status


def test_unready_and_uninitialised_name_their_containers():
    status = podstatus.pod_status({"spec": {"restartPolicy": "Always"}}, [rec("setup", RUNNING)],
                                  [rec("main", podstatus.waiting(podstatus.INITIALIZING))],
                                  pod_ip="1.2.3.4", host_ip="h", start_time=T, now=T)
    by = {c["type"]: c for c in status["conditions"]}
    assert by["Initialized"]["message"] == "containers with incomplete status: [setup]"
    assert by["Ready"]["message"] == "containers with unready status: [main]"
    assert by["Ready"]["reason"] == "ContainersNotReady" and status["phase"] == "Pending"


def test_a_container_waiting_out_its_back_off_counts_only_the_restarts_made():
    # the stand-in numbers the attempt it will start at the exit; the kubelet counts a
    # restart when it creates that attempt (kuberuntime_container.go)
    first_crash = rec("a", podstatus.waiting("CrashLoopBackOff"), last=BAD, restarts=1)
    restarted = rec("a", RUNNING, last=BAD, restarts=1)
    assert podstatus.container_status(first_crash)["restartCount"] == 0
    assert podstatus.container_status(restarted)["restartCount"] == 1
    config = rec("a", podstatus.waiting(podstatus.CONFIG_ERROR), restarts=2)  # no back-off: as numbered
    assert podstatus.container_status(config)["restartCount"] == 2


def test_a_termination_message_is_the_files_last_4096_bytes_or_the_logs_on_error(tmp_path):
    file = tmp_path / "msg"
    never = lambda: pytest.fail("the log is read only under FallbackToLogsOnError with an empty file")  # noqa: E731
    file.write_bytes(b"culprit rank 3\n")
    assert podstatus.termination_message(str(file), "File", 124, never) == "culprit rank 3\n"
    file.write_bytes(b"h" * 10 + b"t" * podstatus.MAX_MESSAGE)
    assert podstatus.termination_message(str(file), "File", 1, never) == "t" * podstatus.MAX_MESSAGE
    file.write_bytes(b"\xff ok")
    assert podstatus.termination_message(str(file), "File", 0, never) == "\ufffd ok"
    assert podstatus.termination_message(str(tmp_path / "gone"), "File", 1, never) == ""
    file.write_bytes(b"")
    assert podstatus.termination_message(str(file), "File", 1, never) == ""
    log = b"x" * 5000 + b"last line\n"
    assert podstatus.termination_message(str(file), "FallbackToLogsOnError", 1, lambda: log) == \
        log[-podstatus.MAX_LOG_BYTES:].decode()
    assert podstatus.termination_message(str(file), "FallbackToLogsOnError", 0, never) == ""
    assert podstatus.termination_message(str(tmp_path), "File", 1, never).startswith("Error on reading termination log")
    with open(file, "wb") as f:
        f.truncate(1 << 30)  # a sparse gigabyte: its last 4096 bytes alone are read
        f.seek(0, os.SEEK_END)
        f.write(b"the end")
    assert podstatus.termination_message(str(file), "File", 1, never) == "\0" * (podstatus.MAX_MESSAGE - 7) + "the end"


@pytest.mark.parametrize("make, says", [(os.mkfifo, "is a FIFO (named pipe)"), (os.mkdir, "is a directory"),
                                        (lambda p: os.symlink("/dev/zero", p), "is a character device")])
def test_a_termination_message_path_that_is_no_file_is_one_error_line_never_a_wait(tmp_path, make, says):
    make(tmp_path / "msg")
    message = podstatus.termination_message(str(tmp_path / "msg"), "File", 1, lambda: b"")
    assert message.startswith(f"Error on reading termination log {tmp_path / 'msg'}: ") and says in message
    assert "\n" not in message
    assert podstatus.terminated(124, "a", "b", message="m")["terminated"]["message"] == "m"
    assert "message" not in podstatus.terminated(0, "a", "b")["terminated"]
