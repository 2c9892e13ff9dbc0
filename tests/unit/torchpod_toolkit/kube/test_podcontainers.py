"""torchpod_toolkit.kube.podcontainers, with an API and a docker of plain objects: a container
whose configuration cannot be made waits CreateContainerConfigError, an exit read from docker
is the terminated state the API shows, ``restartPolicy`` decides a restart and the kubelet's
back-off (10 s doubling to 300 s) delays it, and a Secret's values are decoded."""

from __future__ import annotations

import base64
import shutil

import pytest

from torchpod_toolkit.kube import podcontainers, podruntime, podstatus
from torchpod_toolkit.kube.podcontainers import ContainerPod


class _Client:
    def __init__(self, objects=None):
        self.objects = objects or {}

    def get(self, path):
        return {"items": []}

    def find(self, path):
        return self.objects.get(path)

    def create(self, path, body):  # the image's Pulled event
        return body


class _Container:
    def __init__(self, state):
        self.attrs = {"State": state}

    def logs(self, tail):
        return b"the end\n"


class _Image:
    attrs = {"Size": 10, "Config": {}}


class _Present:
    def get(self, name):
        return _Image()


class _Docker:
    def __init__(self, containers=None):
        self.found = containers or {}
        self.containers = self
        self.images = _Present()  # every image is on this machine: podimages' pulls have tests of their own

    def get(self, name):
        return self.found[name]


def _worker(request, container, objects=None, docker=None, policy="Always") -> ContainerPod:
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-1"},
           "spec": {"containers": [{"imagePullPolicy": "IfNotPresent", **container}], "restartPolicy": policy}}
    runtime = podruntime.Runtime(node="n-0", client=_Client(objects), docker=docker or _Docker(), network="net",
                                 labels={}, host_ip="172.18.0.2", allocatable={}, note=lambda what, exc: None)
    worker = ContainerPod(pod, runtime)
    request.addfinalizer(lambda: worker.folder and shutil.rmtree(worker.folder, ignore_errors=True))
    return worker


def test_a_missing_config_map_key_waits_create_container_config_error(request):
    container = {"name": "c", "image": "img",
                 "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "absent"}}}]}
    worker = _worker(request, container, {"/api/v1/namespaces/ns/configmaps/settings": {"data": {"other": "1"}}})
    [record] = worker.apps
    assert worker._launch(record) is False
    assert record.state["waiting"]["reason"] == podstatus.CONFIG_ERROR
    assert "absent" in record.state["waiting"]["message"]


def test_an_exit_read_from_docker_is_the_terminated_state(request):
    state = {"Running": False, "Status": "exited", "ExitCode": 3, "OOMKilled": False,
             "StartedAt": "2026-11-27T04:20:01.5Z", "FinishedAt": "2026-11-27T04:21:00.5Z"}
    docker = _Docker({"abc": _Container(state)})
    worker = _worker(request, {"name": "c", "image": "img"}, docker=docker)
    [record] = worker.apps
    record.container_id, record.state = "docker://abc", podstatus.running("2026-11-27T04:20:01Z")
    assert worker._poll(record) is True
    done = record.state["terminated"]
    assert (done["exitCode"], done["reason"], done["finishedAt"]) == (3, "Error", "2026-11-27T04:21:00Z")


@pytest.mark.parametrize("policy, code, restarts", [("Always", 0, True), ("Always", 1, True),
                                                    ("OnFailure", 0, False), ("OnFailure", 1, True),
                                                    ("Never", 1, False)])
def test_the_restart_policy_decides_a_restart(request, policy, code, restarts):
    worker = _worker(request, {"name": "c", "image": "img"}, policy=policy)
    [record] = worker.apps
    record.state = podstatus.terminated(code, "", "")
    assert worker._restart_due(record, worker._policy()) is restarts
    assert record.restarts == (1 if restarts else 0)
    if restarts:
        assert record.state["waiting"]["reason"] == "CrashLoopBackOff" and record.last["terminated"]["exitCode"] == code


def test_the_back_off_doubles_from_10_s_to_at_most_300_s(request):
    worker = _worker(request, {"name": "c", "image": "img"})
    [record] = worker.apps
    said = []
    for _ in range(7):
        record.state = podstatus.terminated(1, "", "")
        worker._restart_due(record, "Always")
        said.append(record.state["waiting"]["message"].split()[1])
    assert said == ["10s", "20s", "40s", "80s", "160s", "300s", "300s"]
    assert podcontainers.BACKOFF_MAX == 300.0


def test_a_secrets_values_are_decoded_and_a_config_maps_kept(request):
    worker = _worker(request, {"name": "c", "image": "img"}, {
        "/api/v1/namespaces/ns/secrets/s": {"data": {"k": base64.b64encode(b"v\xff").decode()}},
        "/api/v1/namespaces/ns/configmaps/m": {"data": {"k": 1}}})
    assert worker._text("secrets")("s") == {"k": "v\ufffd"}
    assert worker._text("configmaps")("m") == {"k": "1"}
    assert worker._text("configmaps")("absent") is None
