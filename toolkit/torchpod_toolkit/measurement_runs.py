"""The rows of the measurements table for the benches that run jobs, the launcher and the
test harness: rendezvous and all-reduce in containers (bench/rendezvous.py,
bench/allreduce.py), Slurm submission (bench/slurm.py), preflight (bench/preflight.py),
hostile logs (bench/hostile_reads.py), the Kubernetes control plane (bench/kube.py), rank
order across racks (bench/ranks.py), the hang watch (bench/hang_watch.py), c10d at scale
(bench/rendezvous_scale.py) and a job's first step (bench/first_step.py).

Each function takes one result file (a measurement_result.Result) and returns its rows,
(what, figure, command); measurements.ROWS puts them in the table's order.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from .measurement_result import Result, Row, full_key, gb


def rendezvous(r: Result) -> list[Row]:
    cells: list[str] = []
    spread: dict[tuple[str, int], list[Any]] = {}
    for where, row in r.rows("runs"):
        key = (r.text("launcher", row, where), r.count("nodes", row, where))
        spread.setdefault(key, []).append(r.number("seconds", row, where))
    nodes = []
    for where, row in r.rows("summary"):
        n = r.count("nodes", row, where)
        pod, run = r.number("torchpod_s", row, where), r.number("torchrun_s", row, where)
        cells.append(f"{n} nodes {pod:.2f} / {run:.2f} s = **{pod / run:.3f}**")
        nodes.append(str(n))
    widest = max(max(v) - min(v) for v in spread.values())
    repeats = r.count("repeats")
    what = ("`docker run` → first all-reduce, Volcano, c10d, 1 CPU process per node: torchpod / "
            f"hand-written torchrun (the OKE recipe's flags), median of {repeats}, side by side")
    return [(what, "; ".join(cells) + f" (the runs of one cell differ by up to {widest:.1f} s)",
             f"`python bench/rendezvous.py --nodes {','.join(nodes)} --repeats {repeats}`")]


def allreduce(r: Result) -> list[Row]:
    busbw, tcp, ratio = (r.number(f"median.{k}") for k in ("busbw_gbps", "tcp_gbps", "ratio"))
    sizes = [r.count("bytes", row, f"runs.0.rows.{i}", limit=1 << 50)
             for i, row in enumerate(r.items("runs.0.rows", list))]
    repeats = r.count("repeats")
    what = (f"all-reduce bus bandwidth, {r.count('nodes')} containers, gloo (peak over "
            f"{_bytes(min(sizes))}-{_bytes(max(sizes))}) / raw TCP between the same containers "
            f"(iperf3, 5 s, one stream), median of {repeats}")
    return [(what, f"{busbw:.3f} / {tcp:.3f} GB/s, median ratio **{ratio:.3f}**",
             f"`python bench/allreduce.py --repeats {repeats}`")]


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def slurm(r: Result) -> list[Row]:
    sbatch, harness = r.number("median_s.sbatch"), r.number("median_s.harness")
    runs = []
    for where, row in r.rows():
        if r.text("how", row, where) == "sbatch":
            runs.append(r.number("seconds", row, where))
    if not runs:
        raise r.bad("rows", "(no sbatch row)", "at least one row with how='sbatch'")
    repeats = r.count("repeats")
    what = (f"submission → first all-reduce, {r.count('nodes')}-node job: `sbatch` of the generated script "
            "on the Slurm cluster in containers / the same job through the harness "
            f"(`invoke demo --scheduler slurm`), median of {repeats}, alternating")
    figure = (f"{sbatch:.2f} / {harness:.2f} s = **{sbatch / harness:.2f}** "
              f"(sbatch runs {min(runs):.1f}–{max(runs):.1f} s: slurmctld's scheduling pass)")
    return [(what, figure,
             f"`python bench/slurm.py --repeats {repeats}`")]


def preflight(r: Result) -> list[Row]:
    cells, nodes = [], []
    for where, row in r.rows():
        n = r.count("nodes", row, where)
        pre, plain = r.number("median_s", row, where), r.number("plain_median_s", row, where)
        cell = f"{n} nodes {pre:.1f} / {plain:.1f} s = **{pre / plain:.2f}**"
        if "slow_median_s" in row:
            slow = r.number("slow_median_s", row, where)
            slow_nodes = r.items("slow_nodes", list, row, where)
            if any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n for x in slow_nodes):
                raise r.bad(f"{where}.slow_nodes", slow_nodes, f"node indices from 0 to {n - 1}")
            cell += f", nodes {', '.join(map(str, slow_nodes))} throttled {slow:.1f} s (named, with a retest round)"
        cells.append(cell)
        nodes.append(str(n))
    repeats = r.count("repeats")
    what = ("`torchpod run -m torchpod.preflight` (doctor on every node, pair rounds, sweep; gloo) / the same "
            f"Slurm job running only the all-reduce check, containers as nodes, median of {repeats}, alternating; "
            "and to its verdict with slow nodes")
    return [(what, "; ".join(cells), f"`python bench/preflight.py --nodes {' '.join(nodes)} --repeats {repeats}`")]


def hostile_reads(r: Result) -> list[Row]:
    cells, sizes = [], []
    for where, row in r.rows():
        case = r.text("case", row, where)
        size = re.fullmatch(r"([0-9]{1,6}) MB log", case)  # the bench's --sizes, in its own words
        if size:
            sizes.append(size.group(1))
        cells.append(f"{case} {_read_cost(r, row, where, 'new')} / {_read_cost(r, row, where, 'old')}")
    what = ("`torchpod doctor --nccl-log` on large and hostile logs: CPU time and peak memory, the streamed "
            "reader (`torchpod.readers`) / a whole-file reader")
    return [(what, "; ".join(cells),
             f"`python bench/hostile_reads.py --sizes {','.join(sizes)}`")]


def _read_cost(r: Result, row: Any, where: str, side: str) -> str:
    """One reader's cost in a hostile_reads row, or the bench's note when it never ended."""
    cost = r.mapping(r.get(side, row, where), f"{where}.{side}")
    where = f"{where}.{side}"
    if cost.get("cpu_s") is None:
        return r.text("note", cost, where)
    return f"{r.number('cpu_s', cost, where):.2f} s, {r.number('peak_rss_mib', cost, where):.0f} MiB"


def _numbers(r: Result, key: str, positive: bool = True) -> list[float]:
    """A non-empty list of finite numbers, each above 0 (``positive``) or at least 0."""
    values = r.items(key, list)
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0 or (positive and value == 0):
            raise r.bad(f"{key}.{i}", value, "a positive number" if positive else "a number, 0 or more")
    return [float(v) for v in values]


def kube(r: Result) -> list[Row]:
    build = {}
    for name, _ in r.items("build_seconds"):
        if not re.fullmatch(r"[a-z0-9-]{1,40}", name):
            raise r.bad("build_seconds", name, "program names such as kube-apiserver")
        build[name] = r.number(name, r.get("build_seconds"), "build_seconds")
    slowest = max(build, key=lambda name: build[name])
    starts, load = _numbers(r, "start_seconds"), _numbers(r, "load_average", positive=False)
    memory = []
    for i, row in enumerate(r.items("rss_bytes", list)):
        used = r.mapping(row, f"rss_bytes.{i}")
        for name in used:  # a key reaches a message and a dotted lookup: held to a name first
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9-]{1,40}", name):
                raise r.bad(f"rss_bytes.{i}", name, "component names such as kube-apiserver")
        memory.append(sum(r.count(name, used, f"rss_bytes.{i}", limit=2**40) for name in sorted(used)))
    what = (f"the Kubernetes control plane ({r.text('release')}, {r.text('go')}): cold build of its {len(build)} "
            "programs (`invoke kube.build`: niced, one package at a time, empty Go build cache; the host's "
            "1-minute load during it, mean / peak); start to every health check (`invoke kube.up`); the four "
            "components' resident "
            f"memory {r.number('settle_seconds'):.0f} s later, median of {len(starts)} starts")
    figure = (f"build **{sum(build.values()):.0f} s** ({slowest} {build[slowest]:.0f} s), Go build cache "
              f"{gb(r.number('build_cache_bytes'))} GB, binaries {r.number('binaries_bytes') / 1e6:.0f} MB, "
              f"load {' / '.join(f'{x:.1f}' for x in load)}; start **{statistics.median(starts):.1f} s**; "
              f"**{statistics.median(memory) / 2**20:.0f} MiB** resident")
    return [(what, figure, "`python bench/kube.py --repeats 3`")]


def ranks(r: Result) -> list[Row]:
    """The largest job's rack crossings for each layout and rack size (bench/ranks.py)."""
    largest: dict[tuple[str, int], tuple[int, ...]] = {}
    rows = r.items("rows", list)
    top = max(r.count("nodes", r.mapping(row, f"rows.{i}"), f"rows.{i}") for i, row in enumerate(rows))
    for i, row in enumerate(rows):
        where = f"rows.{i}"
        if r.count("nodes", row, where) != top:
            continue
        key = (r.text("layout", row, where), r.count("rack_size", row, where))
        largest[key] = tuple(r.count(f"rack_{how}", row, where) for how in ("torch", "index", "torchpod", "min"))
    cells = "; ".join(f"{layout}, racks of {size}: {t} / {ix} / **{tp}** (minimum {low})"
                      for (layout, size), (t, ix, tp, low) in sorted(largest.items()))
    met = all(tp == low for _, _, tp, low in largest.values())
    what = (f"ring edges between racks at {top:,} nodes (blocks of {r.count('racks_per_block')} racks, nodes "
            "scattered over a larger cluster): torch's own c10d order (addresses as text) / the scheduler's "
            "index / torchpod's order when the scheduler names each node's domains; the minimum is one per rack")
    return [(what, cells + ("; torchpod at the minimum in every layout" if met else ""),
             f"`python bench/ranks.py --seed {r.count('seed')}`")]


