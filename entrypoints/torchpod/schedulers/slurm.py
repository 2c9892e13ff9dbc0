"""Slurm: one launcher per node, started by `srun --ntasks-per-node=1 torchpod run ...`.

Variables as slurmd/srun export them (Slurm `doc/man/man1/srun.1`, "OUTPUT ENVIRONMENT
VARIABLES", and `src/common/env.c`): SLURM_JOB_ID, SLURM_JOB_NODELIST (compressed,
``gpu[001-004,010]``), SLURM_JOB_NUM_NODES / SLURM_NNODES, inside a step SLURM_STEP_ID,
SLURM_STEP_NODELIST, SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE (``4(x2)``),
SLURM_NODEID (this node's index within the step), SLURM_GPUS_ON_NODE,
SLURM_GPUS_PER_NODE (``4`` or ``a100:4``).
"""

from __future__ import annotations

import itertools
import re

from ..errors import InputError
from ..options import UserOptions
from .common import (
    Detection,
    Endpoint,
    Env,
    Facts,
    NodeCount,
    find_host,
    get,
    parse_int,
    rdzv_port,
    stable_id,
)

NAME = "slurm"
STRONG = True
MARKERS = ("SLURM_JOB_ID", "SLURM_JOBID")
# This step's hosts first: a step may run on part of the allocation.
NODELIST_VARS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def nodelist(env: Env) -> tuple[str, str] | None:
    """(variable, compressed host list) this node's step runs on; main() expands it with
    `scontrol show hostnames` when it can, detect() with expand_hostlist otherwise."""
    return get(env, *NODELIST_VARS)


def expand_hostlist(name: str, value: str) -> tuple[str, ...]:
    """Expand Slurm's compressed host list (``a[01-03,7],b-[1-2]x[3-4]``) in order."""
    text = value.strip()
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise _bad(name, value, "nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise _bad(name, value, "']' without '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise _bad(name, value, "unclosed '['")
    items.append(text[start:])
    hosts: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            raise _bad(name, value, "empty entry")
        parts = re.split(r"(\[[^\]]*\])", item)
        choices: list[list[str]] = []
        for part in parts:
            if part.startswith("["):
                choices.append(_expand_ranges(name, value, part[1:-1]))
            elif part:
                if not re.fullmatch(r"[A-Za-z0-9_.-]+", part):
                    raise _bad(name, value, f"unexpected characters in {part!r}")
                choices.append([part])
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return tuple(hosts)


def _expand_ranges(name: str, value: str, body: str) -> list[str]:
    out: list[str] = []
    for piece in body.split(","):
        piece = piece.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", piece)
        if not m:
            raise _bad(name, value, f"range {piece!r} is not N or N-M")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise _bad(name, value, f"range {piece!r} runs backwards")
        if int(hi) - int(lo) > 100_000:
            raise _bad(name, value, f"range {piece!r} is implausibly large")
        width = len(lo)
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def _bad(name: str, value: str, why: str) -> InputError:
    return InputError(
        f"{name}={value!r} is not a Slurm host list ({why}); expected a form like "
        "'gpu[001-004,010],login1'; check `scontrol show hostnames $SLURM_JOB_NODELIST`"
    )


def expand_tasks_per_node(name: str, value: str) -> tuple[int, ...]:
    """``2(x3),1`` -> (2, 2, 2, 1), as in SLURM_TASKS_PER_NODE."""
    out: list[int] = []
    for piece in value.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", piece)
        if not m:
            raise InputError(
                f"{name}={value!r} is not a Slurm task count list; expected a form like '4(x2),1'"
            )
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return tuple(out)


def gpus_from_env(env: Env) -> tuple[str | None, str]:
    """GPUs Slurm allocated on this node, and which variable said so."""
    found = get(env, "SLURM_GPUS_ON_NODE")
    if found:
        return str(parse_int(found[0], found[1])), found[0]
    found = get(env, "SLURM_GPUS_PER_NODE")
    if found:
        total = 0
        for piece in found[1].split(","):
            count = piece.rsplit(":", 1)[-1]  # "4", "a100:4", "gpu:a100:4"
            count = re.sub(r"\(.*\)$", "", count)  # "a100:4(S:0-1)"
            total += parse_int(found[0], count, hint="expected '4' or 'a100:4'")
        return str(total), found[0]
    return None, ""


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    job = get(env, *MARKERS)
    job_id = job[1] if job else ""
    list_var = nodelist(env)
    if list_var is None:
        raise InputError(
            "SLURM_JOB_ID is set but SLURM_JOB_NODELIST is empty or missing; expected the "
            "allocation's host list, e.g. 'gpu[001-004]'; run inside an sbatch/salloc "
            "allocation, or unset SLURM_JOB_ID"
        )
    hosts = facts.slurm_hosts or expand_hostlist(*list_var)
    notes = [f"hosts from {list_var[0]}={list_var[1]}"]
    count_var = get(env, "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
    if count_var is not None:
        count = parse_int(*count_var, minimum=1)
        if count != len(hosts):
            raise InputError(
                f"{count_var[0]}={count_var[1]!r} does not match the {len(hosts)} hosts in "
                f"{list_var[0]}={list_var[1]!r}; expected equal counts; are the variables "
                "from different steps?"
            )
    node_var = get(env, "SLURM_NODEID")
    if node_var is not None:
        index = parse_int(*node_var, hint="Slurm sets it to this node's index in the step")
        if index >= len(hosts):
            raise InputError(
                f"SLURM_NODEID={node_var[1]!r} is outside the {len(hosts)} hosts of "
                f"{list_var[0]}; expected 0-{len(hosts) - 1}"
            )
    else:
        index = find_host(hosts, facts.hostname)
        if index is None:
            raise InputError(
                f"SLURM_NODEID is not set and this host {facts.hostname!r} is not in "
                f"{list_var[0]}={list_var[1]!r}; expected one of {', '.join(hosts[:8])}; "
                "start torchpod with srun, or set TORCHPOD_HOSTNAME to this node's listed name"
            )
        notes.append(f"node index {index} from matching hostname {facts.hostname!r}")
    step = get(env, "SLURM_STEP_ID", "SLURM_STEPID")
    tasks = get(env, "SLURM_STEP_TASKS_PER_NODE")
    if tasks is not None:
        counts = expand_tasks_per_node(*tasks)
        if index < len(counts) and counts[index] > 1:
            raise InputError(
                f"SLURM_STEP_TASKS_PER_NODE={tasks[1]!r} starts {counts[index]} launchers on "
                "this node; expected 1 (torchrun starts the per-GPU processes itself); use "
                "`srun --ntasks-per-node=1 torchpod run ...`"
            )
    if step is None and len(hosts) > 1:
        notes.append(
            "SLURM_STEP_ID unset: if this is the batch script, only this node runs; start "
            "one launcher per node with `srun --ntasks-per-node=1 torchpod run ...`"
        )
    port, port_notes = rdzv_port(env)
    nproc, nproc_var = gpus_from_env(env)
    if nproc is not None:
        notes.append(f"nproc_per_node {nproc} from {nproc_var}")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts)),
        node_rank=index,
        rdzv_endpoint=Endpoint(hosts[0], port),
        rdzv_id=stable_id("slurm", job_id, step[1] if step else ""),
        hosts=hosts,
        local_addr=hosts[index],
        nproc_per_node=nproc,
        notes=tuple(notes) + port_notes,
    )
