"""torchpod.torchrun_flags: a torchpod command line split as torchrun splits its own:
resolved options apart, every other torchrun option passed through in one canonical token,
the script and its arguments untouched, and anything else refused in one line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.torchrun_flags import RESOLVED_OPTIONS, TORCHRUN_OPTIONS, Invocation, spelling, split_command_line


def test_resolved_options_are_taken_in_every_spelling_and_the_rest_pass_through():
    inv = split_command_line(["--nnodes", "2", "--nproc_per_node=4", "--standalone", "-r3", "-t", "0:1",
                              "--log_dir", "-x", "--no-python", "train.py", "--nnodes", "9", "--", "-r"])
    assert inv == Invocation(options={"nnodes": "2", "nproc_per_node": "4", "standalone": "true"},
                             passthrough=("--redirects=3", "--tee=0:1", "--log-dir=-x", "--no-python"),
                             script="train.py", script_args=("--nnodes", "9", "--", "-r"))


def test_double_dash_ends_the_options_and_own_options_are_set_apart():
    inv = split_command_line(["--format", "json", "--max-restarts=2", "--", "-m.py", "a"], own_options=("--format",))
    assert inv.own == {"--format": "json"} and inv.options == {"max_restarts": "2"}
    assert inv.script == "-m.py" and inv.script_args == ("a",)
    assert split_command_line([]) == Invocation() and split_command_line(["-"]).script == "-"


@pytest.mark.parametrize("argv, message", [
    (["--nodes=2", "x.py"], "unknown option '--nodes=2' before the script"),
    (["--lr", "1", "x.py"], "unknown option '--lr' before the script"),
    (["--standalone=yes", "x.py"], "torchrun option --standalone takes no value, got '--standalone=yes'"),
    (["x.py", "--nnodes"], None),  # after the script: the script's own
    (["--nnodes"], "torchrun option --nnodes needs a value; e.g. --nnodes=VALUE"),
    (["--format"], "option --format needs a value; e.g. --format json"),
])
def test_what_torchrun_would_refuse_is_one_line(argv, message):
    if message is None:
        assert split_command_line(argv, own_options=("--format",)).script_args == ("--nnodes",)
        return
    with pytest.raises(InputError) as info:
        split_command_line(argv, own_options=("--format",))
    assert str(info.value).startswith(message)


def test_every_option_has_a_dashed_canonical_spelling_and_resolved_ones_are_torchruns():
    assert RESOLVED_OPTIONS <= set(TORCHRUN_OPTIONS)
    for dest, (spellings, _) in TORCHRUN_OPTIONS.items():
        assert spelling(dest) in spellings and spelling(dest).startswith("--")


TOKENS = st.one_of(st.sampled_from(["--", "-", "--nnodes", "--nnodes=", "-r", "-r3", "--standalone", "--format",
                                    "--log-dir", "-m", "x.py", "=", "-\u00e9"]), st.text(max_size=12))


@settings(deadline=None, max_examples=300)
@given(st.lists(TOKENS, max_size=8))
def test_any_command_line_splits_or_is_one_line_and_never_loses_the_script(argv):
    try:
        inv = split_command_line(argv, own_options=("--format",))
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    # the script and everything after it come through unchanged
    if inv.script is not None:
        assert list(argv[len(argv) - len(inv.script_args) - 1:]) == [inv.script, *inv.script_args]
    # every passthrough token is one canonical option, with its value in the same token
    for token in inv.passthrough:
        name, eq, _ = token.partition("=")
        dest = next(d for d in TORCHRUN_OPTIONS if spelling(d) == name)
        assert dest not in RESOLVED_OPTIONS and bool(eq) == TORCHRUN_OPTIONS[dest][1]