def hang_watch(r: Result) -> list[Row]:
    """The DDP example's steps/s with the hang watch off, with only torch's flight recorder
    set, and on, side by side (bench/hang_watch.py)."""
    median = r.mapping(r.get("median"), "median")
    paired = r.mapping(r.get("paired_over_off"), "paired_over_off")
    runs = r.mapping(r.get("steps_per_s"), "steps_per_s")
    spread = {}
    for arm in ("off", "fr", "on"):
        values = {str(i): v for i, v in enumerate(r.items(arm, list, runs, "steps_per_s"))}
        seen = [r.number(i, values, f"steps_per_s.{arm}") for i in values]
        spread[arm] = f"{r.number(arm, median, 'median'):.3f} ({min(seen):.3f}-{max(seen):.3f})"
    what = (f"the DDP example's steps/s with the hang watch off / the flight recorder's variable alone / on "
            f"({r.count('rounds')} rounds, the arms' order reversed every other round, {r.text('machine')})")
    cells = (f"median {spread['off']} / {spread['fr']} / {spread['on']}; paired ratio to off: "
             f"fr {r.number('fr', paired, 'paired_over_off'):.3f}, on {r.number('on', paired, 'paired_over_off'):.3f}; "
             "goal: on at least 0.98")
    return [(what, cells, f"`python bench/hang_watch.py --rounds {r.count('rounds')} --steps {r.count('steps')}`")]


