"""What the containers-as-nodes harness runs: a Topology of Nodes, each with the hostname
its container gets, the names other nodes reach it by, its environment, its files and, for a
manifest's pod, the securityContext Docker applies. Pure.

Schedulers that hand out addresses write ``{node<i>_ip}`` placeholders into a node's
environment and files (``ip_of``); the runner gives each node a fixed address on the job's
network and fills them in before start (``fill_ips``). topology.build makes a Topology from a
scenario, topology.from_manifest from a rendered manifest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

IP_OF_NODE0 = "{node0_ip}"  # replaced by the runner once node 0 has an address
# Any node's address, ``{node<i>_ip}``: the runner gives each node a fixed address on the
# job's network and fills these in before start (fill_ips), for schedulers that hand out IPs.
_IP_PLACEHOLDER = re.compile(r"\{node(\d+)_ip\}", re.ASCII)


def ip_of(index: int) -> str:
    """The placeholder for node ``index``'s address (node 0: IP_OF_NODE0)."""
    return f"{{node{index}_ip}}"


def needs_ips(nodes: Sequence["Node"]) -> bool:
    """Whether any node's environment or files name a node's address (fill_ips)."""
    return any(_IP_PLACEHOLDER.search(text) for n in nodes
               for text in [v for _, v in n.env] + [t for _, t in n.files])


def fill_ips(text: str, addresses: Sequence[str]) -> str:
    """``text`` with every ``{node<i>_ip}`` replaced by ``addresses[i]``."""

    def one(m: re.Match) -> str:
        index = int(m.group(1))
        if index >= len(addresses):
            raise ValueError(f"{m.group(0)} names node {index}; only {len(addresses)} addresses were given")
        return addresses[index]

    return _IP_PLACEHOLDER.sub(one, text)


@dataclass(frozen=True)
class Security:
    """What a pod's securityContext asks of its container, as Docker can apply it: the user
    and group (runAsUser:runAsGroup; fsGroup as a supplementary group), a read-only root with
    tmpfs where the pod mounts an emptyDir, capabilities dropped and added, no new privileges."""

    user: str | None = None
    groups: tuple[str, ...] = ()
    read_only: bool = False
    tmpfs: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    no_new_privileges: bool = False


def security_of(pod: Mapping) -> Security:
    """The Security of a pod spec's first container (torchpod's pods have one), the pod's
    fields under the container's as Kubernetes merges them (a container's own runAsUser wins)."""
    c = (pod.get("containers") or [{}])[0]
    psc, csc = pod.get("securityContext") or {}, c.get("securityContext") or {}
    uid, gid = csc.get("runAsUser", psc.get("runAsUser")), csc.get("runAsGroup", psc.get("runAsGroup"))
    user = None if uid is None else f"{uid}:{gid if gid is not None else 0}"
    empty = {v["name"] for v in pod.get("volumes") or () if "emptyDir" in v
             and (v["emptyDir"] or {}).get("medium") != "Memory"}  # /dev/shm is Docker's own tmpfs
    caps = csc.get("capabilities") or {}
    return Security(user=user, groups=(str(psc["fsGroup"]),) if "fsGroup" in psc else (),
                    read_only=bool(csc.get("readOnlyRootFilesystem")),
                    tmpfs=tuple(m["mountPath"] for m in c.get("volumeMounts") or () if m.get("name") in empty),
                    cap_drop=tuple(caps.get("drop") or ()), cap_add=tuple(caps.get("add") or ()),
                    no_new_privileges=csc.get("allowPrivilegeEscalation") is False)


@dataclass(frozen=True)
class Node:
    index: int
    hostname: str  # what `hostname` prints inside the container
    names: tuple[str, ...]  # DNS names (network aliases) other nodes resolve to this one
    env: tuple[tuple[str, str], ...]
    files: tuple[tuple[str, str], ...] = ()  # absolute path -> text, written before start
    domainname: str = ""
    command: tuple[str, ...] = ()  # this node's own args (a manifest's pod); () = the job's
    options: tuple[str, ...] = ()  # torchpod options the pod passes before the job's command (JobSet's --nnodes)
    security: Security | None = None  # a manifest's pod securityContext, applied to the container

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
