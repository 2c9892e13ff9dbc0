"""A pod's containers on a kubelet stand-in node, as the kubelet's runtime manager runs them
(kubernetes v1.37.2, pkg/kubelet/kuberuntime/kuberuntime_manager.go ``SyncPod``): each
one's image made present first (``podimages``), then created and started in the pod's
sandbox with the environment and command line ``podenv`` makes and the ``docker create``
words ``podargs`` makes; the init containers one at a time
(each must exit 0 before the next), then every app container, followed until it exits. A
container whose configuration cannot be made (a missing ConfigMap key, say) waits with the
reason CreateContainerConfigError and is tried again (one docker refuses to create or start
waits with CreateContainerError or RunContainerError); an exited container is restarted as
``restartPolicy`` says, after the kubelet's back-off (10 s doubling to 300 s).
"""

from __future__ import annotations

import base64
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torchpod.errors import RuntimeFailure, one_line

from . import podargs, podenv, podstatus
from .podimages import ImagePod
from .podreport import CONFIG_RETRY
from .podruntime import ENGINE_ERRORS, docker_time
from .podstatus import Record

BACKOFF, BACKOFF_MAX = 10.0, 300.0  # the kubelet's crash-loop back-off


class ContainerPod(ImagePod):
    """A pod worker's containers (``podworker.PodWorker`` runs them once its sandbox is up)."""

    def _env(self, container: Mapping[str, Any]) -> dict[str, str]:
        spec = self.pod.get("spec") or {}
        services = podenv.service_env(self._client().get("/api/v1/services").get("items") or [], self.namespace,
                                      spec.get("enableServiceLinks") is not False)
        context = podenv.PodContext(self.pod, container, pod_ip=self.pod_ip, host_ip=self.runtime.host_ip,
                                    config_maps=self._text("configmaps"), secrets=self._text("secrets"),
                                    services=services, allocatable=self.runtime.allocatable)
        return podenv.resolve_env(context)

    def _text(self, plural: str) -> Callable[[str], Mapping[str, str] | None]:
        """A ConfigMap's data, or a Secret's decoded (bytes that are not UTF-8 replaced)."""
        def lookup(name: str) -> Mapping[str, str] | None:
            found = self._object(plural)(name)
            if found is None:
                return None
            data = found.get("data") or {}
            if plural == "secrets":
                return {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in data.items()}
            return {k: str(v) for k, v in data.items()}
        return lookup

    def _launch(self, record: Record) -> bool:
        """Create and start ``record``'s container; False (and a waiting state) when its
        configuration cannot be made."""
        container = self.specs[record.name]
        if not self._ensure_image(record):
            return False
        try:
            env = self._env(container)
            command, args = podenv.expand_command(container, env)
            name = self.name_of(record.name, record.restarts)
            record.message_file = self._message_file(name)
            argv = podargs.container_argv(self.pod, container, name=name, sandbox=self.sandbox, env=env,
                                          command=command, args=args, sources=self.sources,
                                          labels=self._labels(record.name), image_user=self._image_user(container),
                                          host_cpus=self.runtime.host_cpus, message_file=record.message_file)
        except (podenv.ConfigError, ValueError, RuntimeFailure) as exc:  # the API's refusals too, as the kubelet's
            record.state = podstatus.waiting(podstatus.CONFIG_ERROR, one_line(exc))
            return False
        self.runtime.remove(name)
        # docker's refusals in the kubelet's words (pkg/kubelet/container/sync_result.go)
        for reason, step in (("CreateContainerError", argv), ("RunContainerError", ["docker", "start", name])):
            try:
                self.runtime.run(step)
            except RuntimeFailure as exc:
                record.state = podstatus.waiting(reason, one_line(exc))
                return False
        self._ensured.discard(record.name)  # a restart makes its image present again, as the kubelet's start does
        if record.restarts:
            self.runtime.remove(self.name_of(record.name, record.restarts - 1))
        container_id = self.runtime.docker.containers.get(name).id
        record.container_id = f"docker://{container_id}"
        record.image_id = str(self.runtime.docker.containers.get(container_id).attrs.get("Image", ""))
        record.state = podstatus.running(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return True

    def _message_file(self, name: str) -> str:
        """An empty file, writable by any user, for one attempt's termination message, as the
        kubelet makes it (kuberuntime_container.go: Create, then Chmod 0666)."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="torchpod-pod-"))
        path = self.folder / "termination" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
        path.chmod(0o666)
        return str(path)

    def _image_user(self, container: Mapping[str, Any]) -> str:
        try:
            image = self.runtime.docker.images.get(str(container.get("image", "")))
        except ENGINE_ERRORS as exc:
            raise podenv.ConfigError(f"image {container.get('image')!r} is not on this machine: "
                                     f"{one_line(exc)}") from None
        return str((image.attrs.get("Config") or {}).get("User") or "")

    def _poll(self, record: Record) -> bool:
        """Refresh a started container's state; whether it has exited."""
        if not record.container_id or "running" not in record.state:
            return "terminated" in record.state
        state = self.runtime.docker.containers.get(record.container_id.split("//", 1)[1]).attrs["State"]
        if state.get("Running") or state.get("Status") in ("created", "restarting"):
            return False
        code, container = int(state.get("ExitCode", -1)), self.specs[record.name]
        message = podstatus.termination_message(
            record.message_file, str(container.get("terminationMessagePolicy") or "File"), code,
            lambda: self.runtime.docker.containers.get(record.container_id.split("//", 1)[1]).logs(
                tail=podstatus.MAX_LOG_LINES))
        record.state = podstatus.terminated(code, docker_time(state.get("StartedAt", "")),
                                            docker_time(state.get("FinishedAt", "")), bool(state.get("OOMKilled")),
                                            record.container_id, message)
        return True

    def _restart_due(self, record: Record, policy: str) -> bool:
        """After an exit: whether ``policy`` restarts it; if so it waits out the back-off first."""
        code = record.state["terminated"]["exitCode"]
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            return False
        delay = min(BACKOFF * 2 ** record.restarts, BACKOFF_MAX)
        record.last, record.restarts = record.state, record.restarts + 1
        record.state = podstatus.waiting("CrashLoopBackOff", f"back-off {delay:.0f}s restarting failed "
                                         f"container={record.name} pod={self.pod_name}_{self.namespace}({self.uid})")
        self._next_try[record.name] = time.monotonic() + delay
        return True

    def _start_when_due(self, record: Record) -> None:
        if time.monotonic() >= self._next_try.get(record.name, 0.0) and not self._launch(record):
            self._next_try[record.name] = time.monotonic() + CONFIG_RETRY

    def _run_inits(self) -> bool:
        """Each init container to a clean exit in turn; False when the pod failed or is stopping."""
        policy = "Never" if self._policy() == "Never" else "OnFailure"
        for record in self.inits:
            while True:
                if "waiting" in record.state:
                    self._start_when_due(record)
                elif self._poll(record):
                    if record.state["terminated"]["exitCode"] == 0:
                        break
                    if not self._restart_due(record, policy):
                        self.report()
                        return False
                self.report()
                if self._wait(0.5):
                    return False
        return True

    def _policy(self) -> str:
        return str((self.pod.get("spec") or {}).get("restartPolicy") or "Always")

    def _monitor(self) -> None:
        """Start the app containers and follow them until the pod is done or stopping."""
        for record in self.apps:
            record.state = podstatus.waiting(podstatus.CREATING)
        while True:
            for record in self.apps:
                if "waiting" in record.state:
                    self._start_when_due(record)
                elif self._poll(record):
                    self._restart_due(record, self._policy())
            status = self.report()
            if status.get("phase") in ("Succeeded", "Failed") or self._wait(0.5):
                return
