"""torchpod_toolkit.kube.podruntime, the parts decided without docker itself: docker's times
in the API's form, and a removed container that had ended kept with its exit and the end of
its log."""

from __future__ import annotations

from torchpod_toolkit.kube import podruntime


def test_docker_times():
    assert podruntime.docker_time("2026-11-27T04:20:01.123456789Z") == "2026-11-27T04:20:01Z"
    assert podruntime.docker_time("0001-01-01T00:00:00Z") == "" and podruntime.docker_time("") == ""


class _Container:
    def __init__(self, name, status, code=0, labels=None, log=b""):
        self.name, self.labels, self._log, self.removed = name, labels or {}, log, False
        self.attrs = {"State": {"Status": status, "Running": status == "running", "ExitCode": code}}

    def logs(self, tail):
        return b"\n".join(self._log.split(b"\n")[-tail:])

    def remove(self, force):
        self.removed = True


class _Docker:
    def __init__(self, *found):
        self.found = {c.name: c for c in found}
        self.containers = self

    def get(self, name):
        return self.found[name]


def _runtime(docker):
    return podruntime.Runtime(node="n", client=None, docker=docker, network="net", labels={}, host_ip="",
                             allocatable={}, note=lambda what, exc: None)


def test_a_removed_container_that_had_ended_is_kept_with_its_exit_and_log_tail():
    pod = {"io.kubernetes.pod.namespace": "ns", "io.kubernetes.pod.name": "p", "io.kubernetes.container.name": "c"}
    ended = _Container("k8s_c_p_ns_u_0", "exited", 3, pod, b"x" * (podruntime.ENDED_LOG_CHARS + 10) + b"\nlast")
    running = _Container("k8s_c_p_ns_u_1", "running", 0, pod)
    sandbox = _Container("sandbox", "exited", 0, {})  # not a pod's container: nothing to keep
    runtime = _runtime(_Docker(ended, running, sandbox))
    for name in ("k8s_c_p_ns_u_0", "k8s_c_p_ns_u_1", "sandbox"):
        runtime.remove(name)
    assert ended.removed and running.removed and sandbox.removed
    [kept] = runtime.ended
    assert (kept.namespace, kept.pod, kept.container, kept.attempt, kept.code) == ("ns", "p", "c", "k8s_c_p_ns_u_0", 3)
    assert kept.log.endswith("\nlast") and len(kept.log) == podruntime.ENDED_LOG_CHARS
