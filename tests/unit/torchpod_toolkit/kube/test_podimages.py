"""torchpod_toolkit.kube.podimages with an API and a docker of plain objects and pulls that
succeed or fail as told: imagePullPolicy and the API's default for it, the kubelet's events
word for word (kubernetes v1.37.2, pkg/kubelet/images/image_manager.go), the waiting
reasons ErrImageNeverPull, ErrImagePull and ImagePullBackOff, the back-off of 10 s doubling
to 300 s, and Go's duration format of the Pulled event."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import podimages, podruntime
from torchpod_toolkit.kube.api import ApiError
from torchpod_toolkit.kube.podimages import ImagePod


class _Client:
    def __init__(self, refuse=False):
        self.events, self.patches, self.refuse = [], [], refuse

    def create(self, path, body):
        if self.refuse:
            raise ApiError("POST", path, 403, {"message": "forbidden"})
        self.events.append(body)
        return body

    def patch(self, path, body):
        self.patches.append((path.rsplit("/", 1)[-1], body))
        return body


class _Image:
    def __init__(self, size):
        self.attrs = {"Size": size}


class _Images:
    def __init__(self, present):
        self.present = dict(present)

    def get(self, name):
        if name not in self.present:
            raise podruntime.ENGINE_ERRORS[0]("No such image: " + name)
        return _Image(self.present[name])


class _Docker:
    def __init__(self, present):
        self.images = _Images(present)


class _Runtime(podruntime.Runtime):
    """Pulls as told: ``pulls`` answers each `docker pull` in turn (True: the image arrives)."""

    def run(self, argv, timeout=120.0):
        self.asked.append(list(argv))
        if not self.pulls.pop(0):
            raise RuntimeFailure("docker pull --quiet: exit 1: Error response from daemon: manifest unknown")
        self.docker.images.present[argv[-1]] = 4096
        return ""


def _worker(container, present=(), pulls=(), client=None, noted=None) -> ImagePod:
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-1"}, "spec": {"containers": [container]}}
    runtime = _Runtime(node="n-0", client=client or _Client(), docker=_Docker(present), network="net", labels={},
                       host_ip="172.18.0.2", allocatable={},
                       note=lambda what, exc: noted.append(what) if noted is not None else None)
    runtime.pulls, runtime.asked = list(pulls), []
    return ImagePod(pod, runtime)


def _said(worker):
    return [(e["type"], e["reason"], e["message"]) for e in worker.runtime.client.events]


@pytest.mark.parametrize("image, policy", [
    ("reg.example.com:5000/team/img:1.0", "IfNotPresent"), ("img", "Always"), ("img:latest", "Always"),
    ("reg.example.com:5000/img", "Always"), ("img@sha256:" + "a" * 64, "IfNotPresent"),
    ("localhost:5000/img:latest", "Always"),
])
def test_a_pod_the_api_did_not_default_gets_the_apis_default_policy(image, policy):
    assert podimages.pull_policy({"image": image}) == policy
    assert podimages.pull_policy({"image": image, "imagePullPolicy": "Never"}) == "Never"


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (0.0004, "0s"), (0.523, "523ms"), (1.5, "1.5s"), (2, "2s"),
                                           (61.004, "1m1.004s"), (3600, "1h0m0s"), (3723.5, "1h2m3.5s")])
def test_durations_are_written_as_go_writes_them(seconds, text):
    assert podimages.go_duration(seconds) == text


@given(st.floats(min_value=0, max_value=1e7, allow_nan=False))
def test_any_duration_is_one_go_duration(seconds):
    text = podimages.go_duration(seconds)
    assert text.endswith("s") and "\n" not in text and not text.startswith("-")


def test_a_present_image_is_not_pulled_and_said_present():
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "IfNotPresent"}, present={"img:1": 9})
    [record] = worker.apps
    assert worker._ensure_image(record) is True and worker.runtime.asked == []
    assert _said(worker) == [("Normal", "Pulled", 'Container image "img:1" already present on machine and can be '
                                                  "accessed by the pod")]
    event = worker.runtime.client.events[0]
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "u-1",
                                       "fieldPath": "spec.containers{c}"}
    assert event["source"] == {"component": "kubelet", "host": "n-0"} and event["metadata"]["name"].startswith("p.")
    assert worker._ensure_image(record) is True and len(_said(worker)) == 1  # once for the container's start


def test_never_and_absent_waits_err_image_never_pull_and_pulls_nothing():
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "Never"})
    [record] = worker.apps
    assert worker._ensure_image(record) is False and worker.runtime.asked == []
    message = 'Container image "img:1" is not present with pull policy of Never'
    assert record.state == {"waiting": {"reason": "ErrImageNeverPull", "message": message}}
    assert _said(worker) == [("Warning", "ErrImageNeverPull", message)]


@pytest.mark.parametrize("policy, present", [("IfNotPresent", {}), ("Always", {"img:1": 9})])
def test_an_absent_image_or_policy_always_is_pulled_and_said_as_the_kubelet_says(policy, present):
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": policy}, present=present, pulls=[True])
    [record] = worker.apps
    assert worker._ensure_image(record) is True
    assert worker.runtime.asked == [["docker", "pull", "--quiet", "img:1"]]
    (pulling, pulled) = _said(worker)
    assert pulling == ("Normal", "Pulling", 'Pulling image "img:1"')
    assert pulled[:2] == ("Normal", "Pulled")
    assert pulled[2].startswith('Successfully pulled image "img:1" in ') and " including waiting). " in pulled[2]
    assert pulled[2].endswith("Image size: 4096 bytes.")


def test_a_failed_pull_waits_then_backs_off_and_the_back_off_doubles(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(podimages.time, "monotonic", lambda: now[0])
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "IfNotPresent"}, pulls=[False, False, True])
    [record] = worker.apps
    assert worker._ensure_image(record) is False
    waiting = record.state["waiting"]
    assert waiting["reason"] == "ErrImagePull" and "manifest unknown" in waiting["message"]
    assert _said(worker)[-1][:2] == ("Warning", "Failed")
    assert _said(worker)[-1][2].startswith('Failed to pull image "img:1": docker pull')
    now[0] += 5  # within the first 10 s
    assert worker._ensure_image(record) is False and len(worker.runtime.asked) == 1
    waiting = record.state["waiting"]
    assert waiting["reason"] == "ImagePullBackOff"
    assert waiting["message"].startswith('Back-off pulling image "img:1": ErrImagePull: docker pull')
    assert _said(worker)[-1] == ("Normal", "BackOff", 'Back-off pulling image "img:1"')
    now[0] += 5.1  # past 10 s: pulled again, failed again, now 20 s
    assert worker._ensure_image(record) is False and len(worker.runtime.asked) == 2
    now[0] += 15
    assert worker._ensure_image(record) is False and len(worker.runtime.asked) == 2
    assert worker.runtime.client.patches and worker.runtime.client.patches[-1][1]["count"] == 2  # the same BackOff
    now[0] += 5.1
    assert worker._ensure_image(record) is True and len(worker.runtime.asked) == 3


def test_the_back_off_stops_at_300_s(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(podimages.time, "monotonic", lambda: now[0])
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "Always"}, pulls=[False] * 8)
    [record] = worker.apps
    delays = []
    for _ in range(8):
        assert worker._ensure_image(record) is False
        delays.append(worker._pull_backoff["img:1"].delay)
        now[0] += delays[-1]
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]


def test_an_event_the_api_refuses_is_noted_and_the_image_still_made_present():
    noted = []
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "IfNotPresent"}, pulls=[True],
                     client=_Client(refuse=True), noted=noted)
    [record] = worker.apps
    assert worker._ensure_image(record) is True
    assert noted == ["event Pulling on ns/p", "event Pulled on ns/p"]


def test_the_node_pulls_one_image_at_a_time():
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "Always"}, pulls=[True])
    assert isinstance(worker.runtime.pull_lock, type(threading.Lock()))
    worker.runtime.pull_lock.acquire()
    done = []
    thread = threading.Thread(target=lambda: done.append(worker._ensure_image(worker.apps[0])))
    thread.start()
    thread.join(0.3)
    assert not done and worker.runtime.asked == []  # waits for the pull before it
    worker.runtime.pull_lock.release()
    thread.join(5)
    assert done == [True]


def test_an_init_containers_events_name_it_as_an_init_container():
    worker = _worker({"name": "c", "image": "img:1", "imagePullPolicy": "IfNotPresent"}, present={"img:1": 9})
    init = {"name": "c0", "image": "img:1", "imagePullPolicy": "IfNotPresent"}
    worker.pod["spec"]["initContainers"] = [init]
    worker.specs["c0"] = init
    worker.inits = [podimages.Record("c0", "img:1")]
    assert worker._ensure_image(worker.inits[0]) and worker._ensure_image(worker.apps[0])
    assert [e["involvedObject"]["fieldPath"] for e in worker.runtime.client.events] == [
        "spec.initContainers{c0}", "spec.containers{c}"]
