"""The launcher's commands as records (how each is called, its own options, the workloads
it runs through torchrun) and the help generated from them.

``torchpod --help`` and each command's ``--help`` are built from the data that decides what
the launcher does: these records (which cli.py parses with, too), torchrun's options
(torchrun_flags), the schedulers in the order detection tries them (schedulers.SCHEDULERS),
each workload's own parser (the one its workers use) and the settings each command reads
(contract.SETTINGS). Nothing here is a second list of any of them. Pure: text only.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import Callable, Sequence

from . import bench_allreduce, preflight_options
from .contract import ENV_COMMAND, ENV_SCHEDULER, PREFLIGHT_MODULE, SETTINGS, Setting
from .schedulers import SCHEDULERS
from .torchrun_flags import RESOLVED_OPTIONS, TORCHRUN_OPTIONS, spelling

WIDTH = 88


@dataclass(frozen=True)
class Option:
    """One of torchpod's own options: its flag, what it takes and what it does."""

    flag: str
    value: str  # the metavariable, "" for a switch
    meaning: str


@dataclass(frozen=True)
class Command:
    """A command of the launcher: how it is called, what it does, its own options, and
    whether torchrun's options go before its script."""

    name: str
    synopsis: str  # after "torchpod "
    brief: str  # its line in `torchpod --help`
    summary: str
    options: tuple[Option, ...] = ()
    torchrun: bool = False

    def flags(self) -> tuple[str, ...]:
        """The spellings its command line accepts (``-h`` and ``--help`` included)."""
        return tuple(f for o in self.options for f in o.flag.split(", "))


HELP = Option("-h, --help", "", "print this help and exit")
HELP_FLAGS = HELP.flag.split(", ")
PLAN_FORMATS = ("text", "json", "shell")
DOCTOR_FORMATS = ("text", "json")

RUN = Command(
    "run", "run [TORCHRUN OPTIONS] [--] SCRIPT [ARGS...]", "run SCRIPT through torchrun on this node",
    "Detect the scheduler, check that SCRIPT is there on this node, and run torchrun with the "
    "matching rendezvous (`torchpod SCRIPT ARGS...` means the same: the image's ENTRYPOINT). "
    "torchrun's -m/--module and --no-python say what SCRIPT is, as they do to torchrun.",
    (HELP,), torchrun=True)
PLAN = Command(
    "plan", f"plan [--format {'|'.join(PLAN_FORMATS)}] [TORCHRUN OPTIONS] [-- SCRIPT [ARGS...]]",
    "what `run` would do here, and why",
    "Show what `run` would do here and why, without running anything: the scheduler, this "
    "node's place, the rendezvous, the torchrun command, the variables added and the notes.",
    (Option("--format", "|".join(PLAN_FORMATS),
            "text: a summary for people (the default on a terminal); json: every field, whose keys "
            "other tools rely on (the default when piped); shell: comments and assignments only, "
            f"safe to `eval`, the command in {ENV_COMMAND}"), HELP), torchrun=True)
DOCTOR = Command(
    "doctor", f"doctor [--sysfs-root DIR] [--nccl-log FILE] [--format {'|'.join(DOCTOR_FORMATS)}]",
    "why NCCL is (not) using RDMA on this node",
    "Say why NCCL is (not) using RDMA on this node, one line per check; exit 1 when a check "
    "fails, or when the log shows sockets on a node with an RDMA fabric.",
    (Option("--sysfs-root", "DIR", "read RDMA devices under DIR instead of /sys (an existing directory)"),
     Option("--nccl-log", "FILE", "also say which transport NCCL used, from a log written with NCCL_DEBUG=INFO"),
     Option("--format", "|".join(DOCTOR_FORMATS), "text (the default) or json"),
     HELP))
BENCH = Command(
    "bench", "bench allreduce [OPTIONS]", "all-reduce bandwidth over every node of the job",
    "Run a benchmark of torchpod's own through torchrun on every node of the job, as `run "
    "-m` would; `torchpod bench allreduce --help` lists its options.",
    (HELP,))
PREFLIGHT = Command(
    "preflight", "preflight [OPTIONS] [--then script|module|program TARGET [ARGS...]]",
    "check every node of the job and name the slow one",
    f"Run {PREFLIGHT_MODULE} through torchrun on every node of the job, as `torchpod run -m "
    f"{PREFLIGHT_MODULE}` does: every node's doctor checks, pairs of nodes timed, the slow node "
    "named.",
    (HELP,))
STACKS_FORMATS = ("text", "json")
STACKS = Command(
    "stacks", f"stacks [--run-id ID] [--wait SECONDS] [--format {'|'.join(STACKS_FORMATS)}]",
    "every worker's Python stacks on this node, now",
    "Print the Python stacks of every thread of every worker `torchpod run` started on this "
    "node (as this user), with the line each rank is at, without stopping them; name a worker "
    "that does not answer (frozen). Exit 0 when all answered, 1 when one did not, 2 when no "
    "worker runs here.",
    (Option("--run-id", "ID", "only the workers of this run (the rendezvous id `torchpod run` prints), where "
                              "two jobs share the node"),
     Option("--wait", "SECONDS", "how long to wait for the workers' answers (default 5)"),
     Option("--format", "|".join(STACKS_FORMATS), "text (the default) or json"), HELP))
