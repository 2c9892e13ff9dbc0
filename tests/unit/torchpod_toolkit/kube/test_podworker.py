"""torchpod_toolkit.kube.podworker, the parts decided without docker: what the stand-in
refuses in one line, and docker's times in the API's form."""

from __future__ import annotations

import pytest

from torchpod_toolkit.kube import podworker


@pytest.mark.parametrize("spec, words", [
    ({"initContainers": [{"name": "side", "restartPolicy": "Always"}]}, "sidecar"),
    ({"hostNetwork": True}, "hostNetwork"),
    ({"volumes": [{"name": "v", "ephemeral": {}}]}, "ephemeral is not supported"),
])
def test_what_the_stand_in_refuses(spec, words):
    assert words in podworker.refusal({"spec": {"containers": [{"name": "c"}], **spec}})


def test_a_plain_pod_is_not_refused():
    spec = {"containers": [{"name": "c"}], "volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]}
    assert podworker.refusal({"spec": spec}) == ""


def test_docker_times():
    assert podworker.docker_time("2026-11-27T04:20:01.123456789Z") == "2026-11-27T04:20:01Z"
    assert podworker.docker_time("0001-01-01T00:00:00Z") == "" and podworker.docker_time("") == ""