def rendezvous_scale(r: Result) -> list[Row]:
    """torch's c10d rendezvous at N simulated nodes, each size under each set of timeouts
    side by side (bench/rendezvous_scale.py): seconds to every rank, keep-alive beats that
    missed their deadline and nodes dropped as dead afterwards."""
    cells: dict[int, dict[str, str]] = {}
    named: dict[str, str] = {}  # label -> its timeouts, in words
    confs: dict[str, dict] = {}
    for where, row in r.rows():
        nodes, label = r.count("nodes", row, where), r.text("label", row, where)
        if not r.flag("ranks_ok", row, where):
            raise r.bad(f"{where}.ranks_ok", False, "true: every node got one rank (re-run the bench)")
        lost = [r.get(k, row, where) for k in ("missed_beats", "dropped")]
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in lost):
            raise r.bad(f"{where}.missed_beats", lost, "whole numbers of 0 or more")
        conf = confs.setdefault(label, r.mapping(r.get("settings", row, where), f"{where}.settings"))
        named.setdefault(label, f"{label} (join {r.count('join_timeout', conf, where + '.settings')} s, heartbeat "
                                f"{r.count('heartbeat_timeout', conf, where + '.settings')} s)")
        cells.setdefault(nodes, {})[label] = f"{r.number('complete_s', row, where):.1f} s ({lost[0]}, {lost[1]})"
    shown = "; ".join(f"{n}: " + " / ".join(cells[n].get(k, "-") for k in named) for n in sorted(cells))
    what = (f"a c10d rendezvous of N simulated nodes (torch's handlers over a real TCPStore, {r.count('procs')} "
            f"processes on {r.count('machine.cpus')} cores), {' / '.join(named.values())}: seconds to every rank "
            "(keep-alive beats that missed their deadline, nodes dropped as dead "
            f"{r.number('rows.0.steady_s'):g} s on)")
    labels = ",".join(named)
    custom = confs.get("custom", {})
    flags = "".join(f" --{k.replace('_', '-')} {custom[k]}" for k in ("join_timeout", "heartbeat_timeout")
                    if k in custom and custom[k] != {"join_timeout": 600, "heartbeat_timeout": 5}[k])
    return [(what, shown, f"`python bench/rendezvous_scale.py --nodes {','.join(map(str, sorted(cells)))} "
                          f"--settings {labels}{flags} --steady-s {r.number('rows.0.steady_s'):g}`")]


