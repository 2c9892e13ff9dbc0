"""torchpod.preflight_options: preflight's options as its workers, the launcher and `invoke
manifests --workload preflight` read them, the ``--then`` split, and bad options refused in
one line; hostile words (all of Unicode, control characters included) next to them."""

from __future__ import annotations

import argparse
import ast
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod import preflight_options
from torchpod.errors import InputError, one_line

PREFIX = "torchpod preflight: "
BOUNDS = "expected --iters >= 1, --warmup >= 0, --min-bytes <= --max-bytes and --floor-gbps > 0"


def test_a_valid_option_set_is_read_as_the_workers_read_it():
    args = preflight_options.check_options(["--pair-bytes", "64K", "--min-bytes", "4", "--max-bytes", "2MiB",
                                            "--iters", "3", "--warmup", "0", "--floor-gbps", "12.5",
                                            "--allow-undecided", "--json", "out.json", "--svg", "out.svg"])
    assert (args.pair_bytes, args.min_bytes, args.max_bytes) == (64 << 10, 4, 2 << 20)
    assert (args.iters, args.warmup, args.floor_gbps, args.allow_undecided) == (3, 0, 12.5, True)
    assert (args.json, args.svg) == ("out.json", "out.svg")


def test_no_options_are_the_defaults():
    args = preflight_options.check_options([])
    assert (args.pair_bytes, args.min_bytes, args.max_bytes) == (4 << 20, 1 << 10, 4 << 20)
    assert (args.iters, args.warmup, args.floor_gbps, args.allow_undecided) == (5, 2, None, False)
    assert args.json is None and args.svg is None


def test_the_option_is_checked_with_the_others():
    assert preflight_options.check_options(["--allow-undecided"]).allow_undecided is True
    assert preflight_options.check_options([]).allow_undecided is False


def test_then_and_what_follows_it_are_left_out_of_the_check():
    args = preflight_options.check_options(["--iters", "2", "--then", "module", "pkg.train", "--iters", "0",
                                            "--bogus"])
    assert args.iters == 2  # the command's own --iters 0 and --bogus are not preflight's


def test_then_splits_preflight_options_from_the_command_exactly():
    own, then = preflight_options.split_then(["--iters", "2", "--then", "script", "t.py", "--then", "$(id)"])
    assert own == ["--iters", "2"] and then == ["script", "t.py", "--then", "$(id)"]
    assert preflight_options.split_then(["--iters", "2"]) == (["--iters", "2"], None)
    assert preflight_options.split_then(("--then", "program", "/bin/x")) == ([], ["program", "/bin/x"])


@pytest.mark.parametrize("argv, message", [
    (["--iters", "0"], PREFIX + BOUNDS),
    (["--warmup", "-1"], PREFIX + BOUNDS),
    (["--min-bytes", "2M", "--max-bytes", "1M"], PREFIX + BOUNDS),
    (["--floor-gbps", "0"], PREFIX + BOUNDS),
    (["--bogus"], PREFIX + "unrecognized arguments: --bogus"),
    (["train.py"], PREFIX + "unrecognized arguments: train.py"),
    (["--iters", "\u0663"], PREFIX + "argument --iters: '\u0663' is not a whole number; expected ASCII digits, "
                                     "e.g. 10"),
    (["--pair-bytes", "lots"], PREFIX + "argument --pair-bytes: 'lots' is not a size; expected e.g. 4, 1K, 64M "
                                        "(at least 4 bytes)"),
    (["--floor-gbps", "nan"], PREFIX + "argument --floor-gbps: 'nan' is not a bandwidth; expected GB/s as a "
                                       "number, e.g. 40 or 12.5"),
    (["--then", "shell", "id"], "preflight --then 'shell id'; expected --then script|module|program TARGET [ARGS...]"),
    (["--then", "script"], "preflight --then 'script'; expected --then script|module|program TARGET [ARGS...]"),
])
def test_bad_options_are_one_input_error_naming_the_option(argv, message):
    with pytest.raises(InputError) as err:
        preflight_options.check_options(argv)
    assert one_line(err.value) == str(err.value) == message


def test_the_parser_is_the_one_help_shows():
    parser = preflight_options.parser()
    assert parser.prog == "torchpod preflight" and "--then script|module|program TARGET" in parser.format_help()


def test_the_module_imports_none_of_preflights_measuring_code():
    # the build host checks the options: torch, the doctor, the facts and preflight's rule stay out
    tree = ast.parse(inspect.getsource(preflight_options))
    imported = {(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {(0, a.name) for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported == {(0, "__future__"), (0, "argparse"), (0, "math"), (0, "re"), (0, "typing"),
                        (1, "contract"), (1, "errors"), (1, "plan"), (1, "workload_options")}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(), st.sampled_from(["--then", "--iters", "--floor-gbps", "script", "-"])),
                max_size=6))
def test_any_words_are_options_or_one_line_of_bad_input(words):
    try:
        args = preflight_options.check_options(words)
    except InputError as exc:
        assert "\n" not in one_line(exc)
    else:
        assert isinstance(args, argparse.Namespace) and args.iters >= 1 and args.min_bytes <= args.max_bytes
