"""bench/_options.py: the command-line values the bench programs share, each refused in one
line naming the option and the value, and every program that takes --nodes refusing the
same hostile values before it starts anything."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paths import bench_helper, bench_script

options = bench_helper("_options")

HOSTILE_NODES = ["", "8,x", "0", "2,,4", "2,2", "-1", "4 ", "٣", "1e3", "9" * 400, "2;rm -rf /", "65"]


@given(st.lists(st.integers(1, 64), min_size=1, max_size=8, unique=True))
def test_node_counts_read_back_sorted(counts):
    assert options.node_counts(64)(",".join(map(str, counts))) == sorted(counts)


@pytest.mark.parametrize("text", HOSTILE_NODES)
def test_a_node_count_out_of_its_form_is_refused_with_the_value(text):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        options.node_counts(64)(text)
    assert str(refused.value) == f"{text!r}: expected node counts from 1 to 64, separated by commas, each once"


@pytest.mark.parametrize("text, fine", [("0", True), ("2.5", True), ("-1", False), ("nan", False), ("inf", False),
                                        ("10s", False), ("", False)])
def test_seconds(text, fine):
    if fine:
        assert options.seconds(text) == float(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="expected seconds, a number 0 or more"):
            options.seconds(text)


@pytest.mark.parametrize("text", ["0", "101", "-3", "3.0", "x", "", "٣"])
def test_a_whole_number_out_of_range_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected a whole number from 1 to 100$"):
        options.whole_number(100)(text)
    assert options.whole_number(100)("100") == 100


@pytest.mark.parametrize("program, most", [("first_step", 64), ("rendezvous", 64), ("rendezvous_scale", 4096),
                                           ("rendezvous_cost", 65536)])
@pytest.mark.parametrize("text", ["8,x", "0", "2,2", ""])
def test_every_program_that_takes_nodes_refuses_the_same_values_in_one_line(program, most, text, capsys):
    bench = bench_script(program)
    with pytest.raises(SystemExit) as stop:
        bench.main(["--nodes", text])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"argument --nodes: {text!r}: expected node counts from 1 to {most}, separated by "
                            "commas, each once") and "Traceback" not in "\n".join(err), err
