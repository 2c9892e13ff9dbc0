"""What a kubelet stand-in's pod workers share with their kubelet (``podworker``): the
node's API client, docker (the SDK, and its CLI for the command lines ``podargs`` makes),
the network and the labels every container carries; the removal of a container, which
keeps an ended one's exit and the end of its log; and docker's times in the API's form.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import docker
import requests

from torchpod.errors import RuntimeFailure

from .api import Client

ENGINE_ERRORS = (docker.errors.APIError, requests.exceptions.RequestException)


# how much of an ended container's log is kept (its last lines, at most these characters)
ENDED_LOG_LINES = 200
ENDED_LOG_CHARS = 64 << 10


@dataclass(frozen=True)
class Ended:
    """A container that had ended when the stand-in removed it."""

    namespace: str
    pod: str
    container: str  # the pod's container name
    attempt: str  # docker's name of this attempt (podargs' k8s_<container>_<pod>_<ns>_<uid>_<attempt>)
    code: int | None  # None while it runs (Kubelet.attempts)
    log: str


@dataclass
class Runtime:
    """What a pod worker shares with its kubelet: the node's API client, docker, the
    network, the labels every container carries, the node's address and allocatable."""

    node: str
    client: Client | None
    docker: Any
    network: str
    labels: Mapping[str, str]
    host_ip: str
    allocatable: Mapping[str, str]
    note: Callable[[str, BaseException], None]
    host_cpus: int = 0  # the docker host's CPUs (podargs.resource_args); 0: no cap
    # Every container that had ended when it was removed (a restart's previous attempt, a
    # deleted pod's), as docker last showed it: what `kubectl logs --previous` and a runtime's
    # log files keep past a container's removal, for whoever watches the stand-in.
    ended: list[Ended] = field(default_factory=list)
    # the node pulls one image at a time (the kubelet's serializeImagePulls, true by default)
    pull_lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, argv: Sequence[str], timeout: float = 120.0) -> str:
        """A docker command (a list of words, never a shell line); its stdout, or RuntimeFailure."""
        program = shutil.which(argv[0])
        if program is None:
            raise RuntimeFailure(f"{argv[0]} not found on PATH; the kubelet stand-in runs pods with the docker CLI")
        done = subprocess.run([program, *argv[1:]], capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeFailure(f"{' '.join(argv[:2])} {argv[2] if len(argv) > 2 else ''}: exit {done.returncode}: "
                                 f"{done.stderr.strip()[-2000:]}")
        return done.stdout.strip()

    def remove(self, name: str) -> None:
        try:
            container = self.docker.containers.get(name)
            state = container.attrs.get("State") or {}
            labels = container.labels or {}
            if not state.get("Running") and state.get("Status") == "exited" and "io.kubernetes.pod.name" in labels:
                log = container.logs(tail=ENDED_LOG_LINES).decode("utf-8", "replace")[-ENDED_LOG_CHARS:]
                self.ended.append(Ended(labels.get("io.kubernetes.pod.namespace", ""), labels["io.kubernetes.pod.name"],
                                        labels.get("io.kubernetes.container.name", ""), container.name,
                                        int(state.get("ExitCode", -1)), log))
            container.remove(force=True)
        except ENGINE_ERRORS:
            pass

    def sweep(self) -> None:
        """Every container, volume and the network that carry all of this kubelet's labels."""
        flt = {"label": [f"{k}={v}" for k, v in self.labels.items()]}
        for container in self.docker.containers.list(all=True, filters=flt):
            self.remove(container.id)
        for volume in self.docker.volumes.list(filters=flt):
            try:
                volume.remove(force=True)
            except ENGINE_ERRORS:
                pass
        for net in self.docker.networks.list(filters=flt):
            try:
                net.remove()
            except ENGINE_ERRORS:
                pass


def docker_time(text: str) -> str:
    """Docker's nanosecond RFC 3339 time cut to the API's seconds."""
    return text[:19] + "Z" if len(text) >= 19 and not text.startswith("0001") else ""

