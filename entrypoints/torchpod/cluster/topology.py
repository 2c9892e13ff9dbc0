"""What each node of an N-node job looks like under a scheduler, as data. Pure.

``build(scheduler, nodes, job_id)`` returns a Topology: per node the hostname the container
gets, the DNS names other nodes reach it by (the names the scheduler writes into its host
lists), the environment the scheduler sets, and the files it writes (PBS_NODEFILE). The
variables are the ones each system really sets, as the unit fixtures in
tests/unit/fixtures/schedulers.yaml record them with their upstream sources; keep the two
in step. Nothing here touches Docker, the environment or the clock.

Scenarios (``SCENARIOS``), one builder each:

- runai: `runai submit-dist pytorch` (seeds/000): pods <job>-master-0, <job>-worker-i;
  pod-level WORLD_SIZE/RANK; MASTER_ADDR is the master pod's IP, filled in at start.
- kubeflow: training-operator >= 1.7 Master + Workers (envvar.go): WORLD_SIZE counts
  processes, PET_NNODES/PET_NODE_RANK/PET_MASTER_ADDR the nodes.
- kubeflow-elastic: worker-only elasticPolicy (elastic.go, seeds/004): PET_RDZV_ENDPOINT on
  worker-0, PET_NNODES MIN:MAX, PET_MAX_RESTARTS, REPLICA_INDEX/POD_NAME exposed.
- volcano: worker-only Job with env+svc plugins (seeds/004): VC_TASK_INDEX, VC_WORKER_HOSTS
  of ``<job>-worker-i.<job>``.
- volcano-master: master + worker tasks with the pytorch plugin (MASTER_ADDR, WORLD_SIZE,
  RANK on top of the host lists).
- pbs: PBS_NODEFILE with one line per mpiprocs slot (duplicates) in FQDN form; hosts
  report their short name; PBS_JOBID names the job (seeds/001, started by `pbsdsh -u`).
- slurm: `srun --ntasks-per-node=1`: compressed SLURM_JOB_NODELIST, SLURM_NODEID.
- mpi: `mpirun --map-by ppr:1:node -x MASTER_ADDR -x MASTER_PORT` (seeds/003), Open MPI
  and PMIx variables, MASTER_ADDR the first node's IP, filled in at start.

``host_network=True`` plays pods with hostNetwork / HPC nodes whose hostname is not the
listed name: every container's hostname becomes a "physical" node name (``gpu-node-a``)
that nobody can resolve, so only the listed names (via ``--local-addr``) connect.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..errors import InputError

IP_OF_NODE0 = "{node0_ip}"  # replaced by the runner once node 0 has an address


@dataclass(frozen=True)
class Node:
    index: int
    hostname: str  # what `hostname` prints inside the container
    names: tuple[str, ...]  # DNS names (network aliases) other nodes resolve to this one
    env: tuple[tuple[str, str], ...]
    files: tuple[tuple[str, str], ...] = ()  # absolute path -> text, written before start
    domainname: str = ""

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Topology:
    scenario: str
    scheduler: str  # what `torchpod plan` must detect
    job_id: str
    nodes: tuple[Node, ...]
    nproc: tuple[int, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def world_size(self) -> int:
        return sum(self.nproc)


K8S = (("KUBERNETES_SERVICE_HOST", "10.96.0.1"), ("KUBERNETES_SERVICE_PORT", "443"))


def _dns(job_id: str) -> str:
    """A DNS-label-safe job name (Kubernetes object names are RFC 1123 labels)."""
    name = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    if not name:
        raise InputError(f"job id {job_id!r} has no letters or digits; expected e.g. 'demo-1'")
    return name[:40]


def _number(job: str) -> int:
    """A numeric job id (Slurm, PBS) derived from the name: stable, distinct per job."""
    return zlib.crc32(job.encode()) % 100000


def _runai(job: str, n: int, nproc, port: int, hostnet: bool):
    pods = [f"{job}-master-0"] + [f"{job}-worker-{i}" for i in range(n - 1)]
    nodes = []
    for i, pod in enumerate(pods):
        env = K8S + (
            ("RUNAI_JOB_NAME", job), ("RUNAI_JOB_UUID", f"{job}-0f6c2b8e-uuid"),
            ("WORLD_SIZE", str(n)), ("RANK", str(i)),
            ("MASTER_ADDR", IP_OF_NODE0), ("MASTER_PORT", str(port)),
        )
        nodes.append((pod, (pod,), env, ()))
    return "runai", nodes


def _kubeflow(job: str, n: int, nproc, port: int, hostnet: bool):
    pods = [f"{job}-master-0"] + [f"{job}-worker-{i}" for i in range(n - 1)]
    world = sum(nproc)
    nodes = []
    for i, pod in enumerate(pods):
        env = K8S + (
            ("PYTHONUNBUFFERED", "0"),
            ("MASTER_ADDR", pods[0]), ("MASTER_PORT", str(port)),
            ("WORLD_SIZE", str(world)), ("RANK", str(i)),
            ("PET_NNODES", str(n)), ("PET_NPROC_PER_NODE", str(nproc[i])),
            ("PET_NODE_RANK", str(i)),
            ("PET_MASTER_ADDR", pods[0]), ("PET_MASTER_PORT", str(port)),
        )
        nodes.append((pod, (pod,), env, ()))
    return "kubeflow", nodes


def _kubeflow_elastic(job: str, n: int, nproc, port: int, hostnet: bool):
    pods = [f"{job}-worker-{i}" for i in range(n)]
    nodes = []
    for i, pod in enumerate(pods):
        # minReplicas = maxReplicas - 1 keeps MIN:MAX elastic; last_call_timeout short so a
        # full house of n nodes closes the round at once instead of after 30 s.
        env = K8S + (
            ("PET_RDZV_ENDPOINT", f"{pods[0]}:{port}"), ("PET_RDZV_BACKEND", "c10d"),
            ("PET_NNODES", f"{n}:{n + 1}"), ("PET_MAX_RESTARTS", "3"),
            ("PET_RDZV_CONF", "last_call_timeout=2"),
            ("REPLICA_INDEX", str(i)), ("POD_NAME", pod),
        )
        nodes.append((pod, (pod,), env, ()))
    return "kubeflow", nodes


def _volcano_lists(job: str, tasks: Sequence[tuple[str, int]]):
    lists = {t: [f"{job}-{t}-{i}.{job}" for i in range(count)] for t, count in tasks}
    common = []
    for t, hosts in lists.items():
        key = t.upper().replace("-", "_")
        common += [(f"VC_{key}_HOSTS", ",".join(hosts)), (f"VC_{key}_NUM", str(len(hosts)))]
    return lists, tuple(common)


def _volcano(job: str, n: int, nproc, port: int, hostnet: bool):
    lists, common = _volcano_lists(job, [("worker", n)])
    nodes = []
    for i, listed in enumerate(lists["worker"]):
        env = K8S + common + (("VC_TASK_INDEX", str(i)), ("VK_TASK_INDEX", str(i)))
        nodes.append((listed.split(".")[0], (listed, listed.split(".")[0]), env, ()))
    return "volcano", nodes


def _volcano_master(job: str, n: int, nproc, port: int, hostnet: bool):
    if n < 2:
        raise InputError(f"volcano-master needs 2 or more nodes (a master and workers); got {n}")
    lists, common = _volcano_lists(job, [("master", 1), ("worker", n - 1)])
    listed = lists["master"] + lists["worker"]
    nodes = []
    for i, name in enumerate(listed):
        task_index = 0 if i == 0 else i - 1
        env = K8S + common + (
            ("VC_TASK_INDEX", str(task_index)), ("VK_TASK_INDEX", str(task_index)),
            ("MASTER_ADDR", listed[0]), ("MASTER_PORT", str(port)),
            ("WORLD_SIZE", str(n)), ("RANK", str(i)),
        )
        nodes.append((name.split(".")[0], (name, name.split(".")[0]), env, ()))
    return "volcano", nodes


def _pbs(job: str, n: int, nproc, port: int, hostnet: bool):
    short = [f"{job}-n{i + 1:02d}" for i in range(n)]
    fqdn = [f"{s}.hpc.local" for s in short]
    nodefile = "".join(f"{h}\n{h}\n" for h in fqdn)  # mpiprocs=2: every node listed twice
    jobid = f"{_number(job)}.pbs01"
    path = f"/var/spool/pbs/aux/{jobid}"
    nodes = []
    for i in range(n):
        env = (
            ("PBS_JOBID", jobid), ("PBS_JOBNAME", job), ("PBS_QUEUE", "workq"),
            ("PBS_ENVIRONMENT", "PBS_BATCH"), ("PBS_O_WORKDIR", "/workspace"),
            ("PBS_NODEFILE", path), ("PBS_NODENUM", str(i)), ("PBS_TASKNUM", str(i + 1)),
        )
        nodes.append((short[i], (fqdn[i], short[i]), env, ((path, nodefile),)))
    return "pbs", nodes


def _slurm(job: str, n: int, nproc, port: int, hostnet: bool):
    prefix = f"{job}-c"
    hosts = [f"{prefix}{i + 1:02d}" for i in range(n)]
    compressed = f"{prefix}[01-{n:02d}]" if n > 1 else hosts[0]
    jobid = str(_number(job))
    nodes = []
    for i, host in enumerate(hosts):
        env = (
            ("SLURM_JOB_ID", jobid), ("SLURM_JOBID", jobid), ("SLURM_JOB_NAME", job),
            ("SLURM_JOB_NODELIST", compressed), ("SLURM_NODELIST", compressed),
            ("SLURM_JOB_NUM_NODES", str(n)), ("SLURM_NNODES", str(n)),
            ("SLURM_STEP_ID", "0"), ("SLURM_STEPID", "0"),
            ("SLURM_STEP_NODELIST", compressed), ("SLURM_STEP_NUM_NODES", str(n)),
            ("SLURM_STEP_NUM_TASKS", str(n)), ("SLURM_STEP_TASKS_PER_NODE", f"1(x{n})"),
            ("SLURM_TASKS_PER_NODE", f"1(x{n})"), ("SLURM_NODEID", str(i)),
            ("SLURM_PROCID", str(i)), ("SLURM_LOCALID", "0"), ("SLURMD_NODENAME", host),
        )
        nodes.append((host, (host,), env, ()))
    return "slurm", nodes


def _mpi(job: str, n: int, nproc, port: int, hostnet: bool):
    hosts = [f"{job}-node{i + 1}" for i in range(n)]
    nodes = []
    for i, host in enumerate(hosts):
        env = (
            ("OMPI_COMM_WORLD_SIZE", str(n)), ("OMPI_COMM_WORLD_RANK", str(i)),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
            ("OMPI_COMM_WORLD_NODE_RANK", "0"), ("PMIX_RANK", str(i)),
            ("PMIX_NAMESPACE", f"prterun-{hosts[0]}-12345@1"),
            ("MASTER_ADDR", IP_OF_NODE0), ("MASTER_PORT", str(port)),
        )
        nodes.append((host, (host,), env, ()))
    return "mpi", nodes


Builder = Callable[[str, int, tuple, int, bool], tuple]

SCENARIOS: dict[str, Builder] = {
    "runai": _runai,
    "kubeflow": _kubeflow,
    "kubeflow-elastic": _kubeflow_elastic,
    "volcano": _volcano,
    "volcano-master": _volcano_master,
    "pbs": _pbs,
    "slurm": _slurm,
    "mpi": _mpi,
}


def build(
    scenario: str,
    nodes: int,
    job_id: str,
    *,
    nproc: Sequence[int] | None = None,
    port: int = 23456,
    host_network: bool = False,
    extra_env: Mapping[str, str] | None = None,
) -> Topology:
    """The N nodes of one job under ``scenario``, named after ``job_id``."""
    if scenario not in SCENARIOS:
        raise InputError(
            f"scheduler {scenario!r} is unknown; expected one of {', '.join(SCENARIOS)}"
        )
    if nodes < 1:
        raise InputError(f"nodes={nodes}; expected 1 or more")
    counts = tuple(nproc) if nproc is not None else (1,) * nodes
    if len(counts) != nodes or any(c < 1 for c in counts):
        raise InputError(f"nproc={list(counts)} needs {nodes} counts >= 1, one per node")
    job = _dns(job_id)
    scheduler, raw = SCENARIOS[scenario](job, nodes, counts, port, host_network)
    extra = tuple((extra_env or {}).items())
    out, notes = [], []
    for i, (hostname, names, env, files) in enumerate(raw):
        env = tuple(env) + extra
        if counts[i] != 1 and "PET_NPROC_PER_NODE" not in dict(env):
            env += (("PET_NPROC_PER_NODE", str(counts[i])),)  # torchrun's own variable
        domain = ""
        if host_network:
            hostname = f"{job}-gpu-node-{chr(ord('a') + i % 26)}{i // 26 or ''}"
        out.append(Node(index=i, hostname=hostname, names=names, env=env, files=files, domainname=domain))
    if host_network:
        notes.append("host network: hostnames are node names nobody resolves; listed names connect")
    return Topology(scenario=scenario, scheduler=scheduler, job_id=job, nodes=tuple(out),
                    nproc=counts, notes=tuple(notes))
