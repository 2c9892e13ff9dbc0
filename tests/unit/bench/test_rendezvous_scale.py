"""bench/rendezvous_scale.py without torch: its options are refused in one line before
anything starts, and the nodes' start times deal every node once over the spread."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import bench_script


@pytest.fixture(scope="module")
def bench():
    return bench_script("rendezvous_scale")


@pytest.mark.parametrize("args, needle", [
    (["--spread-s", "-1"], "argument --spread-s: '-1': expected seconds, a number 0 or more"),
    (["--spread-s", "nan"], "argument --spread-s: 'nan': expected seconds, a number 0 or more"),
    (["--late-s", "inf"], "argument --late-s: 'inf': expected seconds, a number 0 or more"),
    (["--steady-s", "10s"], "argument --steady-s: '10s': expected seconds, a number 0 or more"),
    (["--nodes", "8,x"], "argument --nodes: '8,x': expected node counts from 1 to 4096, separated by commas"),
    (["--nodes", "0"], "argument --nodes: '0': expected node counts from 1 to 4096"),
    (["--nodes", ""], "argument --nodes: '': expected node counts from 1 to 4096"),
    (["--nodes", "٣"], "argument --nodes: '٣': expected node counts from 1 to 4096"),  # a digit, not an ASCII one
    (["--procs", "0"], "argument --procs: '0': expected a whole number from 1 to 256"),
    (["--keep-alive-interval", "-5"], "argument --keep-alive-interval: '-5': expected a whole number from 1 to 86400"),
    (["--settings", "torch,fast"], "--settings='torch,fast': expected some of torch, torchpod, custom, separated by"),
])
def test_a_bad_option_is_one_line_naming_it_before_torch_is_imported(bench, capsys, args, needle):
    with pytest.raises(SystemExit) as stop:
        bench.main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert needle in err[-1] and "Traceback" not in "\n".join(err), err


@given(st.integers(1, 2048), st.integers(1, 256), st.floats(0, 1e4, allow_nan=False))
def test_every_node_starts_once_within_the_spread_dealt_round_the_processes(world, procs, spread):
    bench = bench_script("rendezvous_scale")
    procs = min(procs, world)
    offsets = bench.start_offsets(world, procs, spread)
    starts = sorted(t for one in offsets for t in one)
    assert len(offsets) == procs and len(starts) == world
    assert starts == sorted(g * spread / world for g in range(world))  # each node's own start, once
    assert all(0 <= t <= spread for t in starts) and starts[0] == 0
    assert max(len(one) for one in offsets) - min(len(one) for one in offsets) <= 1  # nodes dealt evenly
    assert all(one == sorted(one) for one in offsets)
