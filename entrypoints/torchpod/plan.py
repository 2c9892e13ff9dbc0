"""The launch plan and the one table that turns it into torchrun arguments.

A LaunchPlan is what ``torchpod plan`` prints and what ``torchpod run`` executes. Its
JSON keys (``to_dict``) are a contract other tools rely on: add keys, never rename them,
and keep each value's JSON type (``nnodes`` "2" or "1:4", ``rdzv_endpoint`` "host:port").
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, replace
from typing import Callable, Optional

from . import __version__, rendezvous
from .contract import ENV_DOCTOR, ENV_NODE_RANK, ENV_PREFLIGHT, ENV_RDZV_TIMEOUT, ENV_STALL_WINDOW, PREFLIGHT_MODULE
from .errors import InputError
from .supervise import FORWARDED_NAMES, TERMINATING_NAMES
from .values import Endpoint, NodeCount
from .words import plural


@dataclass(frozen=True)
class LaunchPlan:
    scheduler: str
    nnodes: NodeCount
    node_rank: int | None
    nproc_per_node: str  # a count, or one of torchrun's words (auto, cpu, gpu, xpu)
    rdzv_backend: str
    rdzv_endpoint: Endpoint
    rdzv_id: str
    rdzv_conf: tuple[tuple[str, str], ...]
    local_addr: str | None
    max_restarts: int
    # what torchrun's --signals-to-handle gets; None: this torchrun lacks the flag
    signals_to_handle: tuple[str, ...] | None = FORWARDED_NAMES
    passthrough: tuple[str, ...] = ()  # other torchrun options, verbatim
    # added to torchrun's environment, never overriding, except REPLACES: HOME and TMPDIR
    # are in it only when the current ones cannot be written (torchpod.home)
    env: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    hosts: tuple[str, ...] | None = None
    hostname: str | None = None
    script: str | None = None
    script_args: tuple[str, ...] = ()
    # the group rank torch gives this node (GROUP_RANK), when it is known before the
    # rendezvous, and how torch assigns ranks in this job (resolve.decide_ranks)
    group_rank: int | None = None
    rank_order: str = ""
    domains: tuple[str, ...] = ()  # this node's topology domains, top first (Slurm's switches)

    @property
    def torchrun_args(self) -> list[str]:
        return torchrun_args(self)

    @property
    def handled_signals(self) -> tuple[str, ...]:
        """Names of the signals torchrun will catch and pass to its workers."""
        return self.signals_to_handle or TERMINATING_NAMES


def _conf(plan: LaunchPlan) -> Optional[str]:
    return ",".join(f"{k}={v}" for k, v in plan.rdzv_conf) or None


def _signals(plan: LaunchPlan) -> Optional[str]:
    return ",".join(plan.signals_to_handle) if plan.signals_to_handle is not None else None


# The one table: plan field -> torchrun flag, and how the value is written (None: omit).
# --node-rank only matters to the static backend; torchrun warns about it otherwise.
FLAG_TABLE: tuple[tuple[str, str, Callable[[LaunchPlan], Optional[str]]], ...] = (
    ("nnodes", "--nnodes", lambda p: str(p.nnodes)),
    ("nproc_per_node", "--nproc-per-node", lambda p: p.nproc_per_node),
    (
        "node_rank",
        "--node-rank",
        lambda p: str(p.node_rank) if p.rdzv_backend == "static" else None,
    ),
    ("rdzv_backend", "--rdzv-backend", lambda p: p.rdzv_backend),
    ("rdzv_endpoint", "--rdzv-endpoint", lambda p: str(p.rdzv_endpoint)),
    ("rdzv_id", "--rdzv-id", lambda p: p.rdzv_id),
    ("rdzv_conf", "--rdzv-conf", _conf),
    ("local_addr", "--local-addr", lambda p: p.local_addr),
    ("max_restarts", "--max-restarts", lambda p: str(p.max_restarts)),
    ("signals_to_handle", "--signals-to-handle", _signals),
)


def torchrun_args(plan: LaunchPlan) -> list[str]:
    """Arguments after `torchrun` and before the script."""
    args = []
    for _field, flag, render in FLAG_TABLE:
        value = render(plan)
        if value is not None:
            args.append(f"{flag}={value}")
    return args + list(plan.passthrough)


# The variables a plan's env replaces rather than leaves alone: torchpod.home adds HOME and
# TMPDIR only when the user's value is unusable (a HOME the user cannot write), said in a
# note; TORCHPOD_NODE_RANK is this launch's own (one inherited from an outer launch is stale);
# the stall window is the setting as the launcher read it (a blank one reads as its default).
REPLACES = frozenset({"HOME", "TMPDIR", ENV_NODE_RANK, ENV_STALL_WINDOW.name})
# Search paths a plan's env puts its folders in front of: its value ends with the user's,
# which it then replaces (torchpod.cli.child_env), as `plan --format shell` exports it.
PREPENDS = frozenset({"LD_LIBRARY_PATH", "PYTHONPATH"})

# TORCHPOD_PREFLIGHT=1: the workers run torchpod.preflight, which execs the user's command
# only when no node failed. How that command was given: a script (python -u SCRIPT), a
# module (torchrun --module: python -u -m MODULE) or a program (torchrun --no-python).
THEN = "--then"
THEN_MODES = ("script", "module", "program")
_MODES = (("--module", "module"), ("--no-python", "program"))
_MODE_FLAGS = frozenset({"--module", "--no-python", "--run-path"})


def is_preflight(plan: LaunchPlan) -> bool:
    """Whether the job's workers already run torchpod.preflight (`torchpod preflight`)."""
    return plan.script == PREFLIGHT_MODULE and "--module" in plan.passthrough


