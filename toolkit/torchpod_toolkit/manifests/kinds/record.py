"""What one job kind is, as a record: the fields every module under manifests/kinds/ fills in. Pure.

A kind's module declares one ``JobKind`` (``KIND``); everything else asks the record. The
option checks (spec), the renderers (kube, hpc, render), the harness (cluster/scenarios) and
the demos read its fields, and none of them names a kind: adding a kind is its module, which
``kinds`` finds in its folder and places by ``order``.

This module imports nothing of the toolkit: the records sit below the data model (spec) and
below the renderers, which both read them. A renderer takes the data model the records feed,
so a record cannot import its renderer (nor can a kind's module, even inside a function: the
renderer reaches the records through spec, a circle). A record holds a ``Ref`` instead: the
renderer module's name and the function's, looked up on first use, by which time the
renderer module is loaded; no table of renderers stands between the two, and a unit test
resolves every record's references (tests/unit/torchpod_toolkit/manifests/test_jobs.py).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Optional

Model = Callable[..., list]

# How many times a Kubernetes job restarts after a failure before it ends Failed, where its
# object can say so (PyTorchJob runPolicy.backoffLimit, JobSet failurePolicy.maxRestarts,
# Volcano maxRetry): a script that always fails stops holding its nodes' GPUs after these.
RESTARTS = 3


@dataclass(frozen=True)
class NameRule:
    """A batch system's job-name grammar as torchpod holds --name to it: ``pattern`` (matched
    whole, ASCII), at most ``limit`` characters, and ``form`` as the refusal says it."""

    pattern: str
    limit: int
    form: str


@dataclass(frozen=True)
class Ref:
    """A name in one of the renderer modules of torchpod_toolkit.manifests (``kube``, ``hpc``):
    a renderer function, or a CLI line (kube.CliLine). ``target`` looks it up once, on first
    use; calling a Ref calls its target."""

    module: str  # the renderer module, relative to torchpod_toolkit.manifests ("kube", "hpc")
    name: str  # the name in that module

    @cached_property
    def target(self) -> Any:
        package = __name__.rsplit(".", 2)[0]  # torchpod_toolkit.manifests
        return getattr(importlib.import_module(f"{package}.{self.module}"), self.name)

    def __call__(self, *args: Any) -> Any:
        return self.target(*args)


@dataclass(frozen=True)
class Nodes:
    """What a batch system hands each node of a job, as the containers-as-nodes harness
    (cluster/scenarios.py) plays it from the system's own sources: the names the nodes are
    listed by, the variables each node gets and the node file, if any.

    The texts are format strings over the job (cluster/scenarios.py ``_batch``):
    {name} the job's name, {number} its numeric id, {jobid} its id as ``job_id`` forms it,
    {nodes} the node count, {i} the node's index and {n} its number (index + 1), {host} its
    listed name, {hosts} every listed name, space-separated, {hostlist} the list in Slurm's
    compressed form, {mcpu} ``host 1`` per host (LSF's slots), {ips} every node's address,
    one a line, head first, {gpus} the node's GPU count, {node_file} the node file's path.
    """

    host: str  # each node's listed name (the harness's default, when the caller gives none)
    env: tuple[tuple[str, str], ...]  # each node's variables, in the order the system sets them
    first_host: str = ""  # node 0's listed name where it differs from ``host`` (a head node)
    short_hostname: bool = False  # a node calls itself by the first label of its listed (FQDN) name
    job_id: str = "{number}"  # the job's id as the system writes it
    node_file: str = ""  # where the node file is written on every node; "": none
    per_slot: bool = False  # the node file lists each host once per slot (PBS mpiprocs), else once


@dataclass(frozen=True)
class JobKind:
    name: str  # the --scheduler value
    detector: str  # the torchpod.schedulers NAME `torchpod plan` detects in the job's pods/nodes
    port: int  # the job's c10d port
    scenario: str  # the harness scenario (cluster/scenarios.py) that runs this job
    model: Optional[Model]  # operators' model of the manifest's job object; None: a batch script
    requires: Optional[str]  # the operator the cluster must run (Kubernetes kinds)
    submit: str  # the command that submits the rendered file
    suffix: str  # the rendered file's extension
    # its renderer: a function of kube (spec) -> the job object, or of hpc (spec, header) -> the script's text
    renderer: Ref
    fan_out: str = ""  # how an HPC job starts one launcher per node, when the header names it
    marker: str = ""  # a variable only this kind's pods carry among kinds of the same model
    runtimes: tuple[str, ...] = ()  # the --runtime values a batch kind takes, the first its default; (): all
    # What the batch system hands each node and a runtime that clears the environment must
    # pass on by name: its detector's variables (torchpod.contract.SCHEDULER_VARS), the
    # variable holding its job id, and the node file the launcher reads (bound into the container).
    forwards: tuple[str, ...] = ()
    job_id: str = ""
    node_file: str = ""
    nodes: Optional[Nodes] = None  # a batch kind: what the harness gives each node of its scenario
    step_gpus: bool = False  # its job step names the GPUs by global id (Slurm's SLURM_STEP_GPUS)
    # What the job's file can say; an option needing one of these is refused elsewhere (spec).
    node_range: bool = False  # --nodes MIN:MAX: the job runs on fewer nodes than it asks for
    # the topology its nodes are told, which orders the ranks before the node index
    # (torchpod.order.domain_order), as the header says it; "": ranks follow the node index
    rank_domains: str = ""
    mnnvl: Optional[str] = None  # --mnnvl: the operator release whose CRD carries the claim
    no_mnnvl: str = ""  # a Kubernetes kind without mnnvl: why its pods cannot carry the claim
    queue: bool = False  # --queue: a queue or partition
    queue_list: bool = False  # --queue A,B: several, of which the batch system picks one
    # --name in the batch system's own grammar (None: a DNS label, as Kubernetes objects are named)
    job_name: Optional[NameRule] = None
    gpu_model: bool = False  # --gpu-model: its GPU request can name a model
    batch: bool = False  # --walltime and --account directives, --volume as host paths bound in
    qos: bool = False  # --qos, --constraint, --reservation (sbatch's)
    requeue: bool = False  # --requeue-lead: signalled before its time limit, requeues itself
    pod_fields: bool = False  # its pod template written in full: service account, pull secret, volumes, ...
    priority_class: bool = False  # --priority-class in its pod template
    workdir: bool = False  # --workdir: its containers have a workingDir
    project: bool = False  # --project (Run:ai's)
    # How its file is rendered, where kinds of one renderer or model differ.
    master_task: bool = False  # a master task of one pod beside the workers (so at least 2 nodes)
    # its nodes are started by `mpiexec --ppn 1` (Cray PALS's), which copies the script's environment,
    # rather than by a task program that is handed it word by word
    mpiexec: bool = False
    shared_dir: bool = False  # a batch job whose nodes see its submit directory at the same path
    shared_writes: str = ""  # what its script writes in the submit directory for the nodes to share
    cli: Optional[Ref] = None  # a CLI line (a kube.CliLine) written beside the manifest, as the file to submit
    # a Kubernetes kind the Kubernetes harness (kube/, `invoke demo --kube`) cannot run: why, as
    # `invoke demo --kube --manifest` refuses its manifest ("--manifest='F' is <this>; expected a
    # <the kinds it runs> manifest")
    no_kube_harness: str = ""
    # a batch kind whose system the harness runs for real (cluster/slurm.py: slurmctld, slurmd
    # and munge in containers), so its rendered script is submitted and followed as written
    real_batch_system: bool = False
    no_hostnetwork: str = ""  # a Kubernetes kind whose pods cannot be given hostNetwork: why, and what to use
    # the name the operator gives the job's last pod ({name}, {index}) when a webhook holds it,
    # with the suffix JobSet adds, to a DNS label (spec.pod_name_room)
    last_pod: str = ""
    # What follows a failure, in the header's Restarts line ({n}: RESTARTS): every kind says
    # how many restarts it makes and how the job ends, or why it has no bound.
    restarts: str = ""
    restarts_elastic: str = ""  # the same under --nodes MIN:MAX, where it differs
    # the submit command that reads the file from a pipe (`invoke manifests ... | kubectl apply
    # -f -`); "": its submitter reads no standard input, so the file must be written (--out)
    piped: str = ""
    # --submit: how the submitter names the job it queued (a regular expression whose group
    # "id" is the id, searched in its output; "": the job's own name), and the command that
    # watches it ({id}, {name}, {namespace})
    submitted: str = ""
    watch: str = ""
    # what --submit adds before the file where the submitter reads no standard input ({name}:
    # the job's name), so that it asks nothing and names the job
    submit_flags: str = ""
    # its place in every list of kinds (kinds.KINDS), lowest first; a kind without one comes last
    order: int = 1000

    @property
    def kube(self) -> bool:
        return self.model is not None

    @property
    def min_nodes(self) -> int:
        """The fewest nodes its job runs on: two where a master task stands beside the workers."""
        return 2 if self.master_task else 1
