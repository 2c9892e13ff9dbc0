"""torchpod.workload_options: the parser torchpod's own workloads read their options with
(an error is one InputError, never SystemExit) and the value types their options take."""

from __future__ import annotations

import argparse

import pytest

from torchpod.errors import InputError
from torchpod.workload_options import Parser, parse_bytes, whole


@pytest.mark.parametrize("text, value", [("4", 4), ("1K", 1024), ("64M", 64 << 20), ("2GiB", 2 << 30)])
def test_sizes_parse(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["2", "1X", "", "-4", "٣K", "４M", "1\n2"])  # ASCII digits only
def test_bad_sizes_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a size"):
        parse_bytes(text)


@pytest.mark.parametrize("text, value", [("10", 10), ("0", 0), ("-1", -1)])
def test_whole_numbers_parse(text, value):
    assert whole(text) == value


@pytest.mark.parametrize("text", ["", "1.5", "\u0663", "１", "1e3", " 1", "1" * 19])
def test_other_numbers_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"is not a whole number; expected ASCII digits, e\.g\. 10$"):
        whole(text)


def test_a_parser_error_is_one_input_error_named_after_the_program():
    parser = Parser(prog="torchpod demo")
    parser.add_argument("--n", type=whole, default=1)
    assert parser.parse_args(["--n", "3"]).n == 3
    with pytest.raises(InputError, match=r"^torchpod demo: unrecognized arguments: --bogus$"):
        parser.parse_args(["--bogus"])
    with pytest.raises(InputError, match=r"^torchpod demo: argument --n: 'x' is not a whole number"):
        parser.parse_args(["--n", "x"])
