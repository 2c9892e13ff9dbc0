"""The all-reduce bench's arithmetic (torchpod.bench_allreduce): sizes, the bus factor, a row's collectives.
Its option types are tested with torchpod.workload_options."""

from __future__ import annotations

import argparse

from torchpod.bench_allreduce import bus_factor, sizes


def test_bus_factor_is_nccl_tests_all_reduce_factor():
    assert bus_factor(2) == 1.0 and bus_factor(8) == 1.75 and bus_factor(1) == 0.0


def test_sizes_step_by_the_factor_in_whole_floats():
    assert sizes(1024, 1 << 20, 4) == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert sizes(6, 100, 4) == [4, 24, 96]


class _Tensor:
    def __init__(self, device, value=1.0):
        self.device, self.value = device, value

    def item(self):
        return self.value


class _Torch:
    """The part of torch `measure_row` uses; every tensor remembers the device it was made on."""

    float32 = float64 = "dtype"

    def __init__(self, device_type):
        self.cuda = argparse.Namespace(synchronize=lambda: None)
        self.device_type = device_type

    def ones(self, n, dtype, device):
        return _Tensor(device)

    def tensor(self, values, dtype, device=None):
        return _Tensor(device if device is not None else argparse.Namespace(type="cpu"), values[0])


class _NcclOnly:
    """An NCCL group: every collective's tensor must be on the GPU, as torch insists
    ("No backend type associated with device type cpu")."""

    ReduceOp = argparse.Namespace(MAX="max")

    def __init__(self):
        self.devices = []

    def all_reduce(self, tensor, op=None):
        self.devices.append(tensor.device.type)
        if tensor.device.type != "cuda":
            raise RuntimeError("No backend type associated with device type cpu")

    def barrier(self):
        pass


def test_every_collective_of_a_row_runs_on_the_groups_device():
    from torchpod.bench_allreduce import measure_row

    dist = _NcclOnly()
    args = argparse.Namespace(warmup=1, iters=2)
    row = measure_row(_Torch("cuda"), dist, 1 << 20, args, argparse.Namespace(type="cuda"), 2)
    assert dist.devices == ["cuda"] * 4  # warmup, two timed, and the slowest rank's time
    assert row["bytes"] == 1 << 20 and row["busbw_gbps"] == row["algbw_gbps"] * bus_factor(2)
