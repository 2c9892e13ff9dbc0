"""torchpod_toolkit.kube.podworker, the part decided without docker: what the stand-in
refuses in one line."""

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
