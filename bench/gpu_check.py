"""A prepared check of the launcher on one real GPU: the doctor, the plan, one-node NCCL runs
and preflight, each step's verdict written to a folder.

    python bench/gpu_check.py --out DIR [--timeout-s 420] [--python PATH] [--rehearse]

For the few minutes a single-GPU Linux machine with PyTorch (CUDA) is at hand, with no
Docker and no network: it runs this checkout's launcher from source (``<repo>/entrypoints``
first on PYTHONPATH, ``python -m torchpod ...``) and records, per step, the argv, exit
code, wall seconds, the tails of stdout and stderr and a verdict (ok, failed, skipped with
the reason). The steps:

- ``nvidia-smi``: name, driver and memory per GPU (skipped when it is not on PATH);
- ``environment``: python, torch, ``torch.version.cuda``, the CUDA devices torch sees, NCCL's
  version, torchvision and numpy, in a child process (this script never imports torch);
- ``doctor``: ``torchpod doctor --format json`` (with a GPU its ``gpus`` row must say so);
- ``plan``: ``torchpod plan --format json``: one node, ``nproc_per_node`` = the GPUs torch sees;
- ``preflight-first``: ``TORCHPOD_PREFLIGHT=1 torchpod plan``: one node keeps the script;
- ``allreduce`` and ``ddp``: ``torchpod bench allreduce`` and ``torchpod run
  examples/ddp_resnet.py``, with NCCL_DEBUG=INFO and NCCL's log written under ``nccl/``; each
  rank's result line must name the nccl backend; then ``torchpod doctor --nccl-log`` on each
  log (``allreduce-nccl-log``, ``ddp-nccl-log``);
- ``preflight``: ``torchpod run -m torchpod.preflight`` on one node: it forms its NCCL group,
  then must refuse in one line (its pair rounds need 2 nodes or more);
- ``hang``: the hang watch with this machine's torch: two gloo ranks on the CPU
  (``CUDA_VISIBLE_DEVICES=`` hides the GPU), rank 1 stalled before the all-reduce
  (``examples/allreduce_check.py --stall-rank 1``), ``TORCHPOD_STALL_WINDOW=10``: the run
  must end 124 with the verdict naming rank 1 and its frame;
- ``watch-cost``: the DDP example on NCCL four times, the watch off, on, on, off
  (``TORCHPOD_STALL_WINDOW`` ``off`` and ``300``): each arm's steps/s and the ratio of the
  medians, on over off (recorded, not judged: one GPU's four runs are a figure, not a bound).

With no CUDA device the GPU steps are skipped ("no CUDA device visible") and the others run
(``--rehearse`` runs the GPU steps on the CPU with gloo, to prove this script before a GPU is
at hand). Every step has its own time limit inside ``--timeout-s`` (the whole check); a step
over it is stopped with its process tree (torchrun's workers run in sessions of their own).

Writes ``summary.json``, ``summary.txt`` (the table it prints), ``logs/<step>.stdout|stderr``,
``nccl/`` and the benches' own JSON under ``--out``, which must be new or an empty folder.
Exit codes: 0 a GPU and every step passed; 1 a step failed; 2 bad options (one line);
3 no CUDA device visible and nothing failed; 4 torch is not importable (one line).
Timing lives here, not in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, Sequence

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "entrypoints"
sys.path.insert(0, str(LAUNCHER))  # torchpod.contract: standard library only, as this script

from torchpod import readers  # noqa: E402  (the bounded reader: standard library only)
from torchpod.contract import RESULT_PREFIX  # noqa: E402  (the workloads' result lines)
from torchpod.errors import InputError  # noqa: E402
from torchpod.watch import EXIT_HANG  # noqa: E402  (standard library only, as this script)

DDP_SCRIPT = ROOT / "examples" / "ddp_resnet.py"

OK, FAILED, SKIPPED = "ok", "failed", "skipped"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU, EXIT_NO_TORCH = 0, 1, 2, 3, 4
EXIT_CODES = {EXIT_OK: "a CUDA device was found and every step passed",
              EXIT_FAILED: "a step failed",
              EXIT_USAGE: "bad options: nothing ran",
              EXIT_NO_GPU: "no CUDA device visible; every step that could run passed",
              EXIT_NO_TORCH: "torch is not importable by the Python that runs the launcher"}
NO_GPU = "no CUDA device visible"
DEFAULT_TIMEOUT_S = 420  # 7 minutes: the whole check, inside a machine lent for a few more
RESERVE_S = 10.0  # kept back from the steps: stopping the last one (KILL_GRACE_S) and writing
KILL_GRACE_S = 5.0  # from SIGTERM to SIGKILL; torchpod forwards SIGTERM to torchrun, which stops its workers
MIN_STEP_S = 5.0  # a step with less time left than this is skipped, not started
TAIL_CHARS = 3000  # per stream, in summary.json
READ_CAP = 1 << 20  # the most of a step's stdout read to judge it (the plan and doctor JSON are a few KiB)
REASON_CAP = 240
FACTS_PREFIX = "GPU_CHECK_FACTS "

# Runs in a child with the launcher's Python: importing torch (and CUDA) here could hang or
# crash this script, which must always write its summary.
PROBE = r"""
import importlib, json, platform, sys
out = {"python": platform.python_version(), "executable": sys.executable}
try:
    import torch
