"""Run:ai distributed PyTorch (`runai training pytorch submit`).

Run:ai (its CLI reference, v2.18+: `runai training pytorch submit NAME --workers N`) sets
pod-level WORLD_SIZE (number of pods, the master
counted as one), RANK (this pod's index, master 0), MASTER_ADDR (the master pod's IP) and
MASTER_PORT, next to its own markers. Its documentation ("Environment Variables inside a Run:ai Workload",
docs.run.ai) names RUNAI_NUM_OF_GPUS plus JOB_NAME / JOB_UUID in older releases; newer
ones also set RUNAI_JOB_NAME / RUNAI_PROJECT. Any RUNAI_* marker claims the pod (JOB_NAME
alone is too generic); the job id comes from the most specific one present. torchrun needs
nodes, not processes, so these map to --nnodes and the node index directly. Where the job
also runs on a training-operator that sets PET_NNODES, that wins (WORLD_SIZE then counts processes).
"""

from __future__ import annotations

from ..errors import InputError
from ..options import UserOptions
from .common import Detection, Env, Facts, NodeCount, get, master_endpoint, parse_int, stable_id

NAME = "runai"
STRONG = True


MARKERS = ("RUNAI_JOB_NAME", "RUNAI_JOB_UUID", "RUNAI_PROJECT", "RUNAI_NUM_OF_GPUS")
# Run:ai sets RUNAI_* in every workload, a single pod included: they name the platform, not
# a job of several nodes (WORLD_SIZE/MASTER_ADDR do, and standalone refuses those stray).
MULTI_NODE_MARKERS: tuple[str, ...] = ()
JOB_IDS = ("RUNAI_JOB_UUID", "JOB_UUID", "RUNAI_JOB_NAME", "JOB_NAME")
# How a distributed PyTorch job is submitted (the Run:ai CLI reference, v2.18+), as the
# job files `invoke manifests --scheduler runai` writes submit it.
SUBMIT = "runai training pytorch submit"


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None and (
        get(env, "WORLD_SIZE", "MASTER_ADDR", "PET_NNODES") is not None
    )


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    notes: list[str] = []
    world = get(env, "WORLD_SIZE")
    pet = get(env, "PET_NNODES")
    if pet is not None:
        nnodes = NodeCount.parse(*pet)
        if world is not None and world[1] != pet[1]:
            notes.append(f"WORLD_SIZE={world[1]} counts processes; using PET_NNODES={pet[1]}")
    elif world is not None:
        nnodes = NodeCount.exactly(parse_int("WORLD_SIZE", world[1], minimum=1, hint="Run:ai sets the pod count"))
        notes.append(f"WORLD_SIZE={world[1]} counts pods (Run:ai, master included)")
    else:
        raise InputError(
            "WORLD_SIZE is not set in this Run:ai pod; expected the number of pods; submit "
            f"with `{SUBMIT} --workers N`"
        )
    rank = get(env, "PET_NODE_RANK", "RANK")
    if rank is None:
        raise InputError(
            "RANK is not set in this Run:ai pod; expected the pod's index (master 0); "
            f"submit with `{SUBMIT}`"
        )
    node = parse_int(rank[0], rank[1], hint="Run:ai sets the pod index")
    master = master_endpoint(env, ("MASTER_ADDR", "PET_MASTER_ADDR"), ("MASTER_PORT", "PET_MASTER_PORT"))
    if master is None:
        raise InputError(
            "MASTER_ADDR is not set in this Run:ai pod; expected the master pod's address; "
            f"submit with `{SUBMIT}`"
        )
    ep, ep_notes = master
    job = get(env, *JOB_IDS)
    return Detection(
        scheduler=NAME,
        nnodes=nnodes,
        node_rank=node,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("runai", job[1] if job else ep.host),
        notes=tuple(notes) + ep_notes,
    )
