"""The harness's scenarios: for each scheduler, what it hands each node of an N-node job
(the names it lists, the environment it sets, the files it writes). Pure; topology.build
runs a scenario's builder and makes the Topology.

Scenarios (``SCENARIOS``): one per renderable job kind (manifests/jobs.py, which also
says the detector each one must produce), plus env, mpi, sagemaker, flux and azureml,
which no manifest renders.
The Kubernetes ones (runai, kubeflow, kubeflow-elastic,
trainer, volcano, volcano-master) are not written here: ``_from_manifest`` renders the job
with `invoke manifests`' renderer and takes each pod from the operator model
(torchpod_toolkit.manifests.operators, one model per operator under manifests/models/,
written from the operators' sources), so the harness runs what a generated manifest makes the operator create.
The batch kinds' are not written here either: each kind's record declares what its system
hands each node (JobKind.nodes, a record.Nodes written from the system's own sources in the
kind's module: the listed names, the variables, the node file), and ``_batch`` plays it, so
a new batch kind brings its scenario with it. The others, one builder each, written from
the systems' own sources:

- env: the pod-level env:// convention with no marker (Alibaba PAI-DLC, Baidu AIHC,
  training-operator < 1.7): MASTER_ADDR <job>-master-0, WORLD_SIZE nodes, RANK node index,
  NPROC_PER_NODE.
- mpi: Open MPI `mpirun --map-by ppr:1:node -x MASTER_ADDR -x MASTER_PORT` (mpirun(1)):
  OMPI_COMM_WORLD_* and PMIx variables, MASTER_ADDR the first node's IP, filled in at start.
- sagemaker: containers algo-1..N listed sorted lexicographically in SM_HOSTS and
  /opt/ml/input/config/resourceconfig.json, SM_CURRENT_HOST, SM_NUM_GPUS
  (aws/sagemaker-training-toolkit @33839372, src/sagemaker_training/environment.py and
  mapping.py to_env_vars); the container's own hostname is the instance's, not algo-N
  (aws/sagemaker-training-toolkit: Open MPI reports such a host), so only the
  algo-N names connect.
- flux: `flux run -N N --tasks-per-node=1` tasks: FLUX_JOB_ID (f58), FLUX_JOB_SIZE,
  FLUX_JOB_NNODES, FLUX_URI, FLUX_KVS_NAMESPACE (flux-framework/flux-core @4a5e79f5,
  src/shell/shell.c), FLUX_TASK_RANK, FLUX_TASK_LOCAL_ID (src/shell/task.c). Flux lists no
  hosts, so the job script exports MASTER_ADDR="$(flux hostlist -n 0 local)" and
  MASTER_PORT, which `flux run` copies into every task (flux-run(1), ENVIRONMENT).
- azureml: the PyTorch distribution with process_count_per_instance 1: MASTER_ADDR the first
  node's IP and MASTER_PORT 6105, NODE_RANK, WORLD_SIZE = nodes, RANK = NODE_RANK,
  LOCAL_RANK 0, AZUREML_RUN_ID, AZUREML_NODE_COUNT, AZ_BATCH_MASTER_NODE IP:PORT
  (MicrosoftDocs/azure-ai-docs how-to-train-distributed-gpu.md; Azure/azureml-cheatsheets
  distributed-training.md).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Callable, Sequence

from torchpod.contract import RDZV_PORT_DEFAULT

from ..manifests import jobs
from ..manifests.models.common import K8S_ENV as K8S
from .nodes import IP_OF_NODE0, ip_of

# AzureML's PyTorch distribution sets MASTER_PORT 6105 (Azure/azureml-cheatsheets,
# website/docs/cheatsheets/python/v1/distributed-training.md); only this model uses it.
AZUREML_MASTER_PORT = 6105
# Where SageMaker writes every container's hosts and current_host (aws/sagemaker-training-toolkit
# @33839372, src/sagemaker_training/environment.py, read_resource_config).
SAGEMAKER_RESOURCE_CONFIG = "/opt/ml/input/config/resourceconfig.json"


@dataclass(frozen=True)
class Job:
    """What a builder needs: the job's name, size and, optionally, real-world names."""

    name: str  # DNS-label-safe job name
    nodes: int
    nproc: tuple[int, ...]
    port: int
    hosts: tuple[str, ...] | None = None  # the listed node names, when the caller gives them
    number: str | None = None  # an HPC scheduler's job id, when the caller gives it
    host_network: bool = False  # Kubernetes pods with hostNetwork (the manifest's --rdma hostnetwork)
    slots: int = 2  # PBS mpiprocs per chunk: PBS_NODEFILE lines per node
    min_nodes: int | None = None  # an elastic job's MIN (--nodes MIN:MAX; a kind whose record has node_range)

    def host(self, i: int, default: str) -> str:
        return self.hosts[i] if self.hosts else default

    @property
    def job_number(self) -> str:
        """A numeric job id (Slurm, PBS): given, or derived from the name (stable per job)."""
        return self.number or str(zlib.crc32(self.name.encode()) % 100000)