except Exception as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"
else:
    out["torch"] = torch.__version__
    out["cuda_build"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    n = torch.cuda.device_count() if out["cuda_available"] else 0
    out["device_count"] = n
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(n)]
    out["capabilities"] = [".".join(map(str, torch.cuda.get_device_capability(i))) for i in range(n)]
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception as exc:
        out["nccl"], out["nccl_error"] = None, f"{type(exc).__name__}: {exc}"
for name in ("torchvision", "numpy"):
    try:
        out[name] = getattr(importlib.import_module(name), "__version__", "?")
    except Exception as exc:
        out[name], out[name + "_error"] = None, f"{type(exc).__name__}: {exc}"
print("GPU_CHECK_FACTS " + json.dumps(out), flush=True)
"""


class UsageError(Exception):
    """Bad options: one line, exit 2."""


@dataclass(frozen=True)
class Spec:
    """One step: its name, what it checks, its own time limit, and what it needs."""

    name: str
    what: str
    timeout_s: float
    gpu_only: bool = False
    needs: tuple[str, ...] = ()  # modules the launcher's Python must import (environment facts)
    log_of: str = ""  # the step whose NCCL log this one reads


# Why a module a step needs matters, said in its skip reason.
NEEDS_WHY = {"torchvision": "examples/ddp_resnet.py imports it",
             "numpy": "torch.distributed.all_gather_object, which preflight uses, needs it"}

# The order: facts first, then what runs without a GPU, then the NCCL runs from the smallest
# workload up, so a hang in a later one leaves the earlier verdicts standing.
STEPS: tuple[Spec, ...] = (
    Spec("nvidia-smi", "the driver's view: nvidia-smi --query-gpu", 20),
    Spec("environment", "python, torch, CUDA and NCCL as torch sees them", 90),
    Spec("doctor", "torchpod doctor --format json on this node", 45),
    Spec("plan", "torchpod plan --format json: one node, nproc = visible GPUs", 30),
    Spec("preflight-first", "TORCHPOD_PREFLIGHT=1 torchpod plan: one node keeps the script", 30),
    Spec("allreduce", "torchpod bench allreduce on NCCL, NCCL_DEBUG=INFO", 90, gpu_only=True),
    Spec("allreduce-nccl-log", "torchpod doctor --nccl-log on allreduce's NCCL log", 20, gpu_only=True,
         log_of="allreduce"),
    Spec("ddp", "torchpod run examples/ddp_resnet.py on NCCL, NCCL_DEBUG=INFO", 120, gpu_only=True,
         needs=("torchvision",)),
    Spec("ddp-nccl-log", "torchpod doctor --nccl-log on ddp's NCCL log", 20, gpu_only=True, log_of="ddp"),
    Spec("preflight", "torchpod run -m torchpod.preflight on one node (NCCL)", 90, gpu_only=True,
         needs=("numpy",)),
    Spec("hang", "the hang watch: two gloo ranks, rank 1 stalled, a 10 s window: the verdict, exit 124", 90,
         gpu_only=True),
    Spec("watch-cost", "the DDP example on NCCL, the hang watch off, on, on, off: steps/s per arm", 200,
         gpu_only=True, needs=("torchvision",)),
)


@dataclass
class Step:
    """A step's record, as summary.json holds it."""

    name: str
    what: str
    verdict: str
    reason: str = ""
    argv: list[str] = field(default_factory=list)
    env_added: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    stdout_tail: str = ""
    stderr_tail: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Ran:
    """What one command did; its output is in the two files."""

    argv: tuple[str, ...]
    exit_code: int | None  # None: it could not start
    wall_s: float
    timed_out: bool
    stdout: Path
    stderr: Path


