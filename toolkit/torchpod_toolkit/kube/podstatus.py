"""A pod's status as the kubelet reports it, pure: what each container did in, the object the
status subresource takes out.

Followed (kubernetes v1.37.2): the phase from pkg/kubelet/kubelet_pods.go ``getPhase``; the
conditions from pkg/kubelet/status/generate.go (Initialized, ContainersReady and Ready with
their reasons ContainersNotInitialized, ContainersNotReady and PodCompleted) and
``PodReadyToStartContainers`` once the sandbox has an address; a container's states from
pkg/kubelet/kuberuntime (a terminated container's reason is ``Completed`` for exit 0,
``OOMKilled`` when the kernel killed it for memory, else ``Error``; its message is what it
wrote at its terminationMessagePath). Without readiness probes a
running container is ready, as the kubelet treats a container with no probe.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchpod import readers
from torchpod.errors import InputError

Obj = Mapping[str, Any]
CONFIG_ERROR = "CreateContainerConfigError"
# A container's termination message (kubernetes v1.37.2, pkg/kubelet/container/runtime.go): at
# most this much of its file, or of its log's last lines under FallbackToLogsOnError
MAX_MESSAGE, MAX_LOG_BYTES, MAX_LOG_LINES = 4 * 1024, 2 * 1024, 80
TERMINATION_LOG = "/dev/termination-log"  # the API's default terminationMessagePath
CREATING = "ContainerCreating"
INITIALIZING = "PodInitializing"


@dataclass
class Record:
    """What one container of the pod has done so far."""

    name: str
    image: str
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": CREATING}})
    last: dict[str, Any] = field(default_factory=dict)
    restarts: int = 0
    container_id: str = ""
    image_id: str = ""
    message_file: str = ""  # the host file bound at its terminationMessagePath

    @property
    def ready(self) -> bool:
        return "running" in self.state


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def running(started_at: str) -> dict[str, Any]:
    return {"running": {"startedAt": started_at}}


def terminated(exit_code: int, started_at: str, finished_at: str, oom: bool = False,
               container_id: str = "", message: str = "") -> dict[str, Any]:
    reason = "OOMKilled" if oom else ("Completed" if exit_code == 0 else "Error")
    out: dict[str, Any] = {"exitCode": exit_code, "reason": reason, "startedAt": started_at, "finishedAt": finished_at}
    if container_id:
        out["containerID"] = container_id
    if message:
        out["message"] = message
    return {"terminated": out}


def termination_message(path: str, policy: str, exit_code: int, logs: Callable[[], bytes]) -> str:
    """What the kubelet reports as a terminated container's message (kuberuntime_container.go,
    ``getTerminationMessage`` and its caller): the last MAX_MESSAGE bytes of the file bound at
    its terminationMessagePath (``tail.ReadAtMost``); a file gone is none. Under
    FallbackToLogsOnError, a failed container with an empty file gets its log's last
    MAX_LOG_LINES lines, at most their last MAX_LOG_BYTES (``readLastStringFromContainerLogs``)."""
    data = b""
    if path:
        try:  # the bounded reader: a FIFO or a device bound there is named, never waited on or read
            data = readers.read_tail(path, what=path, expected="a container's termination message",
                                     limit=MAX_MESSAGE)
        except InputError as exc:
            if not (isinstance(exc, readers.Unreadable) and exc.errno == errno.ENOENT):
                return f"Error on reading termination log {path}: {exc}"
    if not data and policy == "FallbackToLogsOnError" and exit_code != 0:
        data = logs()[-MAX_LOG_BYTES:]
    return data.decode("utf-8", "replace")


def restarts_made(record: Record) -> int:
    """The restarts a container status counts: those made. The kubelet sets a container's
    restart count when it creates the next attempt (pkg/kubelet/kuberuntime/
    kuberuntime_container.go, v1.37: ``restartCount = containerStatus.RestartCount + 1``), so
    a container waiting out its back-off still shows the count of its last attempt; the
    stand-in has already numbered the attempt it will start (Record.restarts)."""
    waiting = record.state.get("waiting") or {}
    return record.restarts - 1 if waiting.get("reason") == "CrashLoopBackOff" else record.restarts


def container_status(record: Record) -> dict[str, Any]:
    out: dict[str, Any] = {"name": record.name, "image": record.image, "imageID": record.image_id,
                           "state": record.state, "lastState": record.last, "ready": record.ready,
                           "restartCount": restarts_made(record), "started": "running" in record.state}
    if record.container_id:
        out["containerID"] = record.container_id
    return out


def _exit_code(state: Obj) -> int | None:
    return state["terminated"].get("exitCode") if "terminated" in state else None


def init_counts(inits: Sequence[Record]) -> tuple[int, int]:
    """(pending, failed) init containers, as getPhase counts the regular ones."""
    pending = failed = 0
    for record in inits:
        code = _exit_code(record.state)
        if "running" in record.state:
            pending += 1
        elif code is not None:
            failed += code != 0
        elif _exit_code(record.last) is not None:
            failed += _exit_code(record.last) != 0
        else:
            pending += 1
    return pending, failed


def phase(inits: Sequence[Record], apps: Sequence[Record], restart_policy: str) -> str:
    """Pending, Running, Succeeded or Failed, from what the containers did."""
    pending_init, failed_init = init_counts(inits)
    if failed_init and restart_policy == "Never":
        return "Failed"
    if pending_init or failed_init:
        return "Pending"
    run = sum("running" in r.state for r in apps)
    stopped = sum("terminated" in r.state or ("waiting" in r.state and "terminated" in r.last) for r in apps)
    succeeded = sum(_exit_code(r.state) == 0 for r in apps)
    waiting_now = sum("waiting" in r.state and "terminated" not in r.last for r in apps)
    if waiting_now:
        return "Pending"
    if run:
        return "Running"
    if stopped == len(apps) and apps:
        if restart_policy == "Always":
            return "Running"
        if succeeded == stopped:
            return "Succeeded"
        return "Failed" if restart_policy == "Never" else "Running"
    return "Pending"


def _condition(kind: str, ok: bool, now: str, reason: str = "", message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "status": "True" if ok else "False", "lastTransitionTime": now,
                           "lastProbeTime": None}
    if not ok and reason:
        out["reason"] = reason
    if not ok and message:
        out["message"] = message
    return out


def conditions(inits: Sequence[Record], apps: Sequence[Record], pod_phase: str, has_address: bool,
               scheduled: Sequence[Obj], now: str) -> list[dict[str, Any]]:
    """PodReadyToStartContainers, Initialized, ContainersReady and Ready, after the
    scheduler's PodScheduled as the pod already carries it."""
    done = pod_phase in ("Succeeded", "Failed")
    incomplete = [r.name for r in inits if _exit_code(r.state) != 0]
    initialized = not incomplete or (done and not inits)
    unready = [r.name for r in apps if not r.ready]
    ready = not unready and not done and initialized
    reason = "PodCompleted" if done else "ContainersNotReady"
    message = "" if done else f"containers with unready status: [{' '.join(unready)}]"
    return [*[dict(c) for c in scheduled],
            _condition("PodReadyToStartContainers", has_address and not done, now),
            _condition("Initialized", initialized, now, "ContainersNotInitialized",
                       f"containers with incomplete status: [{' '.join(incomplete)}]"),
            _condition("ContainersReady", ready, now, reason, message),
            _condition("Ready", ready, now, reason, message)]


def pod_status(pod: Obj, inits: Sequence[Record], apps: Sequence[Record], *, pod_ip: str, host_ip: str,
               start_time: str, now: str) -> dict[str, Any]:
    """The ``status`` the kubelet writes for ``pod``."""
    policy = str((pod.get("spec") or {}).get("restartPolicy") or "Always")
    current = phase(inits, apps, policy)
    scheduled = [c for c in ((pod.get("status") or {}).get("conditions") or []) if c.get("type") == "PodScheduled"]
    out: dict[str, Any] = {
        "phase": current, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "startTime": start_time,
        "conditions": conditions(inits, apps, current, bool(pod_ip), scheduled, now),
        "containerStatuses": [container_status(r) for r in apps],
        "initContainerStatuses": [container_status(r) for r in inits],
        "qosClass": (pod.get("status") or {}).get("qosClass", "BestEffort"),
    }
    if pod_ip:
        out.update(podIP=pod_ip, podIPs=[{"ip": pod_ip}])
    return out
