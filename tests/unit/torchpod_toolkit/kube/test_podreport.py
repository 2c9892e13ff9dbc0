"""torchpod_toolkit.kube.podreport, without docker: the kubelet loop's signals stop a worker's
waits, and the pod's status is written through the status subresource only when it changed
(the conditions' times aside), a pod already gone from the API (404) being no error."""

from __future__ import annotations

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import podruntime, podstatus
from torchpod_toolkit.kube.api import ApiError
from torchpod_toolkit.kube.podreport import PodReporter

POD = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-1"},
       "spec": {"initContainers": [{"name": "i", "image": "img"}], "containers": [{"name": "c", "image": "img"}]}}


class _Client:
    def __init__(self, status: int = 0):
        self.patches: list[tuple[str, object]] = []
        self.status = status

    def patch(self, path, body):
        if self.status:
            raise ApiError("PATCH", path, self.status, {"reason": "NotFound" if self.status == 404 else "Forbidden"})
        self.patches.append((path, body))
        return {}


def _reporter(client) -> PodReporter:
    runtime = podruntime.Runtime(node="n-0", client=client, docker=None, network="net", labels={"torchpod": "1"},
                                 host_ip="172.18.0.2", allocatable={}, note=lambda what, exc: None)
    return PodReporter(POD, runtime)


def test_the_pod_is_known_by_its_names_and_its_containers_records():
    reporter = _reporter(_Client())
    assert (reporter.namespace, reporter.pod_name, reporter.uid) == ("ns", "p", "u-1")
    assert [r.name for r in reporter.inits] == ["i"] and [r.name for r in reporter.apps] == ["c"]
    assert reporter.name_of("c", 2).startswith("k8s_c_p_ns_u-1_2")
    assert reporter._labels("c") == {"torchpod": "1", "io.kubernetes.pod.namespace": "ns",
                                     "io.kubernetes.pod.name": "p", "io.kubernetes.pod.uid": "u-1",
                                     "io.kubernetes.container.name": "c"}


@pytest.mark.parametrize("signal", ["deleted", "gone", "halt"])
def test_each_signal_of_the_kubelets_loop_ends_a_wait(signal):
    reporter = _reporter(_Client())
    reporter.update(POD)
    assert not reporter.stopping()
    if signal == "deleted":
        reporter.update({**POD, "metadata": {**POD["metadata"], "deletionTimestamp": "2026-11-27T12:00:00Z"}})
    else:
        getattr(reporter, signal)()
    assert reporter.stopping() and reporter._wait(60.0) is True


def test_the_status_is_written_once_until_it_changes():
    client = _Client()
    reporter = _reporter(client)
    first = reporter.report()
    reporter.report()
    assert len(client.patches) == 1 and client.patches[0] == ("/api/v1/namespaces/ns/pods/p/status", {"status": first})
    assert first["hostIP"] == "172.18.0.2"
    reporter.apps[0].state = podstatus.waiting("CrashLoopBackOff", "back-off")
    reporter.report()
    assert len(client.patches) == 2


def test_a_pod_gone_from_the_api_is_no_error_and_a_refusal_is():
    _reporter(_Client(404)).report()
    with pytest.raises(ApiError, match="403"):
        _reporter(_Client(403)).report()


def test_a_node_without_a_client_is_one_error():
    with pytest.raises(RuntimeFailure, match="no API client for node 'n-0'"):
        _reporter(None).report()
