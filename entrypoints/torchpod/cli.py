"""Command line of the torchpod launcher, and the only place that touches the process.

``main`` reads ``sys.argv``, ``os.environ``, the hostname, `nvidia-smi` and
`scontrol`; everything below it takes those as arguments (see resolve.py).

    torchpod run [TORCHRUN OPTIONS] [--] SCRIPT [ARGS...]
    torchpod plan [--format json|shell] [TORCHRUN OPTIONS] [-- SCRIPT ARGS...]
    torchpod SCRIPT [ARGS...]          (same as `run`: the image's ENTRYPOINT)
    torchpod --version | --help

`plan --format shell` prints only comments and assignments, safe to `eval`: the added
variables as `export NAME='value'` and the torchrun command line as TORCHPOD_COMMAND
(quoted words), run by `eval "exec $TORCHPOD_COMMAND"`.

The TORCHPOD_* variables it reads are listed in ``torchpod --help``, generated from
contract.SETTINGS (one table: name, meaning, default); torchrun's own PET_* also apply.
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path
from typing import Mapping, Sequence

from . import __version__, bench_allreduce, doctor, gpus, preflight, script
from .contract import ENV_DOCTOR, ENV_PREFLIGHT, PREFLIGHT_MODULE, SETTINGS, Setting, check_settings, switch
from .errors import InputError, RuntimeFailure, TorchpodError, one_line
from .facts import HELPER_TIMEOUT_S, configured_sysfs, gather_facts, gpu_count, sysfs_root
from .plan import REPLACES, LaunchPlan, command, preflight_first, to_json, to_shell
from .resolve import resolve
from .supervise import supervise
from .torchrun_flags import Invocation, split_command_line

# The launcher's entry, and the facts it gathers (torchpod.facts) under the names callers
# have always imported from here.
__all__ = ["main", "gather_facts", "HELPER_TIMEOUT_S"]

_COMMANDS = """\
usage: torchpod run [TORCHRUN OPTIONS] [--] SCRIPT [ARGS...]
       torchpod plan [--format json|shell] [TORCHRUN OPTIONS] [-- SCRIPT [ARGS...]]
       torchpod doctor [--sysfs-root DIR] [--nccl-log FILE] [--format text|json]
       torchpod bench allreduce [--min-bytes 1K] [--max-bytes 64M] [--iters 10] [--json FILE]
       torchpod SCRIPT [ARGS...]        (means `torchpod run SCRIPT ARGS...`)
       torchpod --version

Detects the scheduler (Run:ai, Volcano, Slurm, PBS, Kubeflow, MPI, the env:// convention
MASTER_ADDR/WORLD_SIZE/RANK, else one node) and runs `python -m torch.distributed.run`
with the matching rendezvous. Torchrun options given here and PET_* variables win over
detection. `torchpod plan` shows the decision and why, without running anything;
`torchpod doctor` says why NCCL is (not) using RDMA here."""


def environment_help(settings: Sequence[Setting] = SETTINGS) -> str:
    """--help's environment section, one entry per variable torchpod reads."""
    lines = ["environment:"]
    for item in settings:
        default = f" (default: {item.default})" if item.default is not None else ""
        lines.append(f"  {item.name}")
        lines.extend(textwrap.wrap(item.meaning + default, width=88, initial_indent="      ",
                                   subsequent_indent="      "))
    return "\n".join(lines)


USAGE = _COMMANDS + "\n\n" + environment_help()

SUBCOMMANDS = ("run", "plan", "doctor", "bench")
BENCHES = {"allreduce": "torchpod.bench_allreduce"}  # workloads: run through torchrun on every node
# torchpod's own workloads (run as modules): their options are checked here, before torchrun
# starts a worker that would refuse them after the rendezvous
WORKLOAD_OPTIONS = {BENCHES["allreduce"]: bench_allreduce.check_options, PREFLIGHT_MODULE: preflight.check_options}
DOCTOR_OPTIONS = ("--sysfs-root", "--nccl-log", "--format")


def child_env(env: Mapping[str, str], plan: LaunchPlan) -> dict[str, str]:
    """torchrun's environment: the caller's, plus the plan's additions where unset (a HOME or
    TMPDIR the plan names replaces the unusable one: plan.REPLACES)."""
    merged = dict(env)
    for key, value in plan.env:
        if key in REPLACES:
            merged[key] = value
        else:
            merged.setdefault(key, value)
    return merged


