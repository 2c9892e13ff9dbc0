"""bench/gpu_check.py's judges: what each step printed, read and judged into a verdict
(ok, failed, skipped), a one-line reason and the facts worth keeping. Pure: no process, file
or clock here, so each judge is tested on the output a GPU machine gave, without one.

A judge reads output of the machine under test, which may be anything: a crash, a partial
line, terminal escapes, JSON of another shape. Whatever it reads, it returns a verdict, never
raises; the reason is one printable line (``one_line``), so that a table row stays one row.

Standard library only, plus two constants of the launcher (standard library only as well):
the result line's prefix and the hang watch's exit code. The program puts entrypoints/ on
``sys.path`` before it imports this helper (a name starting with ``_``: no task of its own).
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any, Mapping, Sequence

from torchpod.contract import RESULT_PREFIX  # the workloads' result lines
from torchpod.watch import EXIT_HANG

OK, FAILED, SKIPPED = "ok", "failed", "skipped"
NO_GPU = "no CUDA device visible"
REASON_CAP = 240


def one_line(text: object, cap: int = REASON_CAP) -> str:
    """``text`` as one printable line of at most ``cap`` characters: output of the machine
    under test may hold newlines or terminal escapes, and a table row must stay one row."""
    flat = " ".join(str(text).split())
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in flat)
    return shown if len(shown) <= cap else shown[:cap - 3] + "..."


def last_error(text: str) -> str:
    """The line that says what went wrong: the last error or exception line, torchrun's own
    ChildFailedError summary left out (it names no cause); else the last line."""
    lines = [re.sub(r"^\[(?:rank|default)\d*\]:\s*", "", ln).strip() for ln in text.splitlines() if ln.strip()]
    found = [ln for ln in lines if re.search(r"(?:\b\w*(?:Error|Exception)\b.*:|torchpod: error:)", ln)
             and "ChildFailedError" not in ln]
    return (found or lines or [""])[-1]


def failed_run(ran_rc: int | None, timed_out: bool, limit: float, stderr: str) -> str | None:
    """Why a run that did not end well failed, or None when it exited 0: past its ``limit``
    (stopped, or surviving SIGKILL), unable to start, or a non-zero exit with its last error."""
    if timed_out:
        return f"did not end within {limit:.0f} s; " + ("stopped with its process tree" if ran_rc is not None else
                                                        "it survived SIGKILL (stuck in the kernel: the GPU driver?)")
    if ran_rc is None:
        return f"could not start: {last_error(stderr)}"
    if ran_rc != 0:
        return f"exit {ran_rc}: {last_error(stderr)}"
    return None


def json_output(stdout: str) -> Any:
    """The JSON document a command printed (the doctor and the plan print nothing else)."""
    start = stdout.find("{")
    try:
        return json.loads(stdout[start:]) if start >= 0 else None
    except ValueError:
        return None


def judge_nvidia_smi(rc: int | None, stdout: str) -> tuple[str, str, dict]:
    gpus = [dict(zip(("name", "driver", "memory"), (p.strip() for p in line.split(","))))
            for line in stdout.splitlines() if line.count(",") >= 2]
    facts = {"gpus": gpus}
    if rc != 0 or not gpus:
        return FAILED, f"nvidia-smi exit {rc}, {len(gpus)} GPUs listed: {last_error(stdout)}", facts
    return OK, f"{len(gpus)} GPUs: " + "; ".join(f"{g['name']}, driver {g['driver']}" for g in gpus), facts


def judge_environment(facts: Mapping[str, Any], smi_gpus: int) -> tuple[str, str]:
    """The facts torch gave, judged against what nvidia-smi listed."""
    if "torch_error" in facts:
        return FAILED, f"torch is not importable: {facts['torch_error']}"
    if "torch" not in facts:
        return FAILED, "the probe printed no facts"
    n = facts.get("device_count") or 0
    said = f"torch {facts['torch']}, CUDA build {facts.get('cuda_build') or 'none (a CPU build)'}"
    if smi_gpus and not n:
        return FAILED, (f"nvidia-smi lists {smi_gpus} GPUs but torch sees none ({said}): a CPU build of torch, "
                        "or a driver older than its CUDA")
    if not n:
        return OK, f"{NO_GPU}; {said}"
    return OK, f"{n} GPUs: {', '.join(facts.get('devices') or [])}; {said}, NCCL {facts.get('nccl') or '?'}"


def judge_doctor(rc: int | None, stdout: str, gpus: int) -> tuple[str, str, dict]:
    """``torchpod doctor --format json``: its own exit code, and with a GPU its gpus row (by code)."""
    data = json_output(stdout)
    listed = data.get("checks") if isinstance(data, dict) else None
    checks = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
    rows = {c.get("name", "?"): c.get("status", "?") for c in checks}
    facts: dict[str, Any] = {"rows": rows, "checks": checks}
    for key in ("transport", "network", "nccl_version", "gdrdma", "log_notes", "nodes"):
        if isinstance(data, dict) and key in data:
            facts[key] = data[key]
    if isinstance(data, dict) and isinstance(data.get("evidence"), list):
        facts["evidence"] = data["evidence"][:3]
    if not checks:
        return FAILED, f"exit {rc}: no JSON checks printed", facts
    bad = [c for c in checks if c.get("status") == "fail"]
    warned = [c["name"] for c in checks if c.get("status") == "warn"]
    said = "; ".join(f"{c['name']}: {c.get('detail', '')}" for c in bad)
    if rc != 0:
        return FAILED, f"exit {rc}: " + (said or "sockets on a node with RDMA hardware"), facts
    gpu_row: dict[str, Any] = next((c for c in checks if c.get("name") == "gpus"), {})
    if gpus and gpu_row.get("code") != "doctor.gpus.ok":
        return FAILED, (f"torch sees {gpus} GPUs but the doctor's gpus row is {gpu_row.get('code')!r} "
                        f"({gpu_row.get('detail', '')}): it counts GPUs with nvidia-smi -L"), facts
    extra = f", transport {facts['transport']}" if "transport" in facts else ""
    extra += " (one node: nothing crossed a network)" if extra and facts.get("nodes") == 1 else ""
    return OK, f"exit 0{extra}" + (f"; warn: {', '.join(warned)}" if warned else ""), facts


def judge_plan(rc: int | None, stdout: str, gpus: int) -> tuple[str, str, dict]:
    """One node, and nproc_per_node = the GPUs torch sees (1 CPU process without one). The
    plan names no backend: each workload picks NCCL when torch sees CUDA (examples/common.py,
    torchpod.bench_allreduce), so the backend is asserted on the runs' result lines."""
    plan = json_output(stdout)
    if rc != 0 or not isinstance(plan, dict):
        return FAILED, f"exit {rc}: no plan printed", {}
    want = str(gpus or 1)
    facts = {k: plan.get(k) for k in ("scheduler", "nnodes", "nproc_per_node", "rdzv_endpoint", "notes", "version")}
    facts["expected_backend"] = "nccl" if gpus else "gloo"
    said = f"{plan.get('scheduler')}, {plan.get('nnodes')} node, nproc {plan.get('nproc_per_node')}"
    if plan.get("nnodes") != "1":
        return FAILED, f"{said}: expected one node on this machine", facts
    if plan.get("nproc_per_node") != want:
        return FAILED, f"{said}: expected nproc {want} (the CUDA devices torch sees)", facts
    seen = f"= the {gpus} GPUs torch sees" if gpus else "(no GPU: 1 CPU process)"
    return OK, f"{said} {seen}; workloads will use {facts['expected_backend']}", facts


