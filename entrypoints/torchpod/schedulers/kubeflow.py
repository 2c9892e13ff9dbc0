"""Kubeflow PyTorchJob (training-operator v1) and Kubeflow Trainer v2 TrainJob.

Upstream (kubeflow/training-operator, pkg/controller.v1/pytorch/envvar.go, master.go,
elastic.go): with a Master replica the operator sets MASTER_ADDR (``<job>-master-0``),
MASTER_PORT, WORLD_SIZE and RANK (master 0, worker i -> i + 1); from v1.7 it also sets
PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, and
WORLD_SIZE then counts *processes* (pods x nproc), not pods. With an elasticPolicy it
sets PET_RDZV_ENDPOINT (``<job>-worker-0:<port>``), PET_RDZV_BACKEND, PET_NNODES
(``MIN:MAX``), PET_MAX_RESTARTS, PET_RDZV_ID, PET_RDZV_CONF, and early releases spelled
the process count PET_N_PROC_PER_NODE. A worker-only elastic job tells a pod nothing
about its index; seeds/004 exposes the ``training.kubeflow.org/replica-index`` label as
REPLICA_INDEX and the pod name as POD_NAME. Trainer v2 (kubeflow/trainer,
pkg/runtime/framework/plugins/torch) sets only PET_* and takes PET_NODE_RANK from the
Indexed Job's completion index (JOB_COMPLETION_INDEX in every such pod).

PET_* are torchrun's own environment options and people export them anywhere, so this
detector only claims a Kubernetes pod (KUBERNETES_SERVICE_HOST) that no stronger
scheduler claims.
"""

from __future__ import annotations

import re

from ..errors import InputError
from .common import (
    Detection,
    Env,
    Facts,
    endpoint,
    get,
    parse_int,
    rdzv_port,
    split_endpoint,
    stable_id,
)

NAME = "kubeflow"
STRONG = False


def claims(env: Env) -> bool:
    if get(env, "KUBERNETES_SERVICE_HOST") is None:
        return False
    if get(env, "PET_NNODES", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT") is not None:
        return True
    # training-operator before PET_*: the master/worker convention only.
    return get(env, "MASTER_ADDR") is not None and get(env, "WORLD_SIZE") is not None


def detect(env: Env, facts: Facts) -> Detection:
    notes: list[str] = []
    nnodes_var = get(env, "PET_NNODES")
    world = get(env, "WORLD_SIZE")
    if nnodes_var is not None:
        nnodes = nnodes_var[1]
        if world is not None and world[1] != nnodes:
            notes.append(
                f"WORLD_SIZE={world[1]} counts processes (Kubeflow >= 1.7); using PET_NNODES={nnodes}"
            )
    elif world is not None:
        nnodes = str(parse_int("WORLD_SIZE", world[1], minimum=1))
        notes.append(
            f"no PET_NNODES: reading WORLD_SIZE={world[1]} as the number of pods "
            "(training-operator < 1.7, master counted)"
        )
    else:
        raise InputError(
            "PET_NNODES is not set in this Kubeflow pod; expected the number of nodes "
            "('2' or '1:4'); set elasticPolicy or numNodes on the job, or PET_NNODES"
        )

    node, how = None, ""
    for name in ("PET_NODE_RANK", "RANK", "JOB_COMPLETION_INDEX", "REPLICA_INDEX"):
        found = get(env, name)
        if found is not None:
            node, how = parse_int(name, found[1], hint="expected this pod's index"), name
            break
    pod_name = get(env, "POD_NAME")
    if node is None:
        for candidate in ([pod_name[1]] if pod_name else []) + [facts.hostname]:
            m = re.search(r"-worker-(\d+)$", candidate)
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

    port, port_notes = rdzv_port(env)
    rdzv = get(env, "PET_RDZV_ENDPOINT")
    master = get(env, "PET_MASTER_ADDR", "MASTER_ADDR")
    if rdzv is not None:
        ep = rdzv[1]
    elif master is not None:
        mport = get(env, "PET_MASTER_PORT", "MASTER_PORT")
        ep = endpoint(master[1], mport[1] if mport else port)
        notes.append(f"rendezvous on {master[0]} (master pod) port from "
                     f"{mport[0] if mport else 'TORCHPOD_RDZV_PORT/default'}")
    else:
        raise InputError(
            "neither PET_RDZV_ENDPOINT nor PET_MASTER_ADDR/MASTER_ADDR is set in this Kubeflow "
            "pod; expected the rendezvous host; set elasticPolicy.rdzvHost or add a Master replica"
        )
    nproc = None
    legacy = get(env, "PET_N_PROC_PER_NODE")
    if legacy is not None and get(env, "PET_NPROC_PER_NODE") is None:
        nproc = legacy[1]
        notes.append(f"nproc_per_node {nproc} from PET_N_PROC_PER_NODE (early training-operator spelling)")
    host = split_endpoint(ep)[0]
    job = re.sub(r"-(master|worker|node)-\d+(-\d+)?$", "", host.split(".", 1)[0])
    return Detection(
        scheduler=NAME,
        nnodes=nnodes,
        node_rank=node,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("kubeflow", job),
        local_addr=pod_name[1] if pod_name else None,
        nproc_per_node=nproc,
        notes=tuple(notes) + (port_notes if rdzv is None else ()),
    )
