"""bench/gpu_check.py's steps: which steps the check takes, in order and under what limits
(``STEPS``), why one is skipped (``skip_reason``), what each runs (``RUNNERS``: a command per
step, judged by bench/_gpu_judges.py) and each step's record (``Step``, as summary.json holds
it). ``run_steps`` takes them in order; a step that crashes the check is a failed row and the
rest still run.

Each command runs through bench/_gpu_processes.py, under the step's own limit inside the
whole check's deadline, with the checkout's launcher first on PYTHONPATH. torch is imported
only by those child processes (the ``environment`` step's ``PROBE``), never here: a CUDA
import that hangs or crashes must not keep the check from writing its summary.

A helper of the program (its name starts with ``_``: no task of its own), which puts
entrypoints/ on ``sys.path`` before it imports this module.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from _gpu_judges import (
    FAILED,
    NO_GPU,
    SKIPPED,
    failed_run,
    judge_doctor,
    judge_environment,
    judge_hang,
    judge_nvidia_smi,
    judge_plan,
    judge_preflight,
    judge_preflight_first,
    judge_run,
    judge_watch_cost,
    last_error,
    one_line,
    results,
)
from _gpu_processes import READ_CAP, Ran, execute, read_head, read_tail

ROOT = Path(__file__).resolve().parents[1]
DDP_SCRIPT = ROOT / "examples" / "ddp_resnet.py"
MIN_STEP_S = 5.0  # a step with less time left than this is skipped, not started
FACTS_PREFIX = "GPU_CHECK_FACTS "

# Runs in a child with the launcher's Python: importing torch (and CUDA) in the check's own
# process could hang or crash it, and the check must always write its summary.
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


def inherited(env: Mapping[str, str]) -> dict[str, str]:
    """The caller's variables that change what the launcher or NCCL does here."""
    prefixes = ("TORCHPOD_", "NCCL_", "CUDA_", "NVIDIA_", "PET_", "SLURM_", "MASTER_", "WORLD_SIZE", "RANK")
    return {k: one_line(v, 200) for k, v in sorted(env.items()) if k.startswith(prefixes)}


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
            step.reason = failed_run(ran.exit_code, ran.timed_out, limit, step.stderr_tail) or ""
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
    failed = failed_run(ran.exit_code, ran.timed_out, spec.timeout_s, read_tail(ran.stderr))
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
