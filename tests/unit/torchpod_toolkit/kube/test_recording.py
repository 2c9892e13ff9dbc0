"""torchpod_toolkit.kube.recording: a pod as the operator wrote it, read from the API
server's objects with what only chance or the API server decides masked."""

from __future__ import annotations

import pytest

from torchpod_toolkit.kube.recording import mask, record

UID = "5c66e4a3-1b2c-4d5e-8f90-0000a57a89fe"


@pytest.mark.parametrize("value, masked", [
    (f"job-{UID}", "job-{uid}"),
    ("6324b67b2a613e9adfd9cc96ccb777f1d16c7d61", "{hash}"),
    ("train-7c9f8d6b5", "train-{hash}"),
    ("12345678", "12345678"),  # digits alone are a number, not a hash
    ("deadbeefcafe-worker", "{hash}-worker"),
    ("alpha-worker-0.alpha", "alpha-worker-0.alpha"),
])
def test_uids_and_hashes_are_masked_and_nothing_else(value, masked):
    assert mask(value, [UID]) == masked


def _pod(name, generate="", env=(), volumes=(), mounts=()):
    meta = {"name": name, "uid": "11111111-2222-4333-8444-555555555555",
            "labels": {"a": "1", "controller-revision-hash": "alpha-0-5886686456"},
            "annotations": {"owner": UID}}
    if generate:
        meta["generateName"] = generate
    return {"metadata": meta, "spec": {"hostname": "h", "subdomain": "s", "nodeName": "node-x",
                                       "volumes": list(volumes),
                                       "containers": [{"name": "sidecar"}, {"name": "train", "env": list(env),
                                                                            "volumeMounts": list(mounts)}]}}


def test_a_pod_is_recorded_as_the_operator_wrote_it():
    job = {"kind": "Job", "metadata": {"name": "alpha"},
           "spec": {"template": {"spec": {"containers": [{"name": "train"}]}}}}
    cm = {"kind": "ConfigMap", "metadata": {"name": "alpha-svc", "uid": "x"}, "data": {"worker.host": "a-0.a\na-1.a",
                                                                                      "NUM": "2"}}
    env = [{"name": "N", "valueFrom": {"configMapKeyRef": {"name": "alpha-svc", "key": "NUM"}}},
           {"name": "I", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "U", "value": f"g-{UID}"}]
    pod = _pod("alpha-0-k3x9z", "alpha-0-", env, [{"name": "hosts", "configMap": {"name": "alpha-svc"}}],
               [{"name": "hosts", "mountPath": "/etc/volcano/"}])
    owner = {"kind": "Job", "metadata": {"name": "alpha", "uid": UID}}
    service = {"kind": "Service", "metadata": {"name": "alpha-0-k3x9z", "uid": "y"}}
    (recorded,) = record([job], [pod], [cm], [owner, service])["pods"]
    assert recorded["name"] == "alpha-0-{random}"
    assert recorded["container"] == "train"  # the job's own container, not the first
    assert recorded["env"] == [{"name": "N", "value": "2"},  # the kubelet's resolution of a ConfigMap key
                               {"name": "I", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                               {"name": "U", "value": "g-{uid}"}]
    assert recorded["files"] == {"/etc/volcano/NUM": "2", "/etc/volcano/worker.host": "a-0.a\na-1.a"}
    assert recorded["annotations"] == {"owner": "{uid}"} and recorded["service"] is True
    # a StatefulSet's revision hash may be all digits: masked by its key
    assert recorded["labels"] == {"a": "1", "controller-revision-hash": "alpha-0-{hash}"}
    assert "node-x" not in str(recorded)  # the node a pod is bound to is never read
