"""The all-reduce bench's arithmetic (torchpod.bench_allreduce): sizes, the bus factor, input."""

from __future__ import annotations

import argparse

import pytest

from torchpod.bench_allreduce import bus_factor, parse_bytes, sizes


def test_bus_factor_is_nccl_tests_all_reduce_factor():
    assert bus_factor(2) == 1.0 and bus_factor(8) == 1.75 and bus_factor(1) == 0.0


def test_sizes_step_by_the_factor_in_whole_floats():
    assert sizes(1024, 1 << 20, 4) == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert sizes(6, 100, 4) == [4, 24, 96]


@pytest.mark.parametrize("text, value", [("4", 4), ("1K", 1024), ("64M", 64 << 20), ("2GiB", 2 << 30)])
def test_sizes_parse(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["2", "1X", "", "-4", "٣K", "４M", "1\n2"])  # ASCII digits only
def test_bad_sizes_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a size"):
        parse_bytes(text)
