"""Azure Machine Learning command jobs with the PyTorch distribution (``distribution:
type: pytorch``, SDK v2; PyTorchConfiguration in v1).

Upstream (MicrosoftDocs/azure-ai-docs, articles/machine-learning/how-to-train-distributed-gpu.md;
Azure/azureml-cheatsheets, website/docs/cheatsheets/python/v1/distributed-training.md):
AzureML starts ``process_count_per_instance`` copies of the command on every node (one
when unset) and sets, per node, MASTER_ADDR (the first node's IP), MASTER_PORT (6105),
NODE_RANK (0 .. nodes-1) and WORLD_SIZE, which counts *processes*; per process RANK and
LOCAL_RANK. AZUREML_NODE_COUNT (the job's instance_count, read the same way by AzureML's
own ParallelRunStep driver) and AZUREML_RUN_ID (the run, the same on every node) come with
every AzureML job; AZ_BATCHAI_* and AZ_BATCH_MASTER_NODE with AmlCompute.

torchpod is itself the per-node launcher, so it wants one copy per node
(process_count_per_instance 1); then WORLD_SIZE equals the node count. The node count
comes from AZUREML_NODE_COUNT where it is set, else from WORLD_SIZE only while nothing
shows more than one process per node (RANK = NODE_RANK, LOCAL_RANK 0); any sign of
several copies per node is refused, naming what to set. The node index is NODE_RANK,
never the process RANK; the first node is NODE_RANK 0, MASTER_ADDR's host.

Claimed by an AzureML marker together with the distribution's variables (or more than
one node): a single-node AzureML job carries AZUREML_RUN_ID too and stays standalone.
"""

from __future__ import annotations

from ..errors import InputError
from ..options import UserOptions
from ..words import plural
from .common import Detection, Env, Facts, NodeCount, get, index_below, master_endpoint, parse_int, stable_id

NAME = "azureml"
STRONG = True
MARKERS = ("AZUREML_RUN_ID", "AZUREML_NODE_COUNT", "AZ_BATCHAI_JOB_NAME", "AZ_BATCH_MASTER_NODE")
# AZUREML_RUN_ID and AZ_BATCHAI_JOB_NAME are set in every AzureML job, a single node too, and
# AZUREML_NODE_COUNT may say 1: they name the platform. AZ_BATCH_MASTER_NODE exists only in a
# multi-instance task, so it alone rules out a one-node plan (schedulers.markers).
MULTI_NODE_MARKERS = ("AZ_BATCH_MASTER_NODE",)
DISTRIBUTION = ("MASTER_ADDR", "NODE_RANK", "WORLD_SIZE")

_FIX = "set process_count_per_instance: 1 in the job's distribution (torchpod starts one worker per GPU)"


def claims(env: Env, user: UserOptions) -> bool:
    if get(env, *MARKERS) is None:
        return False
    count = get(env, "AZUREML_NODE_COUNT")
    return get(env, *DISTRIBUTION) is not None or (count is not None and count[1] != "1")


def _nodes(env: Env, notes: list[str]) -> int:
    """The node count from node-level data; refuses more than one copy of torchpod per node."""
    count, world = get(env, "AZUREML_NODE_COUNT"), get(env, "WORLD_SIZE")
    local, rank, node_rank = get(env, "LOCAL_RANK"), get(env, "RANK"), get(env, "NODE_RANK")
    if local is not None and parse_int(*local) > 0:
        raise InputError(
            f"LOCAL_RANK={local[1]!r}: AzureML started more than one copy of torchpod on this node; "
            f"expected one per node; {_FIX}"
        )
    if rank is not None and node_rank is not None and parse_int(*rank) != parse_int(*node_rank):
        raise InputError(
            f"RANK={rank[1]!r} differs from NODE_RANK={node_rank[1]!r}: AzureML runs several processes "
            f"per node; expected one per node; {_FIX}"
        )
    if count is not None:
        nodes = parse_int(*count, minimum=1, hint="AzureML sets the job's instance count")
        if world is not None and parse_int(*world, minimum=1) != nodes:
            raise InputError(
                f"WORLD_SIZE={world[1]!r} processes on AZUREML_NODE_COUNT={plural(nodes, 'node')}: AzureML runs "
                f"several copies of torchpod per node; expected WORLD_SIZE={nodes}; {_FIX}"
            )
        notes.append(f"{plural(nodes, 'node')} from AZUREML_NODE_COUNT")
        return nodes
    if world is None:
        raise InputError(
            "AZUREML_NODE_COUNT and WORLD_SIZE are both missing in this AzureML job; expected the "
            "PyTorch distribution's variables; set distribution: {type: pytorch, "
            "process_count_per_instance: 1} on the command job"
        )
    nodes = parse_int(*world, minimum=1, hint="AzureML's process count")
    notes.append(f"WORLD_SIZE={nodes} read as the node count: one process per node (RANK = NODE_RANK, "
                 "no AZUREML_NODE_COUNT)")
    return nodes


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    notes: list[str] = []
    nodes = _nodes(env, notes)
    node_var = get(env, "NODE_RANK")
    if node_var is None:
        raise InputError(
            "NODE_RANK is not set in this AzureML job; expected this node's index (0 for the first "
            "node); set distribution: {type: pytorch} on the command job"
        )
    node = index_below(node_var, nodes, of=f"the {plural(nodes, 'node')}", hint="AzureML sets this node's index",
                       tail="; were the variables copied from another job?")
    master = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))
    if master is None:
        raise InputError(
            "MASTER_ADDR is not set in this AzureML job; expected the first node's address; "
            "set distribution: {type: pytorch} on the command job"
        )
    ep, ep_notes = master
    run = get(env, "AZUREML_RUN_ID")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(nodes),
        node_rank=node,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("azureml", run[1] if run else str(ep)),
        notes=(f"node {node} from NODE_RANK (AzureML, per node)", *notes, *ep_notes),
    )
