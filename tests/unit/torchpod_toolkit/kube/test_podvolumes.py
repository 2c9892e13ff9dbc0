"""torchpod_toolkit.kube.podvolumes: the files of configMap, secret, downwardAPI and
projected volumes as the kubelet's volume plugins write them, and the kinds it refuses."""

from __future__ import annotations

import base64

import pytest

from torchpod_toolkit.kube import podvolumes

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "1"}},
       "spec": {"containers": [{"name": "main", "resources": {"limits": {"memory": "1Mi"}}}]}}
MAPS = {"cm": {"data": {"k": "v", "other": "o"}, "binaryData": {"bin": base64.b64encode(b"\x00\xff").decode()}}}
SECRETS = {"s": {"data": {"token": base64.b64encode(b"t0k").decode()}}}


def files(volume, token=lambda audience, seconds: f"token-for-{audience or 'api'}-{seconds}"):
    context = podvolumes.VolumeContext(POD, pod_ip="1.2.3.4", host_ip="1.2.3.1", allocatable={"memory": "1Gi"},
                                       config_maps=MAPS.get, secrets=SECRETS.get, token=token)
    return podvolumes.volume_files(volume, context)


def test_config_map_every_key_or_the_items_with_their_modes():
    every = files({"name": "v", "configMap": {"name": "cm"}})
    assert every == {"k": (b"v", 0o644), "other": (b"o", 0o644), "bin": (b"\x00\xff", 0o644)}
    some = files({"name": "v", "configMap": {"name": "cm", "defaultMode": 0o600,
                                             "items": [{"key": "k", "path": "dir/k.txt", "mode": 0o400}]}})
    assert some == {"dir/k.txt": (b"v", 0o400)}


def test_secret_values_are_decoded():
    assert files({"name": "v", "secret": {"secretName": "s"}}) == {"token": (b"t0k", 0o644)}


@pytest.mark.parametrize("volume, message", [
    ({"name": "v", "configMap": {"name": "absent"}}, 'configmaps "absent" not found'),
    ({"name": "v", "secret": {"secretName": "absent"}}, 'secrets "absent" not found'),
    ({"name": "v", "configMap": {"name": "cm", "items": [{"key": "nope", "path": "x"}]}},
     "configmap references non-existent config key: nope"),
    ({"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "../escape"}]}}, "must be relative"),
    ({"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "/abs"}]}}, "must be relative"),
    ({"name": "v", "persistentVolumeClaim": {"claimName": "c"}}, "persistentVolumeClaim is not supported"),
    ({"name": "v", "projected": {"sources": [{"clusterTrustBundle": {}}]}}, "is not supported"),
])
def test_what_fails_a_mount(volume, message):
    with pytest.raises(podvolumes.MountError, match=message):
        files(volume)


def test_optional_sources_that_are_absent_give_no_files():
    assert files({"name": "v", "configMap": {"name": "absent", "optional": True}}) == {}
    assert files({"name": "v", "secret": {"secretName": "absent", "optional": True}}) == {}


def test_downward_api_and_the_service_account_volume_the_api_server_injects():
    downward = files({"name": "v", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "mem",
         "resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "1Ki"}}]}})
    assert downward == {"labels": (b'a="1"', 0o644), "mem": (b"1024", 0o644)}
    access = {"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "cm", "items": [{"key": "k", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}
    assert files(access) == {"token": (b"token-for-api-3607", 420), "ca.crt": (b"v", 420), "namespace": (b"ns", 420)}


def test_kinds():
    assert podvolumes.kind_of({"name": "v", "emptyDir": {}}) == "emptyDir"
    with pytest.raises(podvolumes.MountError, match="no source"):
        podvolumes.kind_of({"name": "v"})
