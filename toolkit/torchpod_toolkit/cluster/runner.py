"""Run a Topology as containers on a private Docker network, and always clean up.

One ``Cluster`` is one job: a bridge network of its own (unless one is shared on purpose),
one container per node created from the image with the hostname, network aliases,
environment and files the topology gives, started in node order (node 0 first, so a
scheduler that hands out the master's IP can be played). Every container, network and
volume carries the caller's labels, so a sweep by label removes whatever a crash left.

Edges only: nothing here reads ``os.environ``; callers pass the image, command and opt-ins.
Errors are caught narrowly: the engine's own (docker.errors) and the HTTP client's
(requests), never a blanket ``except Exception`` that would relabel a bug as a cleanup hiccup.
"""

from __future__ import annotations

import functools
import io
import ipaddress
import json
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import docker
import requests

# RESULT_PREFIX: examples/common.py prints it (tests/unit/torchpod/test_contract.py holds the two equal)
from torchpod.contract import EXAMPLES_DIR as EXAMPLES
from torchpod.contract import RESULT_PREFIX
from torchpod.errors import RuntimeFailure

from .nodes import Node, Security, Topology, fill_ips, needs_ips

# What a container that went away (or an engine that timed out) raises through the SDK.
ENGINE_ERRORS = (docker.errors.APIError, requests.exceptions.RequestException)
# What `container.wait(timeout=...)` raises when the deadline passes: a ReadTimeout, which
# some urllib3/requests pairs report as a ConnectionError("Read timed out").
WAIT_TIMEOUT = (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError)


def parse_results(text: str) -> list[dict]:
    """Every ``TORCHPOD_RESULT {json}`` line in a node's log, in order."""
    out = []
    for line in text.splitlines():
        at = line.find(RESULT_PREFIX)
        if at >= 0:
            try:
                out.append(json.loads(line[at + len(RESULT_PREFIX):]))
            except ValueError:
                continue  # a line cut by a kill mid-write
    return out


def dev_mounts(root: Path, python: str) -> dict[str, dict[str, str]]:
    """Bind mounts of a working copy's launcher and examples over the image's copies
    (``python``: the image's MAJOR.MINOR, from its definition)."""
    site = f"/opt/venv/lib/python{python}/site-packages/torchpod"
    return {
        str(root / "entrypoints" / "torchpod"): {"bind": site, "mode": "ro"},
        str(root / "examples"): {"bind": EXAMPLES, "mode": "ro"},
    }


def sweep(client, label: str, value: str | None = None) -> int:
    """Remove every container, network and volume carrying ``label`` (=``value``)."""
    flt = {"label": label if value is None else f"{label}={value}"}
    removed = 0
    for c in client.containers.list(all=True, filters=flt):
        _quietly(functools.partial(c.remove, force=True))
        removed += 1
    for n in client.networks.list(filters=flt):
        _quietly(n.remove)
        removed += 1
    for v in client.volumes.list(filters=flt):
        _quietly(functools.partial(v.remove, force=True))
        removed += 1
    return removed


def _quietly(fn: Callable[[], object]) -> None:
    try:
        fn()
    except ENGINE_ERRORS:  # already gone, or removed by a concurrent sweep: cleanup goes on
        pass