def preflight_first(plan: LaunchPlan) -> LaunchPlan:
    """The same job, whose workers first run torchpod.preflight and then exec the command.

    One torchrun, one rendezvous: preflight runs in the job's own workers, on a process
    group of its own keys (torchpod.preflight), and each worker then replaces itself with
    the user's command, so the script starts in the group torchrun formed, with the same
    RANK/MASTER_* variables. A second torchrun would need a second rendezvous on the same
    endpoint, and a node that starts it while node 0's first store is still closing would
    join that store. A job already running torchpod.preflight is left as it is.
    """
    if plan.script is None or is_preflight(plan):
        return plan
    if str(plan.nnodes) == "1":
        return replace(plan, notes=plan.notes + (f"{ENV_PREFLIGHT.name}=1: one node, no pair of nodes to compare: "
                                                 f"preflight skipped ({ENV_DOCTOR.name}=1 checks this node)",))
    mode = next((word for flag, word in _MODES if flag in plan.passthrough), "script")
    kept = tuple(p for p in plan.passthrough if p not in _MODE_FLAGS)
    note = (f"{ENV_PREFLIGHT.name}=1: every worker runs {PREFLIGHT_MODULE} first and starts "
            f"{plan.script!r} only when no node failed (exit 1 names the failing nodes)")
    return replace(plan, passthrough=kept + ("--module",), script=PREFLIGHT_MODULE,
                   script_args=(THEN, mode, plan.script, *plan.script_args), notes=plan.notes + (note,))


# What `torchpod run` executes: torchrun (torch.distributed.run) with the nodes ranked in
# torchpod's order and a rendezvous timeout explained in one line (torchpod.torchrun). Plain
# torchrun takes the same arguments, ignores torchpod_order and ranks by address.
TORCHRUN_MODULE = "torchpod.torchrun"


def command(plan: LaunchPlan, python: str, module: str = TORCHRUN_MODULE) -> list[str] | None:
    """The command line ``torchpod run`` executes."""
    if plan.script is None:
        return None
    return [python, "-m", module, *torchrun_args(plan), plan.script, *plan.script_args]


