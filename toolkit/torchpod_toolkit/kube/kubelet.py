"""A kubelet stand-in for the test control plane: Node objects that advertise a GPU node,
their Leases kept fresh, and the pods the real scheduler binds to them run as Docker
containers on one Docker network, their status reported back as the kubelet reports it.

What comes from the real control plane stays real: the objects, the pod specs the
controllers write (a Job's pods, their hostnames and indexes), admission and the
scheduler's placement. Each node talks to the API with its own credentials, a client
certificate of the plane's CA for ``system:node:<name>`` in ``system:nodes``, so the Node
authorizer and NodeRestriction admission hold it to what a real kubelet may read and write
(its own Node and Lease, the pods bound to it, the ConfigMaps, Secrets and tokens those pods
name).

How a pod runs (podworker): a sandbox container holds the pod's network namespace, hostname
and DNS names, as the kubelet's pause container does; init containers run one after another,
then the app containers, each a ``docker create`` command line built by podargs with the
environment podenv resolves as the kubelet's makeEnvironmentVariables does.

What it is not: no CRI, no cgroups beyond docker's ``--cpus`` and ``--memory``, no probes (a
running container is ready), no kube-proxy or ClusterIP routing (peers find each other by
the headless DNS names only), no GPUs or RDMA devices behind the advertised counts, no pause
image (the sandbox runs the first app container's image, pulled first), one image store for
every node (an image one node pulled is present on all: podimages), no exec or attach (its
endpoint serves container logs only: kubeletlogs), and no sidecar (restartable init)
containers: a pod with one is failed in one line. Every container and the network carry the labels
given to ``Kubelet`` plus ``torchpod.kubelet=<id>``; ``stop`` removes them all.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torchpod.errors import RuntimeFailure, one_line
from torchpod_toolkit import grammars
from torchpod_toolkit.manifests import spec as spec_mod

from . import kubeletlogs, planecerts, podargs
from . import plane as plane_mod
from .api import ApiError, Client
from .podruntime import Ended, Runtime
from .podworker import PodWorker

LABEL = "torchpod.kubelet"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40  # the kubelet's default nodeLeaseDurationSeconds
RENEW_SECONDS = 10.0  # a quarter of it, as the kubelet renews
ARCH = "amd64"
NODE_NAME = grammars.DNS1123_LABEL


def rdma_resources() -> tuple[str, ...]:
    """The RDMA device plugin's resource names as torchpod's manifests name them (the example
    of the ``rdma_resource`` option, which pods of ``--rdma device-plugin`` request)."""
    field = next(f for f in dataclasses.fields(spec_mod.JobSpec) if f.name == "rdma_resource")
    return tuple(dict.fromkeys(re.findall(r"rdma/[A-Za-z0-9_.-]+", field.metadata["option"].help)))


@dataclass(frozen=True)
class NodeShape:
    """What each node advertises: capacity equals allocatable (nothing reserved)."""

    cpu: str = "16"
    memory: str = "64Gi"
    pods: str = "110"
    gpus: int = 8
    rdma: tuple[str, ...] = dataclasses.field(default_factory=rdma_resources)
    rdma_count: int = 1

    def capacity(self) -> dict[str, str]:
        out = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods, "ephemeral-storage": "100Gi",
               spec_mod.GPU_RESOURCE: str(self.gpus)}
        out.update({name: str(self.rdma_count) for name in self.rdma})
        return out


def now_text(now: datetime.datetime | None = None, micro: bool = False) -> str:
    """A time as the API writes it: RFC 3339 in UTC, with microseconds for a MicroTime."""
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).astimezone(datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def node_object(name: str, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Node as a kubelet registers it: its name, the well-known labels and those of its
    ``--node-labels`` (``extra``: a site's topology labels, say)."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**(extra or {}), "kubernetes.io/hostname": name,
                                                  "kubernetes.io/arch": ARCH, "kubernetes.io/os": "linux",
                                                  "beta.kubernetes.io/arch": ARCH, "beta.kubernetes.io/os": "linux"}}}


def node_status(shape: NodeShape, address: str, hostname: str, version: str, now: str,
                port: int = 0) -> dict[str, Any]:
    """The Node's status: capacity, allocatable, addresses, the kubelet's endpoint (``port``,
    where the API server reads container logs), Ready and no pressure."""
    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {"capacity": shape.capacity(), "allocatable": shape.capacity(),
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": hostname}],
            **({"daemonEndpoints": {"kubeletEndpoint": {"Port": port}}} if port else {}),
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                          "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")],
            "nodeInfo": {"architecture": ARCH, "operatingSystem": "linux", "kubeletVersion": version,
                         "containerRuntimeVersion": "docker://", "kernelVersion": "", "osImage": "",
                         "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": ""}}


def lease_object(name: str, node_uid: str, now: str) -> dict[str, Any]:
    """The node's Lease in kube-node-lease, owned by its Node as the kubelet makes it."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now}}


