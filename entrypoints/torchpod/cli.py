"""Command line of the torchpod launcher, and the only place that touches the process.

``main`` reads ``sys.argv``, ``os.environ``, whether stdout is a terminal and the working
directory; torchpod.facts asks the machine (hostname, `nvidia-smi`, `scontrol`); everything
below takes those as arguments (see resolve.py).

    torchpod run [TORCHRUN OPTIONS] [--] SCRIPT [ARGS...]
    torchpod plan [--format text|json|shell] [TORCHRUN OPTIONS] [-- SCRIPT ARGS...]
    torchpod doctor [--sysfs-root DIR] [--nccl-log FILE] [--format text|json]
    torchpod bench allreduce [OPTIONS]
    torchpod preflight [OPTIONS] [--then script|module|program TARGET [ARGS...]]
    torchpod stacks [--wait SECONDS] [--format text|json]
    torchpod SCRIPT [ARGS...]          (same as `run`: the image's ENTRYPOINT)
    torchpod [COMMAND] --help | torchpod --version

The commands, their options and their help are records in torchpod.commands; each
command's --help lists the TORCHPOD_* settings it reads (contract.SETTINGS), and each
command checks those settings before it starts. `plan --format shell` prints only comments
and assignments, safe to `eval`: the added variables as `export NAME='value'` and the
torchrun command line as TORCHPOD_COMMAND (quoted words), run by
`eval "exec $TORCHPOD_COMMAND"`. A closed stdout (`torchpod plan | head -3`) ends quietly
with 141, as a program SIGPIPE ended would.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from . import __version__, doctor, gpus, preflight, script, stacks
from .commands import (
    BENCH,
    BENCHES,
    BY_NAME,
    DOCTOR,
    DOCTOR_FORMATS,
    HELP_FLAGS,
    PLAN,
    PLAN_FORMATS,
    PREFLIGHT_WORKLOAD,
    RUN,
    STACKS,
    STACKS_FORMATS,
    WORKLOADS,
    Command,
    Workload,
    command_help,
    main_help,
    workload_help,
)
from .contract import (
    ENV_DOCTOR,
    ENV_HOSTNAME,
    ENV_NODE_RANK,
    ENV_PREFLIGHT,
    ENV_STACKS_DIR,
    ENV_STALL_WINDOW,
    check_settings,
    setting,
    switch,
)
from .errors import InputError, RuntimeFailure, TorchpodError, one_line
from .facts import HELPER_TIMEOUT_S, configured_sysfs, gather_facts, gpu_count, sysfs_root, torchrun_lacks
from .plan import (
    PREPENDS,
    REPLACES,
    THEN,
    LaunchPlan,
    command,
    is_preflight,
    preflight_first,
    to_json,
    to_shell,
    to_text,
)
from .resolve import resolve
from .supervise import Child, supervise
from .torchrun_flags import Invocation, split_command_line
from .watch import EXIT_HANG, node
from .words import did_you_mean

# The launcher's entry, and the facts it gathers (torchpod.facts) under the names callers
# have always imported from here.
__all__ = ["main", "gather_facts", "HELPER_TIMEOUT_S"]

NO_SCRIPT = ("no script given; expected `torchpod run [TORCHRUN OPTIONS] SCRIPT [ARGS...]`, "
             "e.g. `torchpod train.py --epochs 3`")


def child_env(env: Mapping[str, str], plan: LaunchPlan) -> dict[str, str]:
    """torchrun's environment: the caller's, plus the plan's additions where unset (a HOME or
    TMPDIR the plan names replaces the unusable one, and TORCHPOD_NODE_RANK is the plan's
    alone: plan.REPLACES; a search path the plan prepends to, plan.PREPENDS, is the plan's
    where it ends with the caller's)."""
    merged = dict(env)
    merged.pop(ENV_NODE_RANK, None)  # an outer launch's node is not this one's: the plan's, or none
    for key, value in plan.env:
        if key in REPLACES or (key in PREPENDS and value.endswith(":" + merged.get(key, ""))):
            merged[key] = value
        else:
            merged.setdefault(key, value)
    return merged