Raw = list[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]]


def compress_hostlist(hosts: Sequence[str]) -> str:
    """Slurm's compressed form of consecutive names sharing a prefix (``gpu[001-004],login1``):
    what SLURM_JOB_NODELIST holds. Equal-width numbers only, as Slurm writes them."""
    groups: list[tuple[str, str, list[int]]] = []  # (prefix, width-format, numbers)
    for host in hosts:
        m = re.fullmatch(r"(.*?)(\d+)", host)
        if m is None:
            groups.append((host, "", []))
            continue
        prefix, digits = m.groups()
        fmt = f"0{len(digits)}d"
        if groups and groups[-1][0] == prefix and groups[-1][1] == fmt:
            groups[-1][2].append(int(digits))
        else:
            groups.append((prefix, fmt, [int(digits)]))
    out = []
    for prefix, fmt, numbers in groups:
        if not numbers:
            out.append(prefix)
        elif len(numbers) == 1:
            out.append(f"{prefix}{numbers[0]:{fmt}}")
        else:
            runs: list[list[int]] = []
            for n in numbers:
                if runs and n == runs[-1][1] + 1:
                    runs[-1][1] = n
                else:
                    runs.append([n, n])
            ranges = [f"{a:{fmt}}" if a == b else f"{a:{fmt}}-{b:{fmt}}" for a, b in runs]
            out.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)


def _master_and_workers(job: Job) -> list[str]:
    """Pod names of a master/worker job: <job>-master-0, then <job>-worker-i."""
    return [job.host(0, f"{job.name}-master-0")] + [
        job.host(i + 1, f"{job.name}-worker-{i}") for i in range(job.nodes - 1)]


# The image and command the harness renders into a manifest: the runner replaces both with
# the image under test and the workload's own command.
HARNESS_IMAGE = "torchpod/harness:model"
HARNESS_COMMAND = ("workload.py",)


def _manifest_pods(kind: str, job: Job) -> list:
    """The pods the operator model (manifests/operators.py) makes of the job's manifest,
    rendered with `invoke manifests`' renderer."""
    from ..manifests import kube, operators
    from ..manifests import spec as mspec

    same = len(set(job.nproc)) == 1 and job.nproc[0] > 1
    request = mspec.check(mspec.JobSpec(
        kind, job.nodes, HARNESS_IMAGE, HARNESS_COMMAND, name=job.name, min_nodes=job.min_nodes,
        gpus_per_node=job.nproc[0] if same else 0,
        rdma="hostnetwork" if job.host_network else "none"))
    return operators.pods(kube.objects(request))


def _from_manifest(kind: str) -> "Builder":
    """A Kubernetes scenario: each pod from the operator model, so the harness runs exactly
    what a generated manifest makes the operator create."""

    def builder(job: Job) -> Raw:
        return [(p.hostname, p.dns_names, p.env, p.files) for p in _manifest_pods(kind, job)]

    return builder


def _manifest_options(kind: str) -> Callable[[Job], tuple[str, ...]]:
    """The torchpod options a manifest's pods pass between ``run`` and ``--``."""

    def options(job: Job) -> tuple[str, ...]:
        args = _manifest_pods(kind, job)[0].args
        return tuple(args[1:args.index("--")]) if args[:1] == ("run",) and "--" in args else ()

    return options


def _no_options(job: Job) -> tuple[str, ...]:
    return ()


