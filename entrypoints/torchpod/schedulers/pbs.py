"""PBS Pro / Torque / OpenPBS: one launcher per node (`pbsdsh -u` or `mpiexec --ppn 1`).

The job script itself runs on the first node only: torchrun started there alone waits for
the other nodes and ends in RendezvousTimeoutError. PBS_NODEFILE lists one line per MPI
slot, so a node appears `mpiprocs` times (PBS Pro reference guide "PBS_NODEFILE", Torque
`qsub(1)`); de-duplicate keeping first-appearance order. PBS_JOBID (``1234.server``,
``1234[7].server``) names the job.

This node's index, in order of trust:
- PALS_NODEID: HPE Cray PALS `mpiexec --ppn 1` sets it per rank, the 0-based index of the
  node in the application (as HPE's Slurm plugin mpi/cray_shasta and PRRTE's ess/pals read
  it); PALS_LOCAL_RANKID > 0 means a second launcher on one node.
- PBS_NODENUM: the MoM's index among the job's unique hosts, in PBS_NODEFILE order, set in
  every task the MoM starts (openpbs src/resmom/start_exec.c, ``ji_nodeid``; `pbsdsh`
  tasks included, one per PBS_NODEFILE line, so one per node with mpiprocs=1).
- this host's name matched against the nodefile, in short and fully qualified form.
The job script's own shell has PBS_NODENUM=0 too (start_exec.c, finish_exec), and an
`mpiexec` that forwards the environment copies it to every node: so a variable is checked
against the hostname whenever the hostname names a node, and a disagreement is an error.
"""

from __future__ import annotations

from .. import readers
from ..contract import ENV_HOSTNAME, SCHEDULER_VARS
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
    parse_int,
    rdzv_port,
    short,
    stable_id,
    unique_in_order,
)

NAME = "pbs"
READS = SCHEDULER_VARS[NAME]  # every variable detect() and claims() read (contract)
STRONG = True
MARKERS = ("PBS_JOBID", "PBS_NODEFILE")
# Per-node index variables, most trusted first (module docstring).
NODE_INDEX_VARS = ("PALS_NODEID", "PBS_NODENUM")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


NODEFILE_EXPECTED = ("the file PBS writes for the job, one host name per line; "
                     "run inside the PBS job on an allocated node")


def read_nodefile(path: str) -> tuple[str, ...]:
    """The unique hosts of the node file, in order, each checked as a host name."""
    what = f"PBS_NODEFILE={path!r}"
    text = readers.read_text(path, what=what, expected=NODEFILE_EXPECTED, cap=readers.NODE_FILE_CAP)
    hosts = []
    for number, line in enumerate(text.split("\n"), 1):
        words = line.split("#", 1)[0].split()
        if words:
            hosts.append(check_host(f"{what} line {number}", words[0]))
    return unique_in_order(hosts)


def matches(hosts: tuple[str, ...], hostname: str) -> list[int]:
    """Indices of ``hosts`` that name this host: exact (case-insensitive) matches, else
    those with the same short name. More than one is ambiguous, never node 0 for both."""
    name = hostname.strip().lower()
    exact = [i for i, h in enumerate(hosts) if h.lower() == name]
    return exact or [i for i, h in enumerate(hosts) if short(h).lower() == short(name)]


def _ambiguous(found: list[int], hosts: tuple[str, ...], hostname: str, nodefile: str) -> InputError:
    named = " and ".join(repr(hosts[i]) for i in found[:4])
    return InputError(
        f"this host {hostname!r} matches {named} in PBS_NODEFILE={nodefile!r}; expected exactly "
        f"one line for this node; set {ENV_HOSTNAME.name} to this node's full name as listed, or "
        "start the launchers with pbsdsh -u / `mpiexec --ppn 1`, which set PBS_NODENUM / PALS_NODEID"
    )


def node_index(env: Env, facts: Facts, hosts: tuple[str, ...], nodefile: str) -> tuple[int, str]:
    """This node's index in ``hosts`` and how it was found (module docstring)."""
    found = matches(hosts, facts.hostname)
    var = get(env, *NODE_INDEX_VARS)
    if var is not None:
        index = parse_int(var[0], var[1], hint="this node's index in the job's node list")
        if index >= len(hosts):
            raise InputError(
                f"{var[0]}={var[1]!r} is outside the {plural(len(hosts), 'host')} of PBS_NODEFILE={nodefile!r}; "
                f"expected 0-{len(hosts) - 1}"
            )
        if found and index not in found:
            raise InputError(
                f"{var[0]}={index} names {hosts[index]!r} but this host {facts.hostname!r} is node "
                f"{found[0]} in PBS_NODEFILE; expected them to agree; was {var[0]} copied from the "
                "job script's environment? start one launcher per node with pbsdsh -u or "
                "`mpiexec --ppn 1`, which set it per node"
            )
        return index, var[0]
    if len(found) > 1:
        raise _ambiguous(found, hosts, facts.hostname, nodefile)
    if not found:
        raise InputError(
            f"this host {facts.hostname!r} is not in PBS_NODEFILE={nodefile!r} "
            f"(hosts: {', '.join(hosts[:8])}); expected this node's short or full name; "
            "start torchpod on the allocated nodes (pbsdsh -u / mpiexec --ppn 1) or set "
            f"{ENV_HOSTNAME.name} to this node's listed name"
        )
    return found[0], f"hostname {facts.hostname!r}"


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    job = get(env, "PBS_JOBID")
    nodefile = get(env, "PBS_NODEFILE")
    if nodefile is None:
        raise InputError(
            (f"PBS_JOBID={job[1]!r} is set but PBS_NODEFILE is missing; " if job
             else "a PBS job has no PBS_NODEFILE; ")
            + "expected the path of the job's node file; request nodes with `qsub -l select=...`"
        )
    hosts = read_nodefile(nodefile[1])
    if not hosts:
        raise InputError(
            f"PBS_NODEFILE={nodefile[1]!r} lists no hosts; expected one host name per line; "
            "check the job's select statement"
        )
    index, how = node_index(env, facts, hosts, nodefile[1])
    local = get(env, "PALS_LOCAL_RANKID")
    if local is not None and parse_int(*local) > 0:
        raise InputError(
            f"PALS_LOCAL_RANKID={local[1]!r}: mpiexec started more than one launcher on this node; "
            "expected 1 (torchrun starts one process per GPU itself); use `mpiexec --ppn 1`"
        )
    notes = [f"{len(hosts)} unique hosts in PBS_NODEFILE; this is {hosts[index]!r}, node {index} (from {how})"]
    if len(hosts) > 1:
        notes.append(
            "every node must run torchpod (pbsdsh -u, or mpiexec with one rank per node); "
            "the job script alone runs only on the first node"
        )
    port, port_notes = rdzv_port(env)
    job_id = job[1] if job else ",".join(hosts)
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts)),
        node_rank=index,
        rdzv_endpoint=Endpoint(hosts[0], port),
        rdzv_id=stable_id("pbs", job_id),
        hosts=hosts,
        local_addr=hosts[index],
        notes=tuple(notes) + port_notes,
    )
