"""PBS Pro / Torque / OpenPBS: one launcher per node (`pbsdsh -u` or `mpiexec --ppn 1`).

The job script itself runs on the first node only (seeds/001: torchrun started there alone
waits for the second node and ends in RendezvousTimeoutError). PBS_NODEFILE lists one line
per MPI slot, so a node appears `mpiprocs` times (PBS Pro `doc` "PBS_NODEFILE", Torque
`qsub(1)`); de-duplicate keeping first-appearance order, and find this node by its name
in short and fully qualified form. PBS_JOBID (``1234.server``, ``1234[7].server``) names the job.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from .common import (
    Detection,
    Env,
    Facts,
    endpoint,
    find_host,
    get,
    rdzv_port,
    stable_id,
    unique_in_order,
)

NAME = "pbs"
STRONG = True


def claims(env: Env) -> bool:
    return get(env, "PBS_JOBID", "PBS_NODEFILE") is not None


def read_nodefile(path: str) -> tuple[str, ...]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(
            f"PBS_NODEFILE={path!r} cannot be read ({exc.strerror or exc}); expected the "
            "file PBS writes for the job; run inside the PBS job on an allocated node"
        ) from exc
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    return unique_in_order([line.split()[0] for line in lines if line])


def detect(env: Env, facts: Facts) -> Detection:
    job = get(env, "PBS_JOBID")
    nodefile = get(env, "PBS_NODEFILE")
    if nodefile is None:
        raise InputError(
            f"PBS_JOBID={job[1] if job else ''!r} is set but PBS_NODEFILE is missing; "
            "expected the path of the job's node file; request nodes with `qsub -l select=...`"
        )
    hosts = read_nodefile(nodefile[1])
    if not hosts:
        raise InputError(
            f"PBS_NODEFILE={nodefile[1]!r} lists no hosts; expected one host name per line; "
            "check the job's select statement"
        )
    index = find_host(hosts, facts.hostname)
    if index is None:
        raise InputError(
            f"this host {facts.hostname!r} is not in PBS_NODEFILE={nodefile[1]!r} "
            f"(hosts: {', '.join(hosts[:8])}); expected this node's short or full name; "
            "start torchpod on the allocated nodes (pbsdsh -u / mpiexec --ppn 1) or set "
            "TORCHPOD_HOSTNAME to this node's listed name"
        )
    notes = [
        f"{len(hosts)} unique hosts in PBS_NODEFILE; this is {hosts[index]!r} "
        f"(hostname {facts.hostname!r}), node {index}"
    ]
    if len(hosts) > 1:
        notes.append(
            "every node must run torchpod (pbsdsh -u, or mpiexec with one rank per node); "
            "the job script alone runs only on the first node"
        )
    port, port_notes = rdzv_port(env)
    job_id = job[1] if job else ",".join(hosts)
    return Detection(
        scheduler=NAME,
        nnodes=str(len(hosts)),
        node_rank=index,
        rdzv_endpoint=endpoint(hosts[0], port),
        rdzv_id=stable_id("pbs", job_id),
        hosts=hosts,
        local_addr=hosts[index],
        notes=tuple(notes) + port_notes,
    )