def _path(domains: Sequence[str]) -> str:
    return " > ".join(domains)


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
        code = _dispatch(args, environ)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is answered below
        return code
    except TorchpodError as exc:
        print(f"torchpod: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return closed_pipe()


# What a program ended by SIGPIPE exits with in a shell (128 + 13): `torchpod plan | head -3`
# ends as `yes | head -3` does, and a script under `set -o pipefail` still sees the cut.
CLOSED_PIPE = 128 + 13


def closed_pipe() -> int:
    """The reader of stdout went away (`torchpod plan | head -3`): nothing more is said to it,
    and nothing on stderr either. stdout is pointed at /dev/null first, so the interpreter's
    own flush at exit finds nothing to write and prints no BrokenPipeError of its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # stdout is no file here
        pass
    return CLOSED_PIPE


def working_directory() -> Path:
    """Where the script is looked for and torchrun starts: one line when it was removed
    under the shell (`getcwd` fails), not a traceback."""
    try:
        return Path.cwd()
    except OSError as exc:
        raise InputError(f"the working directory cannot be read ({exc.strerror or exc}): it was removed or is "
                         "out of reach; expected an existing directory to start the job in; cd to one and "
                         "run torchpod again") from None


def _dispatch(args: list[str], env: dict[str, str]) -> int:
    if not args:
        print(main_help(), file=sys.stderr)
        return 2
    first, rest = args[0], args[1:]
    if first == "--version":
        print(f"torchpod {__version__}")
        return 0
    if first in (*HELP_FLAGS, "help"):
        return _help(rest)
    handlers: dict[str, Callable[[list[str], dict[str, str]], int]] = {
        "plan": _plan, "doctor": _doctor, "bench": _bench, "preflight": _preflight, "stacks": _stacks, "run": _run}
    if first in handlers:
        return handlers[first](rest, env)
    if first.startswith("--") and first != "--":  # torchpod's own top-level option, misspelt?
        hint = did_you_mean(first, ("--version", "--help"))
        if hint:
            raise InputError(f"unknown option {first!r}; {hint}; expected a command ({', '.join(handlers)}), "
                             "--version, --help, or torchrun options then a script")
    return _run(args, env)


def _help(words: list[str]) -> int:
    """``torchpod --help`` or ``torchpod help [COMMAND]``."""
    if not words:
        print(main_help())
        return 0
    if words[0] not in BY_NAME:
        hint = did_you_mean(words[0], BY_NAME)
        raise InputError(f"help {words[0]!r}: no such command{'; ' + hint if hint else ''}; expected one of "
                         f"{', '.join(BY_NAME)}")
    print(command_help(BY_NAME[words[0]]))
    return 0


def _help_asked(words: Sequence[str], stop: Sequence[str] = ("--",)) -> bool:
    """Whether -h/--help comes before the first word that ends torchpod's own options."""
    for word in words:
        if word in stop:
            return False
        if word in HELP_FLAGS:
            return True
    return False


def _launch_line(words: list[str], cmd: Command, **own: Sequence[str]) -> Invocation | None:
    """The command line of `run` or `plan` split, or None after printing its help."""
    inv = split_command_line(words, own_switches=HELP_FLAGS, **own)
    if any(flag in inv.own for flag in HELP_FLAGS):
        print(command_help(cmd))
        return None
    return inv


def _plan(words: list[str], env: dict[str, str]) -> int:
    inv = _launch_line(words, PLAN, own_options=("--format",))
    if inv is None:
        return 0
    fmt = inv.own.get("--format") or ("text" if stdout_is_terminal() else "json")
    if fmt not in PLAN_FORMATS:
        hint = did_you_mean(fmt, PLAN_FORMATS)
        raise InputError(f"--format {fmt!r} is not a plan format{'; ' + hint if hint else ''}; expected "
                         f"{', '.join(PLAN_FORMATS)}")
    check_settings(env, PLAN.name)
    plan = with_preflight(env, resolve(env, gather_facts(env), check_workload(inv)))
    render = {"json": to_json, "shell": to_shell, "text": to_text}[fmt]
    print(render(plan, sys.executable))
    return 0


def stdout_is_terminal() -> bool:
    """Whether a person reads stdout (`plan` then defaults to text, else to JSON)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def _run(words: list[str], env: dict[str, str]) -> int:
    inv = _launch_line(words, RUN)
    if inv is None:
        return 0
    check_settings(env, RUN.name)
    if inv.script is None:
        raise InputError(NO_SCRIPT)
    cwd = working_directory()
    _refuse_misspelt_command(inv, cwd)
    return run(check_workload(inv), env, cwd)


def _refuse_misspelt_command(inv: Invocation, cwd: Path) -> None:
    """`torchpod plna`: a first word close to a command, and no such file here, is a
    misspelt command rather than a script (a script is looked for where it would run)."""
    word = inv.script or ""
    alone = not inv.options and not inv.passthrough and "/" not in word
    hint = did_you_mean(word, BY_NAME, shown="`torchpod {}`") if alone else ""
    if hint and not os.path.lexists(cwd / word):
        raise InputError(f"{word!r} is neither a command nor a file in {cwd}; {hint}; expected a command "
                         f"({', '.join(BY_NAME)}) or a script")


def _workload(workload: Workload, words: list[str], env: dict[str, str], stop: Sequence[str]) -> int:
    """bench and preflight: the workload's --help, or `run -m MODULE WORDS` through torchrun."""
    if _help_asked(words, stop):
        print(workload_help(workload))
        return 0
    check_settings(env, workload.command.name)
    inv = check_workload(split_command_line(["--module", workload.module, *words]))
    return run(inv, env, working_directory())


def _bench(words: list[str], env: dict[str, str]) -> int:
    if not words:
        raise InputError(f"bench needs a benchmark's name; expected one of {', '.join(BENCHES)}, e.g. "
                         "`torchpod bench allreduce` (`torchpod bench --help` says more)")
    if words[0] in HELP_FLAGS:
        print(command_help(BENCH))
        return 0
    if words[0] not in BENCHES:
        hint = did_you_mean(words[0], BENCHES)
        raise InputError(f"bench {words[0]!r} is not a benchmark{'; ' + hint if hint else ''}; expected one of "
                         f"{', '.join(BENCHES)}, e.g. `torchpod bench allreduce`")
    return _workload(BENCHES[words[0]], words[1:], env, stop=("--",))


def _preflight(words: list[str], env: dict[str, str]) -> int:
    # what follows --then is the command preflight starts, with options of its own
    return _workload(PREFLIGHT_WORKLOAD, words, env, stop=("--", THEN))


def check_workload(inv: Invocation) -> Invocation:
    """``inv``, once the options of a torchpod workload it runs as a module are checked."""
    workload = WORKLOADS.get(inv.script or "") if "--module" in inv.passthrough else None
    if workload is not None:
        workload.check(inv.script_args)
    return inv


def _own_options(args: list[str], cmd: Command) -> dict[str, str] | None:
    """A command's own options by flag (each takes a value); None when -h/--help asked for its help."""
    opts: dict[str, str] = {}
    known = [flag for flag in cmd.flags() if flag not in HELP_FLAGS]
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in HELP_FLAGS:
            return None
        if name not in known:
            hint = did_you_mean(name, cmd.flags())
            raise InputError(f"unknown {cmd.name} option {args[i]!r}{'; ' + hint if hint else ''}; expected "
                             f"{', '.join(known)}")
        if not eq:
            if i + 1 >= len(args):
                raise InputError(f"{cmd.name} option {name} needs a value; e.g. {name}=VALUE")
            value, i = args[i + 1], i + 1
        opts[name] = value
        i += 1
    return opts


def _doctor_options(args: list[str]) -> dict[str, str] | None:
    """The doctor's options by flag; None when -h/--help asked for its help."""
    opts = _own_options(args, DOCTOR)
    if opts is None:
        return None
    fmt = opts.get("--format", "text")
    if fmt not in DOCTOR_FORMATS:
        raise InputError(f"--format {fmt!r} is not a doctor format; expected {' or '.join(DOCTOR_FORMATS)}")
    return opts


def _doctor(args: list[str], env: dict[str, str]) -> int:
    opts = _doctor_options(args)
    if opts is None:
        print(command_help(DOCTOR))
        return 0
    check_settings(env, DOCTOR.name)
    verdict = doctor.read_log(opts["--nccl-log"]) if "--nccl-log" in opts else None
    sysfs = sysfs_root("--sysfs-root", opts["--sysfs-root"]) if "--sysfs-root" in opts else configured_sysfs(env)
    fabric, checks = doctor.preflight(env, doctor.gather(env, sysfs, gpus.visible(env, gpu_count(env))[0]))
    print(doctor.report(checks, verdict, opts.get("--format", "text")))
    return doctor.exit_code(fabric, checks, verdict)


def _stacks(args: list[str], env: dict[str, str]) -> int:
    opts = _own_options(args, STACKS)
    if opts is None:
        print(command_help(STACKS))
        return 0
    fmt = opts.get("--format", "text")
    if fmt not in STACKS_FORMATS:
        raise InputError(f"--format {fmt!r} is not a stacks format; expected {' or '.join(STACKS_FORMATS)}")
    wait = stacks.check_wait(opts.get("--wait", str(stacks.WAIT_DEFAULT_S)))
    check_settings(env, STACKS.name)
    run_id = opts.get("--run-id", "")
    found = stacks.workers(run_id=run_id)
    if not found:
        of = f" of run {run_id!r}" if run_id else ""
        raise InputError(f"no worker of `torchpod run`{of} runs on this node as this user; expected to be run "
                         "where the job runs (e.g. `kubectl exec POD -- torchpod stacks`), as the job's user")
    answers = stacks.collect(found, wait)
    print(stacks.report(answers, gather_host(env), fmt))
    return 0 if all(a.dump is not None for a in answers) else 1


def gather_host(env: Mapping[str, str]) -> str:
    """This node's name as the plan names it (TORCHPOD_HOSTNAME, else the hostname)."""
    import socket

    return setting(env, ENV_HOSTNAME) or socket.gethostname()


def stacks_folder(env: dict[str, str]) -> str:
    """A private folder for the workers' stack dumps (torchpod.stacks), in the workers' TMPDIR."""
    import tempfile

    try:
        return tempfile.mkdtemp(prefix="torchpod-stacks-", dir=env.get("TMPDIR") or None)
    except OSError as exc:
        raise RuntimeFailure(f"cannot create a folder for the workers' stack dumps in "
                             f"{env.get('TMPDIR') or tempfile.gettempdir()} ({exc.strerror or exc}); expected a "
                             "writable TMPDIR") from None


def with_preflight(env: Mapping[str, str], plan: LaunchPlan) -> LaunchPlan:
    """The plan itself, or under TORCHPOD_PREFLIGHT=1 the plan whose workers run preflight first;
    a job that is preflight (`torchpod preflight`) does not read the setting."""
    if is_preflight(plan) or not switch(env, ENV_PREFLIGHT):
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
    lacking = torchrun_lacks(plan.passthrough)
    if lacking:
        raise InputError(lacking)
    plan = with_preflight(env, plan)
    # torchpod.torchrun: torch.distributed.run with the nodes ranked in torchpod's order and a
    # one-line rendezvous-timeout message
    argv = command(plan, sys.executable)
    if argv is None:
        raise InputError(NO_SCRIPT)
    summary = (
        f"torchpod: {plan.scheduler}: node {plan.node_rank} of {plan.nnodes}"
        f"{f' (group rank {plan.group_rank})' if plan.group_rank is not None else ''}"
        f"{f' (ranked in domain {_path(plan.domains)})' if plan.domains else ''}, "
        f"{plan.nproc_per_node} proc/node, {plan.rdzv_backend} at {plan.rdzv_endpoint} "
        f"(id {plan.rdzv_id})"
    )
    print(summary, file=sys.stderr, flush=True)
    private_home(plan)
    workers = child_env(env, plan)
    folder = workers[ENV_STACKS_DIR] = stacks_folder(workers)
    # the hang watch: the workers' threads write a verdict here; this stops torchrun on it
    child = Child()
    watching = setting(workers, ENV_STALL_WINDOW) not in ("", "off")
    watcher = node.Watcher(folder, stop=child.stop).start() if watching else None
    try:
        # torchrun ended: a stop request from here on (srun tearing the step down) would only
        # turn the job's own code into 143
        code = supervise(argv, workers, handled=plan.handled_signals, child=child, then_ignore=True)
    finally:
        if watcher is not None:
            watcher.close()
    if watcher is not None and watcher.verdict is not None:
        return EXIT_HANG
    if code == 0:
        shutil.rmtree(folder, ignore_errors=True)
    elif any(Path(folder).glob("rank-*.stacks")):
        print(f"torchpod: the workers' stack dumps are kept in {folder}", file=sys.stderr, flush=True)
    return code
