"""`torchpod preflight`: before a job trains, check every node and name every slow one.

    torchpod preflight [--pair-bytes 4M] [--min-bytes 1K] [--max-bytes 4M]
                       [--iters 5] [--warmup 2] [--floor-gbps X] [--allow-undecided]
                       [--json FILE] [--svg FILE]
                       [--then script|module|program TARGET [ARGS...]]
    (= torchpod run -m torchpod.preflight ..., which also takes torchrun's options first)

A workload like ``torchpod.bench_allreduce``: torchrun starts it on every node. It

1. runs the doctor's checks (torchpod.doctor.preflight) on every node and gathers them to
   rank 0 over the job's own process group (``all_gather_object``);
2. times pairs of nodes, one leader rank per node, in rounds of disjoint pairs, every pair
   of a round at once, each over its own ``new_group`` (torch.distributed.new_group must be
   entered by every rank, in the same order: torch/distributed/distributed_c10d.py, v2.4.0).
   torchpod.localise decides the rounds and the verdict: ring neighbours and pairs two
   apart first, then retests of the undecided nodes against nodes proven fast. Every rank
   runs the same pure rule on the same gathered figures, so all enter the same rounds;
3. names every node that is slow with two nodes proven fast (a pair under ``--floor-gbps``,
   or without one under a quarter of the best pair), and says when the pairs cannot tell
   (two nodes without a floor, no node proven fast, a node between a quarter and half the
   best): that fails the run unless accepted with ``--allow-undecided`` or
   TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED=1;
4. sweeps an all-reduce over every rank in nccl-tests' columns (size, count, type, redop,
   time, algbw, busbw; busbw = algbw * 2(n-1)/n, nccl-tests doc/PERFORMANCE.md, v2.13.9),
   NCCL on GPUs, gloo on CPUs.

With TORCHPOD_PRESET naming a shape whose presets.json entry has a ``preflight_floor`` (a
public figure: OCI's health-check thresholds, AWS's published p5 sweep, CSCS's GH200
reference, each cited there), the sweep also runs at the floor's size on NCCL and the job
is judged against it: below a floor measured with Ring (as preflight measures) fails, below
one measured with NCCL's own choice warns; on gloo it is not judged (an info line).

Rank 0 prints the per-node verdict (ok / warn / fail, reason and fix), every round's pairs
and the sweep table, writes ``--json`` and ``--svg`` (busbw against size, standard library
only) and prints a TORCHPOD_RESULT line. Every rank exits 0 only when no node failed and
the verdict is decided or accepted, 1 otherwise, 2 for bad input. The pure parts
(torchpod.localise, ``verdicts``, ``assemble``, ``report``, ``svg``) take plain data; only
``main`` touches torch, the env and the clock. The options (their parser, their check and
the ``--then`` split) live in torchpod.preflight_options, which the launcher and `invoke
manifests --workload preflight` read without importing this module's measuring code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import time
from datetime import timedelta
from typing import Any, Mapping, Sequence
from xml.sax.saxutils import escape

from . import doctor, gpus
from .bench_allreduce import measure_row, sizes
from .contract import ENV_NODE_RANK, ENV_PREFLIGHT_UNDECIDED, RESULT_PREFIX, switch
from .errors import InputError, one_line
from .fabric import presets
from .fabric.findings import Severity
from .fabric.presets import RING, Floor
from .facts import gather_facts
from .localise import Pair, Verdict, figure, localise
from .localise import ring as localise_ring
from .preflight_options import check_options, split_then
from .words import plural

PREFIX = "torchpod.preflight"  # the store keys of preflight's own process group
WARN, FAIL = Severity.WARN.value, Severity.FAIL.value  # the doctor's statuses (Check.as_dict)
UNDECIDED = "preflight.undecided"
ACCEPT = f"--allow-undecided or {ENV_PREFLIGHT_UNDECIDED.name}=1"


def _pairs_text(pairs: Sequence[tuple[Pair, float]]) -> str:
    return "; ".join(f"{p} {v:.3f} GB/s" for p, v in pairs)


def _pair_reasons(index: int, verdict: Verdict) -> list[dict]:
    """This node's reasons from the pairs: named slow, undecided, or on a slow link."""
    if index in verdict.slow:
        fast = set(verdict.fast)
        against = [(p, v) for p, v in verdict.pairs_of(index) if v < verdict.slow_under and set(p) - {index} <= fast]
        return [{"code": "preflight.slow-node", "status": FAIL,
                 "detail": f"under {verdict.slow_under:.3f} GB/s with "
                           f"{plural(len({q for p, _ in against for q in p}) - 1, 'node')} proven fast: "
                           f"{_pairs_text(against)} ({verdict.rule})",
                 "fix": "check this node's NIC, link speed and cabling (ethtool, ibstat); drain it and rerun "
                        "preflight"}]
    if index in verdict.undecided:
        return [{"code": UNDECIDED, "status": WARN,
                 "detail": f"neither proven fast nor named slow: {_pairs_text(verdict.pairs_of(index))}",
                 "fix": "give --floor-gbps (what a healthy pair reaches), or run preflight with nodes known "
                        "to be good"}]
    links = [(p, v) for p, v in verdict.slow_links() if index in p]
    if links:
        return [{"code": "preflight.slow-pair", "status": WARN,
                 "detail": f"under {verdict.slow_under:.3f} GB/s though both nodes are fast with others: "
                           f"{_pairs_text(links)}",
                 "fix": "the link between the two is the likelier cause (cable, switch port); rerun to "
                        "confirm"}]
    return []


