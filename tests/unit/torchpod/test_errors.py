"""torchpod.errors: one family, and its exit codes as `torchpod` returns them: 2 for bad input,
1 for a runtime failure, one line on stderr whatever the message holds."""

from __future__ import annotations

import pytest

import torchpod.cli as cli
from torchpod.errors import InputError, RuntimeFailure, TorchpodError


@pytest.mark.parametrize("error, code", [(InputError, 2), (RuntimeFailure, 1), (TorchpodError, 2)])
def test_main_exits_with_the_errors_code_and_prints_one_line(monkeypatch, capsys, error, code):
    def fail(args, env):
        raise error("PET_NNODES='x'\nis not a node count;\r\n  expected N or MIN:MAX")

    monkeypatch.setattr(cli, "_dispatch", fail)
    assert cli.main(["plan"], {}) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "torchpod: error: PET_NNODES='x' is not a node count; expected N or MIN:MAX\n"


def test_one_family_that_callers_catch_whole():
    assert issubclass(InputError, TorchpodError) and issubclass(RuntimeFailure, TorchpodError)
    assert not issubclass(RuntimeFailure, InputError) and not issubclass(InputError, RuntimeFailure)


def test_a_bug_is_not_turned_into_an_exit_code(monkeypatch):
    def broken(args, env):
        raise KeyError("a bug, not a message for people")

    monkeypatch.setattr(cli, "_dispatch", broken)
    with pytest.raises(KeyError):
        cli.main(["plan"], {})


def test_one_line_keeps_a_short_message_and_bounds_a_long_one_keeping_its_start_and_end():
    from torchpod.errors import one_line

    assert one_line(InputError("a\nb\r\n  c\u2028d")) == "a b c d"
    long = InputError("MASTER_ADDR='" + "x" * 10_000_000 + "' is not a host; expected HOST or HOST:PORT")
    text = one_line(long)
    assert len(text) < 2100 and "\n" not in text
    assert text.startswith("MASTER_ADDR='xxx") and text.endswith("is not a host; expected HOST or HOST:PORT")
    assert "characters left out" in text


def test_a_megabyte_value_is_refused_in_a_bounded_line(capsys):
    env = {"MASTER_ADDR": "h" * 1_000_000, "MASTER_PORT": "1", "WORLD_SIZE": "2", "RANK": "0"}
    assert cli.main(["plan"], env) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 2200 and err.startswith("torchpod: error: ")