def _env(job: Job) -> Raw:
    pods = _master_and_workers(job)
    nodes: Raw = []
    for i, pod in enumerate(pods):
        env = K8S + (
            ("MASTER_ADDR", pods[0]), ("MASTER_PORT", str(job.port)),
            ("WORLD_SIZE", str(job.nodes)), ("RANK", str(i)),
            ("NPROC_PER_NODE", str(job.nproc[i])),
        )
        nodes.append((pod, (pod,), env, ()))
    return nodes


def _mpi(job: Job) -> Raw:
    hosts = [job.host(i, f"{job.name}-node{i + 1}") for i in range(job.nodes)]
    nodes: Raw = []
    for i, host in enumerate(hosts):
        env = (
            ("OMPI_COMM_WORLD_SIZE", str(job.nodes)), ("OMPI_COMM_WORLD_RANK", str(i)),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
            ("OMPI_COMM_WORLD_NODE_RANK", "0"), ("PMIX_RANK", str(i)),
            ("PMIX_NAMESPACE", f"prterun-{hosts[0]}-12345@1"),
            ("MASTER_ADDR", IP_OF_NODE0), ("MASTER_PORT", str(job.port)),
        )
        nodes.append((host, (host,), env, ()))
    return nodes


def _gpus(job: Job, i: int) -> str:
    """A node's GPU count as a platform reports it: the harness's nproc above one, else 0
    (a CPU node: the launcher then counts the GPUs it finds)."""
    return str(job.nproc[i]) if job.nproc[i] > 1 else "0"


def _sagemaker(job: Job) -> Raw:
    # SageMaker names the containers algo-1..N and lists them sorted lexicographically
    # (algo-10 before algo-2); node i is the i-th name of that list.
    hosts = list(job.hosts) if job.hosts else sorted(f"algo-{k}" for k in range(1, job.nodes + 1))
    listed = json.dumps(hosts, separators=(",", ":"))  # mapping.to_env_vars' form
    nodes: Raw = []
    for i, host in enumerate(hosts):
        config = {"current_host": host, "current_instance_type": "ml.p4d.24xlarge",
                  "current_instance_group": "homogeneousCluster", "hosts": hosts,
                  "instance_groups": [{"instance_group_name": "homogeneousCluster",
                                       "instance_type": "ml.p4d.24xlarge", "hosts": hosts}],
                  "network_interface_name": "eth0"}
        text = json.dumps(config, sort_keys=True)
        env = (
            ("TRAINING_JOB_NAME", job.name), ("SM_HOSTS", listed), ("SM_CURRENT_HOST", host),
            ("SM_NUM_GPUS", _gpus(job, i)), ("SM_NETWORK_INTERFACE_NAME", "eth0"),
            ("SM_CURRENT_INSTANCE_TYPE", "ml.p4d.24xlarge"), ("SM_RESOURCE_CONFIG", text),
        )
        # the container's own hostname is the instance's, not its algo-N name
        hostname = f"ip-10-0-{i // 200}-{10 + i % 200}"
        nodes.append((hostname, (host,), env, ((SAGEMAKER_RESOURCE_CONFIG, text),)))
    return nodes


def _f58(number: int) -> str:
    """A Flux job id as FLUX_JOB_ID writes it: 'ƒ' and base58 (flux-core src/common/libutil/fluid.c)."""
    digits = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 58)
        out = digits[rest] + out
        if not number:
            return "\u0192" + out


def _flux(job: Job) -> Raw:
    hosts = [job.host(i, f"{job.name}-flux{i + 1:02d}") for i in range(job.nodes)]
    number = int(job.job_number) if job.job_number.isdigit() else zlib.crc32(job.job_number.encode())
    fluid = number << 24  # a FLUID: milliseconds << 24 (generator id and sequence 0)
    common = (
        ("FLUX_URI", "local:///run/flux/local"), ("FLUX_KVS_NAMESPACE", f"job-{fluid}"),
        ("FLUX_JOB_ID", _f58(fluid)), ("FLUX_JOB_ID_PATH", "/" + _f58(fluid)),
        ("FLUX_JOB_SIZE", str(job.nodes)), ("FLUX_JOB_NNODES", str(job.nodes)),
        # the job script's own exports, copied into every task by `flux run`
        ("MASTER_ADDR", hosts[0]), ("MASTER_PORT", str(RDZV_PORT_DEFAULT)),
    )
    return [(host, (host,), common + (("FLUX_TASK_RANK", str(i)), ("FLUX_TASK_LOCAL_ID", "0")), ())
            for i, host in enumerate(hosts)]