def verdicts(nodes: Sequence[Mapping[str, Any]], verdict: Verdict) -> list[dict]:
    """Per node: ok / warn / fail with reasons (code, detail, fix). ``nodes[i]`` carries the
    node's hostname and its doctor checks (doctor.Check.as_dict())."""
    out = []
    for index, node in enumerate(nodes):
        reasons = [{k: c.get(k, "") for k in ("code", "status", "detail", "fix")}
                   for c in node.get("checks", []) if c.get("status") in (WARN, FAIL)]
        reasons += _pair_reasons(index, verdict)
        statuses = {r["status"] for r in reasons}
        status = FAIL if FAIL in statuses else WARN if WARN in statuses else Severity.OK.value
        out.append({"node": index, "hostname": node.get("hostname", ""), "group_rank": node.get("group_rank", index),
                    "status": status, "reasons": reasons})
    return out


def undecided_reasons(verdict: Verdict, accepted: bool) -> list[dict]:
    """The job's line when the pairs cannot tell slow nodes from fast: a failure, or a
    warning when the user accepted it. None when every node is decided."""
    if verdict.decided:
        return []
    return [{"code": UNDECIDED, "status": WARN if accepted else FAIL,
             "detail": f"cannot tell which nodes are slow: {verdict.why}" + ("; accepted" if accepted else ""),
             "fix": "" if accepted else f"give --floor-gbps (what a healthy pair reaches), or accept it with {ACCEPT}"}]


def allow_undecided(flag: bool, env: Mapping[str, str]) -> bool:
    """``--allow-undecided``, or TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED=1 (TORCHPOD_PREFLIGHT=1's
    workers get no preflight options); a value other than 0 or 1 is bad input."""
    accepted = switch(env, ENV_PREFLIGHT_UNDECIDED)  # checked even when the flag says it already
    return flag or accepted


