"""The rows of the measurements table for the benches of the image build and the developer's
loop: image size and build times (bench/images.py), a toolkit edit (bench/toolkit_edit.py),
gzip against zstd layers (bench/layers.py), the net plugin variants (bench/netplugin.py), the
payload install (bench/payload.py), locked rebuilds (bench/rebuild.py) and the first command
and CI from a fresh clone (bench/loop.py).

Each function takes one result file (a measurement_result.Result) and returns its rows,
(what, figure, command); measurements.ROWS puts them in the table's order. The goals shown
beside the figures are here, where the rows judge them.
"""

from __future__ import annotations

import math
import re

from .measurement_result import CELL_TEXT, Result, Row, gb

# Goals the project set itself (issue text), shown beside the figures they judge.
GOAL_SIZE_RATIO = 1.05
GOAL_CROSS_BUILD_RATIO = 1.5
GOAL_WARM_REBUILD_S = 20.0


def images(r: Result) -> list[Row]:
    host = r.text("host")
    arches = sorted(r.items("arches"), key=lambda kv: kv[0] != host)  # the native arch first
    for name, value in arches:
        if not re.fullmatch(r"[a-z0-9_]{1,16}", name):  # checked first: it becomes part of every key shown
            raise r.bad("arches", name, "arch names such as x86_64 and aarch64")
        r.mapping(value, f"arches.{name}")
    if len(arches) < 2:
        raise r.bad("arches", sorted(dict(arches)), "the native arch and at least one other (the ratio's)")
    cmd = f"`python bench/images.py --rounds {r.count('rounds')}`"

    def n(arch: str, key: str) -> float:
        return r.number(key, dict(arches)[arch], f"arches.{arch}")

    sizes = "; ".join(
        f"{a} {gb(n(a, 'image_bytes'))} / {gb(n(a, 'payload_bytes'))} GB = "
        f"**{n(a, 'image_bytes') / n(a, 'payload_bytes'):.3f}**" for a, _ in arches)
    native, *cross = [a for a, _ in arches]
    builds = " / ".join(f"{n(a, 'cold_build_s'):.1f} s" for a, _ in arches)
    ratios = ", ".join(f"**{n(a, 'cold_build_s') / n(native, 'cold_build_s'):.2f}×**" for a in cross)
    warm = ", ".join(f"{a} **{n(a, 'warm_rebuild_s'):.1f} s**" for a, _ in arches)
    over = [a for a, _ in arches if n(a, "warm_rebuild_s") > GOAL_WARM_REBUILD_S]
    verdict = f"missed by {', '.join(over)}" if over else "met"
    order = " / ".join(a for a, _ in arches)
    size_what = (f"image size / torch environment alone (`{r.text('image')}`; the payload: torch, "
                 "torchvision, pillow, numpy, NCCL)")
    return [
        (size_what, f"{sizes} (goal ≤ {GOAL_SIZE_RATIO})", cmd),
        (f"full rebuild of both stages, base cached, arches alternated: {order}",
         f"{builds} = {ratios} (goal ≤ {GOAL_CROSS_BUILD_RATIO}×)", "same run (`cold_build_s`)"),
        ("warm rebuild after adding a file under `entrypoints/` only, probe and labels included",
         f"{warm} (goal ≤ {GOAL_WARM_REBUILD_S:.0f} s: {verdict})", "same run (`warm_rebuild_s`)"),
    ]


def toolkit_edit(r: Result) -> list[Row]:
    steps, cached = r.count("dockerfile_steps"), r.count("cached_steps")
    same = "byte-identical" if r.flag("layers_identical") else "**changed**"
    figure = (f"**{cached} of {steps}** Dockerfile steps cached, layer list {same}, "
              f"{r.number('rebuild_seconds'):.1f} s with probe and labels")
    return [(f"rebuild after editing the build-host toolkit (`{r.text('edited')}`)", figure,
             "`python bench/toolkit_edit.py`")]


def netplugin(r: Result) -> list[Row]:
    by_variant: dict[str, list[str]] = {}
    for i, row in enumerate(r.items("sizes", list)):
        where = f"sizes.{i}"
        r.mapping(row, where)
        added, ratio = r.number("added_bytes", row, where), r.number("ratio", row, where)
        by_variant.setdefault(r.text("variant", row, where), []).append(
            f"{r.text('arch', row, where)} +{added / 1e6:.0f} MB (**{ratio:.3f}×**)")
    groups: dict[str, list[str]] = {}
    for variant, parts in by_variant.items():
        groups.setdefault(", ".join(parts), []).append(variant)
    sizes = "; ".join(f"{' and '.join(names)}: {parts}" for parts, names in groups.items())
    x86, arm = r.number("median_s.x86_64"), r.number("median_s.aarch64")
    repeats = r.count("repeats")
    what = ("net plugin variants (the tests' stand-in plugin): size over the base image; plugin stage "
            f"build time, aarch64 (cross-compiled) / x86_64, median of {repeats}, alternating")
    return [(what, f"{sizes}; {arm:.1f} / {x86:.1f} s = **{arm / x86:.2f}**",
             f"`python bench/netplugin.py --repeats {repeats}`")]


