"""An operator's upstream manifests, read and rewritten (pure: no process, no plane): where
Go's module cache holds its source (``go mod download -json``'s answer), the objects of its
rendered overlay sorted by what the install does with each, what its Deployments mount and
run as, and the rewrites that let its programs run as processes on this host instead of as
its pods (``operators`` says what is real and what stands in): each webhook configuration's
``clientConfig.service`` becomes ``clientConfig.url`` ``https://127.0.0.1:<port><path>``
with the CA made here, the webhook Secret a cert rotator reads holds that CA and its
certificate, the files of the ConfigMaps a pod mounts are read out, and a kubeconfig
carries a token of the program's own ServiceAccount. Deployments and Jobs are not applied:
host processes stand in for their pods.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from torchpod.errors import RuntimeFailure, one_line
from torchpod_toolkit.kube import plane

WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
# Kinds of the overlay the host processes replace (this module's docstring).
# Volcano's admission-init Job makes its webhook Secret with a script; here the harness does.
STAND_INS = ("Deployment", "Job")


def parse_download(text: str, module: str) -> Path:
    """The ``Dir`` of ``go mod download -json``'s answer: the module's source in Go's cache."""
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise RuntimeFailure(f"go mod download -json {module}: not JSON ({one_line(exc)})") from None
    if not isinstance(found, dict) or found.get("Error") or not isinstance(found.get("Dir"), str):
        reason = found.get("Error") if isinstance(found, dict) else None
        raise RuntimeFailure(f"go mod download -json {module}: {reason or 'no Dir in its answer'}; expected the "
                             "module's source in Go's module cache (is the Go module proxy reachable?)")
    return Path(found["Dir"])


def parse_objects(text: str, where: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream; anything but mappings with a kind and a
    name is one error naming ``where``."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise RuntimeFailure(f"{where}: not YAML ({one_line(exc)})") from None
    for doc in docs:
        if not isinstance(doc, dict) or not doc.get("kind") or not (doc.get("metadata") or {}).get("name"):
            raise RuntimeFailure(f"{where}: {str(doc)[:200]!r}; expected Kubernetes objects with a kind and a name")
    return docs


@dataclass(frozen=True)
class Manifests:
    """An overlay's objects sorted by what the install does with each."""

    crds: list[dict[str, Any]]
    objects: list[dict[str, Any]]  # namespaces, RBAC, ConfigMaps, Secrets, Services
    webhooks: list[dict[str, Any]]
    deployments: list[dict[str, Any]]  # stood in for by host processes; read for what they mount


def sort_manifests(docs: Iterable[dict[str, Any]]) -> Manifests:
    """:class:`Manifests` of ``docs``, namespaces first among the objects."""
    docs = list(docs)
    objects = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", *WEBHOOK_KINDS, *STAND_INS)]
    objects.sort(key=lambda d: d["kind"] != "Namespace")
    return Manifests(crds=[d for d in docs if d["kind"] == "CustomResourceDefinition"], objects=objects,
                     webhooks=[d for d in docs if d["kind"] in WEBHOOK_KINDS],
                     deployments=[d for d in docs if d["kind"] in STAND_INS])


def _pod_specs(deployments: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [((d.get("spec") or {}).get("template") or {}).get("spec") or {} for d in deployments]


def service_account(deployments: Sequence[Mapping[str, Any]], where: str) -> str:
    """The one ServiceAccount the operator's pod runs as."""
    # ``serviceAccount`` is the field's older name, which Volcano's installer still writes.
    names = {spec.get("serviceAccountName") or spec.get("serviceAccount") or "" for spec in _pod_specs(deployments)}
    if len(names) != 1 or "" in names:
        raise RuntimeFailure(f"{where}: service accounts {sorted(names)}; expected one Deployment naming one")
    return names.pop()


def mounted(deployments: Sequence[Mapping[str, Any]], source: str) -> list[str]:
    """The names of the ``source`` volumes (``secret``: ``secretName``, ``configMap``: ``name``)."""
    key = "secretName" if source == "secret" else "name"
    return [volume[source][key] for spec in _pod_specs(deployments) for volume in spec.get("volumes") or []
            if isinstance(volume.get(source), dict) and volume[source].get(key)]


def service_hosts(webhooks: Iterable[Mapping[str, Any]]) -> list[str]:
    """``<service>.<namespace>.svc`` of each Service the webhooks name, sorted, once each."""
    hosts = {f"{c['service']['name']}.{c['service'].get('namespace', 'default')}.svc"
             for config in webhooks for hook in config.get("webhooks") or []
             for c in [hook.get("clientConfig") or {}] if isinstance(c.get("service"), dict)}
    return sorted(hosts)


def rewrite_webhooks(configs: Iterable[Mapping[str, Any]], port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Each configuration with every ``clientConfig.service`` (and its ``path``) replaced by
    ``url: https://127.0.0.1:<port><path>`` and ``caBundle``: the API server calls the host
    process (this module's docstring). Rules, policies and selectors are kept as shipped."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    rewritten = []
    for config in configs:
        hooks = []
        for hook in config.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service") or {}
            path = service.get("path") or "/"
            if not path.startswith("/"):
                raise RuntimeFailure(f"webhook {hook.get('name')}: path {path!r}; expected one starting with /")
            hooks.append({**hook, "clientConfig": {"url": f"https://{plane.LOOPBACK}:{port}{path}",
                                                   "caBundle": bundle}})
        rewritten.append({**config, "webhooks": hooks})
    return rewritten


def prefill_secrets(objects: Iterable[Mapping[str, Any]], names: Sequence[str],
                 files: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """``objects`` with each Secret called one of ``names`` holding ``files`` (base64)."""
    data = {key: base64.b64encode(value).decode("ascii") for key, value in files.items()}
    return [{**obj, "data": data} if obj["kind"] == "Secret" and obj["metadata"]["name"] in names else dict(obj)
            for obj in objects]


def config_files(objects: Iterable[Mapping[str, Any]], names: Sequence[str]) -> dict[str, str]:
    """The files of the ConfigMaps called one of ``names``, by key."""
    return {key: str(value) for obj in objects if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in names
            for key, value in (obj.get("data") or {}).items()}


def token_kubeconfig(server: str, ca: Path, token: str, user: str) -> str:
    """A kubeconfig that calls ``server`` with a ServiceAccount's bearer token."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "torchpod",
        "clusters": [{"name": "torchpod", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "torchpod", "context": {"cluster": "torchpod", "user": user}}],
    }, sort_keys=False)
