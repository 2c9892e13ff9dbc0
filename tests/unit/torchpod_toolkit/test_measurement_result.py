"""torchpod_toolkit.measurement_result: each accessor of a bench result returns the value it
checked, and a value that is missing, of the wrong type or would break a table cell is one
line naming the file, the dotted key, the value seen and the form expected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.measurement_result import CELL_TEXT, Result, full_key, gb

from measurement_cases import one_line

DATA = {"rounds": 3, "host": "x86_64", "edit_only": False, "median": {"s": 1.5},
        "runs": [{"seconds": 2.0}], "arches": {"x86_64": {}}}


def test_each_accessor_returns_the_value_at_its_dotted_key():
    r = Result("images.json", DATA)
    assert r.count("rounds") == 3 and r.text("host") == "x86_64" and r.flag("edit_only") is False
    assert r.number("median.s") == 1.5 and r.number("runs.0.seconds") == 2.0
    assert r.number("s", DATA["median"], "median") == 1.5
    assert r.items("arches") == [("x86_64", {})] and r.items("runs", list) == [{"seconds": 2.0}]
    assert r.mapping(DATA["median"], "median") == {"s": 1.5}


@pytest.mark.parametrize("call, message", [
    (lambda r: r.get("runs.1.seconds"), "bench/results/images.json: runs.1 is missing; expected the key"),
    (lambda r: r.number("rounds.x"), "bench/results/images.json: rounds.x is missing"),
    (lambda r: r.number("host"), "host='x86_64'; expected a positive number"),
    (lambda r: r.number("s", {"s": float("inf")}, "median"), "median.s=inf; expected a positive number"),
    (lambda r: r.count("median.s"), "median.s=1.5; expected a positive integer"),
    (lambda r: r.count("rounds", limit=3), "rounds=3; expected a positive integer"),
    (lambda r: r.count("edit_only"), "edit_only=False; expected a positive integer"),
    (lambda r: r.text("rounds"), "rounds=3; expected 1-120 characters"),
    (lambda r: r.flag("rounds"), "rounds=3; expected true or false"),
    (lambda r: r.items("runs"), "runs=[{'seconds': 2.0}]; expected a non-empty mapping"),
    (lambda r: r.items("arches", list), "arches={'x86_64': {}}; expected a non-empty list"),
    (lambda r: r.mapping([1], "runs"), "runs=[1]; expected a mapping"),
])
def test_a_value_not_of_its_form_is_one_line_naming_file_key_and_form(call, message):
    with pytest.raises(InputError) as info:
        call(Result("images.json", DATA))
    text = one_line(info.value)
    assert text.startswith("bench/results/images.json: ") and message in text, text


def test_a_long_value_is_shown_cut_short():
    with pytest.raises(InputError) as info:
        Result("kube.json", {"go": "x" * 500}).number("go")
    assert "go='xxxx" in str(info.value) and "...; expected a positive number" in str(info.value)
    assert len(str(info.value)) < 200


@given(st.text(max_size=130))
def test_a_cell_text_never_breaks_the_markdown_table(text):
    if CELL_TEXT.fullmatch(text):
        assert "|" not in text and "\n" not in text and text.isprintable()


def test_keys_and_gigabytes_as_the_rows_show_them():
    assert full_key("seconds", "runs.0") == "runs.0.seconds" and full_key("seconds", "") == "seconds"
    assert gb(1_234_567_890) == "1.23"


def test_rows_are_each_mapping_with_its_path_and_anything_else_is_named():
    assert Result("x.json", {"rows": [{"a": 1}, {"b": 2}]}).rows() == [("rows.0", {"a": 1}), ("rows.1", {"b": 2})]
    assert Result("x.json", {"runs": [{"a": 1}]}).rows("runs") == [("runs.0", {"a": 1})]
    for data, key in (({"rows": [{"a": 1}, 7]}, "rows.1"), ({"rows": []}, "rows"), ({}, "rows")):
        with pytest.raises(InputError) as info:
            Result("x.json", data).rows()
        assert key in str(info.value) and "\n" not in str(info.value)