def rebuild(r: Result) -> list[Row]:
    host = r.text("host")
    arches = sorted(r.items("arches"), key=lambda kv: kv[0] != host)
    full, edit, layers, over = [], [], [], []
    for name, value in arches:
        if not re.fullmatch(r"[a-z0-9_]{1,16}", name):
            raise r.bad("arches", name, "arch names such as x86_64 and aarch64")
        row = r.mapping(value, f"arches.{name}")
        before = r.mapping(r.get("before", row, f"arches.{name}"), f"arches.{name}.before")
        after = r.mapping(r.get("after", row, f"arches.{name}"), f"arches.{name}.after")
        b, a = f"arches.{name}.before", f"arches.{name}.after"
        full.append(f"{name} {r.number('full_s', before, b):.1f} / **{r.number('full_s', after, a):.1f} s**")
        edit.append(f"{name} {r.number('launcher_edit_s', before, b):.1f} / "
                    f"**{r.number('launcher_edit_s', after, a):.1f} s**")
        if r.number("launcher_edit_s", after, a) > GOAL_WARM_REBUILD_S:
            over.append(name)
        differ = r.get("layers_differing", after, a)
        if not isinstance(differ, list):
            raise r.bad(f"{a}.layers_differing", differ, "a list of the differing layers' steps (empty when none)")
        named = ", ".join(r.text(str(i), dict(enumerate(differ)), f"{a}.layers_differing") for i in range(len(differ)))
        layers.append(f"{name} **{r.count('layers_equal', after, a)} of {r.count('layers', after, a)}** equal"
                      + (f" (differ: {named})" if differ else ""))
    rev = r.text("before")
    cmd = f"`python bench/rebuild.py --before {rev}`"
    return [
        (f"full rebuild, layer cache pruned, base cached: build code of {rev} (downloads its wheels) / locked "
         "builds from the wheelhouse (`--no-cache`)", "; ".join(full), cmd),
        (f"rebuild after adding a file under `entrypoints/` only, probe and labels included: {rev} (the probe "
         "imports torch) / locked builds (its result reused)", "; ".join(edit)
         + f" (goal ≤ {GOAL_WARM_REBUILD_S:.0f} s: {'missed by ' + ', '.join(over) if over else 'met'})",
         f"`python bench/rebuild.py --before {rev} --edit-only`" if r.flag("edit_only_rerun") else "same run"),
        ("two builds with `--no-cache` from the same locks: layer digests", "; ".join(layers), "same run"),
    ]


def payload(r: Result) -> list[Row]:
    before, after = r.number("median_s.before"), r.number("median_s.after")
    repeats, cores, rev = r.count("repeats"), r.count("cores", limit=1025), r.text("before")
    what = (f"the payload install of `{r.text('image')}` {r.text('arch')} (`docker/payload/` in its base, "
            f"{cores} cores): {rev} (one pip over the lock) / one pip per core over shards of it, median of "
            f"{repeats}, alternating")
    same = "the same files in every run" if r.flag("same_tree") else "**the trees differed**"
    return [(what, f"{before:.1f} / {after:.1f} s = **{after / before:.2f}**; {same}",
             f"`python bench/payload.py --before {rev} --repeats {repeats}`")]


GOAL_FIRST_S = 150.0  # a fresh machine to the first demo
GOAL_CI_S = 1200.0  # `bash .ci/run` from a fresh clone
_LOOP = {"first": ("the README's first command on a fresh machine (`./setup.sh && invoke build --arch x86_64 && "
                   "invoke demo --scheduler volcano --nodes 2`), from a fresh clone: each phase, before / after",
                   GOAL_FIRST_S, "`python bench/loop.py first --label after`"),
         "ci": ("`bash .ci/run` from a fresh clone (CI=true): each stage and test tier, before / after; tests passed",
                GOAL_CI_S, "`python bench/loop.py ci --label after`")}


