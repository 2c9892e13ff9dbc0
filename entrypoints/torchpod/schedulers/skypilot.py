"""SkyPilot: a task's `run` commands start once on every node of the cluster.

SkyPilot exports, per node and never per process (skypilot-org/skypilot,
docs/source/running-jobs/environment-variables.rst and distributed-jobs.rst):
SKYPILOT_NODE_IPS (every node's IP, newline-separated, the head node first),
SKYPILOT_NODE_RANK (this node's index in that list), SKYPILOT_NUM_NODES and
SKYPILOT_NUM_GPUS_PER_NODE. Its own distributed example takes the rendezvous host as
`head -n1` of SKYPILOT_NODE_IPS, so the first IP (the head node) is node 0 here too.
"""

from __future__ import annotations

from ..contract import ENV_SCHEDULER
from ..errors import InputError
from ..options import UserOptions
from ..words import plural
from .common import Detection, Endpoint, Env, Facts, NodeCount, check_host, get, parse_int, rdzv_port, stable_id

NAME = "skypilot"
# SKYPILOT_* are SkyPilot's own, but SkyPilot also runs tasks inside Slurm and Kubernetes
# clusters whose variables the node carries as well: SkyPilot's view of its task wins by
# order (schedulers/__init__.py), not by refusing the pair.
STRONG = False
MARKERS = ("SKYPILOT_NODE_IPS", "SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    ips, rank = get(env, "SKYPILOT_NODE_IPS"), get(env, "SKYPILOT_NODE_RANK")
    if ips is None or rank is None:
        seen = get(env, *MARKERS)
        why = f"{seen[0]} is set but" if seen else f"{ENV_SCHEDULER.name}={NAME!r}, and"
        raise InputError(
            f"{why} SKYPILOT_NODE_IPS or SKYPILOT_NODE_RANK is missing; expected both (every "
            "node's IP, one a line, and this node's index); start torchpod from the task's run section"
        )
    hosts = tuple(check_host("SKYPILOT_NODE_IPS", line.strip()) for line in ips[1].splitlines() if line.strip())
    if len(set(hosts)) != len(hosts):
        raise InputError(f"SKYPILOT_NODE_IPS={ips[1]!r} lists an address twice; expected each node's IP once")
    index = parse_int(*rank, hint="this node's index in SKYPILOT_NODE_IPS")
    count = get(env, "SKYPILOT_NUM_NODES")
    if count is not None and parse_int(*count, minimum=1) != len(hosts):
        raise InputError(
            f"SKYPILOT_NUM_NODES={count[1]!r} disagrees with the {plural(len(hosts), 'address', 'addresses')} of "
            f"SKYPILOT_NODE_IPS={ips[1]!r}; expected one IP per node"
        )
    if index >= len(hosts):
        raise InputError(
            f"SKYPILOT_NODE_RANK={rank[1]!r} is outside the {plural(len(hosts), 'address', 'addresses')} of "
            f"SKYPILOT_NODE_IPS; expected 0-{len(hosts) - 1}"
        )
    notes = [f"{plural(len(hosts), 'node')} in SKYPILOT_NODE_IPS; this is {hosts[index]}, node {index} "
             f"(SKYPILOT_NODE_RANK); the head node {hosts[0]} holds the rendezvous"]
    nproc = None
    gpus = get(env, "SKYPILOT_NUM_GPUS_PER_NODE")
    per_node = None if gpus is None else parse_int(*gpus, hint="this node's GPU count")
    if per_node:  # 0 on a CPU cluster: leave the count to the GPUs found or the user
        nproc = str(per_node)
        notes.append(f"nproc_per_node {nproc} from SKYPILOT_NUM_GPUS_PER_NODE")
    port, port_notes = rdzv_port(env)
    task = get(env, "SKYPILOT_TASK_ID")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts)),
        node_rank=index,
        rdzv_endpoint=Endpoint(hosts[0], port),
        rdzv_id=stable_id("skypilot", task[1] if task else ",".join(hosts)),
        hosts=hosts,
        local_addr=hosts[index],
        nproc_per_node=nproc,
        notes=tuple(notes) + port_notes,
    )
