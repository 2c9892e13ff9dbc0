"""A container's image made present before the container starts, as the kubelet's image
manager does it (kubernetes v1.37.2, pkg/kubelet/images/image_manager.go
``EnsureImageExists``), and each step told as the kubelet tells it, as events on the pod:

- ``imagePullPolicy`` decides (pkg/kubelet/images/image_manager.go ``shouldPullImage``):
  ``Never`` pulls nothing, ``IfNotPresent`` pulls an absent image, ``Always`` pulls every
  time. A pod the API has not defaulted gets the API's default
  (pkg/apis/core/v1/defaults.go ``SetDefaults_Container``: ``Always`` for the tag
  ``latest``, which a reference without tag or digest has, else ``IfNotPresent``).
- An image present and not to be pulled: a Normal ``Pulled`` event, "Container image "X"
  already present on machine and can be accessed by the pod" (the wording of v1.35 on,
  where the feature KubeletEnsureSecretPulledImages is on by default; an image pulled
  without credentials is accessible to every pod).
- ``Never`` and absent: a Warning ``ErrImageNeverPull`` event, and the container waits
  with that reason and "Container image "X" is not present with pull policy of Never".
- A pull: a Normal ``Pulling`` event, ``docker pull`` on the node's engine, then a Normal
  ``Pulled`` event, "Successfully pulled image "X" in 1.2s (3.4s including waiting). Image
  size: N bytes."; the node pulls one image at a time (the kubelet's
  ``serializeImagePulls``, true by default), so "including waiting" counts the wait for
  the pull before it.
- A failed pull: a Warning ``Failed`` event, "Failed to pull image "X": <why>", and the
  container waits ``ErrImagePull``; the next try within the back-off (10 s doubling to
  300 s per pod and image: pkg/kubelet/kubelet.go ``imageBackOffPeriod``,
  ``MaxImageBackOff``) pulls nothing: a Normal ``BackOff`` event, "Back-off pulling image
  "X"", and the container waits ``ImagePullBackOff`` with the last pull's error.

Events are written as the kubelet's event recorder writes them (client-go
tools/record/event.go): named ``<pod>.<hex nanoseconds>``, with the container as the
involved object's ``fieldPath``, source ``kubelet`` on the node; a repeat of the same
reason and message raises the first event's ``count``, as the recorder's correlator does.
An event the API refuses is noted and never stops the pod.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchpod.errors import RuntimeFailure, one_line

from . import podstatus
from .api import ApiError
from .podmounts import MountingPod
from .podruntime import ENGINE_ERRORS, Runtime
from .podstatus import Record

BACKOFF, BACKOFF_MAX = 10.0, 300.0  # pkg/kubelet/kubelet.go imageBackOffPeriod, MaxImageBackOff
PULL_TIMEOUT = 3600.0  # a pull with no end is a stuck engine; a 20 GB image on a slow link is not
NEVER_PULL, PULL_ERROR, PULL_BACKOFF = "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff"


def pull_policy(container: Mapping[str, Any]) -> str:
    """The container's ``imagePullPolicy``, or the API's default for its image."""
    given = str(container.get("imagePullPolicy") or "")
    if given:
        return given
    image = str(container.get("image", ""))
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def go_duration(seconds: float) -> str:
    """``seconds`` cut to the millisecond and written as Go's time.Duration.String writes it
    (``523ms``, ``1.5s``, ``2m3.004s``, ``1h0m0s``), as the kubelet's Pulled event has it."""
    ms = int(max(seconds, 0.0) * 1000)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest // 1000}.{rest % 1000:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    return f"{minutes}m{secs}" if minutes else secs