def rendezvous_cost(r: Result) -> list[Row]:
    """The CPU one node of torch's c10d rendezvous takes at N nodes (bench/rendezvous_cost.py)
    and the cores N nodes then need on one machine: N polls a second while they wait for the
    last node, and N beats (with the event each records) every keep-alive interval."""
    cells = []
    for where, row in r.rows():
        need = r.number("poll_cores", row, where) + r.number("beat_cores", row, where)
        cells.append(f"{r.count('nodes', row, where)}: poll {r.number('poll_ms', row, where):.2f} ms, beat "
                     f"{r.number('beat_ms', row, where):.2f} ms, record {r.number('record_ms', row, where):.2f} ms; "
                     f"**{need:.2f} cores**")
    nodes = ",".join(str(r.count("nodes", row, where)) for where, row in r.rows())
    what = (f"one node of torch's c10d rendezvous (its own classes over a real TCPStore), CPU per operation at N "
            f"nodes, and the cores N nodes need while they wait for the last one: N polls every "
            f"{r.number('poll_every_s'):g} s and N beats every {r.number('keep_alive_interval_s'):g} s "
            f"(this machine: {r.count('machine.cpus')} cores)")
    return [(what, "; ".join(cells),
             f"`python bench/rendezvous_cost.py --nodes {nodes} --repeats {r.count('repeats')}`")]


def _tally(r: Result, key: str) -> float:
    """A count at ``key`` that may be 0 (a median of counts may end in .5)."""
    value = r.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise r.bad(key, value, "a count, 0 or more")
    return float(value)


