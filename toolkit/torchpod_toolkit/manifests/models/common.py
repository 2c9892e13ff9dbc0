"""The pod record every operator model returns, and what the models share: the kubelet's
resolution of the downward API, the words torchpod is started with, the last definition of
a variable winning, the stand-ins for a node's name and an object's UID. Pure.

Kubernetes itself: KUBERNETES_SERVICE_HOST/PORT in every container; for a duplicated
variable the last definition wins; under hostNetwork the pod's hostname is its node's.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from torchpod.errors import InputError

# What Kubernetes sets in every container (the API server's Service); the harness's
# non-manifest scenarios (cluster/scenarios.py) set the same.
K8S_ENV = (("KUBERNETES_SERVICE_HOST", "10.96.0.1"), ("KUBERNETES_SERVICE_PORT", "443"))
Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Pod:
    name: str
    hostname: str  # what `hostname` prints in the container
    dns_names: tuple[str, ...]  # names other pods resolve to this one
    env: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    image: str
    files: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = field(default=())
    host_network: bool = False

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


def uid(name: str) -> str:
    return f"{zlib.crc32(name.encode()):08x}-0000-4000-8000-{zlib.crc32(name[::-1].encode()):012x}"


def node_name(i: int) -> str:
    return f"gpu-node-{chr(ord('a') + i % 26)}{i // 26 or ''}"


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def resolve(env: Sequence[Obj] | None, pod: str, namespace: str, labels: Mapping[str, str],
            annotations: Mapping[str, str], node: str) -> list[tuple[str, str]]:
    """The manifest's own env entries with downward-API fields resolved as the kubelet would."""
    out = []
    for item in env or ():
        if "value" in item or "valueFrom" not in item:
            out.append((item["name"], str(item.get("value", ""))))
            continue
        ref = (item["valueFrom"] or {}).get("fieldRef")
        if not ref:
            raise InputError(f"env {item['name']}: only value and fieldRef are modelled; got {dict(item['valueFrom'])}")
        path = ref["fieldPath"]
        m = _FIELD.match(path)
        if path == "metadata.name":
            value = pod
        elif path == "metadata.namespace":
            value = namespace
        elif path == "spec.nodeName":
            value = node
        elif m:
            value = (labels if m.group(1) == "labels" else annotations).get(m.group(2), "")
        else:
            raise InputError(f"env {item['name']}: fieldRef {path!r} is not modelled; expected metadata.name, "
                             "metadata.namespace, spec.nodeName or a label/annotation")
        out.append((item["name"], value))
    return out


def launcher_args(c: Obj) -> tuple[str, ...]:
    """The words torchpod is started with: the model's pods run the image's torchpod, so a
    container must name torchpod as its command, or none (the image's ENTRYPOINT); any other
    command would run something the model does not."""
    command = c.get("command")
    if command not in (None, [], ["torchpod"]):
        raise InputError(f"container {c.get('name', '')}: command {command!r} is not modelled; expected [torchpod] "
                         "or none (the image's torchpod)")
    return tuple(c.get("args") or ())


def last_wins(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    merged: dict[str, str] = {}
    for k, v in pairs:
        merged.pop(k, None)
        merged[k] = v
    return tuple(merged.items())


def main_container(spec: Obj, *names: str) -> Obj:
    """The container torchpod runs in: the first one named as one of ``names`` (the job's own
    container, as the operator names it), else the pod's first; the one rule the shapes, the
    model and the recordings share."""
    containers = spec.get("containers") or []
    if not containers:
        raise InputError("pod template has no containers")
    return next((c for c in containers if c.get("name") in names), containers[0])


def container_port(container: Obj, port_name: str, default: int) -> int:
    for p in container.get("ports") or ():
        if p.get("name") == port_name:
            return int(p["containerPort"])
    return default


def flags(args: Sequence[str]) -> dict[str, str]:
    out = {}
    for a in args or ():
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            out[k] = v
    return out