def judge_preflight_first(rc: int | None, stdout: str, script: str) -> tuple[str, str, dict]:
    """TORCHPOD_PREFLIGHT=1 on one node: the plan keeps the script (no pair of nodes to compare)."""
    plan = json_output(stdout)
    if rc != 0 or not isinstance(plan, dict):
        return FAILED, f"exit {rc}: no plan printed", {}
    notes = [n for n in plan.get("notes", []) if "TORCHPOD_PREFLIGHT" in n]
    facts = {"script": plan.get("script"), "script_args": plan.get("script_args"), "notes": notes}
    if plan.get("script") != script or "--then" in (plan.get("script_args") or []):
        return FAILED, f"one node, yet the workers would run {plan.get('script')!r} first", facts
    return OK, (notes[0] if notes else "the script runs as given (no note says why)"), facts


def results(stdout: str) -> list[dict]:
    """The workloads' TORCHPOD_RESULT lines, wherever a launcher prefix put them."""
    out = []
    for line in stdout.splitlines():
        at = line.find(RESULT_PREFIX)
        if at >= 0:
            try:
                found = json.loads(line[at + len(RESULT_PREFIX):])
            except ValueError:
                continue
            if isinstance(found, dict):
                out.append(found)
    return out


def judge_run(found: Sequence[Mapping[str, Any]], backend: str, nproc: int) -> tuple[str, str, dict]:
    """A run that exited 0: one result line per rank, each ok on the expected backend."""
    facts: dict[str, Any] = {"results": len(found), "backends": sorted({str(r.get("backend")) for r in found})}
    # nccl-tests' bus bandwidth is algbw * 2(n-1)/n: 0 for one rank, whose copy rate is shown instead
    one_rank = bool(found) and found[0].get("world_size") == 1
    for key in ("peak_busbw_gbps", "steps_per_s", "final_loss"):
        if found and key in found[0] and not (one_rank and key == "peak_busbw_gbps"):
            facts[key] = found[0][key]
    rows = found[0].get("rows") if one_rank and "peak_busbw_gbps" in found[0] else None
    algbw = [r["algbw_gbps"] for r in rows if isinstance(r, dict) and isinstance(r.get("algbw_gbps"), (int, float))
             ] if isinstance(rows, list) else []
    if algbw:
        facts["peak_algbw_gbps_one_rank"] = max(algbw)
    sums = {repr(r["param_checksum"]) for r in found if "param_checksum" in r}  # repr: any JSON value
    if sums:
        facts["replicas_in_sync"] = len(sums) == 1
    if len(found) != nproc:
        return FAILED, f"{len(found)} result lines, expected {nproc} (one per rank)", facts
    if facts["backends"] != [backend]:
        return FAILED, f"backend {', '.join(facts['backends'])}, expected {backend}", facts
    if not all(r.get("ok") is True for r in found) or (sums and len(sums) != 1):
        return FAILED, "a rank reported ok=false or replicas out of sync", facts
    shown = {k: v for k, v in facts.items()
             if k in ("peak_busbw_gbps", "peak_algbw_gbps_one_rank", "steps_per_s", "final_loss")
             and isinstance(v, (int, float))}
    return OK, f"{nproc} ranks on {backend}" + "".join(f", {k} {v:.4g}" for k, v in shown.items()), facts