def floor_reasons(sweep: Sequence[Mapping[str, Any]], floor: Floor | None, preset: str, backend: str) -> list[dict]:
    """The job's all-reduce against its preset's floor (presets.Floor), as reasons like a
    node's: none without a floor; an info line on gloo (the floors are NCCL figures on GPUs);
    below it, fail when the cited figure was measured with Ring as preflight measures, warn
    when it was NCCL's own choice (tree or NVLS can beat a ring on 2 nodes)."""
    if floor is None:
        return []
    cited = f"preset {preset}: {floor.busbw_gbps:g} GB/s at {plural(floor.bytes, 'byte')} ({floor.source})"
    if backend != "nccl":
        return [{"code": "preflight.floor.not-judged", "status": Severity.INFO.value,
                 "detail": f"{cited} is an NCCL figure on GPUs; {backend} is not judged against it", "fix": ""}]
    row = next((r for r in sweep if r.get("bytes") == floor.bytes), None)
    if row is None:
        raise InputError(f"preflight sweep has no row at {plural(floor.bytes, 'byte')}; expected one for the {cited}")
    busbw = figure(f"preflight sweep at {plural(floor.bytes, 'byte')}", row.get("busbw_gbps"))
    if busbw >= floor.busbw_gbps:
        return [{"code": "preflight.floor.met", "status": Severity.OK.value,
                 "detail": f"{busbw:.1f} GB/s >= {cited}", "fix": ""}]
    ring = floor.algo == RING
    return [{"code": "preflight.floor.below", "status": FAIL if ring else WARN,
             "detail": f"{busbw:.1f} GB/s with NCCL_ALGO=Ring < {cited}, measured with {floor.algo}",
             "fix": "check every node's NICs and NCCL settings (torchpod doctor on each); the slow pairs above say "
                    "where" if ring else "rerun nccl-tests' all_reduce_perf without NCCL_ALGO to compare like "
                    "with like; if that is below the floor too, check the NICs and NCCL settings"}]


def _label(text: str) -> str:
    """A run's name as XML text: characters XML 1.0 forbids (control characters) as escapes."""
    return escape("".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text)))


def svg(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]], width: int = 640, height: int = 400) -> str:
    """busbw (GB/s) against size (bytes, log scale): one polyline per run, standard library only."""
    points = [(r["bytes"], r["busbw_gbps"]) for _, rows in runs for r in rows]
    if not points:
        raise InputError("preflight svg: no rows to plot; expected at least one run with rows")
    lo, hi = math.log2(min(b for b, _ in points)), math.log2(max(b for b, _ in points))
    top = max(v for _, v in points) or 1.0
    left, bottom, pad = 60, height - 40, 20

    def xy(size: float, value: float) -> str:
        x = left + (math.log2(size) - lo) / ((hi - lo) or 1.0) * (width - left - pad)
        return f"{x:.1f},{bottom - value / top * (bottom - pad):.1f}"

    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             f'<line x1="{left}" y1="{bottom}" x2="{width - pad}" y2="{bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{pad}" x2="{left}" y2="{bottom}" stroke="black"/>',
             f'<text x="{width // 2}" y="{height - 8}" text-anchor="middle">size (bytes, log2)</text>',
             f'<text x="12" y="{pad}">{top:.3g} GB/s</text>']
    for i, (label, rows) in enumerate(runs):
        colour = colours[i % len(colours)]
        line = " ".join(xy(r["bytes"], r["busbw_gbps"]) for r in rows)
        parts.append(f'<polyline fill="none" stroke="{colour}" points="{line}"><title>{_label(label)}</title>'
                     "</polyline>")
        parts.append(f'<text x="{left + 10}" y="{pad + 16 * (i + 1)}" fill="{colour}">{_label(label)}</text>')
    return "\n".join([*parts, "</svg>"]) + "\n"


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The sweep in nccl-tests' all_reduce_perf columns (out-of-place half)."""
    head = (f"{'size(B)':>12} {'count':>11} {'type':>6} {'redop':>6} {'time(us)':>10} "
            f"{'algbw(GB/s)':>12} {'busbw(GB/s)':>12}")
    return "\n".join([head] + [f"{r['bytes']:>12} {r['count']:>11} {'float':>6} {'sum':>6} {r['time_us']:>10.1f} "
                               f"{r['algbw_gbps']:>12.3f} {r['busbw_gbps']:>12.3f}" for r in rows])


