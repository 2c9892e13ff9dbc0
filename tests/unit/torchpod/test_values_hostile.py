"""torchpod.values, hostile: integers are ASCII digits only, everywhere a count or an index is
read (any text, Unicode digits included); GPU lists count ASCII indices only."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hostile_reads import (
    DIGITS,
    TRICKY,
)


@pytest.mark.parametrize("text, number", [("7", 7), (" +7 ", 7), ("007", 7), ("\u00b2", None), ("\u0663", None),
                                          ("\uff17", None), ("7\u00b2", None), ("0x7", None), ("-7", None),
                                          ("", None), ("9" * 19, None), ("9" * 5000, None)])
def test_integers_are_ascii_digits_only(text, number):
    from torchpod.errors import InputError
    from torchpod.values import NodeCount, ascii_int, parse_int

    assert ascii_int(text) == number
    if number is None:
        with pytest.raises(InputError, match="expected an integer"):
            parse_int("V", text)
        with pytest.raises(InputError, match="is not a node count"):
            NodeCount.parse("V", f"{text}:{text}")
    else:
        assert parse_int("V", text) == number
        assert NodeCount.parse("V", f"1:{text.replace('+', '')}") == NodeCount(1, number)


@settings(deadline=None, max_examples=300)
@given(st.one_of(st.text(), st.text(alphabet=TRICKY, max_size=8), DIGITS))
def test_an_integer_parse_accepts_exactly_ascii_digits(text):
    from torchpod.errors import InputError
    from torchpod.values import parse_int

    wanted = re.fullmatch(r"\+?[0-9]{1,18}", text.strip(), re.ASCII)
    try:
        got = parse_int("V", text)
    except InputError as exc:
        assert not wanted and "\n" not in str(exc).replace(repr(text), "")
    else:
        assert wanted and got == int(text.strip())


def test_a_gpu_list_counts_ascii_indices_only():
    from torchpod.gpus import visible_count

    assert visible_count("0,1,\u0663") == 2 and visible_count("\u00b2") == 0 and visible_count("GPU-ab,3") == 2