def _azureml(job: Job) -> Raw:
    run = f"{job.name}_{job.job_number}_a1b2c3d4"
    port = str(AZUREML_MASTER_PORT)
    common = (
        ("AZUREML_RUN_ID", run), ("AZUREML_NODE_COUNT", str(job.nodes)),
        ("AZ_BATCH_MASTER_NODE", f"{IP_OF_NODE0}:{port}"),
        ("MASTER_ADDR", IP_OF_NODE0), ("MASTER_PORT", port), ("WORLD_SIZE", str(job.nodes)),
    )
    nodes: Raw = []
    for i in range(job.nodes):
        host = job.host(i, f"{job.name}-{i:06d}")  # the node's own name: no variable lists it
        env = common + (("NODE_RANK", str(i)), ("RANK", str(i)), ("LOCAL_RANK", "0"))
        nodes.append((host, (host,), env, ()))
    return nodes


Builder = Callable[[Job], Raw]


def _job_fields(job: Job, model: jobs.Nodes, hosts: list[str]) -> dict:
    """The format fields of a batch kind's node texts (record.Nodes) that every node shares."""
    jobid = model.job_id.format(number=job.job_number, name=job.name)
    return dict(name=job.name, number=job.job_number, jobid=jobid, nodes=job.nodes, hosts=" ".join(hosts),
                hostlist=compress_hostlist(hosts), mcpu=" ".join(f"{h} 1" for h in hosts),
                ips="\n".join(ip_of(k) for k in range(job.nodes)), node_file=model.node_file.format(jobid=jobid))


def _listed(job: Job, model: jobs.Nodes) -> list[str]:
    """Each node's listed name: the caller's, else the kind's (node 0's own where it has one)."""
    first = model.first_host or model.host
    return [job.host(i, (first if i == 0 else model.host).format(name=job.name, i=i, n=i + 1))
            for i in range(job.nodes)]


def _batch(kind: jobs.JobKind) -> Builder:
    """A batch kind's scenario: each node as its record says the system hands it (JobKind.nodes)."""
    model = kind.nodes
    if model is None:
        raise TypeError(f"job kind {kind.name!r} is a batch kind without nodes (a record.Nodes); "
                        "expected what its system hands each node, for the harness")

    def builder(job: Job) -> Raw:
        hosts = _listed(job, model)
        fields = _job_fields(job, model, hosts)
        lines = "".join(f"{h}\n" * (job.slots if model.per_slot else 1) for h in hosts)
        files = ((fields["node_file"], lines),) if model.node_file else ()
        nodes: Raw = []
        for i, host in enumerate(hosts):
            mine = dict(fields, i=i, n=i + 1, host=host, gpus=_gpus(job, i))
            env = tuple((k, v.format(**mine)) for k, v in model.env)
            short = host.split(".")[0] if model.short_hostname else host
            nodes.append((short, (host, short) if model.short_hostname else (host,), env, files))
        return nodes

    return builder


@dataclass(frozen=True)
class Scenario:
    name: str
    detector: str  # the torchpod.schedulers NAME `torchpod plan` must detect on its nodes
    build: Builder
    options: Callable[[Job], tuple[str, ...]] = _no_options  # what every node passes before the command


# The scenarios whose job can run on fewer nodes than it asks for (--nodes MIN:MAX).
NODE_RANGE_SCENARIOS = tuple(sorted(k.scenario for k in jobs.KINDS if k.node_range))

SCENARIOS: dict[str, Scenario] = {
    **{k.scenario: Scenario(k.scenario, k.detector, _from_manifest(k.name) if k.kube else _batch(k),
                            _manifest_options(k.name) if k.kube else _no_options)
       for k in jobs.KINDS},
    # conventions no manifest renders: their detectors are named here, the one place
    "env": Scenario("env", "env", _env),
    "mpi": Scenario("mpi", "mpi", _mpi),
    "sagemaker": Scenario("sagemaker", "sagemaker", _sagemaker),
    "flux": Scenario("flux", "flux", _flux),
    "azureml": Scenario("azureml", "azureml", _azureml),
}
