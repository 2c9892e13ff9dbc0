"""Flux: `flux run -N <nodes> --tasks-per-node=1 torchpod ...` (or `flux submit`).

The job shell sets, in every task (flux-framework/flux-core, src/shell/task.c, the comment
over ``shell_task_start``; flux-environment(7)): FLUX_JOB_ID, FLUX_JOB_SIZE (tasks in the
job), FLUX_JOB_NNODES (nodes in the job) per job, and FLUX_TASK_RANK (the task's global
rank) and FLUX_TASK_LOCAL_ID (its index among this node's tasks) per process. There is no
per-node index: with one task per node (FLUX_TASK_LOCAL_ID 0 everywhere and FLUX_JOB_SIZE
equal to FLUX_JOB_NNODES) the shell numbers tasks node by node, so FLUX_TASK_RANK is the node
index; anything else is refused rather than read as one. A local id of 1 or more is a second
launcher on this node, refused as Slurm's SLURM_LOCALID is.

Flux puts no host list in a task's environment (the first host is `flux hostlist -n 0
local`, a command, not a variable), so torchpod cannot name the first node itself: a job
of several nodes needs --rdzv-endpoint (or PET_RDZV_ENDPOINT, or MASTER_ADDR/MASTER_PORT
exported by the job), and without one resolve() stops with one line naming them.
"""

from __future__ import annotations

from ..contract import ENV_SCHEDULER, RDZV_PORT_DEFAULT
from ..errors import InputError
from ..options import UserOptions
from ..words import plural
from .common import Detection, Env, Facts, NodeCount, get, index_below, master_endpoint, parse_int, stable_id

NAME = "flux"
# FLUX_* are Flux's own, but a Flux instance is often started inside a Slurm or LSF
# allocation (`srun flux start`), whose variables its jobs inherit: the innermost
# scheduler, Flux, wins by order (schedulers/__init__.py), not by refusing the pair.
STRONG = False
MARKERS = ("FLUX_JOB_ID", "FLUX_JOB_NNODES", "FLUX_TASK_RANK")

ENDPOINT_HINT = (
    "Flux sets no host list in a task's environment; pass --rdzv-endpoint "
    f'"$(flux hostlist -n 0 local):{RDZV_PORT_DEFAULT}" (or export MASTER_ADDR and MASTER_PORT '
    "in the job) so every node names the first one"
)


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def node_index(env: Env, nnodes: int) -> tuple[int, str]:
    """This node's index: FLUX_TASK_RANK, valid only with one task per node (docstring)."""
    local = get(env, "FLUX_TASK_LOCAL_ID")
    if local is not None and parse_int(*local) > 0:
        raise InputError(
            f"FLUX_TASK_LOCAL_ID={local[1]!r}: this is task {local[1]} on this node, a second launcher; "
            "expected 0 (torchrun starts one process per GPU itself); use `flux run --tasks-per-node=1`"
        )
    size = get(env, "FLUX_JOB_SIZE")
    if size is not None and parse_int(*size, minimum=1) != nnodes:
        raise InputError(
            f"FLUX_JOB_SIZE={size[1]!r} tasks on FLUX_JOB_NNODES={plural(nnodes, 'node')}; expected one task "
            "per node; use `flux run -N <nodes> --tasks-per-node=1`"
        )
    rank = get(env, "FLUX_TASK_RANK")
    if rank is None:
        raise InputError(
            "FLUX_TASK_RANK is missing; expected this task's rank, which the Flux job shell sets; "
            "start torchpod with `flux run --tasks-per-node=1`"
        )
    index = index_below(rank, nnodes, of=f"FLUX_JOB_NNODES={nnodes}", hint="this task's rank, one task per node",
                        tail=" with one task per node")
    return index, rank[0]


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    count = get(env, "FLUX_JOB_NNODES")
    if count is None:
        seen = get(env, *MARKERS)
        why = f"{seen[0]} is set but" if seen else f"{ENV_SCHEDULER.name}={NAME!r}, and"
        raise InputError(
            f"{why} FLUX_JOB_NNODES is missing; expected the job's node count, which the Flux "
            "job shell sets; start torchpod with `flux run -N <nodes> --tasks-per-node=1`"
        )
    nnodes = parse_int(*count, minimum=1, hint="the job's node count")
    index, how = node_index(env, nnodes)
    notes = [f"node {index} of {nnodes} from {how}/FLUX_JOB_NNODES (one task per node)"]
    master = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))
    ep = None
    if master is not None:
        ep, ep_notes = master
        notes += ep_notes
    job = get(env, "FLUX_JOB_ID")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(nnodes),
        node_rank=index,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("flux", job[1]) if job else None,
        notes=tuple(notes),
        endpoint_hint=ENDPOINT_HINT,
    )
