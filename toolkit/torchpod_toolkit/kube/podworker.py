"""One pod's life on a kubelet stand-in node: one thread per pod, from its sandbox to the
deletion the kubelet finalises.

The steps follow the kubelet's pod worker (kubernetes v1.37.2, pkg/kubelet/kubelet.go
``SyncPod`` and pkg/kubelet/kuberuntime/kuberuntime_manager.go ``SyncPod``): the sandbox
first (its address is the pod's), then the volumes, the init containers one at a time
(each must exit 0 before the next), then every app container, each tried again and
restarted as ``podcontainers`` says. A pod with a deletionTimestamp has its containers
stopped within its grace period, then is deleted with gracePeriodSeconds=0 and the pod's
uid as precondition, as the kubelet's status manager finishes a deletion.

The worker is built in layers, one concern a module: ``podreport`` (the pod as last listed,
the kubelet loop's signals, the status written back), ``podmounts`` (the volumes),
``podimages`` (each container's image, pulled as its policy says, and the events told),
``podcontainers`` (creating, following and restarting the containers) and, here, the pod's
life from its sandbox to its deletion; ``podruntime`` holds what every worker shares with its
kubelet.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Mapping
from typing import Any

from torchpod.errors import RuntimeFailure, one_line

from . import podargs, podstatus, podvolumes
from .api import ApiError
from .podcontainers import ContainerPod
from .podreport import CONFIG_RETRY
from .podruntime import ENGINE_ERRORS

FAILURES = (RuntimeFailure, *ENGINE_ERRORS, OSError, subprocess.SubprocessError, ValueError)
DEFAULT_GRACE = 30


def refusal(pod: Mapping[str, Any]) -> str:
    """Why this stand-in cannot run ``pod`` at all, in one line; empty when it can."""
    spec = pod.get("spec") or {}
    sidecars = [c.get("name") for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    if sidecars:
        return f"sidecar (restartable init) containers {sidecars} are not supported by the kubelet stand-in"
    if spec.get("hostNetwork") is True:
        return "hostNetwork is not supported by the kubelet stand-in: every pod has its own address"
    try:
        for volume in spec.get("volumes") or []:
            podvolumes.kind_of(volume)
    except podvolumes.MountError as exc:
        return f"{exc} (kubelet stand-in)"
    return ""


class PodWorker(ContainerPod):
    """Runs one pod; ``update`` hands it the pod as last listed, ``gone`` says it left the API,
    ``halt`` stops it without touching the API (the kubelet stops)."""

    # -- the pod's life ------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            if (self.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self._live()
            while not self._wait(1.0):
                pass
        except FAILURES as exc:
            self.error = one_line(exc)
            self.runtime.note(f"pod {self.namespace}/{self.pod_name}", exc)
            while not self._wait(1.0):
                pass
        finally:
            self._finish()

    def _live(self) -> None:
        self.start_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        why = refusal(self.pod)
        if why:
            self._patch({"phase": "Failed", "reason": "UnsupportedPodSpec", "message": why,
                         "startTime": self.start_time, "hostIP": self.runtime.host_ip})
            return
        # volumes before the sandbox, as the kubelet mounts them before it creates one
        if not self._volumes() or not self._sandbox_image():
            return
        self._make_sandbox()
        for record in self.apps:
            record.state = podstatus.waiting(podstatus.INITIALIZING if self.inits else podstatus.CREATING)
        self.report()
        if not self._run_inits():
            return
        self._monitor()
        if (self._reported or {}).get("phase") in ("Succeeded", "Failed"):
            # a finished pod's sandbox is stopped and its address released (SyncTerminatedPod);
            # its containers stay for their logs until the pod is deleted
            self.runtime.run(["docker", "kill", self.sandbox])

    def _sandbox_image(self) -> bool:
        """The sandbox's image made present: the first app container's (this stand-in has no
        pause image), pulled as that container's, tried again while it cannot be; False when
        the pod is stopping first."""
        if not self.apps:
            return True
        while not self._ensure_image(self.apps[0]):
            self.report()
            if self._wait(CONFIG_RETRY):
                return False
        return True

    def _make_sandbox(self) -> None:
        image = str(self.specs[self.apps[0].name].get("image", "")) if self.apps else ""
        self.runtime.remove(self.sandbox)
        held = [s.where for s in self.sources.values() if s.kind == "volume"]
        services = self._client().get(f"/api/v1/namespaces/{self.namespace}/services").get("items") or []
        self.runtime.run(podargs.sandbox_argv(self.pod, self.sandbox, image, self.runtime.network,
                                              self._labels(podargs.SANDBOX), held, services))
        self.runtime.run(["docker", "start", self.sandbox])
        found = self.runtime.docker.containers.get(self.sandbox)
        self.pod_ip = found.attrs["NetworkSettings"]["Networks"][self.runtime.network]["IPAddress"]

    # -- the end -------------------------------------------------------------------------------------------
    def _finish(self) -> None:
        """Stop and remove the pod's containers; on a deletion, finalise it in the API."""
        grace = DEFAULT_GRACE
        meta = self.pod.get("metadata") or {}
        if meta.get("deletionGracePeriodSeconds") is not None:
            grace = int(meta["deletionGracePeriodSeconds"])
        flt = {"label": [f"io.kubernetes.pod.uid={self.uid}",
                         *(f"{k}={v}" for k, v in self.runtime.labels.items())]}
        try:
            found = self.runtime.docker.containers.list(all=True, filters=flt)
            for container in found:
                if container.name != self.sandbox and not self._halt.is_set():
                    container.stop(timeout=max(0, grace))
            for container in found:
                self.runtime.remove(container.id)
            for volume in self.runtime.docker.volumes.list(filters=flt):
                volume.remove(force=True)
        except ENGINE_ERRORS as exc:
            self.runtime.note(f"removing the containers of {self.namespace}/{self.pod_name}", exc)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        if self._deleted.is_set() and not self._halt.is_set() and not self._gone.is_set():
            self._delete()

    def _delete(self) -> None:
        try:
            self._client().delete(f"/api/v1/namespaces/{self.namespace}/pods/{self.pod_name}",
                                  {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                   "preconditions": {"uid": self.uid}})
        except ApiError as exc:
            if exc.status not in (404, 409):
                self.runtime.note(f"deleting {self.namespace}/{self.pod_name}", exc)
