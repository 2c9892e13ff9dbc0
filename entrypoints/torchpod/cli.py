"""Command line of the torchpod launcher, and the only place that touches the process.

``main`` reads ``sys.argv``, ``os.environ``, the hostname, `nvidia-smi` and
`scontrol`; everything below it takes those as arguments (see resolve.py).

    torchpod run [TORCHRUN OPTIONS] [--] SCRIPT [ARGS...]
    torchpod plan [--format json|shell] [TORCHRUN OPTIONS] [-- SCRIPT ARGS...]
    torchpod SCRIPT [ARGS...]          (same as `run`: the image's ENTRYPOINT)
    torchpod --version | --help

Environment: TORCHPOD_SCHEDULER (force a scheduler), TORCHPOD_RDZV_PORT (port for
endpoints built from host lists, default 29400), TORCHPOD_RDZV_TIMEOUT (seconds to wait
for all nodes), TORCHPOD_HOSTNAME (this node's listed name), and torchrun's own PET_*.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from . import __version__
from .errors import InputError, TorchpodError
from .gpus import needs_probe
from .plan import LaunchPlan, command, to_json, to_shell
from .resolve import resolve
from .schedulers.common import Facts
from .supervise import supervise
from .torchrun_flags import Invocation, split_command_line

USAGE = """\
usage: torchpod run [TORCHRUN OPTIONS] [--] SCRIPT [ARGS...]
       torchpod plan [--format json|shell] [TORCHRUN OPTIONS] [-- SCRIPT [ARGS...]]
       torchpod SCRIPT [ARGS...]        (means `torchpod run SCRIPT ARGS...`)
       torchpod --version

Detects the scheduler (Run:ai, Volcano, Slurm, PBS, Kubeflow, MPI, else one node) and
runs `python -m torch.distributed.run` with the matching rendezvous. Torchrun options
given here and PET_* variables win over detection. TORCHPOD_SCHEDULER=<name> forces a
scheduler; TORCHPOD_RDZV_PORT, TORCHPOD_RDZV_TIMEOUT and TORCHPOD_HOSTNAME tune it.
`torchpod plan` shows the decision and why, without running anything."""

SUBCOMMANDS = ("run", "plan")


def gather_facts(env: Mapping[str, str]) -> Facts:
    """Ask the machine what the pure resolver needs: hostname, GPUs, Slurm hosts."""
    hostname = (env.get("TORCHPOD_HOSTNAME") or "").strip() or socket.gethostname()
    gpu_count = None
    if needs_probe(env) and shutil.which("nvidia-smi"):
        out = _quiet(["nvidia-smi", "-L"])
        if out is not None:
            gpu_count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    slurm_hosts = None
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    if nodelist and shutil.which("scontrol"):
        out = _quiet(["scontrol", "show", "hostnames", nodelist])
        if out and out.split():
            slurm_hosts = tuple(out.split())
    return Facts(hostname=hostname, gpu_count=gpu_count, slurm_hosts=slurm_hosts,
                 torchrun_signals=torchrun_accepts("--signals-to-handle"))


def torchrun_accepts(option: str) -> bool:
    """Whether the installed torch's torchrun defines ``option``, read from its source.

    Importing torch.distributed.run to ask its parser costs a second or more per launch;
    the option's spelling in run.py answers the same question. No torch: True (the
    launch then fails on the missing torch, which is the real problem).
    """
    spec = importlib.util.find_spec("torch")  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        return True
    run_py = Path(next(iter(spec.submodule_search_locations))) / "distributed" / "run.py"
    try:
        return f'"{option}"' in run_py.read_text(encoding="utf-8")
    except OSError:
        return True


def _quiet(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def child_env(env: Mapping[str, str], plan: LaunchPlan) -> dict[str, str]:
    """torchrun's environment: the caller's, plus the plan's additions where unset."""
    merged = dict(env)
    for key, value in plan.env:
        merged.setdefault(key, value)
    return merged


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ if env is None else env)
    try:
        return _dispatch(args, environ)
    except TorchpodError as exc:
        message = " ".join(str(exc).split())
        print(f"torchpod: error: {message}", file=sys.stderr)
        return exc.exit_code


def _dispatch(args: list[str], env: dict[str, str]) -> int:
    if not args:
        print(USAGE, file=sys.stderr)
        return 2
    first = args[0]
    if first == "--version":
        print(f"torchpod {__version__}")
        return 0
    if first in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if first == "plan":
        inv = split_command_line(args[1:], own_options=("--format",))
        fmt = inv.own.get("--format", "json")
        if fmt not in ("json", "shell"):
            raise InputError(f"--format {fmt!r} is not a plan format; expected json or shell")
        plan = resolve(env, gather_facts(env), inv)
        print(to_json(plan, sys.executable) if fmt == "json" else to_shell(plan, sys.executable))
        return 0
    rest = args[1:] if first == "run" else args
    inv = split_command_line(rest)
    if inv.script is None:
        raise InputError(
            "no script given; expected `torchpod run [TORCHRUN OPTIONS] SCRIPT [ARGS...]`, "
            "e.g. `torchpod train.py --epochs 3`"
        )
    return run(inv, env)


def run(inv: Invocation, env: dict[str, str]) -> int:
    plan = resolve(env, gather_facts(env), inv)
    # torchpod.torchrun is torch.distributed.run with a one-line rendezvous-timeout message
    argv = command(plan, sys.executable, module="torchpod.torchrun")
    summary = (
        f"torchpod: {plan.scheduler}: node {plan.node_rank} of {plan.nnodes}, "
        f"{plan.nproc_per_node} proc/node, {plan.rdzv_backend} at {plan.rdzv_endpoint} "
        f"(id {plan.rdzv_id})"
    )
    print(summary, file=sys.stderr, flush=True)
    return supervise(argv, child_env(env, plan), handled=plan.handled_signals)
