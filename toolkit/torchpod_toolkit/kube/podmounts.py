"""A pod's volumes set up on this machine, before its sandbox, as the kubelet's volume
manager mounts them: a hostPath checked or made, an emptyDir a folder of the pod's (or with
``medium: Memory`` a tmpfs docker volume), the files of configMap, secret, downwardAPI and
projected volumes (``podvolumes``) written read-only, a service-account token asked of the
TokenRequest API; each held for docker as a ``podargs.Source``. What cannot be set up yet
is tried again while the containers wait ContainerCreating.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchpod.errors import RuntimeFailure

from . import podargs, podenv, podstatus, podvolumes
from .api import ApiError
from .podreport import CONFIG_RETRY, PodReporter


class MountingPod(PodReporter):
    """A pod worker's volumes (``podworker.PodWorker`` sets them up before its sandbox)."""

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
