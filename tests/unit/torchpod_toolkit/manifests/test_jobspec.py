"""The JobSpec record and the option each field declares (manifests.jobspec)."""

import dataclasses

from torchpod_toolkit.manifests import jobspec
from torchpod_toolkit.manifests.jobspec import NON_ROOT_ID, JobSpec, flag, non_root

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def test_a_field_declaring_an_option_carries_it_in_its_metadata():
    nodes = next(f for f in dataclasses.fields(JobSpec) if f.name == "nodes")
    how = nodes.metadata["option"]
    assert isinstance(how, jobspec.Option) and how.count == (1, jobspec.MAX_NODES) and how.span == "min_nodes"
    assert flag("gpus_per_node") == "--gpus-per-node"


def test_the_derived_properties():
    spec = JobSpec("kubeflow", 4, IMAGE, ("train.py",), min_nodes=2, gpus_per_node=0)
    assert spec.kube and spec.nnodes == "2:4" and spec.nproc == 1 and spec.shm_size == "2Gi"
    assert spec.etcd_service == "train-etcd" and spec.launch() == ((), ("train.py",))
    assert non_root(spec) and spec.run_as_user == NON_ROOT_ID


def test_a_privileged_or_hpc_job_is_no_non_root_pod():
    assert not non_root(JobSpec("kubeflow", 2, IMAGE, ("t.py",), privileged=True))
    assert not non_root(JobSpec("slurm", 2, IMAGE, ("t.py",)))


def test_hostile_a_command_of_control_characters_is_carried_as_given_until_checked():
    spec = JobSpec("slurm", 2, IMAGE, ("t\x00.py", "\u202e"))
    assert spec.command == ("t\x00.py", "\u202e") and spec.launch()[1] == spec.command
