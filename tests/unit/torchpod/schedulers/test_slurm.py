"""torchpod.schedulers.slurm: its parsers (host lists, task and GPU counts). The checks every detector
runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import slurm
from torchpod.schedulers.slurm import expand_hostlist, expand_tasks_per_node, gpus_from_env

from launcher_cases import ForwardedDetectorCases


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


class TestSlurm(ForwardedDetectorCases):
    detector = slurm
    prefixes = ('SLURM_',)
    claims = [
        {'SLURM_JOB_ID': '5'},
        {'SLURM_JOBID': '5'},
    ]
    not_claims = [
        {},
        {'SLURM_NODELIST': 'gpu[1-2]'},
        {'PBS_JOBID': '1.s'},
    ]
    refused_later = {
        'slurm_nnodes_smaller_than_hosts':
            "the user's --nnodes is held against the hosts after detection (resolve.decide_nnodes)",
    }