def _round_line(rnd: Mapping[str, Any]) -> str:
    pairs = ", ".join(f"{p['pair']} {p['busbw_gbps']:.3f} GB/s{' SLOW' if p['slow'] else ''}" for p in rnd["pairs"])
    return f"round {rnd['round']} ({rnd['kind']}): {pairs}"


def report(result: Mapping[str, Any]) -> str:
    """The text rank 0 prints: one line per node, every round's pairs, the sweep, the job's
    lines and the verdict: the failing nodes, "none", or "undecided" when the pairs cannot tell."""
    lines = [f"# torchpod preflight: {plural(len(result['nodes']), 'node')}, {result['backend']}, "
             f"rule: {result['rule']}"]
    for v in result["nodes"]:
        torch = "" if v.get("group_rank", v["node"]) == v["node"] else f", group rank {v['group_rank']}"
        lines.append(f"node {v['node']} ({v['hostname']}{torch}): {v['status']}")
        lines += [f"  {r['status']:4} {r['code']}: {r['detail']}" + (f" | fix: {r['fix']}" if r["fix"] else "")
                  for r in v["reasons"]]
    lines += [_round_line(rnd) for rnd in result["rounds"]]
    lines += ["# all_reduce sweep, every rank", table(result["sweep"])]
    lines += [f"job: {r['status']:4} {r['code']}: {r['detail']}" + (f" | fix: {r['fix']}" if r["fix"] else "")
              for r in result.get("job", [])]
    named = ", ".join(str(n) for n in result["failing"])
    undecided = "undecided" + (" (accepted)" if result["accepted_undecided"] else "")
    lines.append("failing nodes: " + (named or ("none" if result["decided"] else undecided)))
    return "\n".join(lines)


def _pair_rows(rnd: Sequence[tuple[Pair, float]], threshold: float) -> list[dict]:
    return [{"pair": list(p), "busbw_gbps": v, "slow": v < threshold} for p, v in rnd]


def assemble(nodes: Sequence[Mapping[str, Any]], verdict: Verdict, sweep: Sequence[Mapping[str, Any]],
             backend: str, accepted: bool = False) -> dict:
    """The JSON report from what the run measured (pure). ``pairs`` holds the ring's pairs as
    it always has; ``rounds`` every round, the ring's included."""
    if len(nodes) != verdict.nodes:
        raise InputError(f"preflight has {plural(len(nodes), 'node')} but the pairs were measured for {verdict.nodes}; "
                         "expected the same count")
    judged = verdicts(nodes, verdict)
    ring = verdict.rounds[:len(localise_ring(verdict.nodes))]
    return {"backend": backend, "rule": verdict.rule, "threshold_gbps": verdict.threshold,
            "slow_under_gbps": verdict.slow_under, "nodes": judged,
            "failing": [v["node"] for v in judged if v["status"] == FAIL],
            "slow_nodes": list(verdict.slow), "fast_nodes": list(verdict.fast),
            "undecided_nodes": list(verdict.undecided), "decided": verdict.decided,
            "undecided_why": verdict.why, "accepted_undecided": accepted and not verdict.decided,
            "slow_links": [list(p) for p, _ in verdict.slow_links()],
            "pairs": [row for rnd in ring for row in _pair_rows(rnd, verdict.threshold)],
            "rounds": [{"round": i + 1, "kind": "first" if i < verdict.first else "retest",
                        "pairs": _pair_rows(rnd, verdict.threshold)} for i, rnd in enumerate(verdict.rounds)],
            "job": undecided_reasons(verdict, accepted),
            "sweep": [dict(r, type="float", redop="sum") for r in sweep]}


def exit_code(result: Mapping[str, Any]) -> int:
    """1 when a node failed or a job line did (an undecided verdict does unless accepted), else 0."""
    return 1 if result["failing"] or any(r["status"] == FAIL for r in result["job"]) else 0


# -- the impure edge: torch, the env, the clock ---------------------------------------------

