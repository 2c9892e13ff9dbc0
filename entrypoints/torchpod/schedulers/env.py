"""The env:// convention: MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK per node, and
nothing that names the system that set them.

Pod-level, not process-level: WORLD_SIZE is the number of nodes (pods) and RANK this
node's index, as Run:ai documents for its distributed PyTorch jobs (`runai training pytorch
submit`; "Environment Variables inside a Run:ai Workload"), as Alibaba PAI-DLC and Baidu AIHC inject into PyTorchJob
pods, and as kubeflow/training-operator set them before v1.7
(pkg/controller.v1/pytorch/envvar.go, master counted as node 0). NPROC_PER_NODE, where a
platform sets it, is the process count per node. Claimed only when all three of
MASTER_ADDR, WORLD_SIZE and RANK are set: a lone WORLD_SIZE stays an error (standalone).

Inside a torchrun worker the same names count processes: starting torchpod there is
refused before any detection (schedulers.refuse_torchrun_worker), not misread.
"""

from __future__ import annotations

from ..contract import ENV_SCHEDULER
from ..errors import InputError
from ..options import UserOptions
from .common import Detection, Env, Facts, NodeCount, get, master_endpoint, parse_int, stable_id

NAME = "env"
STRONG = False
MARKERS = ("MASTER_ADDR", "WORLD_SIZE", "RANK")


def claims(env: Env, user: UserOptions) -> bool:
    return all(get(env, name) is not None for name in MARKERS)


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    # claims() saw all three; TORCHPOD_SCHEDULER=env skips it, so each may still be missing
    missing = [name for name in MARKERS if get(env, name) is None]
    world, rank_var = get(env, "WORLD_SIZE"), get(env, "RANK")
    if missing or world is None or rank_var is None:
        raise InputError(
            f"{missing[0]} is not set, and the env:// convention needs it; expected MASTER_ADDR "
            "(the first node), WORLD_SIZE (the number of nodes) and RANK (this node's index); "
            f"set them, or unset {ENV_SCHEDULER.name} to detect the scheduler"
        )
    nodes = parse_int("WORLD_SIZE", world[1], minimum=1, hint="the number of nodes (pods)")
    rank = parse_int("RANK", rank_var[1], hint="this node's index")
    if rank >= nodes:
        raise InputError(
            f"RANK={rank} is outside WORLD_SIZE={nodes}; expected 0-{nodes - 1} (RANK is this "
            "node's index and WORLD_SIZE the number of nodes in the env:// convention)"
        )
    ep, ep_notes = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))  # type: ignore[misc]  # set: checked above
    notes = [
        f"WORLD_SIZE={nodes} read as the number of nodes and RANK={rank} as this node's index "
        "(the env:// convention of Run:ai, PAI-DLC, AIHC and training-operator < 1.7)",
    ]
    nproc = get(env, "NPROC_PER_NODE")
    if nproc is not None:
        notes.append(f"nproc_per_node {nproc[1]} from NPROC_PER_NODE")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(nodes),
        node_rank=rank,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("env", str(ep)),
        nproc_per_node=str(parse_int(*nproc, minimum=1)) if nproc is not None else None,
        notes=tuple(notes) + ep_notes,
    )