def quoted(text: str) -> str:
    """``text`` as Go's %q writes a string of printable characters."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class BackOff:
    until: float  # monotonic time the back-off ends
    delay: float  # its length, which the next failure doubles
    error: str  # the last pull's error, as the waiting message carries it


class ImagePod(MountingPod):
    """A pod worker's images (``podcontainers.ContainerPod`` makes each present before it
    creates the container, ``podworker.PodWorker`` the sandbox's before the sandbox)."""

    def __init__(self, pod: Mapping[str, Any], runtime: Runtime) -> None:
        super().__init__(pod, runtime)
        self._events: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._pull_backoff: dict[str, BackOff] = {}
        self._ensured: set[str] = set()  # containers whose image is made present for their next start

    def _ensure_image(self, record: Record) -> bool:
        """Whether ``record``'s image is present to start it; if not, its waiting state says why."""
        if record.name in self._ensured:
            return True
        container = self.specs[record.name]
        image, policy = str(container.get("image", "")), pull_policy(container)
        kind = "initContainers" if any(r is record for r in self.inits) else "containers"
        where = f"spec.{kind}{{{record.name}}}"
        if policy != "Always" and self._image_size(image) is not None:
            self._event(where, "Normal", "Pulled",
                        f"Container image {quoted(image)} already present on machine and can be accessed by the pod")
        elif policy == "Never":
            message = f"Container image {quoted(image)} is not present with pull policy of Never"
            self._event(where, "Warning", NEVER_PULL, message)
            record.state = podstatus.waiting(NEVER_PULL, message)
            return False
        elif not self._pull(record, image, where):
            return False
        self._ensured.add(record.name)
        return True

    def _pull(self, record: Record, image: str, where: str) -> bool:
        backoff = self._pull_backoff.get(image)
        if backoff is not None and time.monotonic() < backoff.until:
            message = f"Back-off pulling image {quoted(image)}"
            self._event(where, "Normal", "BackOff", message)
            record.state = podstatus.waiting(PULL_BACKOFF, f"{message}: {backoff.error}")
            return False
        self._event(where, "Normal", "Pulling", f"Pulling image {quoted(image)}")
        asked = time.monotonic()
        with self.runtime.pull_lock:
            began = time.monotonic()
            try:
                self.runtime.run(["docker", "pull", "--quiet", image], timeout=PULL_TIMEOUT)
            except (RuntimeFailure, subprocess.TimeoutExpired, OSError) as exc:
                why = one_line(exc)
                self._event(where, "Warning", "Failed", f"Failed to pull image {quoted(image)}: {why}")
                delay = BACKOFF if backoff is None else min(backoff.delay * 2, BACKOFF_MAX)
                self._pull_backoff[image] = BackOff(time.monotonic() + delay, delay, f"{PULL_ERROR}: {why}")
                record.state = podstatus.waiting(PULL_ERROR, why)
                return False
            done = time.monotonic()
        self._pull_backoff.pop(image, None)
        size = self._image_size(image) or 0
        self._event(where, "Normal", "Pulled",
                    f"Successfully pulled image {quoted(image)} in {go_duration(done - began)} "
                    f"({go_duration(done - asked)} including waiting). Image size: {size} bytes.")
        return True

    def _image_size(self, image: str) -> int | None:
        """The image's size on this machine's engine; None when it is absent."""
        try:
            return int(self.runtime.docker.images.get(image).attrs.get("Size") or 0)
        except ENGINE_ERRORS:
            return None

    def _event(self, where: str, kind: str, reason: str, message: str) -> None:
        """One event on the pod, or the count of the same one raised."""
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        key, path = (where, reason, message), f"/api/v1/namespaces/{self.namespace}/events"
        try:
            if key in self._events:
                name, count = self._events[key]
                self._client().patch(f"{path}/{name}", {"count": count + 1, "lastTimestamp": stamp})
                self._events[key] = (name, count + 1)
                return
            name = f"{self.pod_name}.{time.time_ns():x}"
            self._client().create(path, {
                "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": self.namespace},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": self.namespace,
                                   "name": self.pod_name, "uid": self.uid, "fieldPath": where},
                "reason": reason, "message": message, "type": kind, "count": 1,
                "firstTimestamp": stamp, "lastTimestamp": stamp,
                "source": {"component": "kubelet", "host": self.runtime.node},
                "reportingComponent": "kubelet", "reportingInstance": self.runtime.node})
            self._events[key] = (name, 1)
        except (ApiError, RuntimeFailure) as exc:
            self.runtime.note(f"event {reason} on {self.namespace}/{self.pod_name}", exc)
