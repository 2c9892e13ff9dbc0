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

from paths import ROOT

RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "measurements.md"
REAL = m.load(RESULTS)


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert len(text.splitlines()) == 1 and text.isprintable(), repr(text)
    return text


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


def test_figures_come_from_the_json_not_from_the_renderer():
    results = copy.deepcopy(REAL)
    x86 = results["images.json"]["arches"]["x86_64"]
    x86["image_bytes"] = 2 * x86["payload_bytes"]
    results["toolkit_edit.json"]["cached_steps"] = 7
    results["slurm.json"]["median_s"] = {"sbatch": 6.0, "harness": 3.0}
    table = m.render(results)
    assert "= **2.000**" in table and "**7 of 10**" in table and "6.00 / 3.00 s = **2.00**" in table
    assert "= **2.000**" not in m.render(REAL)


def _row(table: str, start: str) -> str:
    (row,) = [line for line in table.splitlines() if line.startswith(f"| {start}")]
    return row


WARM = "warm rebuild after adding a file under `entrypoints/` only"
EDIT = "rebuild after adding a file under `entrypoints/` only"


def test_a_goal_missed_or_met_follows_the_figure():
    results = copy.deepcopy(REAL)
    assert "goal ≤ 20 s: missed by aarch64" in _row(m.render(results), WARM)
    assert "goal ≤ 20 s: met" in _row(m.render(results), EDIT)
    results["images.json"]["arches"]["aarch64"]["warm_rebuild_s"] = 5.0
    results["rebuild.json"]["arches"]["x86_64"]["after"]["launcher_edit_s"] = 20.5
    assert "goal ≤ 20 s: met" in _row(m.render(results), WARM)
    assert "goal ≤ 20 s: missed by x86_64" in _row(m.render(results), EDIT)


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_rebuild_figures_written_by_hand_are_the_jsons():
    # the README's tour and the prose of the page's Rebuilds section repeat figures of
    # rebuild.json and images.json: each one written there is the JSON's, to the tenth
    rebuild, images = REAL["rebuild.json"]["arches"], REAL["images.json"]["arches"]
    rebuilds = " ".join(_section(PAGE.read_text(encoding="utf-8"), "Rebuilds").split())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    before, after = ({a: rebuild[a][side]["launcher_edit_s"] for a in rebuild} for side in ("before", "after"))
    for arch in rebuild:
        assert f"{arch} {before[arch]:.1f} s before, {after[arch]:.1f} s after" in rebuilds, arch
    met = all(v <= m.GOAL_WARM_REBUILD_S for v in after.values())
    assert ("both arches meet the 20 s goal" in rebuilds) is met
    host = REAL["rebuild.json"]["host"]
    assert f"costs {after[host] - before[host]:.1f} s more than before" in rebuilds
    warm = {a: images[a]["warm_rebuild_s"] for a in images}
    assert f"x86_64 {warm['x86_64']:.1f} s, aarch64 {warm['aarch64']:.1f} s" in rebuilds
    full = {a: rebuild[a]["after"]["full_s"] for a in rebuild}
    assert (f"full: {full['x86_64']:.1f} s x86_64, {full['aarch64']:.1f} s aarch64; a launcher edit "
            f"{after['x86_64']:.1f} / {after['aarch64']:.1f} s") in readme


def _set(data, dotted, value):
    *parents, last = dotted.split(".")
    for part in parents:
        data = data[int(part)] if isinstance(data, list) else data[part]
    if value is _DELETE:
        del data[int(last) if isinstance(data, list) else last]
    elif isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


_DELETE = object()


