"""Open MPI / MPICH / PMIx: `mpirun --map-by ppr:1:node torchpod run ...`.

Open MPI exports OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
and OMPI_COMM_WORLD_LOCAL_RANK to every process (Open MPI docs, "mpirun(1)" section
"Environment variables"); MPICH/Hydra and Intel MPI export PMI_RANK and PMI_SIZE; a PMIx
launcher exports PMIX_RANK and PMIX_NAMESPACE. One launcher must run per node, so an MPI
rank is a node index. MPI names no rendezvous host: forward it with
`mpirun -x MASTER_ADDR=<first node> -x MASTER_PORT=...` or pass --rdzv-endpoint.
"""

from __future__ import annotations

from ..contract import ENV_SCHEDULER, RDZV_PORT_DEFAULT
from ..errors import InputError
from ..options import UserOptions
from .common import Detection, Env, Facts, NodeCount, get, master_endpoint, parse_int, stable_id

NAME = "mpi"
STRONG = False  # mpirun runs inside Slurm/PBS/Volcano allocations; those own the host list
MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    size = get(env, "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    rank = get(env, "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
    if size is None or rank is None:
        seen = (rank or size)
        why = f"{seen[0]} is set but" if seen else f"{ENV_SCHEDULER.name}={NAME}, and"
        raise InputError(
            f"{why} the MPI world size or rank is missing; expected both "
            "OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK (or PMI_SIZE and PMI_RANK); "
            "start torchpod with mpirun, one rank per node"
        )
    nnodes = parse_int(size[0], size[1], minimum=1)
    node = parse_int(rank[0], rank[1])
    if node >= nnodes:
        raise InputError(
            f"{rank[0]}={rank[1]!r} is outside {size[0]}={size[1]!r}; expected 0-{nnodes - 1}"
        )
    local = get(env, "OMPI_COMM_WORLD_LOCAL_SIZE")
    if local is not None and parse_int(*local, minimum=1) > 1:
        raise InputError(
            f"OMPI_COMM_WORLD_LOCAL_SIZE={local[1]!r}: mpirun started several launchers on "
            "this node; expected 1 (torchrun starts one process per GPU itself); use "
            "`mpirun --map-by ppr:1:node` (or -npernode 1)"
        )
    notes = [f"node {node} of {nnodes} from {rank[0]}/{size[0]}"]
    master = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))
    ep = None
    if master is not None:
        ep, ep_notes = master
        notes += ep_notes
    job = get(env, "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMI_JOBID")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(nnodes),
        node_rank=node,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("mpi", job[1]) if job else None,
        notes=tuple(notes),
        endpoint_hint=(
            "MPI names no rendezvous host; forward one with `mpirun -x MASTER_ADDR=<first "
            f"node> -x MASTER_PORT={RDZV_PORT_DEFAULT}`, or pass --rdzv-endpoint HOST:PORT"
        ),
    )
