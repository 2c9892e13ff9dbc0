"""What a pod worker (``podworker``) knows of its pod and tells the API: the pod as last
listed and the records of its containers, the signals of the kubelet's loop (updated,
deleted, gone from the API, the kubelet stopping), and the pod's status, which ``podstatus``
computes, written through the status subresource whenever it changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torchpod.errors import RuntimeFailure

from . import podargs, podstatus
from .api import ApiError, Client
from .podruntime import Runtime
from .podstatus import Record

CONFIG_RETRY = 2.0  # seconds between tries of a container whose configuration failed


class PodReporter(threading.Thread):
    """One pod's state in its worker's thread, the kubelet loop's signals and the status
    reports; ``podworker.PodWorker`` runs the pod on it."""

    def __init__(self, pod: Mapping[str, Any], runtime: Runtime) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}-{meta['name']}", daemon=True)
        self.pod, self.runtime = pod, runtime
        self.uid, self.namespace, self.pod_name = str(meta["uid"]), str(meta["namespace"]), str(meta["name"])
        spec = pod.get("spec") or {}
        self.inits = [Record(c["name"], c.get("image", "")) for c in spec.get("initContainers") or []]
        self.apps = [Record(c["name"], c.get("image", "")) for c in spec.get("containers") or []]
        self.specs = {c["name"]: c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]}
        self.sandbox = podargs.sandbox_name(self.uid)
        self.pod_ip, self.start_time = "", ""
        self.sources: dict[str, podargs.Source] = {}
        self.folder: Path | None = None
        self._deleted, self._gone, self._halt = threading.Event(), threading.Event(), threading.Event()
        self._reported: dict[str, Any] | None = None
        self._next_try: dict[str, float] = {}
        self.error = ""

    def name_of(self, container: str, attempt: int) -> str:
        return podargs.container_name(self.namespace, self.pod_name, self.uid, container, attempt)

    # -- signals from the kubelet's loop ---------------------------------------------------------
    def update(self, pod: Mapping[str, Any]) -> None:
        self.pod = pod
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._deleted.set()

    def gone(self) -> None:
        self._gone.set()

    def halt(self) -> None:
        self._halt.set()

    def stopping(self) -> bool:
        return self._deleted.is_set() or self._gone.is_set() or self._halt.is_set()

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; whether the pod is being stopped."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stopping():
                return True
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
        return self.stopping()

    # -- the pod in docker and in the API ------------------------------------------------------
    def _labels(self, container: str) -> dict[str, str]:
        return {**self.runtime.labels, "io.kubernetes.pod.namespace": self.namespace,
                "io.kubernetes.pod.name": self.pod_name, "io.kubernetes.pod.uid": self.uid,
                "io.kubernetes.container.name": container}

    def _object(self, plural: str) -> Callable[[str], Mapping[str, Any] | None]:
        def lookup(name: str) -> Mapping[str, Any] | None:
            return self._client().find(f"/api/v1/namespaces/{self.namespace}/{plural}/{name}")
        return lookup

    def _client(self) -> Client:
        if self.runtime.client is None:
            raise RuntimeFailure(f"no API client for node {self.runtime.node!r}")
        return self.runtime.client

    # -- status ----------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return podstatus.pod_status(self.pod, self.inits, self.apps, pod_ip=self.pod_ip, host_ip=self.runtime.host_ip,
                                    start_time=self.start_time, now=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def report(self) -> dict[str, Any]:
        """Write the status when it changed (times of the conditions aside)."""
        status = self.status()
        key = {**status, "conditions": [{**c, "lastTransitionTime": None} for c in status["conditions"]]}
        if key != self._reported:
            self._patch(status)
            self._reported = key
        return status

    def _patch(self, status: Mapping[str, Any]) -> None:
        try:
            self._client().patch(f"/api/v1/namespaces/{self.namespace}/pods/{self.pod_name}/status",
                                 {"status": status})
        except ApiError as exc:
            if exc.status != 404:
                raise