def render_walk(r: Result) -> list[Row]:
    """A job's render walked room by room, at an earlier commit and now (bench/render_walk.py):
    the returns to a room it had left, the rooms visited, and the same for modules."""
    kinds = r.items("kinds")

    def pair(key: str) -> str:
        return f"{_tally(r, f'median.before.{key}'):g} → {_tally(r, f'median.after.{key}'):g}"

    what = (f"a job's render (`invoke manifests`, {len(kinds)} kinds, 2 nodes) walked by room (CONTRIBUTING.md's "
            f"folders, the shared ground, the launcher, tasks.py): returns to a room it had left, at "
            f"{r.text('before')} and at {r.text('commit')}, side by side")
    figure = (f"room returns **{pair('room_returns')}** (median of the kinds), room visits {pair('room_visits')}; "
              f"module returns {pair('module_returns')} (the job specification split by concern)")
    return [(what, figure, f"`python bench/render_walk.py --before {r.text('before')}`")]


def _seconds(r: Result, key: str, base: Any, where: str) -> float:
    """Seconds at ``key``: a finite number, 0 or more (a part of a whole may round to 0)."""
    value = r.get(key, base, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise r.bad(full_key(key, where), value, "seconds, 0 or more")
    return float(value)


def first_step(r: Result) -> list[Row]:
    """`kubectl apply` to the first training step on the real control plane, each kind and
    node count, the two arms side by side (bench/first_step.py): the whole, and the largest
    part in the first arm."""
    marks = r.items("marks", list)
    if not all(isinstance(m, str) and re.fullmatch(r"[a-z-]{1,20}", m) for m in marks):
        raise r.bad("marks", marks, "mark names such as all-reduce")
    parts = [f"{a}→{b}" for a, b in zip(("apply", *marks), marks)]
    arms = r.items("arms", list)
    if not all(isinstance(a, str) and re.fullmatch(r"[a-z-]{1,30}", a) for a in arms):
        raise r.bad("arms", arms, "arm names such as now")
    cells = []
    for kind, by_arm in r.items("medians"):
        if not re.fullmatch(r"[a-z-]{1,30}", kind):
            raise r.bad("medians", kind, "job kinds such as jobset")
        where = f"medians.{kind}"
        by_arm = r.mapping(by_arm, where)
        ran = [a for a in arms if a in by_arm]  # a kind with one way to run (Slurm) has one arm
        if not ran:
            raise r.bad(where, sorted(by_arm)[:3], f"results of the arms {', '.join(arms)}")
        first = r.mapping(by_arm[ran[0]], f"{where}.{ran[0]}")
        shown = []
        for nodes in sorted(first, key=lambda n: int(n) if str(n).isdecimal() else -1):
            if not str(nodes).isdecimal():
                raise r.bad(f"{where}.{ran[0]}", nodes, "node counts")
            wholes = [r.number(f"{arm}.{nodes}.whole", by_arm, where) for arm in ran]
            at = f"{where}.{ran[0]}.{nodes}"
            med = {k: _seconds(r, k, r.mapping(first[nodes], at), at) for k in parts}
            top = max(parts, key=lambda k: med[k])
            shown.append(f"{nodes} nodes **{wholes[0]:.1f}**" + "".join(f" / {w:.1f}" for w in wholes[1:])
                         + f" s ({top} {100 * med[top] / wholes[0]:.0f}%)")
        cells.append(f"{kind}: " + ", ".join(shown))
    what = (f"`kubectl apply` (Slurm: `sbatch`) → the last rank's first training step on the real control plane "
            f"(Slurm: the real Slurm cluster in containers), {r.text('command.0')} one step, gloo on CPU, median of "
            f"{r.count('repeats')}; the Kubernetes kinds in two arms side by side, alternating: {' / '.join(arms)} "
            "(the kubelet stand-in's sandbox names); in brackets the largest part of the first arm and its share")
    sizes = r.items("nodes", list)
    flags = ",".join(str(r.count(str(i), sizes, "nodes", limit=100_000)) for i in range(len(sizes)))
    return [(what, "; ".join(cells), f"`python bench/first_step.py --nodes {flags} --repeats {r.count('repeats')}`")]

