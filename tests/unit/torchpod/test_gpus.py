"""torchpod.gpus: how many GPUs a node shows (CUDA/NVIDIA_VISIBLE_DEVICES lists, the probe)
and the nproc_per_node that follows."""

from __future__ import annotations

import pytest

from torchpod.gpus import default_nproc, visible_count


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
