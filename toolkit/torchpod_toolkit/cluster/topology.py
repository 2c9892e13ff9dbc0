"""The one model of what each scheduler sets on each node of an N-node job. Pure.

``build(scenario, nodes, job_id)`` returns a Topology: per node the hostname the container
gets, the DNS names other nodes reach it by (the names the scheduler writes into its host
lists), the environment the scheduler sets, and the files it writes (PBS_NODEFILE). Two
users read it: the containers-as-nodes harness (`invoke demo`, tests/cluster, bench/)
runs it as containers, and the launcher's unit fixtures (tests/unit/fixtures/
schedulers.yaml, ``model:`` entries) render single nodes from it with real-world names.
Nothing here touches Docker, the environment or the clock.

Each scheduler's builder, and the list of scenarios, are in scenarios.py; the Node and
Topology records, and the address placeholders the runner fills in, in nodes.py.

``host_network=True`` plays pods with hostNetwork / HPC nodes whose hostname is not the
listed name: every container's hostname becomes a "physical" node name (``gpu-node-a``)
that nobody can resolve, so only the listed names (via ``--local-addr``) connect.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from torchpod.contract import PYTORCHJOB_PORT
from torchpod.errors import InputError

from ..manifests import jobs
from .nodes import Node, Topology, security_of
from .scenarios import NODE_RANGE_SCENARIOS, SCENARIOS, Job


def _dns(job_id: str) -> str:
    """A DNS-label-safe job name (Kubernetes object names are RFC 1123 labels)."""
    name = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    if not name:
        raise InputError(f"job id {job_id!r} has no letters or digits; expected e.g. 'demo-1'")
    return name[:40]


def build(
    scenario: str,
    nodes: int,
    job_id: str,
    *,
    nproc: Sequence[int] | None = None,
    port: int = PYTORCHJOB_PORT,
    host_network: bool = False,
    extra_env: Mapping[str, str] | None = None,
    hosts: Sequence[str] | None = None,
    job_number: str | None = None,
    pbs_slots: int = 2,
    min_nodes: int | None = None,
) -> Topology:
    """The N nodes of one job under ``scenario``, named after ``job_id`` (or ``hosts``);
    ``min_nodes``: an elastic job of the kinds that allow one, rendered as `--nodes MIN:N`."""
    if scenario not in SCENARIOS:
        raise InputError(
            f"scheduler {scenario!r} is unknown; expected one of {', '.join(SCENARIOS)}"
        )
    if nodes < 1:
        raise InputError(f"nodes={nodes}; expected 1 or more")
    counts = tuple(nproc) if nproc is not None else (1,) * nodes
    if len(counts) != nodes or any(c < 1 for c in counts):
        raise InputError(f"nproc={list(counts)} needs {nodes} counts >= 1, one per node")
    if hosts is not None and len(hosts) != nodes:
        raise InputError(f"hosts={list(hosts)} needs {nodes} names, one per node")
    if min_nodes is not None and scenario not in NODE_RANGE_SCENARIOS:
        raise InputError(f"min_nodes={min_nodes} with scheduler {scenario}: a fixed-size job; expected no "
                         f"min_nodes, or scheduler {jobs.choices(NODE_RANGE_SCENARIOS)}")
    job = Job(_dns(job_id), nodes, counts, port, tuple(hosts) if hosts else None, job_number, host_network,
              pbs_slots, min_nodes=min_nodes)
    scheduler, raw = SCENARIOS[scenario].detector, SCENARIOS[scenario].build(job)
    options = SCENARIOS[scenario].options(job)
    extra = tuple((extra_env or {}).items())
    out, notes = [], []
    for i, (hostname, names, env, files) in enumerate(raw):
        env = tuple(env) + extra
        given = dict(env).get("PET_NPROC_PER_NODE", dict(env).get("NPROC_PER_NODE", "1"))
        if counts[i] != 1 and given != str(counts[i]):
            # per-node counts no manifest can say: the user's own torchrun variable
            env = tuple((k, v) for k, v in env if k != "PET_NPROC_PER_NODE") + (("PET_NPROC_PER_NODE", str(counts[i])),)
        if host_network:
            hostname = f"{job.name}-gpu-node-{chr(ord('a') + i % 26)}{i // 26 or ''}"
        out.append(Node(index=i, hostname=hostname, names=names, env=env, files=files, options=options))
    if host_network:
        notes.append("host network: hostnames are node names nobody resolves; listed names connect")
    return Topology(scenario=scenario, scheduler=scheduler, job_id=job.name, nodes=tuple(out),
                    nproc=counts, notes=tuple(notes))


def from_manifest(docs: Sequence[Mapping], host_network_names: bool = True) -> Topology:
    """The nodes a rendered Kubernetes manifest's operator creates (operator model), each
    with the pod's own args, for the harness to run (`invoke demo --manifest FILE`)."""
    from ..manifests import operators

    job = operators.job_object(docs)
    pods = operators.pods(docs)
    kind = job["kind"]
    model = operators.MODELS[(job["apiVersion"], kind)]
    scheduler = jobs.of_pods(model, {k for k, _ in pods[0].env} if pods else set()).detector
    from ..manifests.podsecurity import pod_specs

    security = security_of(next(pod for _, pod in pod_specs(job)))
    nodes = tuple(Node(index=i, hostname=p.hostname, names=p.dns_names, env=p.env, files=p.files,
                       command=p.args, security=security) for i, p in enumerate(pods))
    notes = ("host network: hostnames are node names nobody resolves; listed names connect",) \
        if any(p.host_network for p in pods) and host_network_names else ()
    return Topology(scenario=f"manifest {kind} {job['metadata']['name']}", scheduler=scheduler,
                    job_id=job["metadata"]["name"], nodes=nodes, nproc=(1,) * len(nodes), notes=notes)

