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

import importlib.util
import os
import shutil
import socket
import stat
import sys
import textwrap
from pathlib import Path
from typing import Mapping, Sequence

from . import __version__, bench_allreduce, doctor, gpus, home, preflight, readers, script
from .contract import (
    ENV_DOCTOR,
    ENV_HOSTNAME,
    ENV_PREFLIGHT,
    ENV_SYSFS_ROOT,
    PREFLIGHT_MODULE,
    SETTINGS,
    SYSFS_ROOT_DEFAULT,
    Setting,
    setting,
)
from .errors import InputError, RuntimeFailure, TorchpodError, one_line
from .gpus import needs_probe
from .plan import REPLACES, LaunchPlan, command, preflight_first, to_json, to_shell
from .resolve import resolve
from .schedulers import slurm
from .schedulers.common import Facts
from .supervise import supervise
from .torchrun_flags import Invocation, split_command_line

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


# The one bound on a helper tool, for the plan's reading and the doctor's (readers.py says why).
HELPER_TIMEOUT_S = readers.HELPER_TIMEOUT_S


def gather_facts(env: Mapping[str, str]) -> Facts:
    """Ask the machine what the pure resolver needs: hostname, GPUs, Slurm hosts. The
    doctor takes these from here too, and reads only what it checks beyond them itself
    (doctor.gather), through the same runner and bound (readers.run_helpers).

    The helper tools run side by side under one deadline (HELPER_TIMEOUT_S), so a launch
    waits that long at most, however many of them hang."""
    hostname = setting(env, ENV_HOSTNAME) or socket.gethostname()
    helpers: dict[str, list[str]] = {}
    if needs_probe(env) and shutil.which("nvidia-smi"):
        helpers["gpus"] = ["nvidia-smi", "-L"]
    nodelist = slurm.nodelist(env)
    if nodelist and _expandable(*nodelist) and shutil.which("scontrol"):
        helpers["slurm"] = ["scontrol", "show", "hostnames", nodelist[1]]
    answers = readers.run_helpers(helpers)
    notes: list[str] = []
    gpu_count = slurm_hosts = None
    if "gpus" in answers:
        out, why = answers["gpus"]
        if out is not None and not why:
            gpu_count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        else:
            notes.append(f"nvidia-smi -L {why}: GPUs not counted")
    if "slurm" in answers and nodelist is not None:
        out, why = answers["slurm"]
        if out is not None and not why and out.split():
            slurm_hosts = tuple(out.split())
        else:
            notes.append(f"scontrol show hostnames {why or 'printed nothing'}: "
                         f"{nodelist[0]} expanded by torchpod's parser")
    given = setting(env, ENV_SYSFS_ROOT)
    sysfs = sysfs_root(ENV_SYSFS_ROOT.name, given) if given else Path(SYSFS_ROOT_DEFAULT)
    home_ok, tmp_ok, writable = home.probe(env)
    return Facts(hostname=hostname, gpu_count=gpu_count, slurm_hosts=slurm_hosts, sysfs_root=sysfs,
                 uid=os.getuid(), home_writable=home_ok, tmp_writable=tmp_ok, writable_tmp=writable,
                 torchrun_signals=torchrun_accepts("--signals-to-handle"), notes=tuple(notes))


def sysfs_root(source: str, value: str) -> Path:
    """A sysfs root the user named: a directory, or nothing there (a node without sysfs reads
    as one without RDMA devices, and the doctor names the path it looked under); a FIFO,
    file or device there is refused, never read as an empty sysfs."""
    path = Path(value)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise InputError(f"{source}={value!r} cannot be read ({exc.strerror or exc}); expected a directory "
                         "holding sysfs, e.g. /sys") from None
    if not stat.S_ISDIR(st.st_mode) and not path.is_dir():  # a link to a directory is one
        raise InputError(f"{source}={value!r} is not a directory; expected a directory holding sysfs, e.g. /sys")
    return path


def _expandable(name: str, value: str) -> bool:
    """Whether `scontrol show hostnames` may expand the list: not when it names more hosts
    than torchpod would take (gigabytes of output before the deadline); a list torchpod's
    parser rejects goes to scontrol, whose grammar is the reference."""
    try:
        return slurm.hostlist_size(name, value) <= slurm.MAX_HOSTS
    except InputError:
        return True


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
        text = readers.read_text(run_py, what=f"torch's {str(run_py)!r}", expected="torch's own run.py",
                                 cap=readers.DATA_CAP)
    except TorchpodError:
        return True
    return f'"{option}"' in text


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
    facts = gather_facts(env)
    sysfs = sysfs_root("--sysfs-root", opts["--sysfs-root"]) if "--sysfs-root" in opts else facts.sysfs_root
    fabric, checks = doctor.preflight(env, doctor.gather(env, sysfs, gpus.visible(env, facts.gpu_count)[0]))
    print(doctor.report(checks, verdict, opts.get("--format", "text")))
    return doctor.exit_code(fabric, checks, verdict)


NO_SCRIPT = ("no script given; expected `torchpod run [TORCHRUN OPTIONS] SCRIPT [ARGS...]`, "
             "e.g. `torchpod train.py --epochs 3`")


def with_preflight(env: Mapping[str, str], plan: LaunchPlan) -> LaunchPlan:
    """The plan itself, or under TORCHPOD_PREFLIGHT=1 the plan whose workers run preflight first."""
    value = setting(env, ENV_PREFLIGHT)
    if value not in ("", "0", "1"):
        raise InputError(f"{ENV_PREFLIGHT.name}={value!r} is not a switch; expected 1 (preflight first) or 0")
    if value == "1":  # the workers would each refuse a bad TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED after the rendezvous
        preflight.allow_undecided(False, env)
    return preflight_first(plan) if value == "1" else plan


def run(inv: Invocation, env: dict[str, str], cwd: Path) -> int:
    facts = gather_facts(env)
    if setting(env, ENV_DOCTOR) == "1":
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
