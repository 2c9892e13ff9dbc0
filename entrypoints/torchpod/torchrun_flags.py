"""What torchrun accepts on its command line, and splitting a torchpod command line.

torchpod runs ``python -m torch.distributed.run`` and accepts torchrun's own options in
front of the script, so ``torchpod run --nnodes 2 train.py`` means what it means to
torchrun. The launcher must start without importing torch (``plan`` stays fast and works
where torch is broken), so torchrun's options are written down here once;
``tests/unit/torchpod/test_plan.py`` compares this table with
``torch.distributed.run.get_args_parser()`` so drift in torch fails a test, not a job.

Nothing here reads the process environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .errors import InputError
from .words import did_you_mean

# dest -> (option spellings, takes a value). Mirrors torch/distributed/run.py
# (get_args_parser) of torch 2.13; dash and underscore spellings both accepted.
TORCHRUN_OPTIONS: dict[str, tuple[tuple[str, ...], bool]] = {
    "nnodes": (("--nnodes",), True),
    "nproc_per_node": (("--nproc-per-node", "--nproc_per_node"), True),
    "rdzv_backend": (("--rdzv-backend", "--rdzv_backend"), True),
    "rdzv_endpoint": (("--rdzv-endpoint", "--rdzv_endpoint"), True),
    "rdzv_id": (("--rdzv-id", "--rdzv_id"), True),
    "rdzv_conf": (("--rdzv-conf", "--rdzv_conf"), True),
    "standalone": (("--standalone",), False),
    "max_restarts": (("--max-restarts", "--max_restarts"), True),
    "monitor_interval": (("--monitor-interval", "--monitor_interval"), True),
    "start_method": (("--start-method", "--start_method"), True),
    "event_log_handler": (("--event-log-handler", "--event_log_handler"), True),
    "role": (("--role",), True),
    "module": (("-m", "--module"), False),
    "no_python": (("--no-python", "--no_python"), False),
    "run_path": (("--run-path", "--run_path"), False),
    "log_dir": (("--log-dir", "--log_dir"), True),
    "redirects": (("-r", "--redirects"), True),
    "tee": (("-t", "--tee"), True),
    "local_ranks_filter": (("--local-ranks-filter", "--local_ranks_filter"), True),
    "duplicate_stdout_filters": (
        ("--duplicate-stdout-filters", "--duplicate_stdout_filters"),
        True,
    ),
    "duplicate_stderr_filters": (
        ("--duplicate-stderr-filters", "--duplicate_stderr_filters"),
        True,
    ),
    "node_rank": (("--node-rank", "--node_rank"), True),
    "master_addr": (("--master-addr", "--master_addr"), True),
    "master_port": (("--master-port", "--master_port"), True),
    "local_addr": (("--local-addr", "--local_addr"), True),
    "logs_specs": (("--logs-specs", "--logs_specs"), True),
    "numa_binding": (("--numa-binding", "--numa_binding"), True),
    "signals_to_handle": (("--signals-to-handle", "--signals_to_handle"), True),
    "shutdown_timeout": (("--shutdown-timeout", "--shutdown_timeout"), True),
    "virtual_local_rank": (("--virtual-local-rank", "--virtual_local_rank"), False),
}

# Options torchpod resolves itself (they become LaunchPlan fields). Every other torchrun
# option is passed through to torchrun unchanged, in the order given.
RESOLVED_OPTIONS = frozenset(
    {
        "nnodes",
        "nproc_per_node",
        "rdzv_backend",
        "rdzv_endpoint",
        "rdzv_id",
        "rdzv_conf",
        "standalone",
        "max_restarts",
        "node_rank",
        "master_addr",
        "master_port",
        "local_addr",
        "signals_to_handle",
    }
)

_BY_SPELLING: dict[str, tuple[str, bool]] = {
    spelling: (dest, takes_value)
    for dest, (spellings, takes_value) in TORCHRUN_OPTIONS.items()
    for spelling in spellings
}


def spelling(dest: str) -> str:
    """The canonical (first, dashed) spelling of a torchrun option."""
    return next(s for s in TORCHRUN_OPTIONS[dest][0] if s.startswith("--"))


@dataclass(frozen=True)
class Invocation:
    """A torchpod `run`/`plan` command line, split into its parts."""

    options: dict[str, str] = field(default_factory=dict)  # resolved torchrun options given
    passthrough: tuple[str, ...] = ()  # other torchrun options, as tokens
    script: str | None = None
    script_args: tuple[str, ...] = ()
    own: dict[str, str] = field(default_factory=dict)  # torchpod's own options (--format)


def split_command_line(
    argv: Sequence[str], own_options: Sequence[str] = (), own_switches: Sequence[str] = ()
) -> Invocation:
    """Split ``[torchrun options] [--] SCRIPT [ARGS...]``; torchpod's ``own_options`` (with a
    value) and ``own_switches`` (``--help``: ``own["--help"] == "true"``) too.

    Accepts ``--flag value`` and ``--flag=value``, dash and underscore spellings, and
    short ``-rVALUE``. The first word that is not an option starts the script, as in
    torchrun; ``--`` ends the options explicitly. A word after the script is the script's.
    """
    options: dict[str, str] = {}
    own: dict[str, str] = {}
    passthrough: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            i += 1
            break
        if not token.startswith("-") or token == "-":
            break
        name, eq, inline = token.partition("=")
        if name in own_options:
            own[name], i = _own_value(tokens, i, name, eq, inline)
            continue
        if name in own_switches:
            if eq:
                raise InputError(f"option {name} takes no value, got {token!r}")
            own[name], i = "true", i + 1
            continue
        dest, takes_value, name, eq, inline = _known_option(token, name, eq, inline, (*own_options, *own_switches))
        value, i = _option_value(tokens, i, token, name, takes_value, eq, inline)
        if dest in RESOLVED_OPTIONS:
            options[dest] = value
        else:
            canonical = spelling(dest)
            # one `--flag=value` token: a value starting with '-' must not read as an option
            passthrough.append(f"{canonical}={value}" if takes_value else canonical)
    rest = tokens[i:]
    script = rest[0] if rest else None
    return Invocation(
        options=options,
        passthrough=tuple(passthrough),
        script=script,
        script_args=tuple(rest[1:]),
        own=own,
    )


def _own_value(
    tokens: list[str], i: int, name: str, eq: str, inline: str
) -> tuple[str, int]:
    """The value of torchpod's own option at ``tokens[i]``, and the index after it."""
    if eq:
        return inline, i + 1
    if i + 1 < len(tokens):
        return tokens[i + 1], i + 2
    raise InputError(f"option {name} needs a value; e.g. {name} json")


