"""torchpod_toolkit.measurement_builds: the rows of the image build's and the developer loop's
benches show the JSON's figures and judge them against their goals, and a result file that is
not what the bench writes is one line."""

from __future__ import annotations

import copy

import pytest

from torchpod_toolkit import measurement_builds as builds
from torchpod_toolkit import measurements as m

from measurement_cases import DELETE, PAGE, REAL, ROOT, row, spoiled_message


def test_figures_come_from_the_json_not_from_the_renderer():
    results = copy.deepcopy(REAL)
    x86 = results["images.json"]["arches"]["x86_64"]
    x86["image_bytes"] = 2 * x86["payload_bytes"]
    results["toolkit_edit.json"]["cached_steps"] = 7
    table = m.render(results)
    assert "= **2.000**" in table and "**7 of 10**" in table
    assert "= **2.000**" not in m.render(REAL)


WARM = "warm rebuild after adding a file under `entrypoints/` only"
EDIT = "rebuild after adding a file under `entrypoints/` only"


def test_a_goal_missed_or_met_follows_the_figure():
    results = copy.deepcopy(REAL)
    assert "goal ≤ 20 s: missed by aarch64" in row(m.render(results), WARM)
    assert "goal ≤ 20 s: met" in row(m.render(results), EDIT)
    results["images.json"]["arches"]["aarch64"]["warm_rebuild_s"] = 5.0
    results["rebuild.json"]["arches"]["x86_64"]["after"]["launcher_edit_s"] = 20.5
    assert "goal ≤ 20 s: met" in row(m.render(results), WARM)
    assert "goal ≤ 20 s: missed by x86_64" in row(m.render(results), EDIT)


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
    met = all(v <= builds.GOAL_WARM_REBUILD_S for v in after.values())
    assert ("both arches meet the 20 s goal" in rebuilds) is met
    host = REAL["rebuild.json"]["host"]
    assert f"costs {after[host] - before[host]:.1f} s more than before" in rebuilds
    warm = {a: images[a]["warm_rebuild_s"] for a in images}
    assert f"x86_64 {warm['x86_64']:.1f} s, aarch64 {warm['aarch64']:.1f} s" in rebuilds
    full = {a: rebuild[a]["after"]["full_s"] for a in rebuild}
    assert (f"full: {full['x86_64']:.1f} s x86_64, {full['aarch64']:.1f} s aarch64; a launcher edit "
            f"{after['x86_64']:.1f} / {after['aarch64']:.1f} s") in readme



@pytest.mark.parametrize("name, key, value, needle", [
    ("images.json", "arches.x86_64.cold_build_s", DELETE, "arches.x86_64.cold_build_s is missing"),
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
    ("netplugin.json", "sizes.1.variant", "", "sizes.1.variant=''; expected 1-120 characters"),
    ("netplugin.json", "median_s", {"x86_64": 8.4}, "median_s.aarch64 is missing"),
    ("payload.json", "same_tree", "yes", "same_tree='yes'; expected true or false"),
    ("payload.json", "median_s", {"before": 48.0}, "median_s.after is missing"),
    ("payload.json", "median_s.before", 0, "median_s.before=0; expected a positive number"),
    ("payload.json", "before", "HEAD; rm -rf /", "before='HEAD; rm -rf /'; expected 1-120 characters"),
    ("payload.json", "cores", 4096, "cores=4096; expected a positive integer"),
    ("payload.json", "image", "pytorch | x", "image='pytorch | x'; expected 1-120 characters"),
])
def test_a_result_that_is_not_what_the_bench_writes_is_one_line(name, key, value, needle):
    assert needle in spoiled_message(name, key, value)


LAYERS = "image layers of `"


