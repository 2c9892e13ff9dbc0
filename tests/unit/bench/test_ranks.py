"""bench/ranks.py: ring crossings counted right, and the three orders it compares built from
the launcher's own pieces (torchpod.order keys sorted by torchpod.ranked's descriptor)."""

from __future__ import annotations

import random

import pytest

from needs import module
from paths import bench_script


@pytest.fixture(scope="module")
def bench():
    return bench_script("ranks")


@pytest.mark.parametrize("domains, crossings, low", [
    ([], 0, 0), (["a"], 0, 0), (["a", "a", "a"], 0, 0), (["a", "b"], 2, 2),
    (["a", "b", "a", "b"], 4, 2), (["a", "a", "b", "b", "c"], 3, 3), (["a", "b", "b", "a"], 2, 2),
])
def test_a_ring_crosses_once_per_change_the_last_back_to_the_first(bench, domains, crossings, low):
    assert bench.ring_crossings(domains) == crossings
    assert bench.minimum(domains) == low


def test_the_three_orders_rank_every_node_once_and_torchpods_keeps_racks_together(bench):
    module("torch", "torch (./setup.sh --tests)")
    rng = random.Random(3)
    where = bench.place(40, 8, rng)
    addrs = bench.names("ips", 40, rng)
    orders = bench.orders(addrs, where)
    assert all(sorted(o) == list(range(40)) for o in orders.values())
    assert orders["torch"] == sorted(range(40), key=lambda i: addrs[i])
    racks = [where[i][1] for i in orders["torchpod"]]
    assert bench.ring_crossings(racks) == bench.minimum(racks) > 0


def test_a_row_names_every_count_and_torch_is_no_better_than_the_minimum(bench):
    module("torch", "torch (./setup.sh --tests)")
    row = bench.measure("pods", 64, 18, random.Random(5))
    for level in ("rack", "block"):
        assert row[f"{level}_torch"] >= row[f"{level}_min"] and row[f"{level}_torchpod"] == row[f"{level}_min"]
