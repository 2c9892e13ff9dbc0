"""JobSet (jobset.x-k8s.io/v1alpha2) used directly: replicated Jobs of Indexed pods.

Upstream (kubernetes-sigs/jobset, commit 08dfbdfd): JobSet sets **no** environment
variable. Its controller (pkg/controllers/jobset_controller.go, labelAndAnnotateObject)
puts labels and annotations on every pod: jobset.sigs.k8s.io/jobset-name,
replicatedjob-name, job-index (the Job's index in its replicated job),
job-global-index (0..N-1 over every replicated job, in spec order) and global-replicas
(N, the Jobs in the JobSet). Its webhook (pkg/webhooks/jobset_webhook.go) defaults every
Job to completionMode Indexed and network.enableDNSHostnames to true, so Kubernetes sets
JOB_COMPLETION_INDEX (the pod's index in its Job) and names the pod's host
``<jobset>-<rjob>-<jobIdx>-<podIdx>`` (placement.GenPodName) in the subdomain
network.subdomain, else the JobSet's name (GetSubdomain). The manifest must therefore
pass the labels through the downward API (``fieldRef: metadata.labels['...']``) under
the names this module reads: JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX,
JOB_GLOBAL_INDEX, GLOBAL_REPLICAS. Every one of them is per pod (= per node); none per
process.

Nothing in a pod says how many pods each Job runs (its parallelism), so the node count
is the user's --nnodes, checked against GLOBAL_REPLICAS: pods per Job = nnodes /
GLOBAL_REPLICAS, node index = JOB_GLOBAL_INDEX x pods per Job + JOB_COMPLETION_INDEX.
The first node is pod 0 of Job 0 of the first replicated job,
``<jobset>-<rjob>-0-0.<subdomain>``; a pod of a later replicated job does not know that
one's name and needs MASTER_ADDR (as JobSet's own PyTorch examples set it).

Kubeflow Trainer v2 pods are JobSet pods with PET_*: the kubeflow module stands before
this one. JOB_COMPLETION_INDEX alone (any Indexed Job) is claimed only when neither the
env:// variables nor a user's endpoint describe the job.
"""

from __future__ import annotations

from ..contract import JOBSET_LABEL_ENV
from ..errors import InputError
from ..options import UserOptions
from ..words import plural
from .common import (
    Detection,
    Endpoint,
    Env,
    Facts,
    NodeCount,
    check_host,
    get,
    int_var,
    master_endpoint,
    rdzv_port,
    stable_id,
)

NAME = "jobset"
STRONG = False
LABELS = JOBSET_LABEL_ENV  # the downward-API names of the controller's labels (torchpod.contract)
MARKERS = (*LABELS, "JOB_COMPLETION_INDEX")


def _downward(name: str) -> str:
    return f"pass {name} from the label {LABELS[name]} (fieldRef metadata.labels['{LABELS[name]}'])"


def claims(env: Env, user: UserOptions) -> bool:
    if get(env, *LABELS) is not None:
        return True
    if get(env, "JOB_COMPLETION_INDEX") is None:
        return False
    described = all(get(env, n) is not None for n in ("MASTER_ADDR", "WORLD_SIZE", "RANK"))
    return not described and user.rdzv_endpoint is None and user.master_addr is None