def to_dict(plan: LaunchPlan, python: str) -> dict:
    return {
        "scheduler": plan.scheduler,
        "nnodes": str(plan.nnodes),
        "node_rank": plan.node_rank,
        "nproc_per_node": plan.nproc_per_node,
        "rdzv_backend": plan.rdzv_backend,
        "rdzv_endpoint": str(plan.rdzv_endpoint),
        "rdzv_id": plan.rdzv_id,
        "rdzv_conf": dict(plan.rdzv_conf),
        "local_addr": plan.local_addr,
        "max_restarts": plan.max_restarts,
        "torchrun_args": torchrun_args(plan),
        "env": dict(plan.env),
        "notes": list(plan.notes),
        # additions to the first contract keys
        "signals_to_handle": _signals(plan),
        "hosts": list(plan.hosts) if plan.hosts is not None else None,
        "hostname": plan.hostname,
        "script": plan.script,
        "script_args": list(plan.script_args),
        "command": command(plan, python),
        "version": __version__,
        "group_rank": plan.group_rank,
        "rank_order": plan.rank_order,
        "domains": list(plan.domains),
        "rdzv_timeouts": rdzv_timeouts(plan),
    }


def rdzv_timeouts(plan: LaunchPlan) -> dict | None:
    """The join and keep-alive timeouts this node's rendezvous handler will use, and why;
    None for a backend whose handler reads neither (static, etcd)."""
    if plan.rdzv_backend not in rendezvous.DYNAMIC_BACKENDS:
        return None
    conf, chosen = dict(plan.rdzv_conf), rendezvous.settings(plan.nnodes.hi)
    join = conf.get("join_timeout", str(rendezvous.TORCH_JOIN_S))
    return {"join_timeout": join, "heartbeat_timeout": conf.get("heartbeat_timeout", str(rendezvous.TORCH_HEARTBEAT_S)),
            "keep_alive_interval": conf.get("keep_alive_interval", str(rendezvous.TORCH_KEEP_ALIVE_S)),
            "why": chosen.why if chosen.in_effect(conf) else f"set by {ENV_RDZV_TIMEOUT.name} or --rdzv-conf; "
            f"for up to {plural(chosen.nodes, 'node')} torchpod would set {chosen.why}"}


def to_json(plan: LaunchPlan, python: str) -> str:
    return json.dumps(to_dict(plan, python), indent=2)


# What `eval` may see: a comment, or one assignment whose name is a shell identifier.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def comment_text(text: str) -> str:
    """``text`` with every character outside printable ASCII escaped (``\\n``, ``\\xNN``,
    ``\\uNNNN``): a shell comment ends at a newline, and other tools (editors, YAML, a
    terminal) also end lines at CR, U+0085, U+2028/2029, so none may appear raw."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def _carried(what: str, value: str) -> str:
    """``value`` if a shell word can hold it exactly; NUL ends a C string (bash drops it)
    and a lone surrogate (bytes that were not UTF-8) cannot be written as UTF-8 text."""
    bad = next((ch for ch in value if ch == "\0" or 0xD800 <= ord(ch) <= 0xDFFF), None)
    if bad is not None:
        raise InputError(
            f"{what}={value!r} holds {bad!r}, which a shell variable cannot carry; expected "
            "text without NUL or undecodable bytes; use --format json"
        )
    return value


def to_shell(plan: LaunchPlan, python: str) -> str:
    """Lines that are safe to ``eval "$(torchpod plan --format shell)"``: comments, one
    ``export NAME='value'`` per added variable, and TORCHPOD_COMMAND, the torchrun command
    line as one quoted string (its words shlex-quoted). Nothing runs: the last comment
    says how to run it. Every value round-trips exactly or the plan is refused."""
    head = (
        f"torchpod {__version__} plan: scheduler={plan.scheduler} nnodes={plan.nnodes} "
        f"node_rank={plan.node_rank}"
    )
    lines = [f"# {comment_text(text)}" for text in (head, *plan.notes)]
    for name, value in plan.env:
        if not _NAME.fullmatch(name):
            raise InputError(f"environment variable name {name!r} is not a shell name; expected "
                             "[A-Za-z_][A-Za-z0-9_]*; use --format json")
        lines.append(f"export {name}={shlex.quote(_carried(name, value))}")
    words = [python, "-m", TORCHRUN_MODULE, *torchrun_args(plan)]
    if plan.script is not None:
        words += [plan.script, *plan.script_args]
    text = " ".join(shlex.quote(_carried("torchrun argument", w)) for w in words)
    lines.append(f"TORCHPOD_COMMAND={shlex.quote(text)}")
    if plan.script is None:
        lines.append('# run it, the script and its arguments as "$@": eval "exec $TORCHPOD_COMMAND \\"\\$@\\""')
    else:
        lines.append('# run it: eval "exec $TORCHPOD_COMMAND"')
    return "\n".join(lines)


def shown(text: str) -> str:
    """``text`` as a terminal may print it: characters that would end the line, move the
    cursor or drive the terminal (escape sequences) are written as escapes; the rest of
    Unicode stays as it is."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


