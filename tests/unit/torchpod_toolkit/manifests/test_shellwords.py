"""torchpod_toolkit.manifests.shellwords: a value is one shell word bash reads back exactly,
a control character never starts a new line, only torchpod's own expansions go unquoted,
and a job name that is not a bare word never reaches a script."""

from __future__ import annotations

import pytest

from torchpod_toolkit.manifests import shellwords
from torchpod_toolkit.manifests.spec import JobSpec, check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


@pytest.mark.parametrize("word, quoted", [
    ("train.py", "train.py"),
    ("a b", "'a b'"),
    ("it's", "'it'\"'\"'s'"),
    ("", "''"),
    ("a\nb", "$'a\\nb'"),
    ("tab\there", "$'tab\\there'"),
    ("caf\u00e9", "'caf\u00e9'"),
])
def test_a_word_is_quoted_the_way_bash_reads_it_back(word, quoted):
    assert shellwords.quote(word) == quoted


def test_ascii_only_escapes_everything_outside_printable_ascii():
    assert shellwords.quote("caf\u00e9\u2028", ascii_only=True) == "$'caf\\u00e9\\u2028'"
    assert shellwords.quote("\U0001f600", ascii_only=True) == "$'\\U0001f600'"


def test_a_command_line_quotes_every_word():
    assert shellwords.line(["echo", "a b", shellwords.Sh('"$SIF"')]) == "echo 'a b' \"$SIF\""


def test_the_job_name_is_written_bare():
    assert shellwords.job_name(check(JobSpec("slurm", 2, IMAGE, ("t.py",), name="run-1"))) == "run-1"


def test_a_job_name_that_is_no_bare_word_is_refused():
    spec = JobSpec("slurm", 2, IMAGE, ("t.py",), name="a b")  # unchecked: spec.check would refuse it first
    with pytest.raises(ValueError, match="job name 'a b' reached hpc.py unchecked"):
        shellwords.job_name(spec)


def test_only_torchpods_own_expansions_go_unquoted():
    for text in shellwords.EXPANSIONS:
        assert shellwords.line([shellwords.Sh(text)]) == text
    for text in ("$(touch P)", '"$HOME"', "/srv/:rocm/lib", '"$PWD"; touch P'):
        with pytest.raises(ValueError, match="only torchpod's own expansions"):
            shellwords.Sh(text)


def test_a_word_joined_from_text_and_an_expansion_quotes_the_text():
    word = shellwords.Cat("--x=", shellwords.Sh('"$SIF"'), ",a b;$(c)")
    assert shellwords.word(word) == "--x=\"$SIF\"',a b;$(c)'"
