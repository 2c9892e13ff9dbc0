"""torchpod_toolkit.manifests.spec: a bad request is one line naming the flag, the value and
the form expected, before anything is rendered."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import JobSpec

from manifest_cases import IMAGE

BAD = [
    (dict(nodes=0), "--nodes=0"),
    (dict(nodes=-2), "--nodes=-2"),
    (dict(scheduler="lsf"), "--scheduler='lsf' is unknown"),
    (dict(image="registry.example.com/torchpod/pytorch"), "has no tag"),
    (dict(image="registry.example.com:5000/torchpod/pytorch"), "has no tag"),
    (dict(image="torchpod/pytorch:latest"), "'latest'"),
    (dict(preset="oci-bm-gpu-a10"), "--preset='oci-bm-gpu-a10' is unknown"),
    (dict(preset="oci-bm-gpu-h100.8", gpus_per_node=16), "shape with 8 GPUs"),
    (dict(rdzv="etcd"), "--rdzv etcd needs an etcd endpoint"),
    (dict(rdzv="etcd", etcd_endpoint="etcd.infra"), "has no port"),
    (dict(rdma="device-plugin"), "--rdma device-plugin needs --rdma-resource"),
    (dict(rdma="sriov"), "--rdma='sriov' is unknown"),
    (dict(scheduler="slurm", runtime="singularity"), "--runtime='singularity' is unknown"),
    (dict(scheduler="slurm", rdma="hostnetwork"), "is for Kubernetes pods"),
    (dict(runtime="apptainer"), "is for HPC job scripts"),
    (dict(scheduler="trainer", rdma="hostnetwork"), "cannot set hostNetwork"),
    (dict(scheduler="volcano-master", nodes=1), "expected 2 or more"),
    (dict(name="Train_1"), "--name='Train_1'"),
    (dict(command=()), "no training script"),
    (dict(scheduler="pbs-pals", preset="hpe-slingshot-gh200", gpus_per_node=4), "needs --site-lib HOSTDIR"),
    (dict(scheduler="slurm", preset="aws-p5", site_lib="/opt/x"), "--site-lib is for Slingshot presets"),
    (dict(scheduler="slurm", preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="lib"), "absolute host path"),
    (dict(preset="hpe-slingshot-gh200", gpus_per_node=4), "a Slingshot HPC shape"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line_naming_the_flag(change, message):
    fields = dict(scheduler="volcano", nodes=2, image=IMAGE, command=("train.py",))
    fields.update(change)
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    assert message in str(err.value) and "\n" not in str(err.value)
