"""Push per-arch images and merge them into one multi-arch manifest list.

Per-arch images are pushed as ``<tag>-<arch>``; the manifest list ``<tag>`` is written
with the registry's HTTP API (Distribution v2), so no experimental CLI is needed. The
merge refuses to start when any arch the definition declares has no local image: a
multi-arch name that silently lacks aarch64 is how GH200 jobs end up with x86 wheels.
"""

from __future__ import annotations

import hashlib
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Sequence

from ..arch import Arch
from ..errors import InputError, RuntimeFailure
from .definitions import ImageDef

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_LIST_V2 = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class ManifestRef:
    arch: Arch
    digest: str
    size: int
    media_type: str


@dataclass(frozen=True)
class PushResult:
    images: list[tuple[str, str, str]]  # (arch, ref, digest)
    manifest_ref: str
    manifest_digest: str


def platform_of(arch: Arch) -> dict[str, str]:
    os_name, architecture = arch.docker.split("/")[:2]
    out = {"architecture": architecture, "os": os_name}
    if architecture == "arm64":
        out["variant"] = "v8"
    return out


def manifest_list(entries: Sequence[ManifestRef]) -> dict:
    """A Docker manifest list naming each per-arch manifest with its platform."""
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_LIST_V2,
        "manifests": [
            {"mediaType": e.media_type, "size": e.size, "digest": e.digest, "platform": platform_of(e.arch)}
            for e in entries
        ],
    }


def check_complete(defn: ImageDef, present: Sequence[Arch], registry: str) -> None:
    missing = [a.name for a in defn.arches if a not in present]
    if missing:
        raise RuntimeFailure(
            f"refusing to merge {defn.manifest_ref(registry)}: {defn.path.name} declares "
            f"{', '.join(a.name for a in defn.arches)} but no local image exists for "
            f"{', '.join(missing)}; run `invoke build --image {defn.name} --arch {missing[0]}` first"
        )


def base_url(registry: str, insecure: bool) -> str:
    if "/" in registry or not registry:
        raise InputError(f"--registry={registry!r}; expected HOST:PORT such as 127.0.0.1:5000")
    host = registry.split(":")[0]
    plain = insecure or host in ("localhost", "::1") or host.startswith("127.")
    return f"{'http' if plain else 'https'}://{registry}"


def _request(url: str, *, method: str = "GET", accept: Sequence[str] = (), body: bytes | None = None,
             content_type: str | None = None) -> tuple[bytes, dict[str, str]]:
    req = urllib.request.Request(url, method=method, data=body)
    if accept:
        req.add_header("Accept", ", ".join(accept))
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=60, context=ssl.create_default_context()) as resp:
            return resp.read(), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:200]
        raise RuntimeFailure(f"registry answered {exc.code} to {method} {url}: {detail}") from None
    except urllib.error.URLError as exc:
        raise RuntimeFailure(f"registry unreachable at {url}: {exc.reason}; is it running?") from None


def remote_manifest(url: str, repository: str, reference: str, arch: Arch) -> ManifestRef:
    body, headers = _request(f"{url}/v2/{repository}/manifests/{reference}", accept=(MANIFEST_V2, OCI_MANIFEST))
    media_type = headers.get("content-type", MANIFEST_V2).split(";")[0]
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return ManifestRef(arch=arch, digest=digest, size=len(body), media_type=media_type)


def put_manifest_list(url: str, repository: str, tag: str, document: dict) -> str:
    body = json.dumps(document, indent=2).encode()
    _, headers = _request(f"{url}/v2/{repository}/manifests/{tag}", method="PUT", body=body,
                          content_type=MANIFEST_LIST_V2)
    return headers.get("docker-content-digest", "sha256:" + hashlib.sha256(body).hexdigest())


def push(defn: ImageDef, registry: str, *, insecure: bool = False) -> PushResult:
    from . import engine

    url = base_url(registry, insecure)
    client = engine.docker_client()
    present = [a for a in defn.arches if engine.image_exists(client, defn.ref(a))]
    check_complete(defn, present, registry)
    pushed, entries = [], []
    for arch in defn.arches:
        image = client.images.get(defn.ref(arch))
        recorded = f"{image.attrs.get('Os')}/{image.attrs.get('Architecture')}"
        if recorded != arch.docker:
            raise RuntimeFailure(
                f"{defn.ref(arch)} is recorded as {recorded}, not {arch.docker}; rebuild it with "
                f"`invoke build --image {defn.name} --arch {arch.name}`"
            )
        remote = f"{registry}/{defn.repository}"
        image.tag(remote, defn.tag(arch))
        print(f"==> pushing {remote}:{defn.tag(arch)}", flush=True)
        for event in client.images.push(remote, defn.tag(arch), stream=True, decode=True):
            if "error" in event:
                raise RuntimeFailure(f"push of {remote}:{defn.tag(arch)} failed: {event['error']}")
        client.images.remove(f"{remote}:{defn.tag(arch)}", noprune=True)  # the tag only; the image stays
        entry = remote_manifest(url, defn.repository, defn.tag(arch), arch)
        entries.append(entry)
        pushed.append((arch.name, f"{remote}:{defn.tag(arch)}", entry.digest))
    digest = put_manifest_list(url, defn.repository, defn.version_tag, manifest_list(entries))
    return PushResult(images=pushed, manifest_ref=defn.manifest_ref(registry), manifest_digest=digest)
