"""torchpod.words: counts agree with their nouns, and a misspelt word gets the closest
known one; a sweep over the launcher's messages finds no count left to say "1 hosts"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchpod
from torchpod.words import did_you_mean, plural

LAUNCHER = Path(torchpod.__file__).parent


@pytest.mark.parametrize("count, noun, nouns, text", [
    (1, "host", None, "1 host"), (2, "host", None, "2 hosts"), (0, "host", None, "0 hosts"),
    (1, "address", "addresses", "1 address"), (3, "address", "addresses", "3 addresses"),
])
def test_the_noun_agrees_with_the_count(count, noun, nouns, text):
    assert plural(count, noun, nouns) == text


@pytest.mark.parametrize("word, known, hint", [
    ("--nnode", ["--nnodes", "--node-rank", "--nproc-per-node"], "did you mean --nnodes?"),
    ("--rdzv-endpont", ["--rdzv-endpoint", "--rdzv-backend"], "did you mean --rdzv-endpoint?"),
    ("allreduc", ["allreduce"], "did you mean allreduce?"),
    ("--zzz", ["--nnodes", "--format"], ""),
    ("", ["--nnodes"], ""),
])
def test_the_closest_known_word_or_nothing(word, known, hint):
    assert did_you_mean(word, known) == hint


@given(st.text(), st.lists(st.text(min_size=1), max_size=5))
def test_a_suggestion_is_one_of_the_known_words(word, known):
    hint = did_you_mean(word, known)
    assert hint == "" or hint[len("did you mean "):-1] in known


# Nouns a message counts: a count written before one of them goes through plural().
COUNTED = ("hosts", "distinct hosts", "nodes", "GPUs", "addresses", "processes", "launchers", "tasks", "pods", "bytes",
           "characters", "Jobs", "ranks", "device nodes", "rounds", "pairs")


def counted_without_plural(source: str) -> list[str]:
    """f-string parts that write ``{expression} <plural noun>`` with an expression that can
    be 1; constants in capitals (MAX_HOSTS) never are, and a value quoted as the user wrote
    it (``WORLD_SIZE={world!r} processes``) is their text, not a count."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, after in zip(node.values, node.values[1:]):
            if not (isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant)) \
                    or value.conversion == ord("r"):
                continue
            text = str(after.value)
            if any(text.startswith(f" {noun}") and not text[len(noun) + 1:][:1].isalpha() for noun in COUNTED):
                expr = ast.unparse(value.value)
                if not expr.isupper():
                    found.append(f"{{{expr}}}{text.split(',')[0][:20]}")
    return found


def test_no_message_writes_a_count_the_noun_may_not_agree_with():
    found = {str(p.relative_to(LAUNCHER)): counted_without_plural(p.read_text())
             for p in sorted(LAUNCHER.rglob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_sweep_sees_a_bare_count():
    assert counted_without_plural('f"the {len(hosts)} hosts of {where}"') == ["{len(hosts)} hosts of "]
    assert counted_without_plural('f"{plural(len(hosts), \'host\')} of it"') == []
    assert counted_without_plural('f"more than the {MAX_HOSTS} hosts"') == []
    assert counted_without_plural('f"WORLD_SIZE={world!r} processes"') == []
    assert counted_without_plural('f"{n} distinct hosts"') == ["{n} distinct hosts"]