def _known_option(
    token: str, name: str, eq: str, inline: str, own: Sequence[str] = ()
) -> tuple[str, bool, str, str, str]:
    """``token`` as a torchrun option: (dest, takes a value, name, eq, inline value); an
    unknown one is refused naming the closest known spelling (torchrun's or ``own``)."""
    known = _BY_SPELLING.get(name)
    if known is None and len(token) > 2 and token[1] != "-":
        # argparse also accepts short options glued to their value: -r3, -t0:1
        short = _BY_SPELLING.get(token[:2])
        if short is not None and short[1]:
            known, name, eq, inline = short, token[:2], "=", token[2:]
    if known is None:
        hint = did_you_mean(name, [*_BY_SPELLING, *own])
        raise InputError(
            f"unknown option {token!r} before the script{'; ' + hint if hint else ''}; expected torchrun "
            "options (see `python -m torch.distributed.run --help`) then SCRIPT [ARGS...]; "
            "put the script's own options after the script name"
        )
    return known[0], known[1], name, eq, inline


def _option_value(
    tokens: list[str],
    i: int,
    token: str,
    name: str,
    takes_value: bool,
    eq: str,
    inline: str,
) -> tuple[str, int]:
    """The value of the torchrun option at ``tokens[i]`` ("true" for a switch), and the
    index after it."""
    if not takes_value:
        if eq:
            raise InputError(f"torchrun option {name} takes no value, got {token!r}")
        return "true", i + 1
    if eq and inline != "--":
        return inline, i + 1
    if not eq and i + 1 < len(tokens) and tokens[i + 1] != "--":
        # argparse, like torchrun, never takes "--" as an option's value
        return tokens[i + 1], i + 2
    raise InputError(f"torchrun option {name} needs a value; e.g. {name}=VALUE")
