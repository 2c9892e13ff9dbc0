"""torchpod_toolkit.measurements: the table in docs/measurements.md is what bench/results/*.json
renders, and a result file that is not what a bench writes is one line, never a traceback."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit import measurements as m

from measurement_cases import PAGE, REAL, RESULTS, one_line


def test_the_committed_table_is_what_the_json_renders():
    doc = PAGE.read_text(encoding="utf-8")
    assert m.splice(doc, m.render(REAL)) == doc, "docs/measurements.md is stale: run `invoke measurements`"


def test_every_result_file_has_a_row_and_every_row_a_file():
    assert set(REAL) == set(m.ROWS)
    assert sorted(p.name for p in RESULTS.glob("*.json")) == sorted(m.ROWS)


def test_the_table_has_one_markdown_row_per_figure():
    lines = m.render(REAL).splitlines()
    assert lines[:2] == ["| what | figure | command |", "|---|---|---|"]
    assert len(lines) == 2 + 3 + 3 + 2 + len(m.ROWS) - 3  # images 3, rebuild 3, loop 2, others 1
    assert all(line.startswith("| ") and line.endswith(" |") and line.count(" | ") == 2 for line in lines[2:])


def test_an_unknown_or_missing_result_file_is_one_line():
    with pytest.raises(InputError, match=r"bench/results/new\.json: no row renders it"):
        m.render({**REAL, "new.json": {}})
    partial = dict(REAL)
    del partial["slurm.json"]
    with pytest.raises(InputError, match=r"bench/results/slurm\.json: missing"):
        m.render(partial)


def _results_dir(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for name, data in REAL.items():
        (out / name).write_text(json.dumps(data))
    return out


@pytest.mark.parametrize("content, needle", [
    (b'{"rounds": NaN}', "not valid JSON (NaN is not a number JSON allows)"),
    (b'{"rounds": Infinity}', "not valid JSON (Infinity is not a number JSON allows)"),
    (b'{"rounds": 1', "not valid JSON"),
    (b'{"host": "\xff"}', "not UTF-8 text (first at byte 10); expected a bench's JSON result"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    (b" " * (m.MAX_FILE_BYTES + 1), "over the 1 MiB cap for this file; expected a bench's JSON result"),
])
def test_a_result_file_that_cannot_be_parsed_is_one_line(tmp_path, content, needle):
    results = _results_dir(tmp_path)
    (results / "images.json").write_bytes(content)
    with pytest.raises(InputError) as info:
        m.load(results)
    text = one_line(info.value)
    assert text.startswith("bench/results/images.json") and needle in text, text


def test_a_result_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path):
    results = _results_dir(tmp_path)
    (results / "images.json").unlink()
    os.mkfifo(results / "images.json")  # a reader that opened it blocking would hang here
    with pytest.raises(InputError, match=r"images\.json is a FIFO \(named pipe\); expected a regular file"):
        m.load(results)
    (results / "images.json").unlink()
    (results / "images.json").mkdir()
    with pytest.raises(InputError, match=r"bench/results/images\.json is a directory; expected a regular file"):
        m.load(results)


@pytest.mark.parametrize("doc, needle", [
    ("no markers\n", "appears 0 times; expected once"),
    (f"{m.BEGIN}\n{m.BEGIN}\n{m.END}\n", "appears 2 times"),
    (f"{m.END}\n{m.BEGIN}\n", "comes before"),
])
def test_a_page_without_one_pair_of_markers_is_one_line(doc, needle):
    with pytest.raises(InputError) as info:
        m.splice(doc, "| t |\n", "page.md")
    assert needle in one_line(info.value)


def test_splice_keeps_everything_outside_the_markers():
    doc = f"head\n{m.BEGIN}\nold table\n{m.END}\ntail\n"
    assert m.splice(doc, "| new |\n") == f"head\n{m.BEGIN}\n| new |\n{m.END}\ntail\n"


def test_update_writes_the_table_keeps_the_mode_and_check_refuses_a_stale_page(tmp_path):
    page = tmp_path / "measurements.md"
    page.write_text(f"# M\n\n{m.BEGIN}\nstale\n{m.END}\n\nnotes\n", encoding="utf-8")
    page.chmod(0o644)
    with pytest.raises(RuntimeFailure, match="run `invoke measurements`"):
        m.update(page, RESULTS, check=True)
    assert "stale" in page.read_text()
    assert m.update(page, RESULTS) is True
    assert stat.S_IMODE(page.stat().st_mode) == 0o644
    assert m.render(REAL) in page.read_text() and page.read_text().endswith("\n\nnotes\n")
    assert m.update(page, RESULTS, check=True) is False and m.update(page, RESULTS) is False
    assert [p.name for p in tmp_path.iterdir()] == ["measurements.md"]  # no temporary file left


def test_update_leaves_the_page_alone_when_a_result_is_bad(tmp_path):
    results = _results_dir(tmp_path)
    (results / "slurm.json").write_text('{"repeats": 5}')
    page = tmp_path / "measurements.md"
    before = f"{m.BEGIN}\nold\n{m.END}\n"
    page.write_text(before)
    with pytest.raises(InputError, match="slurm.json: median_s is missing"):
        m.update(page, results)
    assert page.read_text() == before


# Any JSON value, text from all of Unicode (control characters and surrogates included).
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec=None), max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _paths(data, prefix=()):
    yield prefix
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield from _paths(value, (*prefix, key))


_ALL_PATHS = [(name, path) for name in sorted(REAL) for path in _paths(REAL[name]) if path]


@settings(deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_ALL_PATHS), _JSON)
def test_any_value_anywhere_renders_a_well_formed_table_or_fails_in_one_line(where, value):
    name, path = where
    results = copy.deepcopy(REAL)
    node = results[name]
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    try:
        table = m.render(results)
    except InputError as exc:
        assert one_line(exc).startswith(f"bench/results/{name}: ")
        return
    lines = table.splitlines()
    assert len(lines) == 2 + 3 + 3 + 2 + len(m.ROWS) - 3 and table.endswith("\n")
    for line in lines[2:]:
        assert line.startswith("| ") and line.endswith(" |") and line.count(" | ") == 2, line
        assert line.isprintable(), line
