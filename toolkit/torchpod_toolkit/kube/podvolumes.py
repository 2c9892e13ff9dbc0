"""The files of a pod's configMap, secret, downwardAPI and projected volumes, pure: the
volume and lookups in, ``{relative path: (bytes, mode)}`` out; and how each kind of volume is
held for docker.

As the kubelet's volume plugins write them (kubernetes v1.37.2, pkg/volume/configmap,
pkg/volume/secret, pkg/volume/downwardapi, pkg/volume/projected): every key, or only the
``items`` named (each at its ``path`` with its ``mode``), ``defaultMode`` 0644 otherwise; a
missing ConfigMap or Secret fails the mount unless ``optional``, and so does a missing key in
``items``. A projected ``serviceAccountToken`` is a token the TokenRequest API issues for
this pod (the caller's ``token``). emptyDir is a folder, or with ``medium: Memory`` a
tmpfs docker volume capped at ``sizeLimit``; hostPath is a bind mount of the path itself.
Ephemeral, persistentVolumeClaim and every other kind of volume are refused by name.
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from .podenv import ConfigError, field_value, resource_value

Obj = Mapping[str, Any]
Files = dict[str, tuple[bytes, int]]
DEFAULT_MODE = 0o644
# name -> the object (a ConfigMap's or Secret's ``data``/``binaryData``), or None when absent
ObjectLookup = Callable[[str], "Obj | None"]
Token = Callable[[str, int], str]  # (audience, seconds) -> a token for the pod's service account
FILE_KINDS = ("configMap", "secret", "downwardAPI", "projected")
SUPPORTED = (*FILE_KINDS, "emptyDir", "hostPath")


class MountError(Exception):
    """A volume that cannot be set up: the kubelet leaves the pod ContainerCreating (FailedMount)."""


def kind_of(volume: Obj) -> str:
    """The volume's kind; a MountError for a kind this stand-in does not set up."""
    kinds = [k for k in volume if k != "name"]
    if len(kinds) != 1 or kinds[0] not in SUPPORTED:
        raise MountError(f"volume {volume.get('name')!r}: {', '.join(kinds) or 'no source'} is not supported; "
                         f"supported: {', '.join(SUPPORTED)}")
    return kinds[0]


def _safe_path(path: str) -> str:
    if not path or path.startswith("/") or ".." in path.split("/") or "\0" in path:
        raise MountError(f"volume item path {path[:80]!r} must be relative and must not contain '..'")
    return posixpath.normpath(path)


def _object_data(found: Obj, binary_field: str) -> dict[str, bytes]:
    """Every key of a ConfigMap (``data`` as text, ``binaryData`` base64) or a Secret (``data`` base64)."""
    out: dict[str, bytes] = {}
    if binary_field == "data":  # a Secret
        for key, value in (found.get("data") or {}).items():
            out[key] = base64.b64decode(value)
        return out
    for key, value in (found.get("data") or {}).items():
        out[key] = str(value).encode("utf-8")
    for key, value in (found.get("binaryData") or {}).items():
        out[key] = base64.b64decode(value)
    return out


def _keyed(kind: str, source: Obj, lookup: ObjectLookup, default_mode: int) -> Files:
    """A configMap or secret source: its keys (or its items) as files."""
    name = str(source.get("name") or source.get("secretName") or "")
    found = lookup(name)
    if found is None:
        if source.get("optional") is True:
            return {}
        plural = "configmaps" if kind == "configMap" else "secrets"
        raise MountError(f'{plural} "{name}" not found')
    data = _object_data(found, "binaryData" if kind == "configMap" else "data")
    items = source.get("items")
    if not items:
        return {_safe_path(k): (v, default_mode) for k, v in data.items()}
    files: Files = {}
    for item in items:
        if item.get("key") not in data:
            if source.get("optional") is True:
                continue
            raise MountError(f"configmap references non-existent config key: {item.get('key')}" if kind == "configMap"
                             else f"references non-existent secret key: {item.get('key')}")
        files[_safe_path(str(item.get("path")))] = (data[item["key"]], int(item.get("mode", default_mode)))
    return files


def _downward(items: list[Obj], pod: Obj, pod_ip: str, host_ip: str, allocatable: Mapping[str, str],
              default_mode: int) -> Files:
    files: Files = {}
    for item in items:
        try:
            if "fieldRef" in item:
                text = field_value(pod, str(item["fieldRef"].get("fieldPath", "")), pod_ip, host_ip)
            else:
                ref = item.get("resourceFieldRef") or {}
                container: Obj = next((c for c in (pod.get("spec") or {}).get("containers") or []
                                  if c.get("name") == ref.get("containerName")), {})
                text = resource_value(pod, container, ref, allocatable)
        except ConfigError as exc:
            raise MountError(str(exc)) from None
        files[_safe_path(str(item.get("path")))] = (text.encode("utf-8"), int(item.get("mode", default_mode)))
    return files


class VolumeContext:
    """What a pod's file volumes read: the pod, its addresses, the node's allocatable, the
    namespace's ConfigMaps and Secrets, and the TokenRequest API."""

    def __init__(self, pod: Obj, *, pod_ip: str, host_ip: str, allocatable: Mapping[str, str],
                 config_maps: ObjectLookup, secrets: ObjectLookup, token: Token) -> None:
        self.pod, self.pod_ip, self.host_ip, self.allocatable = pod, pod_ip, host_ip, allocatable
        self.config_maps, self.secrets, self.token = config_maps, secrets, token


def _projected(source: Obj, context: VolumeContext, mode: int) -> Files:
    files: Files = {}
    for part in source.get("sources") or []:
        if "configMap" in part:
            files.update(_keyed("configMap", part["configMap"], context.config_maps, mode))
        elif "secret" in part:
            files.update(_keyed("secret", part["secret"], context.secrets, mode))
        elif "downwardAPI" in part:
            files.update(_downward(part["downwardAPI"].get("items") or [], context.pod, context.pod_ip,
                                   context.host_ip, context.allocatable, mode))
        elif "serviceAccountToken" in part:
            ask = part["serviceAccountToken"]
            token = context.token(str(ask.get("audience") or ""), int(ask.get("expirationSeconds") or 3600))
            files[_safe_path(str(ask.get("path")))] = (token.encode("utf-8"), mode)
        else:
            raise MountError(f"projected source {sorted(part)} is not supported: configMap, secret, downwardAPI "
                             "and serviceAccountToken are")
    return files


def volume_files(volume: Obj, context: VolumeContext) -> Files:
    """The files of one configMap, secret, downwardAPI or projected volume."""
    kind = kind_of(volume)
    source = volume[kind] or {}
    mode = int(source.get("defaultMode", DEFAULT_MODE))
    if kind in ("configMap", "secret"):
        lookup = context.config_maps if kind == "configMap" else context.secrets
        return _keyed(kind, source, lookup, mode)
    if kind == "downwardAPI":
        return _downward(source.get("items") or [], context.pod, context.pod_ip, context.host_ip,
                         context.allocatable, mode)
    if kind == "projected":
        return _projected(source, context, mode)
    raise MountError(f"volume {volume.get('name')!r} ({kind}) holds no files")