@pytest.mark.parametrize("name, key, value, needle", [
    ("images.json", "arches.x86_64.cold_build_s", _DELETE, "arches.x86_64.cold_build_s is missing"),
    ("images.json", "arches.x86_64.cold_build_s", "78.6",
     "arches.x86_64.cold_build_s='78.6'; expected a positive number"),
    ("images.json", "arches.x86_64.cold_build_s", True, "arches.x86_64.cold_build_s=True; expected a positive number"),
    ("images.json", "arches.x86_64.cold_build_s", -1, "arches.x86_64.cold_build_s=-1; expected a positive number"),
    ("images.json", "arches.x86_64.payload_bytes", 0, "arches.x86_64.payload_bytes=0; expected a positive number"),
    ("images.json", "arches.aarch64", [1, 2], "arches.aarch64=[1, 2]; expected a mapping"),
    ("images.json", "arches", {"x86_64": {}}, "expected the native arch and at least one other"),
    ("images.json", "arches", {"x86\n64": {}}, "arches='x86\\n64'; expected arch names"),
    ("images.json", "rounds", 1.5, "rounds=1.5; expected a positive integer"),
    ("images.json", "host", None, "host=None; expected 1-120 characters"),
    ("toolkit_edit.json", "edited", "a.py | b\n", "edited='a.py | b\\n'; expected 1-120 characters"),
    ("toolkit_edit.json", "layers_identical", "yes", "layers_identical='yes'; expected true or false"),
    ("rendezvous.json", "summary", [], "summary=[]; expected a non-empty list"),
    ("rendezvous.json", "runs.0", "x", "runs.0='x'; expected a mapping"),
    ("rendezvous.json", "runs.0.seconds", None, "runs.0.seconds=None; expected a positive number"),
    ("allreduce.json", "median", {}, "median.busbw_gbps is missing"),
    ("allreduce.json", "runs.0.rows.0.bytes", 1e3, "runs.0.rows.0.bytes=1000.0; expected a positive integer"),
    ("netplugin.json", "sizes.1.variant", "", "sizes.1.variant=''; expected 1-120 characters"),
    ("netplugin.json", "median_s", {"x86_64": 8.4}, "median_s.aarch64 is missing"),
    ("payload.json", "same_tree", "yes", "same_tree='yes'; expected true or false"),
    ("payload.json", "median_s", {"before": 48.0}, "median_s.after is missing"),
    ("payload.json", "median_s.before", 0, "median_s.before=0; expected a positive number"),
    ("payload.json", "before", "HEAD; rm -rf /", "before='HEAD; rm -rf /'; expected 1-120 characters"),
    ("payload.json", "cores", 4096, "cores=4096; expected a positive integer"),
    ("payload.json", "image", "pytorch | x", "image='pytorch | x'; expected 1-120 characters"),
    ("slurm.json", "rows", [{"how": "harness", "seconds": 3.0}], "expected at least one row with how='sbatch'"),
    ("hostile_reads.json", "rows.4.old", {"cpu_s": None}, "rows.4.old.note is missing"),
    ("preflight.json", "rows.2.slow_nodes", [4, "5 | x"], "rows.2.slow_nodes=[4, '5 | x']; expected node indices"),
    ("preflight.json", "rows.2.slow_nodes", [4, 8], "expected node indices from 0 to 7"),
    ("preflight.json", "rows.2.slow_median_s", -1, "rows.2.slow_median_s=-1; expected a positive number"),
    ("hostile_reads.json", "rows.0.new.peak_rss_mib", "x" * 500, "rows.0.new.peak_rss_mib='xxxxx"),
    ("first_step.json", "marks", ["step | x"], "marks=['step | x']; expected mark names"),
    ("first_step.json", "arms", [], "arms=[]; expected a non-empty list"),
    ("first_step.json", "nodes", None, "nodes=None; expected a non-empty list"),
    ("first_step.json", "nodes.1", "4\n| x", "nodes.1='4\\n| x'; expected a positive integer"),
    ("first_step.json", "medians.jobset", {"other": {}}, "expected results of the arms"),
    ("first_step.json", "medians.jobset.now.2.whole", 0, "medians.jobset.now.2.whole=0; expected a positive number"),
    ("first_step.json", "medians.jobset.now.2.worker→imported", -1.5, "expected seconds, 0 or more"),
    ("first_step.json", "medians.jobset.now.2.bound→started", float("nan"), "expected seconds, 0 or more"),
])
def test_a_result_that_is_not_what_the_bench_writes_is_one_line(name, key, value, needle):
    results = copy.deepcopy(REAL)
    _set(results[name], key, value)
    with pytest.raises(InputError) as info:
        m.render(results)
    text = one_line(info.value)
    assert text.startswith(f"bench/results/{name}: ") and needle in text, text
    assert len(text) < 400


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