def lease_path(name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
    return f"{base}/{name}" if name else base


class Kubelet:
    """``nodes`` Nodes named ``<prefix>-<i>`` and the pods bound to them, run in Docker.

    ``docker_client``: a docker.DockerClient; ``labels``: put on every container and the
    network besides ``torchpod.kubelet=<id>``; ``version``: the kubeletVersion the Nodes report."""

    def __init__(self, plane: plane_mod.Plane, docker_client: Any, *, nodes: int = 2, prefix: str = "torchpod-node",
                 labels: Mapping[str, str] | None = None, shape: NodeShape | None = None, version: str = "v0.0.0",
                 poll: float = 0.5, node_labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.names = [f"{prefix}-{i}" for i in range(nodes)]
        self.node_labels = dict(node_labels or {})  # node name -> its --node-labels
        stray = sorted(set(self.node_labels) - set(self.names))
        if stray:
            raise ValueError(f"node_labels names {stray}, which are not among the nodes {self.names}")
        bad = [n for n in self.names if not NODE_NAME.fullmatch(n) or len(n) > 63]
        if bad or nodes < 1:
            raise ValueError(f"node names {bad or self.names} are not DNS labels of at most 63 characters")
        self.plane, self.docker, self.version, self.poll = plane, docker_client, version, poll
        self.shape = shape or NodeShape()
        self.id = uuid.uuid4().hex[:12]
        self.labels = {**(labels or {}), LABEL: self.id}
        self.network = f"torchpod-kubelet-{self.id}"
        self.clients: dict[str, Client] = {}
        self.workers: dict[str, PodWorker] = {}
        self.errors: list[str] = []  # what the loops met and went on past, newest last
        self.ended: list[Ended] = []  # every container that had ended when it was removed, oldest first
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.address = ""
        self.host_cpus = 0
        self.logs: kubeletlogs.LogServer | None = None

    # -- start and stop -------------------------------------------------------------------------
    def start(self) -> Kubelet:
        """The network, each Node's certificate, Node and Lease, then the lease and pod loops."""
        net = self.docker.networks.create(self.network, driver="bridge", labels=dict(self.labels))
        net.reload()
        self.address = net.attrs["IPAM"]["Config"][0]["Gateway"]
        self.host_cpus = int(self.docker.info().get("NCPU") or 0)
        pki = self.plane.root / "pki"
        # the container-log endpoint every Node names, on the network's gateway (`kubectl logs`)
        cert = planecerts.issue_server(pki, f"kubelet-{self.id}", "torchpod-kubelet", [self.address])
        self.logs = kubeletlogs.LogServer(self.address, self._log_attempts, pki / "ca.crt", cert,
                                          cert.with_suffix(".key")).start()
        for name in self.names:
            planecerts.issue_client(pki, f"node-{name}", f"system:node:{name}", "system:nodes")
            self.clients[name] = Client(plane_mod.LOOPBACK, self.plane.ports.apiserver, pki / "ca.crt",
                                        pki / f"node-{name}.crt", pki / f"node-{name}.key")
            self._register(name)
        for target in (self._lease_loop, self._pod_loop):
            thread = threading.Thread(target=target, name=f"kubelet-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _register(self, name: str) -> None:
        client = self.clients[name]
        try:
            node = client.create("/api/v1/nodes", node_object(name, self.node_labels.get(name)))
        except ApiError as exc:
            if exc.status != 409:
                raise
            node = client.get(f"/api/v1/nodes/{name}")
        client.patch(f"/api/v1/nodes/{name}/status",
                     {"status": node_status(self.shape, self.address, name, self.version, now_text(),
                                            self.logs.port if self.logs else 0)})
        try:
            client.create(lease_path(), lease_object(name, node["metadata"]["uid"], now_text(micro=True)))
        except ApiError as exc:
            if exc.status != 409:
                raise
            self._renew(name)

    def _renew(self, name: str) -> None:
        renewed = {"spec": {"holderIdentity": name, "renewTime": now_text(micro=True)}}
        self.clients[name].patch(lease_path(name), renewed)

    def stop(self) -> None:
        """Stop the loops, every pod's containers and the network; the Nodes stay registered."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        for worker in list(self.workers.values()):
            worker.halt()
        for worker in list(self.workers.values()):
            worker.join(timeout=60)
        runtime = self.runtime("")
        runtime.sweep()
        if self.logs is not None:
            self.logs.stop()

    def __enter__(self) -> Kubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- loops ------------------------------------------------------------------------------------
    def _note(self, what: str, exc: BaseException) -> None:
        self.errors.append(f"{what}: {one_line(exc)}")
        del self.errors[:-50]

    def _lease_loop(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            for name in self.names:
                try:
                    self._renew(name)
                except RuntimeFailure as exc:
                    self._note(f"renewing the lease of {name}", exc)

    def _pod_loop(self) -> None:
        while not self._stop.wait(self.poll):
            for name in self.names:
                try:
                    self._sync(name)
                except (RuntimeFailure, ValueError) as exc:
                    self._note(f"listing the pods of {name}", exc)

    def _sync(self, name: str) -> None:
        """Hand each pod bound to ``name`` to its worker (a new one for a new pod); tell the
        workers of pods no longer listed that they are gone."""
        found = self.clients[name].get("/api/v1/pods", fieldSelector=f"spec.nodeName={name}")
        seen = set()
        for pod in found.get("items") or []:
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            worker = self.workers.get(uid)
            if worker is None:
                worker = self.workers[uid] = PodWorker(pod, self.runtime(name))
                worker.start()
            else:
                worker.update(pod)
        for uid, worker in list(self.workers.items()):
            if worker.runtime.node == name and uid not in seen:
                worker.gone()

    def runtime(self, node: str) -> Runtime:
        """What a pod worker on ``node`` uses: its node's client, docker, the network and labels."""
        client = self.clients.get(node)
        return Runtime(node=node, client=client, docker=self.docker, network=self.network, labels=self.labels,
                       host_ip=self.address, allocatable=self.shape.capacity(), note=self._note,
                       host_cpus=self.host_cpus, ended=self.ended)

    def _log_attempts(self, request: kubeletlogs.LogRequest) -> list[tuple[int, Any]]:
        """Each attempt of a container of a pod this stand-in runs, with its number: what
        the log endpoint reads (LookupError, a 404, for a pod or container it does not run)."""
        if not any(w.namespace == request.namespace and w.pod_name == request.pod for w in list(self.workers.values())):
            raise LookupError(f"pod {request.pod!r} does not exist")
        found = self.docker.containers.list(all=True, ignore_removed=True, filters={"label": [
            f"{LABEL}={self.id}", f"io.kubernetes.pod.namespace={request.namespace}",
            f"io.kubernetes.pod.name={request.pod}", f"io.kubernetes.container.name={request.container}"]})
        if request.container == podargs.SANDBOX or not found:
            raise LookupError(f"container {request.container!r} not found in pod {request.pod!r}")
        return [(int(c.name.rsplit("_", 1)[-1]), c) for c in found]

    def pod_workers(self) -> Mapping[str, PodWorker]:
        return dict(self.workers)

    def attempts(self, namespace: str) -> list[Ended]:
        """Every container attempt run for the pods of ``namespace``, sandboxes aside: those
        still there (code None while one runs) and those removed since (``ended``), each with
        its log, by pod and attempt."""
        import docker

        found = self.docker.containers.list(all=True, filters={"label": [
            f"{LABEL}={self.id}", f"io.kubernetes.pod.namespace={namespace}"]},
            ignore_removed=True)  # one removed between the listing and its inspection is in ended
        out = []
        for container in found:
            labels = container.labels
            name = labels.get("io.kubernetes.container.name", "")
            if name == podargs.SANDBOX:
                continue
            state = container.attrs["State"]
            code = None if state.get("Running") or state.get("Status") == "created" else state.get("ExitCode")
            try:  # removed meanwhile (gone, or dead and marked for removal): then it is in ended, read below
                log = container.logs().decode("utf-8", "replace")
            except (docker.errors.NotFound, docker.errors.APIError):
                continue
            out.append(Ended(namespace, labels.get("io.kubernetes.pod.name", "?"), name, container.name, code, log))
        seen = {e.attempt for e in out}
        out += [e for e in list(self.ended)
                if e.namespace == namespace and e.attempt not in seen and e.container != podargs.SANDBOX]
        return sorted(out, key=lambda e: (e.pod, e.attempt))


Note = Callable[[str, BaseException], None]