HOSTS_SHOWN = 8  # a host list of thousands is counted, not printed


def _summary_rows(plan: LaunchPlan, python: str) -> list[tuple[str, str]]:
    """(label, value) of the text plan's head: what a person asks of a launch first."""
    here = f"this node is {plan.node_rank}" if plan.node_rank is not None else "this node's index set at the rendezvous"
    rank = (f"group rank {plan.group_rank}" if plan.group_rank is not None else "group rank set at the rendezvous") \
        + (f" ({plan.rank_order})" if plan.rank_order else "")
    conf = ", ".join(f"{k}={v}" for k, v in plan.rdzv_conf)
    hosts = list(plan.hosts or ())
    more = f" and {len(hosts) - HOSTS_SHOWN} more" if len(hosts) > HOSTS_SHOWN else ""
    listed = f"{plural(len(hosts), 'host')}: {', '.join(hosts[:HOSTS_SHOWN])}{more}" if hosts else ""
    words = command(plan, python) or [python, "-m", TORCHRUN_MODULE, *torchrun_args(plan), "SCRIPT", "ARGS..."]
    rows = [("scheduler", plan.scheduler),
            ("nodes", f"{plan.nnodes}; {here}" + (f" ({plan.hostname})" if plan.hostname else "")),
            ("ranks", rank),
            ("processes", f"{plan.nproc_per_node} per node"),
            ("rendezvous", f"{plan.rdzv_backend} at {plan.rdzv_endpoint}, id {plan.rdzv_id}"
                           + (f" ({conf})" if conf else "")),
            ("local addr", plan.local_addr or "chosen by torchrun"),
            ("restarts", str(plan.max_restarts)),
            ("hosts", listed or "not listed by the scheduler"),
            ("command", " ".join(shlex.quote(w) for w in words))]
    return rows


def to_text(plan: LaunchPlan, python: str) -> str:
    """The plan for a person at a terminal: a summary (scheduler, nodes, this node's place,
    processes, rendezvous, hosts, the torchrun command), the variables added to torchrun's
    environment, and the notes that say why. Every value is escaped where it could end a
    line or drive the terminal; ``--format json`` holds every field, for programs."""
    lines = [f"torchpod {__version__} plan"]
    lines += [f"  {label:<11} {shown(value)}" for label, value in _summary_rows(plan, python)]
    if plan.script is None:
        lines.append("  (no script given: `torchpod plan -- SCRIPT ARGS...` shows the whole command)")
    lines.append("exports (added to torchrun's environment; a variable already set is kept):" if plan.env
                 else "exports: none")
    lines += [f"  {shown(name)}={shown(value)}" for name, value in plan.env]
    lines.append("notes:" if plan.notes else "notes: none")
    lines += [f"  - {shown(note)}" for note in plan.notes]
    return "\n".join(lines)
