"""A real Slurm cluster in containers: slurmctld and N slurmd nodes (Debian's slurm-wlm
22.05 and munge) on an image built on the torchpod image under test, on a Docker network
of their own. Jobs are submitted with the real `sbatch`, run by the real `srun`.

``slurm_conf`` is pure; ``SlurmCluster`` is the edge (Docker). Every container, network
and volume carries the caller's labels, and ``close()`` removes them; the image is kept
(a tag derived from the base image's id, so a rebuilt base gets a new node image).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import docker

from torchpod.errors import RuntimeFailure

from . import runner

DOCKER_DIR = Path(__file__).resolve().parents[3] / "docker" / "slurm"
CONTROLLER = "slurmctld"
SHARED = "/shared"  # a volume on every node: job scripts and their output


def node_names(n: int) -> list[str]:
    return [f"c{i + 1}" for i in range(n)]


# The states after which a job does no more (src/common/slurm_protocol_defs.c job_state_string,
# SchedMD/slurm slurm-22-05-9-1): the base states a job ends in, and the holds it cannot leave
# alone. Anything else (PENDING, RUNNING, COMPLETING, REQUEUED, ...) is on its way.
FINAL_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                          "DEADLINE", "OUT_OF_MEMORY", "REQUEUE_HOLD", "SPECIAL_EXIT"})
# A requeued job may start again after the credential lifetime (slurm.conf(5) AuthInfo
# cred_expire: "This also controls how long a requeued job must wait before starting again";
# 120 s by default, at least 5: src/common/slurm_cred.c). The tests' requeue runs in seconds.
CRED_EXPIRE_S = 10


# Each node's memory as slurm.conf declares it (MB): what a job's --mem is checked against.
# slurmd drains a node whose real memory is below it; every container sees the host's.
NODE_MEMORY_MB = 2048


def topology_conf(leaves: Mapping[str, Sequence[str]], top: str = "top") -> str:
    """topology.conf (slurm topology.conf(5)) for the topology/tree plugin: each leaf switch
    with its nodes, and one top switch over the leaves (a job may span leaves only below a
    common switch)."""
    lines = [f"SwitchName={leaf} Nodes={','.join(nodes)}" for leaf, nodes in leaves.items()]
    return "\n".join([*lines, f"SwitchName={top} Switches={','.join(leaves)}", ""])


def slurm_conf(nodes: list[str], cpus: int = 1, memory_mb: int = NODE_MEMORY_MB, tree: bool = False) -> str:
    """A minimal slurm.conf (22.05): munge auth, no cgroups (containers), no accounting, and
    a requeued job that starts again within seconds (CRED_EXPIRE_S; the backfill and main
    scheduler loops every 2 and 5 s instead of 30 and 60: slurm.conf(5) bf_interval and
    sched_interval). Tasks are bound to their CPUs as sites bind them: task/affinity sets
    each task's affinity mask (sched_setaffinity, which works in a container where the
    cgroup plugins do not), so a step that asked for one CPU runs on one."""
    return "\n".join([
        "ClusterName=torchpod",
        f"SlurmctldHost={CONTROLLER}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=cred_expire={CRED_EXPIRE_S}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",  # cgroup plugins need a writable cgroup tree
        "TaskPlugin=task/affinity",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=bf_interval=2,sched_interval=5",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "StateSaveLocation=/var/spool/slurmctld",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        f"NodeName={','.join(nodes)} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        *(["TopologyPlugin=topology/tree"] if tree else []),
        "",
    ])


def node_image(client, base: str) -> str:
    """The Slurm node image on ``base`` (built once per base image id)."""
    base_id = client.images.get(base).id.split(":")[-1][:12]
    tag = f"torchpod/slurm-node:{base_id}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.build(path=str(DOCKER_DIR), tag=tag, buildargs={"BASE": base}, rm=True, pull=False)
    except docker.errors.BuildError as exc:
        tail = "".join(str(chunk.get("stream", "")) for chunk in exc.build_log)[-2000:]
        raise RuntimeFailure(f"building the Slurm node image on {base} failed: {exc.msg}\n{tail}") from None
    return tag


def _tar(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, (data, mode) in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class SlurmCluster:
    """Use as a context manager: ``start()``, ``submit(script)``, ``wait(jobid)``, ``close()``."""

    client: Any  # a docker.DockerClient (the SDK ships no types)
    image: str  # the Slurm node image (node_image)
    nodes: int
    labels: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)  # set in every container (jobs inherit sbatch's)
    # extra binds in every container, as docker's volumes= takes them (runner.dev_mounts)
    volumes: Mapping[str, dict] = field(default_factory=dict)
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)  # each node's, in slurm.conf
    # leaf switch -> its nodes: the topology/tree plugin with this topology.conf (none: no plugin)
    leaves: Mapping[str, Sequence[str]] = field(default_factory=dict)
    name: str = ""
    containers: dict = field(default_factory=dict)
    _network: Any = None
    _volume: Any = None

    def __enter__(self) -> "SlurmCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, timeout: float = 90) -> "SlurmCluster":
        self.name = self.name or f"tp-slurm-{os.urandom(3).hex()}"
        self._network = self.client.networks.create(self.name, driver="bridge", labels=dict(self.labels))
        self._volume = runner.new_volume(self.client, self.labels, f"{self.name}-shared")
        names = node_names(self.nodes)
        # every CPU the machine has, as the nodes' slurmd finds them (a node declared with more
        # is drained; with fewer, its jobs cannot show a step bound to fewer CPUs than the node)
        files = {"/etc/slurm/slurm.conf": (slurm_conf(names, cpus=self.cpus, tree=bool(self.leaves)).encode(), 0o644),
                 "/etc/munge/munge.key": (os.urandom(1024), 0o400)}
        if self.leaves:
            files["/etc/slurm/topology.conf"] = (topology_conf(self.leaves).encode(), 0o644)
        for host, role in [(CONTROLLER, "ctld"), *((n, "d") for n in names)]:
            c = self.client.containers.create(
                self.image, [role], name=f"{self.name}-{host}", hostname=host, labels=dict(self.labels),
                network=self.name, environment=dict(self.env), shm_size="256m",
                # a node's root may set the affinity of a task that already runs as the job's user
                # (task/affinity, sched_setaffinity(2): another user's process needs CAP_SYS_NICE),
                # as root can on a host; Docker's default set leaves it out
                cap_add=["SYS_NICE"],
                volumes={self._volume.name: {"bind": SHARED, "mode": "rw"}, **self.volumes}, detach=True)
            c.put_archive("/", _tar(files))
            self.containers[host] = c
        for c in self.containers.values():
            c.start()
        self._wait_idle(names, timeout)
        return self

    def _exec(self, host: str, cmd: list[str]) -> tuple[int, str]:
        code, out = self.containers[host].exec_run(cmd)
        return code, out.decode(errors="replace")

    def _wait_idle(self, names: list[str], timeout: float) -> None:
        deadline, last = time.time() + timeout, ""
        while time.time() < deadline:
            code, last = self._exec(CONTROLLER, ["sinfo", "-h", "-N", "-o", "%N %t"])
            states = dict(line.split() for line in last.splitlines() if len(line.split()) == 2)
            if code == 0 and all(states.get(n) == "idle" for n in names):
                return
            time.sleep(1)
        raise RuntimeFailure(f"Slurm nodes {names} not idle within {timeout:.0f} s; sinfo said: {last.strip()!r}\n"
                             + self.logs()[-3000:])

    def submit(self, script: str, filename: str = "job.sbatch", user: str | None = None) -> str:
        """sbatch ``script`` from the controller, in the shared directory, or as ``user``
        (a name on the nodes: docker/slurm/Dockerfile's ``trainer``) from a directory of
        that user's under it; returns the job id."""
        where = SHARED if user is None else f"{SHARED}/{user}"
        if user is not None:
            self._exec(CONTROLLER, ["install", "-d", "-o", user, "-g", user, where])
        self.containers[CONTROLLER].put_archive(where, _tar({filename: (script.encode(), 0o755)}))
        sbatch = ["sbatch", "--parsable", f"--chdir={where}", f"{where}/{filename}"]
        code, raw = self.containers[CONTROLLER].exec_run(sbatch, user=user or "")
        out = raw.decode(errors="replace")
        if code != 0:
            raise RuntimeFailure(f"sbatch failed ({code}): {out.strip()}")
        return out.strip().split(";")[0]

    def owner(self, path: str) -> str:
        """``uid:gid`` of a file on the shared volume."""
        return self._exec(CONTROLLER, ["stat", "-c", "%u:%g", path])[1].strip()

    def wait(self, jobid: str, timeout: float) -> str:
        """Wait for the job to end, requeued runs included; returns its final JobState
        (FINAL_STATES: COMPLETED, FAILED, ...)."""
        deadline, state = time.time() + timeout, ""
        while time.time() < deadline:
            m = re.search(r"JobState=(\S+)", self.show_job(jobid))
            state = m.group(1) if m else state
            if state in FINAL_STATES:
                return state
            time.sleep(1)
        return f"TIMEOUT (last state {state or 'unknown'})"

    def show_job(self, jobid: str) -> str:
        """`scontrol show job`'s text ('' when the controller does not know the job)."""
        code, out = self._exec(CONTROLLER, ["scontrol", "show", "job", jobid])
        return out if code == 0 else ""

    def read(self, path: str) -> str:
        code, out = self._exec(CONTROLLER, ["cat", path])
        return out if code == 0 else ""

    def logs(self) -> str:
        out = []
        for host, c in self.containers.items():
            try:
                out.append(f"--- {host}\n" + c.logs().decode(errors="replace")[-1500:])
            except runner.ENGINE_ERRORS:
                pass
        return "\n".join(out)

    def close(self) -> None:
        runner.sweep(self.client, *next(iter(self.labels.items())))
