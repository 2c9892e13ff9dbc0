"""One pod's life on a kubelet stand-in node: one thread per pod, from its sandbox to the
deletion the kubelet finalises.

The steps follow the kubelet's pod worker (kubernetes v1.37.2, pkg/kubelet/kubelet.go
``SyncPod`` and pkg/kubelet/kuberuntime/kuberuntime_manager.go ``SyncPod``): the sandbox
first (its address is the pod's), then the volumes, the init containers one at a time
(each must exit 0 before the next), then every app container; a container whose
configuration cannot be made (a missing ConfigMap key, say) waits with the reason
CreateContainerConfigError and is tried again (one docker refuses to create or start waits
with CreateContainerError or RunContainerError); an exited container is restarted as
``restartPolicy`` says, after the kubelet's back-off (10 s doubling to 300 s). A pod with a
deletionTimestamp has its containers stopped within its grace period, then is deleted with
gracePeriodSeconds=0 and the pod's uid as precondition, as the kubelet's status manager
finishes a deletion.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests

from torchpod.errors import RuntimeFailure, one_line

from . import podargs, podenv, podstatus, podvolumes
from .api import ApiError, Client
from .podstatus import Record

ENGINE_ERRORS = (docker.errors.APIError, requests.exceptions.RequestException)
FAILURES = (RuntimeFailure, *ENGINE_ERRORS, OSError, subprocess.SubprocessError, ValueError)
BACKOFF, BACKOFF_MAX = 10.0, 300.0  # the kubelet's crash-loop back-off
CONFIG_RETRY = 2.0  # seconds between tries of a container whose configuration failed
DEFAULT_GRACE = 30


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


class PodWorker(threading.Thread):
    """Runs one pod; ``update`` hands it the pod as last listed, ``gone`` says it left the API,
    ``halt`` stops it without touching the API (the kubelet stops)."""

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
        if not self._volumes():
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

    def _labels(self, container: str) -> dict[str, str]:
        return {**self.runtime.labels, "io.kubernetes.pod.namespace": self.namespace,
                "io.kubernetes.pod.name": self.pod_name, "io.kubernetes.pod.uid": self.uid,
                "io.kubernetes.container.name": container}

    # -- volumes ------------------------------------------------------------------------------------------
    def _volumes(self) -> bool:
        """Every volume set up; while one cannot be, the containers wait ContainerCreating and
        it is tried again, as the kubelet's volume manager retries a failed SetUp. The API's
        refusals count too: just after a pod is bound, the Node authorizer may not yet link
        its node to the ConfigMap the pod mounts (403, "no relationship found")."""
        while True:
            try:
                self._set_up_volumes()
                return True
            except (podvolumes.MountError, ApiError) as exc:
                for record in self.inits[:1] or self.apps:
                    record.state = podstatus.waiting(podstatus.CREATING, f"MountVolume.SetUp failed: {exc}")
                self.report()
            if self._wait(CONFIG_RETRY):
                return False

    def _set_up_volumes(self) -> None:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="torchpod-pod-"))
        context = podvolumes.VolumeContext(self.pod, pod_ip=self.pod_ip, host_ip=self.runtime.host_ip,
                                           allocatable=self.runtime.allocatable, config_maps=self._object("configmaps"),
                                           secrets=self._object("secrets"), token=self._token)
        for volume in (self.pod.get("spec") or {}).get("volumes") or []:
            name, kind = str(volume["name"]), podvolumes.kind_of(volume)
            if name in self.sources:
                continue
            self.sources[name] = self._volume_source(volume, kind, context)

    def _volume_source(self, volume: Mapping[str, Any], kind: str,
                       context: podvolumes.VolumeContext) -> podargs.Source:
        if self.folder is None:
            raise RuntimeFailure("the pod's folder is made before its volumes")
        name, source = str(volume["name"]), volume[kind] or {}
        if kind == "hostPath":
            path = Path(str(source.get("path", "")))
            if source.get("type") == "DirectoryOrCreate":
                path.mkdir(parents=True, exist_ok=True)
            elif source.get("type") in ("Directory", "File") and not path.exists():
                raise podvolumes.MountError(f"hostPath type check failed: {path} does not exist")
            return podargs.Source("bind", str(path))
        if kind == "emptyDir" and source.get("medium") == "Memory":
            return self._memory_volume(name, source)
        folder = self.folder / "volumes" / name
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)  # an emptyDir is writable by whatever user the containers run as
        if kind == "emptyDir":
            return podargs.Source("bind", str(folder))
        for relative, (data, mode) in podvolumes.volume_files(volume, context).items():
            target = folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(mode & 0o777)
        return podargs.Source("bind", str(folder), read_only=True)

    def _memory_volume(self, name: str, source: Mapping[str, Any]) -> podargs.Source:
        """An emptyDir of medium Memory: a tmpfs docker volume every container of the pod shares."""
        volume = podargs.container_name(self.namespace, self.pod_name, self.uid, name, 0)
        options = {"type": "tmpfs", "device": "tmpfs", "o": "mode=0777"}  # an emptyDir's mode, as the kubelet makes it
        if source.get("sizeLimit"):
            try:
                options["o"] += f",size={int(podenv.quantity(source['sizeLimit']))}"
            except podenv.ConfigError as exc:
                raise podvolumes.MountError(str(exc)) from None
        self.runtime.docker.volumes.create(name=volume, driver="local", driver_opts=options,
                                           labels=self._labels(name))
        return podargs.Source("volume", volume)

    def _object(self, plural: str) -> Callable[[str], Mapping[str, Any] | None]:
        def lookup(name: str) -> Mapping[str, Any] | None:
            return self._client().find(f"/api/v1/namespaces/{self.namespace}/{plural}/{name}")
        return lookup

    def _client(self) -> Client:
        if self.runtime.client is None:
            raise RuntimeFailure(f"no API client for node {self.runtime.node!r}")
        return self.runtime.client

    def _token(self, audience: str, seconds: int) -> str:
        """A token of the pod's service account bound to the pod (the TokenRequest API)."""
        account = (self.pod.get("spec") or {}).get("serviceAccountName") or "default"
        body: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": seconds,
                                         "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                            "name": self.pod_name, "uid": self.uid}}}
        if audience:
            body["spec"]["audiences"] = [audience]
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token"
        return str(self._client().create(path, body)["status"]["token"])

    # -- containers ----------------------------------------------------------------------------------------
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
            raise podenv.ConfigError(f"image {container.get('image')!r} is not on this machine "
                                     f"(the stand-in pulls nothing): {one_line(exc)}") from None
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

    # -- status and the end -------------------------------------------------------------------------------
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
