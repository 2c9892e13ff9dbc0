"""What a real operator made of a job, as a recording: the part of each pod the operator
wrote (its name, hostname, subdomain, labels, annotations, the main container's
environment and the files its ConfigMaps mount), read from the API server's objects. Pure.

The recordings under torchpod_toolkit/manifests/recorded/ are written from these on a real
control plane (tests/cluster: the recording test of each operator's module), and
torchpod_toolkit.manifests.derive makes the operator model from them. What only the API
server or chance decides is masked where it is read, so a recording made again on another
day is equal when the operator behaves the same:

- a generated name's random part (``metadata.generateName`` + 5 characters,
  apiserver's names.SimpleNameGenerator) becomes ``{random}``;
- an object's UID, wherever it appears in a value, becomes ``{uid}``;
- a value that is a hash, 8 or more hexadecimal digits with at least one letter (a SHA-1
  group or job key), becomes ``{hash}``, and so does the last dash-separated part of a label
  or annotation whose key ends in ``hash`` (a StatefulSet's controller-revision-hash,
  ``<set>-<hash>``: apimachinery's rand.SafeEncodeString, which may be all digits or hold
  letters past f);
- the node a pod is bound to is never read (a recording's pods are never bound: they ask
  for what no node has, or a node no node is).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from torchpod_toolkit.manifests.models.common import main_container

Obj = Mapping[str, Any]

RANDOM, UID, HASH = "{random}", "{uid}", "{hash}"
RANDOM_LEN = 5  # apiserver/pkg/storage/names/generate.go: randomLength
_HASH = re.compile(r"(?<![0-9a-z])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}(?![0-9a-z])")


def mask(value: str, uids: Sequence[str]) -> str:
    """``value`` with every UID and every hash masked (see the module's docstring)."""
    for u in uids:
        value = value.replace(u, UID)
    return _HASH.sub(HASH, value)


def _keyed(key: str, value: str, uids: Sequence[str]) -> str:
    value = mask(value, uids)
    return re.sub(r"[^-]+$", HASH, value) if key.endswith("hash") else value


def _name(meta: Obj) -> str:
    name, stem = meta["name"], meta.get("generateName")
    if stem and name.startswith(stem) and len(name) == len(stem) + RANDOM_LEN:
        return stem + RANDOM
    return name


def _env(container: Obj, configmaps: Mapping[str, Mapping[str, str]], uids: Sequence[str]) -> list[dict[str, Any]]:
    """The container's variables, a ConfigMap key resolved as the kubelet resolves it at the
    container's start (Volcano's svc plugin gives VC_<TASK>_HOSTS from the job's ConfigMap)."""
    out: list[dict[str, Any]] = []
    for item in container.get("env") or ():
        ref = (item.get("valueFrom") or {}).get("configMapKeyRef") or {}
        if ref.get("key") in configmaps.get(ref.get("name", ""), {}):
            out.append({"name": item["name"], "value": mask(configmaps[ref["name"]][ref["key"]], uids)})
        elif "valueFrom" in item:
            out.append({"name": item["name"], "valueFrom": item["valueFrom"]})
        else:
            out.append({"name": item["name"], "value": mask(str(item.get("value", "")), uids)})
    return out


def _files(spec: Obj, container: Obj, configmaps: Mapping[str, Mapping[str, str]],
           uids: Sequence[str]) -> dict[str, str]:
    """The files the container mounts from ConfigMaps the operator made: path -> text."""
    volumes = {v["name"]: v["configMap"]["name"] for v in spec.get("volumes") or () if "configMap" in v}
    out = {}
    for mount in container.get("volumeMounts") or ():
        data = configmaps.get(volumes.get(mount["name"], ""))
        if data is None:
            continue
        for key, text in sorted(data.items()):
            out[f"{mount['mountPath'].rstrip('/')}/{key}"] = mask(text, uids)
    return out


def pod_record(pod: Obj, configmaps: Mapping[str, Mapping[str, str]], uids: Sequence[str],
               container_names: Sequence[str], services: Sequence[str] = ()) -> dict[str, Any]:
    """One pod as the operator made it, masked; ``services``: the names of the namespace's
    Services (an operator may make one per pod, named as the pod)."""
    meta, spec = pod["metadata"], pod["spec"]
    c = main_container(spec, *container_names)
    return {"name": mask(_name(meta), uids),
            "hostname": spec.get("hostname", ""),
            "subdomain": spec.get("subdomain", ""),
            "hostNetwork": bool(spec.get("hostNetwork")), "service": meta["name"] in services,
            "labels": {k: _keyed(k, v, uids) for k, v in sorted((meta.get("labels") or {}).items())},
            "annotations": {k: _keyed(k, v, uids) for k, v in sorted((meta.get("annotations") or {}).items())},
            "container": c["name"], "env": _env(c, configmaps, uids),
            "files": _files(spec, c, configmaps, uids)}


def record(objects: Sequence[Obj], pods: Sequence[Obj], configmaps: Sequence[Obj],
           others: Sequence[Obj]) -> dict[str, Any]:
    """A recording of one job: ``objects`` as applied, the pods the operator made from them,
    the ConfigMaps of the namespace and every other object there whose UID may show in a
    pod (the job objects as the API server holds them, a JobSet a TrainJob made, PodGroups)."""
    uids = sorted({o["metadata"]["uid"] for o in [*pods, *configmaps, *others] if o["metadata"].get("uid")},
                  key=len, reverse=True)
    maps = {m["metadata"]["name"]: dict(m.get("data") or {}) for m in configmaps}
    names = [c["name"] for o in objects for c in _containers(o)]
    services = [o["metadata"]["name"] for o in others if o.get("kind") == "Service"]
    recorded = sorted((pod_record(p, maps, uids, names, services) for p in pods), key=lambda r: r["name"])
    return {"objects": list(objects), "pods": recorded}


def _containers(obj: Obj) -> list[Obj]:
    """Every container named anywhere in ``obj``'s pod templates (any depth)."""
    found: list[Obj] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "containers" and isinstance(value, list):
                    found.extend(c for c in value if isinstance(c, Mapping) and "name" in c)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(obj)
    return found
