"""Parsers under the detectors: Slurm host lists and counts, GPUs, host matching."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.gpus import default_nproc, visible_count
from torchpod.schedulers.common import find_host
from torchpod.values import Endpoint, split_endpoint
from torchpod.schedulers.slurm import expand_hostlist, expand_tasks_per_node, gpus_from_env


@pytest.mark.parametrize(
    "text, hosts",
    [
        ("gpu001", ("gpu001",)),
        ("gpu[001-004,010]", ("gpu001", "gpu002", "gpu003", "gpu004", "gpu010")),
        ("a[1-2],b3", ("a1", "a2", "b3")),
        ("r[1-2]-n[08-09]", ("r1-n08", "r1-n09", "r2-n08", "r2-n09")),
        ("n[9-11]", ("n9", "n10", "n11")),
        ("x[1]y", ("x1y",)),
        ("login1.cluster,gpu[1-2]", ("login1.cluster", "gpu1", "gpu2")),
    ],
)
def test_slurm_hostlist_expands_in_order(text, hosts):
    assert expand_hostlist("SLURM_JOB_NODELIST", text) == hosts


@pytest.mark.parametrize("text", ["", "gpu[001-", "gpu]1", "gpu[a-b]", "gpu[3-1]", "a,,b", "g[[1]]", "gpu[1-2] x"])
def test_slurm_hostlist_rejects_garbage(text):
    with pytest.raises(InputError, match="SLURM_JOB_NODELIST"):
        expand_hostlist("SLURM_JOB_NODELIST", text)


def test_slurm_task_counts():
    assert expand_tasks_per_node("V", "4(x2),1") == (4, 4, 1)
    with pytest.raises(InputError):
        expand_tasks_per_node("V", "4(2)")


@pytest.mark.parametrize(
    "env, want",
    [
        ({"SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "a100:4"}, "8"),
        ({"SLURM_GPUS_PER_NODE": "a100:4"}, "4"),
        ({"SLURM_GPUS_PER_NODE": "gpu:h100:2,gpu:a100:2"}, "4"),
        ({"SLURM_GPUS_PER_NODE": "4"}, "4"),
        ({}, None),
    ],
)
def test_slurm_gpu_counts(env, want):
    assert gpus_from_env(env)[0] == want


@pytest.mark.parametrize(
    "value, n",
    [("0,1,2,3", 4), ("", 0), ("-1", 0), ("0,-1,2", 1), ("GPU-8a3f-11,GPU-77", 2),
     ("MIG-4f1c-aa/1/0", 1), ("all", 0), ("none", 0)],
)
def test_visible_device_lists(value, n):
    assert visible_count(value) == n


@pytest.mark.parametrize(
    "env, probed, want",
    [
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 8, "2"),
        ({"CUDA_VISIBLE_DEVICES": ""}, 8, "1"),
        ({"NVIDIA_VISIBLE_DEVICES": "void"}, None, "1"),
        ({"NVIDIA_VISIBLE_DEVICES": "none"}, None, "1"),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, 4, "4"),
        ({"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c"}, None, "3"),
        ({}, 2, "2"),
        ({}, None, "1"),
    ],
)
def test_default_nproc(env, probed, want):
    assert default_nproc(env, probed)[0] == want


def test_host_matching_short_and_fqdn():
    hosts = ("n1.cluster.local", "n2.cluster.local")
    assert find_host(hosts, "n2") == 1
    assert find_host(hosts, "N2.CLUSTER.LOCAL") == 1
    assert find_host(("n1", "n2"), "n2.cluster.local") == 1
    assert find_host(hosts, "n3") is None
    assert find_host(("10.0.0.1", "10.0.0.2"), "10.0.0.2") == 1
    assert find_host(("10.0.0.1",), "10.0.0.2") is None  # no "short form" of an address


@pytest.mark.parametrize(
    "host, port, text",
    [("node1", 29400, "node1:29400"), ("::1", 1, "[::1]:1"), ("[fd00::2]", 5, "[fd00::2]:5")],
)
def test_endpoint_brackets_ipv6(host, port, text):
    assert str(Endpoint(host.strip("[]"), port)) == text
    assert Endpoint.parse("E", text) == Endpoint(host.strip("[]"), port)
    back = split_endpoint(text)
    assert back == (host.strip("[]"), str(port))


def test_find_host_refuses_a_short_name_that_matches_two_hosts():
    from torchpod.errors import InputError

    with pytest.raises(InputError, match=r"'n1\.a\.example' and 'n1\.b\.example'"):
        find_host(("n1.a.example", "n1.b.example"), "n1")
    # the same host spelt twice is no ambiguity; an exact match wins over short forms
    assert find_host(("n1.a.example", "N1.A.EXAMPLE", "n2"), "n1") == 0
    assert find_host(("n1.a.example", "n1.b.example"), "n1.b.example") == 1