def _doctor_rows(env: Mapping[str, str]) -> list[dict]:
    """This node's doctor checks, as `torchpod doctor` runs them (read-only use)."""
    facts = gather_facts(env)
    _, checks = doctor.preflight(env, doctor.gather(env, facts.sysfs_root, gpus.visible(env, facts.gpu_count)[0]))
    return [c.as_dict() for c in checks]


def _time_pair(torch, dist, group, size: int, args: argparse.Namespace, device) -> float:
    """busbw of one pair (two ranks: busbw = algbw), the slower rank's time."""
    buf = torch.ones(size // 4, dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(buf, group=group)
    dist.barrier(group=group)
    started = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(buf, group=group)
    if device.type == "cuda":
        torch.cuda.synchronize()
    took = torch.tensor([(time.perf_counter() - started) / args.iters], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX, group=group)
    return size / max(took.item(), 1e-9) / 1e9


def _round(torch, dist, leaders: list[int], pairs: Sequence[Pair], args: argparse.Namespace,
           device) -> dict[Pair, float]:
    """One round of disjoint pairs, all at once, each over its own group (entered by every
    rank, in the same order); what each leader measured, gathered to every rank, so every
    rank's torchpod.localise decides the same next round."""
    rank = dist.get_rank()
    groups = {p: dist.new_group([leaders[p[0]], leaders[p[1]]]) for p in pairs}
    mine: dict[Pair, float] = {}
    for pair in pairs:
        if rank in (leaders[pair[0]], leaders[pair[1]]):
            mine[pair] = _time_pair(torch, dist, groups[pair], args.pair_bytes, args, device)
    dist.barrier()
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return {p: v for got in everyone for p, v in got.items()}


def _write(args: argparse.Namespace, result: dict) -> None:
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.svg:
        with open(args.svg, "w") as f:
            label = f"all_reduce, {plural(len(result['nodes']), 'node')}, {result['backend']}"
            f.write(svg([(label, result["sweep"])]))


def sweep_sizes(args: argparse.Namespace, floor: Floor | None, backend: str) -> list[int]:
    """The sweep's sizes: --min-bytes to --max-bytes by 4, and a preset floor's size on NCCL."""
    out = sizes(args.min_bytes, args.max_bytes, 4)
    if floor is not None and backend == "nccl" and floor.bytes not in out:
        out.append(floor.bytes)
    return out


def _measure(torch, dist, args: argparse.Namespace, env: Mapping[str, str], device,
             sweep_at: Sequence[int]) -> tuple[list[dict], Verdict, list, list[float]]:
    """Doctor rows per node, the pairs' verdict, the sweep and each round's seconds (this
    rank's clock, groups' creation and the gather included): the parts that need the group."""
    group = int(env.get("GROUP_RANK", "0"))
    me = {"rank": dist.get_rank(), "node": _node_number(env, group), "group_rank": group,
          "local": int(env.get("LOCAL_RANK", "0")), "hostname": socket.gethostname()}
    me["checks"] = _doctor_rows(env) if me["local"] == 0 else []
    ranks: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, me)
    heads = node_heads(ranks)
    if len(heads) < 2:
        raise InputError(f"preflight found {len(heads)} node; expected 2 or more (pairs of nodes are compared)")
    leaders = [r["rank"] for r in heads]
    took: list[float] = []

    def timed(pairs: Sequence[Pair]) -> dict[Pair, float]:
        started = time.perf_counter()
        got = _round(torch, dist, leaders, pairs, args, device)
        took.append(round(time.perf_counter() - started, 3))
        return got

    verdict = localise(len(heads), timed, args.floor_gbps)
    world = dist.get_world_size()
    sweep = [measure_row(torch, dist, size, args, device, world) for size in sweep_at]
    return heads, verdict, sweep, took