# -- pure: verdicts, the table, the out folder's rules ----------------------------------------

def one_line(text: object, cap: int = REASON_CAP) -> str:
    """``text`` as one printable line of at most ``cap`` characters: output of the machine
    under test may hold newlines or terminal escapes, and a table row must stay one row."""
    flat = " ".join(str(text).split())
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in flat)
    return shown if len(shown) <= cap else shown[:cap - 3] + "..."


def overall(steps: Sequence[Mapping[str, Any]], facts: Mapping[str, Any]) -> tuple[str, int]:
    """(the check's verdict, its exit code). No torch outranks a failure: nothing could run."""
    if "torch_error" in facts:
        return "no-torch", EXIT_NO_TORCH
    if any(s["verdict"] == FAILED for s in steps):
        return "failed", EXIT_FAILED
    if not facts.get("device_count"):
        return "no-gpu", EXIT_NO_GPU
    return "ok", EXIT_OK


def skip_reason(spec: Spec, facts: Mapping[str, Any], done: Mapping[str, Step], left_s: float,
                rehearse: bool = False) -> str | None:
    """Why ``spec`` does not run, or None. ``facts``: the environment step's (empty before it)."""
    if spec.name not in ("nvidia-smi", "environment"):
        if "torch_error" in facts:
            return f"torch is not importable ({one_line(facts['torch_error'], 120)})"
        if "torch" not in facts:
            return "the environment step did not say whether torch works"
    if spec.gpu_only and not facts.get("device_count") and not rehearse:
        return NO_GPU
    for module in spec.needs:
        if not facts.get(module):
            return f"{module} is not importable ({NEEDS_WHY.get(module, 'this step imports it')})"
    if spec.log_of:
        source = done.get(spec.log_of)
        if source is None or source.verdict == SKIPPED:
            return f"{spec.log_of} did not run"
        if not source.facts.get("nccl_log"):
            return f"{spec.log_of} wrote no NCCL log"
    if left_s < MIN_STEP_S:
        return f"out of time: {left_s:.0f} s of --timeout-s left"
    return None


def device_slug(name: str | None) -> str:
    """A folder-name form of a device name: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "").lower(), flags=re.ASCII).strip("-")
    return slug[:60].strip("-") or "unknown"


def inherited(env: Mapping[str, str]) -> dict[str, str]:
    """The caller's variables that change what the launcher or NCCL does here."""
    prefixes = ("TORCHPOD_", "NCCL_", "CUDA_", "NVIDIA_", "PET_", "SLURM_", "MASTER_", "WORLD_SIZE", "RANK")
    return {k: one_line(v, 200) for k, v in sorted(env.items()) if k.startswith(prefixes)}