def _tar(files: Iterable[tuple[str, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, text in files:
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class NodeRun:
    node: Node
    container: Any = None  # a docker Container (the SDK ships no types)
    started_at: float | None = None  # wall clock just before `start`
    exit_code: int | None = None
    timed_out: bool = False
    log_text: str = ""


def security_kwargs(sec: Security) -> dict[str, Any]:
    """docker-py's create() arguments for a pod's securityContext (nodes.Security)."""
    out: dict[str, Any] = {"read_only": sec.read_only}
    if sec.user is not None:
        out["user"] = sec.user
    if sec.groups:
        out["group_add"] = list(sec.groups)
    if sec.tmpfs:
        out["tmpfs"] = {path: "" for path in sec.tmpfs}
    if sec.cap_drop:
        out["cap_drop"] = list(sec.cap_drop)
    if sec.cap_add:
        out["cap_add"] = list(sec.cap_add)
    if sec.no_new_privileges:
        out["security_opt"] = ["no-new-privileges"]
    return out


@dataclass
class Cluster:
    """One job's containers. Use as a context manager: ``close()`` removes everything."""

    client: Any  # a docker.DockerClient (the SDK ships no types)
    image: str
    topology: Topology
    command: Sequence[str]
    labels: Mapping[str, str]
    network: str | None = None  # join an existing network (two jobs side by side)
    volumes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)  # added to every node
    entrypoint: Sequence[str] | None = None  # None: the image's (torchpod)
    name: str = ""
    gpus: bool = False  # hand every GPU to every node (NCCL instead of gloo)
    # fixed addresses in descending order, node 0 the highest: addresses that sort as text
    # against the node order (torch's c10d ranks by that text)
    descending_addresses: bool = False
    on_line: Callable[[Node, str], None] | None = None  # streams each output line
    nodes: list[NodeRun] = field(default_factory=list)
    _own_network: Any = None
    _addresses: list = field(default_factory=list)  # fixed IPs, when node 0's is needed
    _threads: list = field(default_factory=list)
    _file_dirs: list = field(default_factory=list)  # host copies of read-only-root nodes' files

    def __post_init__(self):
        self.name = self.name or f"tp-{self.topology.job_id}-{uuid.uuid4().hex[:6]}"
        self.nodes = [NodeRun(n) for n in self.topology.nodes]

    @property
    def addresses(self) -> list[str]:
        """The nodes' fixed addresses, in node order (empty: Docker picks them)."""
        return list(self._addresses)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- lifecycle -------------------------------------------------------------------
    def create_network(self) -> str:
        if self.network is None:
            net = self.client.networks.create(
                self.name, driver="bridge", labels=dict(self.labels), check_duplicate=True)
            if needs_ips(self.topology.nodes):
                net = self._with_own_subnet(net)
            self._own_network = net
            self.network = self.name
        return self.network

    def _with_own_subnet(self, net):
        """Re-create ``net`` with the subnet Docker picked, now user-configured, so nodes
        can get fixed addresses known before they start (Run:ai, mpirun and AzureML hand
        every node the master's IP; SkyPilot every node's)."""
        from docker.types import IPAMConfig, IPAMPool

        net.reload()
        subnet = net.attrs["IPAM"]["Config"][0]["Subnet"]
        net.remove()
        hosts = ipaddress.ip_network(subnet).hosts()
        picked = [str(a) for _, a in zip(range(10 + len(self.nodes)), hosts)][10:]
        self._addresses = picked[::-1] if self.descending_addresses else picked
        return self.client.networks.create(
            self.name, driver="bridge", labels=dict(self.labels), check_duplicate=True,
            ipam=IPAMConfig(pool_configs=[IPAMPool(subnet=subnet)]))

    def start(self, only: Sequence[int] | None = None) -> "Cluster":
        """Create and start the nodes (all, or the indices in ``only``) in node order."""
        self.create_network()
        for run in self.nodes:
            if only is not None and run.node.index not in only:
                continue
            self._create(run)
            self._start(run)
        return self


    def _create(self, run: NodeRun) -> None:
        from docker.types import EndpointConfig

        env = dict(run.node.env)
        env.update(self.env)
        address, files = None, run.node.files
        if self._addresses:
            address = self._addresses[run.node.index]
            env = {k: fill_ips(v, self._addresses) for k, v in env.items()}
            files = tuple((path, fill_ips(text, self._addresses)) for path, text in files)
        endpoint = EndpointConfig(self.client.api._version, aliases=list(run.node.names),
                                  ipv4_address=address)
        kwargs = dict(
            command=list(run.node.command or self._command(run.node)), name=f"{self.name}-{run.node.index}",
            hostname=run.node.hostname, environment=env, labels=dict(self.labels),
            network=self.network, networking_config={self.network: endpoint},
            volumes={k: dict(v) for k, v in self.volumes.items()}, detach=True,
            init=False, shm_size="256m",
        )
        if self.gpus:
            from docker.types import DeviceRequest

            kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if run.node.domainname:
            kwargs["domainname"] = run.node.domainname
        if self.entrypoint is not None:
            kwargs["entrypoint"] = list(self.entrypoint)
        if run.node.security is not None:
            kwargs.update(security_kwargs(run.node.security))
            if run.node.security.read_only and files:  # nothing can be put into a read-only root
                kwargs["volumes"] = {k: dict(v) for k, v in self.volumes.items()} | self._mounted_files(files)
                files = ()
        run.container = self.client.containers.create(self.image, **kwargs)
        if files:
            run.container.put_archive("/", _tar(files))

    def _mounted_files(self, files) -> dict[str, dict[str, str]]:
        """Each file as a read-only bind mount of a host copy: the way Kubernetes hands a pod
        the files an operator makes (Volcano's host lists are a ConfigMap volume), which a
        read-only root filesystem does not stop."""
        folder = Path(tempfile.mkdtemp(prefix="torchpod-files-"))
        self._file_dirs.append(folder)
        out = {}
        for path, text in files:
            host = folder / path.lstrip("/")
            host.parent.mkdir(parents=True, exist_ok=True)
            host.write_text(text)
            host.chmod(0o644)
            out[str(host)] = {"bind": path, "mode": "ro"}
        return out

    def _command(self, node: Node) -> list[str]:
        """The job's command, after the options the node's pod passes to `torchpod run`."""
        return ["run", *node.options, "--", *self.command] if node.options else list(self.command)

    def _start(self, run: NodeRun) -> None:
        run.started_at = time.time()
        run.exit_code, run.timed_out = None, False
        run.container.start()
        if self.on_line is not None:
            t = threading.Thread(target=self._stream, args=(run, run.started_at), daemon=True)
            t.start()
            self._threads.append(t)

    def _stream(self, run: NodeRun, since: float) -> None:
        on_line = self.on_line
        if on_line is None:  # started only when a caller streams (start)
            return
        pending = b""
        try:
            for chunk in run.container.logs(stream=True, follow=True, since=int(since) - 1):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    on_line(run.node, line.decode(errors="replace"))
        except ENGINE_ERRORS:  # the container went away: the stream just ends
            pass
        if pending:
            on_line(run.node, pending.decode(errors="replace"))

    def restart(self, index: int) -> None:
        """Start a node's (stopped or killed) container again, as a scheduler would."""
        run = self.nodes[index]
        run.container.reload()
        if run.container.status == "running":
            raise RuntimeFailure(f"node {index} is still running; kill or stop it first")
        self._start(run)

    def kill(self, index: int, signal: str = "SIGKILL") -> None:
        self.nodes[index].container.kill(signal=signal)

    def stop(self, index: int, timeout: int = 10) -> float:
        """`docker stop` one node; returns how long the stop took."""
        t0 = time.time()
        self.nodes[index].container.stop(timeout=timeout)
        return time.time() - t0

    def wait(self, timeout: float, indices: Sequence[int] | None = None) -> list[int | None]:
        """Wait for nodes to exit; kill the ones still running at the deadline."""
        deadline = time.time() + timeout
        chosen = [r for r in self.nodes if r.container is not None
                  and (indices is None or r.node.index in indices)]
        for run in chosen:
            left = max(0.1, deadline - time.time())
            try:
                run.exit_code = int(run.container.wait(timeout=left)["StatusCode"])
            except WAIT_TIMEOUT:
                run.timed_out = True
                _quietly(run.container.kill)
                try:
                    run.exit_code = int(run.container.wait(timeout=30)["StatusCode"])
                except ENGINE_ERRORS:
                    run.exit_code = None
        for t in self._threads:
            t.join(timeout=2)
        return [r.exit_code for r in chosen]

    def status(self, index: int) -> str:
        c = self.nodes[index].container
        c.reload()
        return c.status

    def logs(self, index: int) -> str:
        run = self.nodes[index]
        if run.container is not None:
            try:
                run.log_text = run.container.logs(stdout=True, stderr=True).decode(errors="replace")
            except ENGINE_ERRORS:  # removed already: keep what was read last
                pass
        return run.log_text

    def all_logs(self) -> str:
        return "\n".join(f"----- node {r.node.index} ({r.node.hostname}) exit {r.exit_code}"
                         f"{' TIMED OUT' if r.timed_out else ''}\n{self.logs(r.node.index)}"
                         for r in self.nodes if r.container is not None)

    def results(self, index: int | None = None) -> list[dict]:
        idx = range(len(self.nodes)) if index is None else [index]
        return [r for i in idx for r in parse_results(self.logs(i))]

    def close(self) -> None:
        for run in self.nodes:
            if run.container is not None:
                self.logs(run.node.index)  # keep the text for reports after removal
                _quietly(functools.partial(run.container.remove, force=True))
        if self._own_network is not None:
            _quietly(self._own_network.remove)
            self._own_network = None
        for folder in self._file_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        self._file_dirs.clear()


def new_volume(client, labels: Mapping[str, str], name: str | None = None):
    """A named volume every node can mount (the shared snapshot directory)."""
    return client.volumes.create(name=name or f"tp-vol-{uuid.uuid4().hex[:8]}", labels=dict(labels))


def image_or_error(client, image: str, arch: str = "x86_64") -> object:
    """The local image, or a RuntimeFailure saying how to build it."""
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        raise RuntimeFailure(
            f"image {image} is not built on this Docker engine; build it with "
            f"`invoke build --arch {arch}`"
        ) from None