def node_heads(ranks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each node's local rank 0, numbered and ordered as the plan named the nodes; by torch's
    GROUP_RANK where the plan's numbers are not one of each of 0..N-1 (a node whose plan
    named none, or a number inherited from elsewhere)."""
    heads = [dict(r) for r in ranks if r["local"] == 0]
    if sorted(r["node"] for r in heads) != list(range(len(heads))):
        heads = [{**r, "node": r["group_rank"]} for r in heads]
    return sorted(heads, key=lambda r: r["node"])


def _node_number(env: Mapping[str, str], group_rank: int) -> int:
    """The node as the launcher's plan named it (TORCHPOD_NODE_RANK, which it exports to the
    workers), so that the report's "node 3" is the plan's node 3 where torch's GROUP_RANK
    differs (nodes ordered by topology first); torch's GROUP_RANK without it."""
    value = env.get(ENV_NODE_RANK, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) < 10 else group_rank


def exec_then(then: Sequence[str], env: Mapping[str, str]) -> int:
    """Replace this worker with the user's command as torchrun would have started it
    (torch/distributed/run.py config_from_args, v2.13: PYTHON_EXEC or sys.executable, -u,
    -m for a module; a program as it is). Returns only when the exec failed."""
    mode, target, *args = then
    python = env.get("PYTHON_EXEC") or sys.executable
    module = ["-m"] if mode == "module" else []
    argv = [target, *args] if mode == "program" else [python, "-u", *module, target, *args]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, dict(env))
    except OSError as exc:
        print(f"torchpod: error: preflight passed but {argv[0]!r} could not start: {exc.strerror or exc}",
              file=sys.stderr)
    return 1


def _init_group(dist, backend: str) -> None:
    """The default group on keys of preflight's own (a PrefixStore over the job's store), so
    the command exec'd after it forms its group on fresh keys of the same store."""
    timeout = timedelta(seconds=300)
    store, rank, world = next(dist.rendezvous("env://", timeout=timeout))
    dist.init_process_group(backend, store=dist.PrefixStore(PREFIX, store), rank=rank, world_size=world,
                            timeout=timeout)


def _preset_floor() -> tuple[str, Floor | None]:
    """TORCHPOD_PRESET's name and its preflight floor ("", None without a preset)."""
    preset = presets.chosen(os.environ)
    return (preset.name, preset.floor) if preset is not None else ("", None)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        own, then = split_then(sys.argv[1:] if argv is None else argv)
        args = check_options(own)
        accepted = allow_undecided(args.allow_undecided, os.environ)
        preset, floor = _preset_floor()
    except InputError as exc:
        print(f"torchpod: error: {one_line(exc)}", file=sys.stderr)
        return 2
    if "RANK" not in os.environ:
        print("torchpod: error: preflight runs under torchrun; start it with `torchpod preflight` or "
              "`torchpod run -m torchpod.preflight`", file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    env_before = dict(os.environ)
    cuda = torch.cuda.is_available()
    if cuda:  # the bandwidth figure is the ring's, as nccl-tests quote it (NCCL reads this at init)
        os.environ["NCCL_ALGO"] = "Ring"
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if cuda else "gloo"
    _init_group(dist, backend)
    device = torch.device("cuda") if cuda else torch.device("cpu")
    try:
        heads, verdict, sweep, took = _measure(torch, dist, args, os.environ, device, sweep_sizes(args, floor, backend))
        result = assemble(heads, verdict, sweep, backend, accepted)
        for rnd, seconds in zip(result["rounds"], took):
            rnd["seconds"] = seconds
        result["job"] = [*floor_reasons(sweep, floor, preset, backend), *result["job"]]
    except InputError as exc:
        print(f"torchpod: error: {one_line(exc)}", file=sys.stderr)
        return 2
    if cuda:
        result["nccl_algo"] = {"measured_with": RING, "job_setting": env_before.get("NCCL_ALGO")}
    if dist.get_rank() == 0:
        print(report(result), flush=True)
        _write(args, result)
        print(RESULT_PREFIX + json.dumps({"workload": "preflight", "rank": 0,
                                          "world_size": dist.get_world_size(), **result}), flush=True)
    dist.destroy_process_group()
    if exit_code(result):
        return exit_code(result)
    return exec_then(then, env_before) if then is not None else 0


if __name__ == "__main__":
    sys.exit(main())
