"""What a job's pods carry (manifests.pods)."""

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import pods
from torchpod_toolkit.manifests.jobspec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def _job(scheduler="kubeflow", **fields):
    return JobSpec(scheduler, 2, IMAGE, ("t.py",), **fields)


def test_pod_fields_become_tuples_and_rdma_is_checked():
    spec = pods.check_pod_fields(_job(volume=["pvc:data:/data"], node_selector=["a=b"]))
    assert spec.volume == ("pvc:data:/data",) and spec.node_selector == ("a=b",)
    spec = _job(rdma="device-plugin", rdma_resource="rdma/shared")
    assert pods.check_rdma(spec) is spec and pods.check_pod_security(_job(pod_security="baseline"))


def test_ids_only_for_non_root_pods():
    with pytest.raises(InputError, match=r"^--run-as-user=5 applies to pods that need no capability; an HPC job"):
        pods.check_ids(_job("slurm", run_as_user=5))


def test_memory_above_dev_shm():
    with pytest.raises(InputError, match=r"^--memory-per-node=8Gi with a 64Gi /dev/shm"):
        pods.check_memory(_job(memory_per_node="8Gi"))


@pytest.mark.parametrize("value", ["nvidia.com/gpu", "", "rdma", "bad prefix/x", "a/\x00"])
def test_hostile_rdma_resource_is_refused_in_one_line(value):
    with pytest.raises(InputError) as err:
        pods.check_resource(value)
    assert str(err.value).startswith(("--rdma device-plugin needs", "--rdma-resource=")) and "\n" not in str(err.value)
