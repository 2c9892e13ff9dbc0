"""Where a job runs: its kind, its nodes, its preset and the kinds' own limits (manifests.placement)."""

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs, placement
from torchpod_toolkit.manifests.jobspec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def test_a_known_scheduler_and_a_node_range_where_the_kind_allows_it():
    spec = JobSpec("kubeflow-elastic", 4, IMAGE, ("t.py",), min_nodes=2)
    assert placement.check_scheduler(spec) is spec and placement.check_node_range(spec) is spec
    assert placement.check_node_range(JobSpec("slurm", 2, IMAGE, ("t.py",), min_nodes=2)).min_nodes is None


def test_a_master_task_needs_a_worker():
    with pytest.raises(InputError, match=r"^--nodes=1 with --scheduler volcano-master; expected 2 or more"):
        placement.check_master_task(JobSpec("volcano-master", 1, IMAGE, ("t.py",)))


def test_pod_name_room_and_mnnvl():
    room = placement.pod_name_room(jobs.kind("trainer").last_pod, 10)
    assert room == placement.DNS_LABEL_MAX - placement.POD_SUFFIX - len("-node-0-9")
    spec = JobSpec("jobset", 2, IMAGE, ("t.py",), mnnvl=True, gpus_per_node=4)
    assert placement.check_kind_limits(spec) is spec


def test_hostile_unknown_scheduler_is_one_line():
    with pytest.raises(InputError) as err:
        placement.check_scheduler(JobSpec("slurm\n", 2, IMAGE, ("t.py",)))
    assert str(err.value).startswith("--scheduler='slurm\\n' is unknown") and "\n" not in str(err.value)


def test_hostile_mnnvl_on_the_wrong_architecture():
    with pytest.raises(InputError, match=r"its tag names the x86_64 build"):
        placement.check_mnnvl(JobSpec("jobset", 2, "reg/x:1-x86_64", ("t.py",), mnnvl=True, gpus_per_node=4))