def test_the_layers_row_shows_each_formats_figures_and_the_choice_the_json_makes():
    results = copy.deepcopy(REAL)
    layers = results["layers.json"]
    layers["median_pull_s"] = {"gzip": 100.0, "zstd": 50.0}
    layers["formats"]["gzip"]["compressed_bytes"] = 2e9
    layers["formats"]["zstd"]["compressed_bytes"] = 1.5e9
    layers["choice"].update(default="gzip", variant="zstd")
    layers["runtimes"] = [{"runtime": "podman 4.3.1", "reads_zstd": True, "checked": "measured here"},
                          {"runtime": "Docker Engine 20.10.24", "reads_zstd": False, "checked": "measured here"},
                          {"runtime": "enroot", "reads_zstd": None, "checked": "not checked here"},
                          {"runtime": "Apptainer 1.3 and earlier", "reads_zstd": False, "checked": "source read",
                           "source": "umoci v0.4.7"}]
    line = row(m.render(results), LAYERS)
    assert "100.0 / 50.0 s = **0.50**" in line and "2.00 / 1.50 GB = **0.750**" in line
    assert ("podman 4.3.1 **yes**, Docker Engine 20.10.24 **no**, enroot not checked here, "
            "Apptainer 1.3 and earlier **no** (its source);") in line
    assert line.endswith("default **gzip**, zstd as a variant | `python bench/layers.py --repeats "
                         f"{layers['repeats']}` |")
    layers["choice"].update(default="zstd", variant=None)
    assert "default **zstd** |" in row(m.render(results), LAYERS)


def test_the_layers_choice_written_on_the_page_is_the_jsons():
    layers = REAL["layers.json"]
    prose = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert f"`{layers['choice']['default']}` stays the default" in prose or \
        f"`{layers['choice']['default']}` becomes the default" in prose
    for fmt in ("gzip", "zstd"):
        assert f"{fmt} {layers['median_pull_s'][fmt]:.1f} s" in prose, fmt


@pytest.mark.parametrize("key, value, needle", [
    ("median_pull_s.zstd", DELETE, "median_pull_s.zstd is missing"),
    ("median_pull_s.gzip", 0, "median_pull_s.gzip=0; expected a positive number"),
    ("spread_pull_s.gzip", -1, "spread_pull_s.gzip=-1; expected seconds, 0 or more"),
    ("spread_pull_s.zstd", float("inf"), "spread_pull_s.zstd=inf; expected seconds, 0 or more"),
    ("spread_pull_s", {"gzip": 1.0}, "spread_pull_s.zstd is missing"),
    ("formats.zstd.compressed_bytes", "2e9", "formats.zstd.compressed_bytes='2e9'; expected a positive number"),
    ("formats.gzip.launcher_bytes", None, "formats.gzip.launcher_bytes=None; expected a positive number"),
    ("choice.default", "brotli", "choice.default='brotli'; expected gzip or zstd"),
    ("choice.default", ["gzip"], "choice.default=['gzip']; expected gzip or zstd"),
    ("choice.variant", "brotli", "choice.variant='brotli'; expected the other format, or null"),
    ("choice.variant", "gzip", "choice.variant='gzip'; expected the other format, or null"),  # the default
    ("repeats", 21, "repeats=21; expected a positive integer"),
    ("image", "pytorch | x", "image='pytorch | x'; expected 1-120 characters"),
    ("store.storage_driver", "overlay\n", "store.storage_driver='overlay\\n'; expected 1-120 characters"),
    ("runtimes", [], "runtimes=[]; expected a non-empty list"),
    ("runtimes.0", "podman", "runtimes.0='podman'; expected a mapping"),
    ("runtimes.0.reads_zstd", 1, "runtimes.0.reads_zstd=1; expected true, false or null"),
    ("runtimes.1.runtime", "Docker | 20", "runtimes.1.runtime='Docker | 20'; expected 1-120 characters"),
    ("runtimes.0.checked", DELETE, "runtimes.0.checked is missing"),
])
def test_a_layers_result_that_is_not_what_the_bench_writes_is_one_line(key, value, needle):
    assert needle in spoiled_message("layers.json", key, value)