COMMANDS: tuple[Command, ...] = (RUN, PLAN, DOCTOR, BENCH, PREFLIGHT, STACKS)
BY_NAME = {c.name: c for c in COMMANDS}


@dataclass(frozen=True)
class Workload:
    """A workload of torchpod's own, run as a module through torchrun on every node: the
    command that starts it, its module, its parser (the workers parse with it too) and the
    check the launcher runs on its options before torchrun starts a worker that would
    refuse them after the rendezvous."""

    command: Command
    module: str
    parser: Callable[[], argparse.ArgumentParser]
    check: Callable[[Sequence[str]], argparse.Namespace]
    brief: str = ""


BENCHES = {"allreduce": Workload(BENCH, bench_allreduce.__name__, bench_allreduce.parser, bench_allreduce.check_options,
                                 "all-reduce bandwidth as nccl-tests' all_reduce_perf reports it")}
PREFLIGHT_WORKLOAD = Workload(PREFLIGHT, PREFLIGHT_MODULE, preflight_options.parser, preflight_options.check_options)
WORKLOADS = {w.module: w for w in (*BENCHES.values(), PREFLIGHT_WORKLOAD)}


def _wrap(text: str, indent: str) -> list[str]:
    # a word longer than the width (a URL, a path) stays whole on a line of its own: split, it
    # could not be copied from the help
    return textwrap.wrap(text, width=WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False)


def environment_help(settings: Sequence[Setting] = SETTINGS, command: str | None = None) -> str:
    """The environment section: every setting, or those ``command`` reads."""
    chosen = [s for s in settings if command is None or command in s.commands]
    lines = ["environment:" if command is None else f"environment (read by `torchpod {command}`):"]
    for item in chosen:
        default = f" (default: {item.default})" if item.default is not None else ""
        lines.append(f"  {item.name}")
        lines.extend(_wrap(item.meaning + default, "      "))
    return "\n".join(lines)


def scheduler_help() -> str:
    """The schedulers in the order detection tries them, from the detector registry."""
    names = ", ".join(m.NAME for m in SCHEDULERS)
    return "\n".join([f"schedulers, tried in this order ({ENV_SCHEDULER.name}=NAME forces one):",
                      *_wrap(names, "  ")])


def _torchrun_help() -> list[str]:
    resolved = [spelling(d) for d in TORCHRUN_OPTIONS if d in RESOLVED_OPTIONS]
    passed = [spelling(d) for d in TORCHRUN_OPTIONS if d not in RESOLVED_OPTIONS]
    return ["", "torchrun options (`python -m torch.distributed.run --help` says what each does):",
            *_wrap("decided by torchpod, a flag here beating its PET_* variable, which beats the "
                   "scheduler: " + ", ".join(resolved), "  "),
            *_wrap("passed to torchrun as given: " + ", ".join(passed), "  ")]


def command_help(command: Command) -> str:
    """``torchpod COMMAND --help``: usage, what it does, its options, the settings it reads."""
    lines = [f"usage: torchpod {command.synopsis}", "", *_wrap(command.summary, ""), "", "options:"]
    width = max(len(f"{o.flag} {o.value}") for o in command.options)
    for option in command.options:
        head = f"  {option.flag} {option.value}".rstrip().ljust(width + 4)
        body = _wrap(option.meaning, " " * len(head))
        lines.append(head + body[0].lstrip() if body else head)
        lines.extend(body[1:])
    if command.torchrun:
        lines += _torchrun_help()
    if command.name == BENCH.name:
        lines += ["", "benchmarks:", *[f"  {name:<10} {w.brief}" for name, w in BENCHES.items()]]
    return "\n".join([*lines, "", environment_help(command=command.name)])


def workload_help(workload: Workload) -> str:
    """``torchpod bench allreduce --help``, ``torchpod preflight --help``: the workload's own
    options (its parser, which its workers use too), how it runs, the settings read."""
    how = (f"It runs as `torchpod run -m {workload.module}` would: torchrun starts it on every node of the job "
           "the scheduler describes, and PET_* variables apply as they do to `run`; to give torchrun options, "
           f"use `torchpod run [TORCHRUN OPTIONS] -m {workload.module} [OPTIONS]`.")
    return "\n".join([workload.parser().format_help().rstrip(), "", *_wrap(how, ""), "",
                      environment_help(command=workload.command.name)])


def main_help() -> str:
    """``torchpod --help``."""
    first, *others = COMMANDS
    lines = [f"usage: torchpod {first.synopsis}", *[f"       torchpod {c.synopsis}" for c in others],
             "       torchpod SCRIPT [ARGS...]        (means `torchpod run SCRIPT ARGS...`)",
             "       torchpod COMMAND --help | torchpod --version", "",
             *_wrap("Detects the scheduler and runs `python -m torch.distributed.run` with the matching "
                    "rendezvous. Torchrun options given here and PET_* variables win over detection.", ""),
             "", "commands:"]
    lines += [f"  {c.name:<10} {c.brief}" for c in COMMANDS]
    return "\n".join([*lines, "", scheduler_help(), "", environment_help()])


__all__ = ["Option", "Command", "Workload", "COMMANDS", "BY_NAME", "BENCHES", "WORKLOADS", "PREFLIGHT_WORKLOAD",
           "HELP_FLAGS", "PLAN_FORMATS", "DOCTOR_FORMATS", "environment_help", "scheduler_help", "command_help",
           "workload_help", "main_help"]