ONE_NODE_REFUSAL = re.compile(r"preflight found 1 node\b.*expected 2 or more")


def judge_preflight(rc: int | None, output: str) -> tuple[str, str, dict]:
    """Preflight on one node forms its group (NCCL init, the doctor rows gathered), then must
    refuse: pairs of nodes are what it compares. Its one line is the only signal it gives."""
    lines = [ln for ln in output.splitlines() if ONE_NODE_REFUSAL.search(ln)]
    facts = {"refusal": one_line(lines[-1]) if lines else None}
    if rc == 0:
        return FAILED, "exit 0 on one node: preflight claims to have compared pairs of nodes", facts
    if not lines:
        return FAILED, f"exit {rc}: {last_error(output)}", facts
    return OK, f"refused as it should on one node (exit {rc}): {facts['refusal']}", facts


HANG_FRAME = "in stall_before_the_collective"  # allreduce_check's stalling function


def judge_hang(rc: int | None, stderr: str) -> tuple[str, str, dict]:
    """Rank 1 stalled before the all-reduce: exit 124, and a verdict whose first line names
    the collective the others wait in and whose culprit line names rank 1 and its frame."""
    said = [ln for ln in stderr.splitlines() if ln.startswith("torchpod: hang: ")]
    facts: dict[str, Any] = {"verdict": said[:6]}
    if rc != EXIT_HANG:
        return FAILED, f"exit {rc}, expected {EXIT_HANG} (the hang verdict): {last_error(stderr)}", facts
    culprit = [ln for ln in said if ln.startswith("torchpod: hang: culprit rank ")]
    if not said or not said[0].startswith("torchpod: hang: no rank went past collective"):
        return FAILED, "exit 124 without the verdict's first line", facts
    if len(culprit) != 1 or not culprit[0].startswith("torchpod: hang: culprit rank 1 on ") \
            or HANG_FRAME not in culprit[0]:
        return FAILED, f"the verdict does not name rank 1 {HANG_FRAME}: {culprit}", facts
    return OK, culprit[0].removeprefix("torchpod: hang: "), facts


def judge_watch_cost(arms: Mapping[str, Sequence[float]], failed: Sequence[str] = ()) -> tuple[str, str, dict]:
    """Each arm's steps/s; ok once every run ended 0 and reported one (``failed``: the runs
    that did not, as "N (arm): exit X"). The ratio is a figure, not a bound."""
    medians = {arm: statistics.median(rates) for arm, rates in arms.items() if rates}
    facts: dict[str, Any] = {"steps_per_s": {arm: list(rates) for arm, rates in arms.items()},
                             "median_steps_per_s": medians}
    if failed:
        return FAILED, f"run {', '.join(failed)}", facts
    if set(medians) != set(arms):
        return FAILED, f"no steps/s from the {', '.join(sorted(set(arms) - set(medians)))} arm", facts
    facts["on_over_off"] = round(medians["on"] / medians["off"], 4) if medians["off"] else None
    return OK, f"on/off {facts['on_over_off']} (medians {medians['on']:.4g} and {medians['off']:.4g} steps/s)", facts
