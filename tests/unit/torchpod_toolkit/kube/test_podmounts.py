"""torchpod_toolkit.kube.podmounts, with an API and a docker of plain objects: each kind of
volume held for docker as the kubelet holds it (a hostPath checked or made, an emptyDir a
folder any user may write, a Memory emptyDir a tmpfs volume capped at its sizeLimit, a
ConfigMap's keys as read-only files), a service-account token asked of the TokenRequest API,
and a volume that cannot be set up leaving the containers waiting ContainerCreating."""

from __future__ import annotations

import shutil
import stat

import pytest

from torchpod_toolkit.kube import podruntime, podstatus, podvolumes
from torchpod_toolkit.kube.podmounts import MountingPod


class _Client:
    def __init__(self, objects=None):
        self.objects, self.created, self.patches = objects or {}, [], []

    def find(self, path):
        return self.objects.get(path)

    def create(self, path, body):
        self.created.append((path, body))
        return {"status": {"token": "a-token"}}

    def patch(self, path, body):
        self.patches.append(body["status"])
        return {}


class _Volumes:
    def __init__(self):
        self.made = []

    def create(self, **kwargs):
        self.made.append(kwargs)


class _Docker:
    def __init__(self):
        self.volumes = _Volumes()


@pytest.fixture
def mounting(request):
    def make(volumes, objects=None) -> MountingPod:
        pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u-1"},
               "spec": {"containers": [{"name": "c", "image": "img"}], "volumes": volumes,
                        "serviceAccountName": "trainer"}}
        runtime = podruntime.Runtime(node="n-0", client=_Client(objects), docker=_Docker(), network="net",
                                     labels={}, host_ip="172.18.0.2", allocatable={}, note=lambda what, exc: None)
        worker = MountingPod(pod, runtime)
        request.addfinalizer(lambda: worker.folder and shutil.rmtree(worker.folder, ignore_errors=True))
        return worker
    return make


def test_an_empty_dir_is_a_folder_any_user_may_write(mounting):
    worker = mounting([{"name": "scratch", "emptyDir": {}}])
    assert worker._volumes()
    source = worker.sources["scratch"]
    assert source.kind == "bind" and not source.read_only
    assert stat.S_IMODE((worker.folder / "volumes" / "scratch").stat().st_mode) == 0o777


def test_a_host_path_is_made_when_asked_and_bound_as_it_is(mounting, tmp_path):
    made = tmp_path / "made" / "here"
    worker = mounting([{"name": "data", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}}])
    assert worker._volumes() and made.is_dir()
    assert (worker.sources["data"].kind, worker.sources["data"].where) == ("bind", str(made))


def test_a_config_maps_keys_are_read_only_files(mounting):
    worker = mounting([{"name": "cfg", "configMap": {"name": "settings"}}],
                      {"/api/v1/namespaces/ns/configmaps/settings": {"data": {"rank.conf": "zero"}}})
    assert worker._volumes()
    source = worker.sources["cfg"]
    assert source.read_only
    written = worker.folder / "volumes" / "cfg" / "rank.conf"
    assert written.read_text() == "zero" and stat.S_IMODE(written.stat().st_mode) == 0o644


def test_a_memory_empty_dir_is_a_tmpfs_volume_capped_at_its_size_limit(mounting):
    worker = mounting([{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}])
    assert worker._volumes()
    [made] = worker.runtime.docker.volumes.made
    assert made["driver_opts"] == {"type": "tmpfs", "device": "tmpfs", "o": f"mode=0777,size={64 << 20}"}
    assert (worker.sources["shm"].kind, worker.sources["shm"].where) == ("volume", made["name"])
    with pytest.raises(podvolumes.MountError):
        mounting([])._memory_volume("shm", {"sizeLimit": "lots"})


def test_a_volume_that_cannot_be_set_up_leaves_the_containers_creating(mounting, tmp_path):
    worker = mounting([{"name": "data", "hostPath": {"path": str(tmp_path / "absent"), "type": "Directory"}}])
    worker.halt()  # the pod stops: the retry is given up
    assert worker._volumes() is False
    [record] = worker.apps
    assert record.state["waiting"]["reason"] == podstatus.CREATING
    assert "MountVolume.SetUp failed: hostPath type check failed" in record.state["waiting"]["message"]
    assert worker.runtime.client.patches  # and the status says so


def test_a_token_is_asked_for_the_pods_service_account_and_bound_to_the_pod(mounting):
    worker = mounting([])
    assert worker._token("cluster", 3600) == "a-token"
    [(path, body)] = worker.runtime.client.created
    assert path == "/api/v1/namespaces/ns/serviceaccounts/trainer/token"
    assert body["spec"] == {"expirationSeconds": 3600, "audiences": ["cluster"],
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1"}}
