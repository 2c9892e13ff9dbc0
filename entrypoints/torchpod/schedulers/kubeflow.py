"""Kubeflow PyTorchJob (training-operator v1) and Kubeflow Trainer v2 TrainJob.

Upstream (kubeflow/training-operator, pkg/controller.v1/pytorch/envvar.go, master.go,
elastic.go): with a Master replica the operator sets MASTER_ADDR (``<job>-master-0``),
MASTER_PORT, WORLD_SIZE and RANK (master 0, worker i -> i + 1); from v1.7 it also sets
PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, and
WORLD_SIZE then counts *processes* (pods x nproc), not pods. With an elasticPolicy it
sets PET_RDZV_ENDPOINT (``<job>-worker-0:<port>``), PET_RDZV_BACKEND, PET_NNODES
(``MIN:MAX``), PET_MAX_RESTARTS, PET_RDZV_ID, PET_RDZV_CONF, and early releases spelled
the process count PET_N_PROC_PER_NODE. A worker-only elastic job tells a pod nothing
about its index; manifests expose the ``training.kubeflow.org/replica-index`` label as
REPLICA_INDEX and the pod name as POD_NAME (the label is set by
pkg/controller.v1/common, ReplicaIndexLabel). Trainer v2 (kubeflow/trainer,
pkg/runtime/framework/plugins/torch) sets only PET_* and takes PET_NODE_RANK from the
Indexed Job's completion index (JOB_COMPLETION_INDEX in every such pod).

Claimed by the PET_* variables that describe a job (PET_NNODES, PET_MASTER_ADDR,
PET_RDZV_ENDPOINT), which only these operators set, after every scheduler with markers
of its own. Outside a Kubernetes pod (no KUBERNETES_SERVICE_HOST) the plan says the
variables look exported by hand. Training-operator < 1.7 (MASTER_ADDR/WORLD_SIZE/RANK, no
PET_*) is the env:// convention (env.py). PET_* values win over detection either way:
the resolver reads them as torchrun's own options.
"""

from __future__ import annotations

import re

from ..errors import InputError
from ..options import UserOptions, parse_nproc
from .common import (
    Detection,
    Endpoint,
    Env,
    Facts,
    NodeCount,
    get,
    master_endpoint,
    parse_int,
    stable_id,
)

NAME = "kubeflow"
STRONG = False
MARKERS = ("PET_NNODES", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    notes: list[str] = []
    if get(env, "KUBERNETES_SERVICE_HOST") is None:
        notes.append("PET_* variables outside a Kubernetes pod (no KUBERNETES_SERVICE_HOST): "
                     "read as the Kubeflow operator would set them")
    nnodes = _nnodes(env, notes)
    pod_name = get(env, "POD_NAME")
    node = _node_index(env, facts, pod_name[1] if pod_name else None, notes)
    ep = _endpoint(env, notes)
    nproc = None
    legacy = get(env, "PET_N_PROC_PER_NODE")
    if legacy is not None and get(env, "PET_NPROC_PER_NODE") is None:
        nproc = parse_nproc(*legacy)
        notes.append(f"nproc_per_node {nproc} from PET_N_PROC_PER_NODE (early training-operator spelling)")
    job = re.sub(r"-(master|worker|node)-[0-9]+(-[0-9]+)?$", "", ep.host.split(".", 1)[0])
    return Detection(
        scheduler=NAME,
        nnodes=nnodes,
        node_rank=node,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("kubeflow", job),
        local_addr=pod_name[1] if pod_name else None,
        nproc_per_node=nproc,
        notes=tuple(notes),
    )


def _nnodes(env: Env, notes: list[str]) -> NodeCount:
    """PET_NNODES; WORLD_SIZE counts processes from training-operator 1.7 on (envvar.go)."""
    nnodes_var = get(env, "PET_NNODES")
    if nnodes_var is None:
        raise InputError(
            "PET_NNODES is not set in this Kubeflow pod; expected the number of nodes "
            "('2' or '1:4'); set elasticPolicy or numNodes on the job, or PET_NNODES"
        )
    nnodes = NodeCount.parse(*nnodes_var)
    world = get(env, "WORLD_SIZE")
    if world is not None and world[1] != nnodes_var[1]:
        notes.append(
            f"WORLD_SIZE={world[1]} counts processes (Kubeflow >= 1.7); using PET_NNODES={nnodes}"
        )
    return nnodes


def _node_index(env: Env, facts: Facts, pod_name: str | None, notes: list[str]) -> int | None:
    """This pod's index: the operators' variables, else ``-worker-N`` in the pod name."""
    node, how = None, ""
    for name in ("PET_NODE_RANK", "RANK", "JOB_COMPLETION_INDEX", "REPLICA_INDEX"):
        found = get(env, name)
        if found is not None:
            node, how = parse_int(name, found[1], hint="expected this pod's index"), name
            break
    if node is None:
        for candidate in ([pod_name] if pod_name else []) + [facts.hostname]:
            m = re.search(r"-worker-([0-9]{1,9})$", candidate)  # ASCII: '٣' is no index
            if m:
                node, how = int(m.group(1)), f"pod name {candidate!r}"
                break
    if node is not None:
        notes.append(f"node index {node} from {how}")
    else:
        notes.append(
            "node index unknown: c10d decides who hosts the store by hostname; under "
            "hostNetwork expose REPLICA_INDEX (label training.kubeflow.org/replica-index)"
        )
    return node


def _endpoint(env: Env, notes: list[str]) -> Endpoint:
    """PET_RDZV_ENDPOINT (elastic), else the Master replica's address and port."""
    rdzv = get(env, "PET_RDZV_ENDPOINT")
    master = master_endpoint(env, ("PET_MASTER_ADDR", "MASTER_ADDR"), ("PET_MASTER_PORT", "MASTER_PORT"))
    if rdzv is not None:
        return Endpoint.parse(*rdzv)
    if master is not None:
        ep, ep_notes = master
        notes += ep_notes
        return ep
    raise InputError(
        "neither PET_RDZV_ENDPOINT nor PET_MASTER_ADDR/MASTER_ADDR is set in this Kubeflow "
        "pod; expected the rendezvous host; set elasticPolicy.rdzvHost or add a Master replica"
    )