def loop(r: Result) -> list[Row]:
    rows = []
    for what, (title, goal, cmd) in _LOOP.items():
        sides = r.mapping(r.get(what), what)
        entries = {label: r.mapping(r.get(label, sides, what), f"{what}.{label}") for label in ("before", "after")}
        phases: dict[str, dict[str, float]] = {}
        for label, entry in entries.items():
            where = f"{what}.{label}"
            for name, _ in r.items("phases", base=entry, where=where):
                if not CELL_TEXT.fullmatch(name):
                    raise r.bad(f"{where}.phases", name, "phase names of letters, digits, spaces and ._/+:,()-")
                phases.setdefault(name, {})[label] = r.number(f"phases.{name}", entry, where)
        cells = [f"{name} {_or_dash(sides_.get('before'))} / {_or_dash(sides_.get('after'))}"
                 for name, sides_ in phases.items()]
        totals = {label: r.number("total_s", entry, f"{what}.{label}") for label, entry in entries.items()}
        figure = "; ".join(cells) + (f"; **total {totals['before']:.1f} / {totals['after']:.1f} s** "
                                     f"(goal ≤ {goal:.0f} s: {'met' if totals['after'] <= goal else 'missed'})")
        if what == "ci":
            figure += "; passed " + " / ".join(
                str(r.count("tests.passed", entry, f"{what}.{label}")) for label, entry in entries.items())
            failed = [r.get("tests.failed", entry, f"{what}.{label}") for label, entry in entries.items()]
            if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in failed):
                raise r.bad(f"{what}.*.tests.failed", failed, "counts of failed tests (0 or more)")
            figure += ", failed " + " / ".join(map(str, failed))
        commits = " / ".join(r.text("commit", entry, f"{what}.{label}") for label, entry in entries.items())
        rows.append((f"{title} (commits {commits})", figure, cmd))
    return rows


def _or_dash(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.1f}"



_FORMATS = ("gzip", "zstd")


def _runtimes(r: Result) -> str:
    """Which runtimes read zstd layers: measured here or read in their source (yes, no), or not checked here."""
    shown = []
    for i, item in enumerate(r.items("runtimes", list)):
        where = f"runtimes.{i}"
        r.mapping(item, where)
        reads = r.get("reads_zstd", item, where)
        if not (reads is None or isinstance(reads, bool)):
            raise r.bad(f"{where}.reads_zstd", reads, "true, false or null (not checked here)")
        read = " (its source)" if r.text("checked", item, where).startswith("source read") else ""
        shown.append(f"{r.text('runtime', item, where)} "
                     + ("not checked here" if reads is None else "**yes**" if reads else "**no**") + read)
    return ", ".join(shown)


def _seconds_or_zero(r: Result, key: str) -> float:
    value = r.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise r.bad(key, value, "seconds, 0 or more")
    return float(value)


def layers(r: Result) -> list[Row]:
    """gzip against zstd layers of one image (bench/layers.py): push, pull and unpack into an
    empty store, compressed bytes, the launcher's layer, which runtimes read zstd, the choice."""
    def pair(key: str) -> tuple[float, float]:
        return r.number(f"formats.gzip.{key}"), r.number(f"formats.zstd.{key}")

    push, size, launcher = pair("push_s"), pair("compressed_bytes"), pair("launcher_bytes")
    pull = (r.number("median_pull_s.gzip"), r.number("median_pull_s.zstd"))
    spread = (_seconds_or_zero(r, "spread_pull_s.gzip"), _seconds_or_zero(r, "spread_pull_s.zstd"))
    default, variant = r.get("choice.default"), r.get("choice.variant")
    if not isinstance(default, str) or default not in _FORMATS:
        raise r.bad("choice.default", default, "gzip or zstd")
    if not (variant is None or (isinstance(variant, str) and variant in _FORMATS and variant != default)):
        raise r.bad("choice.variant", variant, "the other format, or null")
    repeats = r.count("repeats", limit=21)
    what = (f"image layers of `{r.text('image')}`, gzip / zstd, one registry on loopback: push (`docker push` / "
            f"`skopeo copy` recompressing); pull and unpack into an empty podman store "
            f"({r.text('store.storage_driver')}), median of {repeats}, alternating; compressed bytes; "
            "the launcher's layer (what a launcher-only release moves); which runtimes read zstd")
    figure = (f"push {push[0]:.1f} / {push[1]:.1f} s; pull and unpack {pull[0]:.1f} / {pull[1]:.1f} s = "
              f"**{pull[1] / pull[0]:.2f}** (each format's runs within {spread[0]:.1f} / {spread[1]:.1f} s); "
              f"{gb(size[0])} / {gb(size[1])} GB = **{size[1] / size[0]:.3f}**; "
              f"launcher layer {launcher[0] / 1e3:.0f} / {launcher[1] / 1e3:.0f} kB; reads zstd: {_runtimes(r)}; "
              f"default **{default}**" + (f", {variant} as a variant" if variant else ""))
    return [(what, figure, f"`python bench/layers.py --repeats {repeats}`")]