def private_home(plan: LaunchPlan) -> None:
    """Create the HOME the plan chose (torchpod.home), or check the one there is this
    user's own: a name under a shared /tmp is predictable, so a directory another user
    made there (or a link) is refused rather than used to cache code torch will run."""
    path = dict(plan.env).get("HOME")
    if path is None:
        return
    try:
        os.mkdir(path, 0o700)
        return
    except FileExistsError:
        st = os.lstat(path)
    except OSError as exc:
        raise RuntimeFailure(f"cannot create HOME={path!r} ({exc.strerror or exc}); expected a writable "
                             "temporary directory, or set HOME to a writable directory") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeFailure(f"HOME={path!r} exists and is not a private directory of this user (owner uid "
                             f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); expected one torchpod made "
                             "(mode 700); remove it or set HOME to a writable directory")


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ if env is None else env)
    try:
        return _dispatch(args, environ)
    except TorchpodError as exc:
        print(f"torchpod: error: {one_line(exc)}", file=sys.stderr)
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
    command = first if first in SUBCOMMANDS else "run"
    check_settings(env, command)
    if first == "plan":
        inv = check_workload(split_command_line(args[1:], own_options=("--format",)))
        fmt = inv.own.get("--format", "json")
        if fmt not in ("json", "shell"):
            raise InputError(f"--format {fmt!r} is not a plan format; expected json or shell")
        plan = with_preflight(env, resolve(env, gather_facts(env), inv))
        print(to_json(plan, sys.executable) if fmt == "json" else to_shell(plan, sys.executable))
        return 0
    if first == "doctor":
        return run_doctor(args[1:], env)
    if first == "bench":
        if len(args) < 2 or args[1] not in BENCHES:
            raise InputError(f"bench {args[1] if len(args) > 1 else ''!r} is not a benchmark; expected one of "
                             f"{', '.join(BENCHES)}, e.g. `torchpod bench allreduce`")
        return run(check_workload(split_command_line(["--module", BENCHES[args[1]], *args[2:]])), env, Path.cwd())
    rest = args[1:] if first == "run" else args
    inv = check_workload(split_command_line(rest))
    if inv.script is None:
        raise InputError(NO_SCRIPT)
    return run(inv, env, Path.cwd())


def check_workload(inv: Invocation) -> Invocation:
    """``inv``, once the options of a torchpod workload it runs as a module are checked."""
    check = WORKLOAD_OPTIONS.get(inv.script or "") if "--module" in inv.passthrough else None
    if check is not None:
        check(inv.script_args)
    return inv


def _doctor_options(args: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name not in DOCTOR_OPTIONS:
            raise InputError(f"unknown doctor option {args[i]!r}; expected {', '.join(DOCTOR_OPTIONS)}")
        if not eq:
            if i + 1 >= len(args):
                raise InputError(f"doctor option {name} needs a value; e.g. {name}=VALUE")
            value, i = args[i + 1], i + 1
        opts[name] = value
        i += 1
    fmt = opts.get("--format", "text")
    if fmt not in ("text", "json"):
        raise InputError(f"--format {fmt!r} is not a doctor format; expected text or json")
    return opts


def run_doctor(args: list[str], env: dict[str, str]) -> int:
    opts = _doctor_options(args)
    verdict = doctor.read_log(opts["--nccl-log"]) if "--nccl-log" in opts else None
    sysfs = sysfs_root("--sysfs-root", opts["--sysfs-root"]) if "--sysfs-root" in opts else configured_sysfs(env)
    fabric, checks = doctor.preflight(env, doctor.gather(env, sysfs, gpus.visible(env, gpu_count(env))[0]))
    print(doctor.report(checks, verdict, opts.get("--format", "text")))
    return doctor.exit_code(fabric, checks, verdict)


NO_SCRIPT = ("no script given; expected `torchpod run [TORCHRUN OPTIONS] SCRIPT [ARGS...]`, "
             "e.g. `torchpod train.py --epochs 3`")


def with_preflight(env: Mapping[str, str], plan: LaunchPlan) -> LaunchPlan:
    """The plan itself, or under TORCHPOD_PREFLIGHT=1 the plan whose workers run preflight first."""
    if not switch(env, ENV_PREFLIGHT):
        return plan
    preflight.allow_undecided(False, env)  # else each worker would refuse a bad value after the rendezvous
    return preflight_first(plan)


def run(inv: Invocation, env: dict[str, str], cwd: Path) -> int:
    facts = gather_facts(env)
    if switch(env, ENV_DOCTOR):
        _, checks = doctor.preflight(env, doctor.gather(env, facts.sysfs_root, gpus.visible(env, facts.gpu_count)[0]))
        refused = doctor.refusal(checks)
        if refused:
            raise RuntimeFailure(refused)
    plan = resolve(env, facts, inv)
    if plan.script is None:  # main() refuses a command line without one first
        raise InputError(NO_SCRIPT)
    where = f"node {plan.node_rank} ({plan.hostname})" if plan.node_rank is not None else f"node {plan.hostname}"
    script.check(plan.script, plan.passthrough, cwd=cwd, env=env, where=where)
    plan = with_preflight(env, plan)
    # torchpod.torchrun is torch.distributed.run with a one-line rendezvous-timeout message
    argv = command(plan, sys.executable, module="torchpod.torchrun")
    if argv is None:
        raise InputError(NO_SCRIPT)
    summary = (
        f"torchpod: {plan.scheduler}: node {plan.node_rank} of {plan.nnodes}, "
        f"{plan.nproc_per_node} proc/node, {plan.rdzv_backend} at {plan.rdzv_endpoint} "
        f"(id {plan.rdzv_id})"
    )
    print(summary, file=sys.stderr, flush=True)
    private_home(plan)
    return supervise(argv, child_env(env, plan), handled=plan.handled_signals)