def table(summary: Mapping[str, Any]) -> str:
    """summary.txt: the verdict, the device, then one row per step."""
    facts = summary.get("environment", {})
    torch = (f"torch {facts['torch']}, CUDA build {facts.get('cuda_build') or 'none'}, "
             f"NCCL {facts.get('nccl') or '?'}" if facts.get("torch") else "no torch")
    head = [f"torchpod GPU check: {summary['verdict']} (exit {summary['exit_code']}: "
            f"{EXIT_CODES.get(summary['exit_code'], '?')})",
            f"device: {one_line(summary.get('device') or 'none', 80)} ({summary.get('gpus', 0)} visible to torch); "
            f"{torch}; python {facts.get('python', '?')}",
            f"{summary.get('wall_s', 0):.1f} s of --timeout-s {summary.get('timeout_s', 0):.0f}"
            + ("; rehearsal: GPU steps run on the CPU" if summary.get("rehearse") else ""), ""]
    rows = [("step", "verdict", "exit", "wall s", "reason")]
    for s in summary["steps"]:
        code = "timeout" if s["timed_out"] else "-" if s["exit_code"] is None else str(s["exit_code"])
        rows.append((s["name"], s["verdict"], code, f"{s['wall_s']:.1f}", one_line(s["reason"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]:>{widths[3]}}  {r[4]}".rstrip()
             for r in rows]
    return "\n".join(head + lines + ["", "raw output: logs/<step>.stdout, logs/<step>.stderr; NCCL logs: nccl/"])


def check_out(value: str) -> Path:
    """The folder ``--out`` names, absolute, when it is new or an empty folder; else one
    UsageError. A link is refused even to an empty folder: the check writes where it was
    told, and nothing it writes replaces a file (every file is created exclusively)."""
    expected = "expected a new or empty folder, e.g. --out /tmp/gpu-check"
    if not value or "\0" in value:
        raise UsageError(f"--out={value!r} is not a path; {expected}")
    path = Path(os.path.abspath(value))
    try:
        st = path.lstat()
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise UsageError(f"--out={value!r} cannot be read ({exc.strerror or exc}); {expected}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"--out={value!r} is a symbolic link; {expected}, not a link")
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "not a folder"
        raise UsageError(f"--out={value!r} is {kind}; {expected} (this check never overwrites)")
    try:
        entries = os.listdir(path)
    except OSError as exc:
        raise UsageError(f"--out={value!r} cannot be listed ({exc.strerror or exc}); {expected}") from None
    if entries:
        raise UsageError(f"--out={value!r} is a folder with {len(entries)} entries; {expected} "
                         "(this check never overwrites)")
    return path


def parse_timeout(text: str) -> float:
    if not re.fullmatch(r"[0-9]{1,5}", text, flags=re.ASCII) or not 30 <= int(text) <= 3600:
        raise UsageError(f"--timeout-s={text!r} is not a time limit; expected whole seconds from 30 to 3600, "
                         f"e.g. {DEFAULT_TIMEOUT_S}")
    return float(text)


# -- pure: judging what a step printed ---------------------------------------------------------

def last_error(text: str) -> str:
    """The line that says what went wrong: the last error or exception line, torchrun's own
    ChildFailedError summary left out (it names no cause); else the last line."""
    lines = [re.sub(r"^\[(?:rank|default)\d*\]:\s*", "", ln).strip() for ln in text.splitlines() if ln.strip()]
    found = [ln for ln in lines if re.search(r"(?:\b\w*(?:Error|Exception)\b.*:|torchpod: error:)", ln)
             and "ChildFailedError" not in ln]
    return (found or lines or [""])[-1]


def _failed_run(ran_rc: int | None, timed_out: bool, limit: float, stderr: str) -> str | None:
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


# -- the edge: processes, files, the clock ----------------------------------------------------

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


def process_tree(root: int) -> list[tuple[int, str]]:
    """(pid, start time) of ``root`` and every descendant, read from /proc: torchrun starts
    its workers in sessions of their own, so a process group does not hold them."""
    children: dict[int, list[tuple[int, str]]] = {}
    start_of: dict[int, str] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        fields = _proc_stat(entry)
        if fields is None:
            continue
        pid, ppid = int(entry), int(fields[1])
        start_of[pid] = fields[19]
        children.setdefault(ppid, []).append((pid, fields[19]))
    tree, todo = [(root, start_of.get(root, ""))], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            tree.append(child)
            todo.append(child[0])
    return tree


def _proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold any bytes, ")" too),
    through the bounded reader; None for a process gone or a line not of that form."""
    path = f"/proc/{pid}/stat"
    try:
        text = readers.read_bytes(path, what=path, expected="procfs's stat", cap=readers.ATTR_CAP)
    except InputError:
        return None
    _, paren, tail = text.decode("utf-8", "replace").rpartition(")")
    fields = tail.split()
    return fields if paren and len(fields) > 19 else None


def _alive(pid: int, started: str) -> bool:
    fields = _proc_stat(pid)
    if fields is None:
        return False
    return fields[0] != "Z" and (not started or fields[19] == started)  # the same process, not a reused pid


def _signal(tree: Sequence[tuple[int, str]], sig: int) -> None:
    for pid, started in tree:
        if _alive(pid, started):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to ``proc``'s whole tree, then SIGKILL to what is left after KILL_GRACE_S."""
    tree = process_tree(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass
    _signal(tree, signal.SIGTERM)
    end = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < end and (proc.poll() is None or any(_alive(p, s) for p, s in tree[1:])):
        time.sleep(0.1)
    _signal(tree, signal.SIGKILL)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:  # bounded even here: a process stuck in the kernel (a wedged GPU driver) survives SIGKILL
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass


def execute(argv: Sequence[str], env: Mapping[str, str], cwd: Path, limit_s: float, stdout: Path,
            stderr: Path) -> Ran:
    """Run ``argv`` with its output in two new files; stop its tree at ``limit_s`` or Ctrl-C."""
    started = time.monotonic()
    with open(stdout, "xb") as out, open(stderr, "xb") as err:
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=dict(env),
                                    cwd=cwd, start_new_session=True)
        except OSError as exc:
            err.write(f"gpu_check: {argv[0]!r} could not start: {exc.strerror or exc}\n".encode())
            return Ran(tuple(argv), None, time.monotonic() - started, False, stdout, stderr)
        timed_out = False
        try:
            proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop(proc)
        except BaseException:  # Ctrl-C: never leave a torchrun and its workers behind
            stop(proc)
            raise
    return Ran(tuple(argv), proc.returncode, time.monotonic() - started, timed_out, stdout, stderr)


# A step's logs are read through the launcher's bounded reader, undecodable bytes replaced; a
# log that cannot be read (gone, or something else in its place) is recorded as one line
# saying why, never raised: the check goes on and records what it can.
LOG = "a step's log (gpu_check opens it for the command's output)"


def read_head(path: Path, cap: int = READ_CAP) -> str:
    try:
        return readers.read_head(path, what=str(path), expected=LOG, limit=cap).decode("utf-8", "replace")
    except InputError as exc:
        return f"(gpu_check: {exc})"


def read_tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        return readers.tail_text(path, what=str(path), expected=LOG, chars=chars)
    except InputError as exc:
        return f"(gpu_check: {exc})"


@dataclass
class Context:
    """What every step reads: where to write, which Python, the clock, what came before."""

    out: Path
    python: str
    env: dict[str, str]  # the caller's, with the checkout's launcher first on PYTHONPATH
    deadline: float  # time.monotonic()
    rehearse: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    done: dict[str, Step] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return int(self.facts.get("device_count") or 0)

    def run(self, spec: Spec, argv: Sequence[str], added: Mapping[str, str] | None = None) -> tuple[Step, Ran]:
        """Run one command for ``spec`` under its own limit; the Step holds all but the verdict."""
        limit = min(spec.timeout_s, self.deadline - time.monotonic())
        logs = {"stdout": f"logs/{spec.name}.stdout", "stderr": f"logs/{spec.name}.stderr"}
        ran = execute(argv, {**self.env, **(added or {})}, self.out, limit, self.out / logs["stdout"],
                      self.out / logs["stderr"])
        step = Step(spec.name, spec.what, FAILED, argv=list(argv), env_added=dict(added or {}),
                    exit_code=ran.exit_code, wall_s=round(ran.wall_s, 2), timed_out=ran.timed_out,
                    stdout_tail=read_tail(ran.stdout), stderr_tail=read_tail(ran.stderr), logs=logs)
        if ran.timed_out or ran.exit_code is None:  # no judge reads a run that did not finish
            step.reason = _failed_run(ran.exit_code, ran.timed_out, limit, step.stderr_tail) or ""
        return step, ran

    def launcher(self, *args: str) -> list[str]:
        return [self.python, "-m", "torchpod", *args]


def _judged(step: Step, verdict: tuple) -> Step:
    """``step`` with a judge's (verdict, reason[, facts]), unless it already timed out or did not start."""
    if step.timed_out or step.exit_code is None:
        return step
    step.verdict, step.reason = verdict[0], one_line(verdict[1])
    if len(verdict) > 2:
        step.facts.update(verdict[2])
    return step


def step_nvidia_smi(ctx: Context, spec: Spec) -> Step:
    tool = shutil.which("nvidia-smi", path=ctx.env.get("PATH", os.defpath))
    if tool is None:
        return Step(spec.name, spec.what, SKIPPED, "nvidia-smi is not on PATH")
    step, ran = ctx.run(spec, [tool, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    return _judged(step, judge_nvidia_smi(ran.exit_code, read_head(ran.stdout)))


def step_environment(ctx: Context, spec: Spec) -> Step:
    step, ran = ctx.run(spec, [ctx.python, "-c", PROBE])
    lines = [ln for ln in read_head(ran.stdout).splitlines() if ln.startswith(FACTS_PREFIX)]
    try:
        ctx.facts.update(json.loads(lines[-1][len(FACTS_PREFIX):]) if lines else {})
    except ValueError:
        pass
    ctx.facts["inherited"] = inherited(ctx.env)
    step.facts.update(ctx.facts)
    smi = ctx.done.get("nvidia-smi")
    return _judged(step, judge_environment(ctx.facts, len(smi.facts.get("gpus", [])) if smi else 0))


def step_doctor(ctx: Context, spec: Spec) -> Step:
    step, ran = ctx.run(spec, ctx.launcher("doctor", "--format", "json"))
    return _judged(step, judge_doctor(ran.exit_code, read_head(ran.stdout), ctx.gpus))


def step_plan(ctx: Context, spec: Spec) -> Step:
    step, ran = ctx.run(spec, ctx.launcher("plan", "--format", "json", "--", str(DDP_SCRIPT), "--steps", "20"))
    return _judged(step, judge_plan(ran.exit_code, read_head(ran.stdout), ctx.gpus))


def step_preflight_first(ctx: Context, spec: Spec) -> Step:
    step, ran = ctx.run(spec, ctx.launcher("plan", "--format", "json", "--", str(DDP_SCRIPT)),
                        {"TORCHPOD_PREFLIGHT": "1"})
    return _judged(step, judge_preflight_first(ran.exit_code, read_head(ran.stdout), str(DDP_SCRIPT)))


def _nccl_run(ctx: Context, spec: Spec, args: Sequence[str]) -> tuple[Step, Ran]:
    """A launcher run with NCCL's INFO log written per process under nccl/ (%h host, %p pid)."""
    folder = ctx.out / "nccl"
    folder.mkdir(exist_ok=True)
    added = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(folder / f"{spec.name}.%h.%p.log")}
    step, ran = ctx.run(spec, ctx.launcher(*args), added)
    found = sorted(str(p.relative_to(ctx.out)) for p in folder.glob(f"{spec.name}.*.log") if p.stat().st_size)
    step.facts.update(nccl_logs=found, nccl_log=found[0] if found else None)
    return step, ran


def _workload(ctx: Context, spec: Spec, args: Sequence[str]) -> Step:
    step, ran = _nccl_run(ctx, spec, args)
    failed = _failed_run(ran.exit_code, ran.timed_out, spec.timeout_s, read_tail(ran.stderr))
    if failed:
        return _judged(step, (FAILED, failed))
    return _judged(step, judge_run(results(read_head(ran.stdout)), "nccl" if ctx.gpus else "gloo",
                                   max(ctx.gpus, 1)))


def step_allreduce(ctx: Context, spec: Spec) -> Step:
    return _workload(ctx, spec, ["bench", "allreduce", "--max-bytes", "64M", "--json", str(ctx.out / "allreduce.json")])


def step_ddp(ctx: Context, spec: Spec) -> Step:
    return _workload(ctx, spec, ["run", str(DDP_SCRIPT), "--steps", "20"])


def step_nccl_log(ctx: Context, spec: Spec) -> Step:
    log = ctx.out / ctx.done[spec.log_of].facts["nccl_log"]
    step, ran = ctx.run(spec, ctx.launcher("doctor", "--nccl-log", str(log), "--format", "json"))
    verdict = judge_doctor(ran.exit_code, read_head(ran.stdout), ctx.gpus)
    if ran.exit_code == 2:  # bad input: the doctor refused the log itself
        verdict = (FAILED, f"exit 2: {last_error(read_tail(ran.stderr))}", verdict[2])
    return _judged(step, verdict)


def step_preflight(ctx: Context, spec: Spec) -> Step:
    step, ran = _nccl_run(ctx, spec, ["run", "-m", "torchpod.preflight", "--json", str(ctx.out / "preflight.json")])
    output = read_tail(ran.stdout, READ_CAP) + "\n" + read_tail(ran.stderr, READ_CAP)
    return _judged(step, judge_preflight(ran.exit_code, output))


def step_hang(ctx: Context, spec: Spec) -> Step:
    script = ROOT / "examples" / "allreduce_check.py"
    step, ran = ctx.run(spec, ctx.launcher("run", "--nproc-per-node", "2", "--", str(script), "--stall-rank", "1",
                                           "--stall-seconds", "120"),
                        {"CUDA_VISIBLE_DEVICES": "", "TORCHPOD_STALL_WINDOW": "10"})
    return _judged(step, judge_hang(ran.exit_code, read_tail(ran.stderr, READ_CAP)))


WATCH_ARMS = ("off", "on", "on", "off")  # the order: each arm once early, once late
WINDOWS = {"off": "off", "on": "300"}


def step_watch_cost(ctx: Context, spec: Spec) -> Step:
    """The DDP example four times; each run's logs under its own name (watch-cost.N.ARM)."""
    arms: dict[str, list[float]] = {"off": [], "on": []}
    runs = []
    for i, arm in enumerate(WATCH_ARMS):
        share = replace(spec, name=f"{spec.name}.{i}.{arm}", timeout_s=spec.timeout_s / len(WATCH_ARMS))
        one, ran = ctx.run(share, ctx.launcher("run", str(DDP_SCRIPT), "--steps", "100"),
                           {"TORCHPOD_STALL_WINDOW": WINDOWS[arm]})
        found = results(read_head(ran.stdout)) if ran.exit_code == 0 else []
        rate = found[0].get("steps_per_s") if found else None
        if isinstance(rate, (int, float)) and rate > 0:
            arms[arm].append(float(rate))
        runs.append({"arm": arm, "exit_code": ran.exit_code, "wall_s": one.wall_s, "steps_per_s": rate,
                     "logs": one.logs})
    step = Step(spec.name, spec.what, FAILED, exit_code=0 if all(r["exit_code"] == 0 for r in runs) else 1,
                wall_s=round(sum(r["wall_s"] for r in runs), 2), facts={"runs": runs})
    failed = [f"{i} ({r['arm']}): exit {r['exit_code']}" for i, r in enumerate(runs) if r["exit_code"] != 0]
    return _judged(step, judge_watch_cost(arms, failed))


RUNNERS: dict[str, Callable[[Context, Spec], Step]] = {
    "nvidia-smi": step_nvidia_smi, "environment": step_environment, "doctor": step_doctor, "plan": step_plan,
    "preflight-first": step_preflight_first, "allreduce": step_allreduce, "allreduce-nccl-log": step_nccl_log,
    "ddp": step_ddp, "ddp-nccl-log": step_nccl_log, "preflight": step_preflight, "hang": step_hang,
    "watch-cost": step_watch_cost,
}


def run_steps(ctx: Context, specs: Sequence[Spec] = STEPS) -> list[Step]:
    """Every step in order, each skipped with its reason or run under its own limit."""
    steps = []
    for i, spec in enumerate(specs, 1):
        why = skip_reason(spec, ctx.facts, ctx.done, ctx.deadline - time.monotonic(), ctx.rehearse)
        try:
            step = Step(spec.name, spec.what, SKIPPED, why) if why else RUNNERS[spec.name](ctx, spec)
        except Exception as exc:  # a bug here, or output no judge foresaw: the summary is still written
            step = Step(spec.name, spec.what, FAILED, f"the check itself failed: {type(exc).__name__}: {exc}")
        ctx.done[spec.name] = step
        steps.append(step)
        print(f"gpu_check: [{i}/{len(specs)}] {spec.name}: {step.verdict} ({step.wall_s:.1f} s) "
              f"{one_line(step.reason)}", file=sys.stderr, flush=True)
    return steps


def summarise(ctx: Context, steps: Sequence[Step], started: str, wall_s: float, limit_s: float) -> dict:
    data = [s.as_dict() for s in steps]
    verdict, code = overall(data, ctx.facts)
    smi = ctx.done.get("nvidia-smi")
    named = (ctx.facts.get("devices") or [g["name"] for g in (smi.facts.get("gpus", []) if smi else [])] or [None])
    return {"check": "bench/gpu_check.py", "verdict": verdict, "exit_code": code,
            "exit_codes": {str(k): v for k, v in EXIT_CODES.items()}, "device": named[0],
            "device_slug": device_slug(named[0]) if named[0] else None, "gpus": ctx.gpus,
            "started": started, "wall_s": round(wall_s, 2), "timeout_s": limit_s, "rehearse": ctx.rehearse,
            "python": ctx.python, "launcher": str(LAUNCHER), "environment": dict(ctx.facts), "steps": data}


USAGE = "gpu_check.py --out DIR [--timeout-s N] [--python PATH] [--rehearse]"


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one UsageError line (a usage block and exit 2 would be several)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; expected {USAGE}")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = _Parser(prog="gpu_check.py", usage=USAGE,
                     description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--out", required=True, help="a new or empty folder for summary.json, summary.txt and logs")
    parser.add_argument("--timeout-s", default=str(DEFAULT_TIMEOUT_S),
                        help=f"the whole check's limit in seconds, 30 to 3600 (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--python", default=sys.executable, help="the Python with torch that runs the launcher")
    parser.add_argument("--rehearse", action="store_true", help="with no GPU, run the GPU steps on the CPU (gloo)")
    args = parser.parse_args(list(argv))
    args.timeout_s = parse_timeout(args.timeout_s)
    python = shutil.which(args.python)
    if python is None:
        raise UsageError(f"--python={args.python!r} is not an executable; expected a Python with torch, "
                         "e.g. --python /usr/bin/python3")
    args.python = python
    args.out = check_out(args.out)
    return args


def _write(out: Path, summary: dict) -> str:
    text = table(summary)
    with open(out / "summary.json", "x") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    with open(out / "summary.txt", "x") as f:
        f.write(text + "\n")
    return text


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    environ = dict(os.environ if env is None else env)
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        (args.out / "logs").mkdir(parents=True, exist_ok=True)
    except UsageError as exc:
        print(f"gpu_check: error: {one_line(exc, 400)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"gpu_check: error: --out cannot be created ({exc.strerror or exc}); expected a new or empty folder "
              "under a writable one", file=sys.stderr)
        return EXIT_USAGE
    pythonpath = os.pathsep.join([str(LAUNCHER), *([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else [])])
    ctx = Context(args.out, args.python, {**environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"},
                  time.monotonic() + args.timeout_s - RESERVE_S, args.rehearse)
    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    try:
        steps = run_steps(ctx)
    except KeyboardInterrupt:
        steps = list(ctx.done.values()) + [Step("interrupted", "Ctrl-C", FAILED, "interrupted before the end")]
    summary = summarise(ctx, steps, started, time.monotonic() - t0, args.timeout_s)
    print(_write(args.out, summary))
    if summary["exit_code"] == EXIT_NO_TORCH:
        print(f"gpu_check: error: torch is not importable by {args.python} "
              f"({one_line(ctx.facts['torch_error'], 160)}); expected PyTorch with CUDA, or --python naming the "
              "Python that has it", file=sys.stderr)
    elif summary["device_slug"] and summary["gpus"]:
        print(f"gpu_check: to keep it: cp -r {args.out} bench/results/gpu-check-{summary['device_slug']} "
              "(read the logs for host names first)", file=sys.stderr)
    return summary["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