def _layout(env: Env, user: UserOptions) -> tuple[NodeCount, int, int, int, int]:
    """(nnodes, node index, jobs, this Job's global index, this pod's index in its Job)."""
    pod = int_var(env, "JOB_COMPLETION_INDEX", hint="Kubernetes sets it in an Indexed Job's pods")
    if pod is None:
        raise InputError(
            "JOB_COMPLETION_INDEX is not set in this JobSet pod; expected the pod's index in its Job; "
            "keep the replicated job's completionMode Indexed (JobSet's default)"
        )
    jobs = int_var(env, "GLOBAL_REPLICAS", minimum=1, hint="the Jobs in the JobSet")
    if jobs is None:
        raise InputError(f"GLOBAL_REPLICAS is not set in this JobSet pod (JOB_COMPLETION_INDEX={pod}); "
                         f"expected the number of Jobs in the JobSet; {_downward('GLOBAL_REPLICAS')}")
    glob = int_var(env, "JOB_GLOBAL_INDEX", hint="the Job's index over the whole JobSet")
    if glob is None and jobs > 1:
        raise InputError(f"JOB_GLOBAL_INDEX is not set in this JobSet pod of {plural(jobs, 'Job')}; expected this "
                         f"Job's index over the JobSet; {_downward('JOB_GLOBAL_INDEX')}")
    glob = glob or 0
    if glob >= jobs:
        raise InputError(f"JOB_GLOBAL_INDEX={glob} is outside GLOBAL_REPLICAS={jobs}; expected 0-{jobs - 1}")
    if user.nnodes is None:
        raise InputError(
            f"GLOBAL_REPLICAS={jobs} says how many Jobs, not how many pods each runs; expected "
            "--nnodes N (GLOBAL_REPLICAS x the Jobs' parallelism) on torchpod's command line"
        )
    nnodes = user.nnodes.value
    if jobs == 1:  # one Job: its completion index is the node index, at any count
        per_job = nnodes.hi
    elif nnodes.lo != nnodes.hi or nnodes.hi % jobs:
        raise InputError(
            f"{user.nnodes.source}={str(nnodes)!r} is not a multiple of GLOBAL_REPLICAS={jobs}; "
            f"expected {jobs} x the pods of each Job (e.g. {jobs * 2})"
        )
    else:
        per_job = nnodes.hi // jobs
    if pod >= per_job:
        raise InputError(
            f"JOB_COMPLETION_INDEX={pod} is outside the {plural(per_job, 'pod')} of each Job ({user.nnodes.source}="
            f"{nnodes} over GLOBAL_REPLICAS={jobs}); expected 0-{per_job - 1}"
        )
    return nnodes, glob * per_job + pod, jobs, glob, pod


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    nnodes, node, jobs, glob, pod = _layout(env, user)
    notes = [f"node {node} = JOB_GLOBAL_INDEX {glob} x {plural(nnodes.hi // jobs, 'pod')} per Job + "
             f"JOB_COMPLETION_INDEX {pod} (JobSet of {plural(jobs, 'Job')})"]
    js, rjob, job_idx = get(env, "JOBSET_NAME"), get(env, "REPLICATED_JOB_NAME"), get(env, "JOB_INDEX")
    name = js[1] if js else None
    if name is None and rjob is not None and job_idx is not None:
        suffix = f"-{rjob[1]}-{job_idx[1]}-{pod}"  # the pod's host name, placement.GenPodName
        if facts.hostname.endswith(suffix) and len(facts.hostname) > len(suffix):
            name = facts.hostname[: -len(suffix)]
    local = None
    if name is not None and rjob is not None and job_idx is not None:
        local = check_host("this JobSet pod's name", f"{name}-{rjob[1]}-{job_idx[1]}-{pod}.{name}")
    master = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))
    if master is not None:
        ep, ep_notes = master
        notes += ep_notes
    else:
        ep = _first_pod(env, name, rjob, glob, job_idx)
        port_notes = rdzv_port(env)[1]
        notes += [f"rendezvous endpoint {ep}: the first pod, in the JobSet's own subdomain "
                  "(set MASTER_ADDR under a custom network.subdomain)", *port_notes]
    return Detection(
        scheduler=NAME,
        nnodes=nnodes,
        node_rank=node,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("jobset", name or ep.host),
        local_addr=local,
        notes=tuple(notes),
    )


def _first_pod(env: Env, name: str | None, rjob, glob: int, job_idx) -> Endpoint:
    """``<jobset>-<rjob>-0-0.<jobset>``: known only in the first replicated job."""
    if name is None or rjob is None:
        raise InputError(
            "neither MASTER_ADDR nor JOBSET_NAME and REPLICATED_JOB_NAME are set in this JobSet pod; "
            f"expected the first pod's address; set MASTER_ADDR, or {_downward('JOBSET_NAME')} and "
            f"{_downward('REPLICATED_JOB_NAME')}"
        )
    # The first replicated job is the one whose Jobs' global indexes start at 0.
    first = glob == int_var(env, "JOB_INDEX") if job_idx is not None else glob == 0
    if not first:
        raise InputError(
            f"REPLICATED_JOB_NAME={rjob[1]!r} is not the JobSet's first replicated job (JOB_GLOBAL_INDEX="
            f"{glob}); expected MASTER_ADDR naming the first pod (<jobset>-<first rjob>-0-0.<subdomain>)"
        )
    port, _ = rdzv_port(env)
    host = check_host("the first JobSet pod", f"{name}-{rjob[1]}-0-0.{name}")
    return Endpoint(host, port)
