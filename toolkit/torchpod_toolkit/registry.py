"""Push per-arch images and merge them into one multi-arch name.

Per-arch images are pushed as ``<tag>-<arch>`` with the engine (Docker SDK, the engine's
stored credentials); the merged name ``<tag>`` is written by the docker CLI, so it talks to
any registry the user is logged in to (GHCR, ECR, Harbor) with the same credentials:

- ``docker buildx imagetools create -t <tag> <tag>-<arch>...`` when buildx is there;
- else ``docker manifest create`` + ``docker manifest push`` (docker/cli
  ``cli/command/manifest``, no experimental mode since Docker 20.10), ``--insecure`` for a
  plain-HTTP registry.

The merge refuses to start when any arch the definition declares has no local image: a
multi-arch name that silently lacks aarch64 is how GH200 jobs end up with x86 wheels.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from typing import Sequence

from torchpod.arch import Arch
from torchpod.errors import InputError, RuntimeFailure

from . import grammars, host
from .commands import Builder
from .definitions import ImageDef

_PORT = re.compile(r":[0-9]+\Z")


@dataclass(frozen=True)
class PushResult:
    images: list[tuple[str, str, str]]  # (arch, ref, digest)
    manifest_ref: str
    manifest_digest: str


def check_registry(registry: str) -> str:
    """``HOST[:PORT]`` as given, or an InputError saying what form is expected: the domain of an
    image reference (grammars.DOMAIN, distribution/reference's grammar), whole."""
    if not isinstance(registry, str) or not grammars.DOMAIN.fullmatch(registry):
        raise InputError(f"--registry={registry!r}; expected HOST:PORT such as 127.0.0.1:5000 (no scheme, no path)")
    return registry


def plain_http(registry: str, insecure: bool) -> bool:
    """Whether to talk HTTP: asked for, or a loopback registry (the engine's own default)."""
    host = _PORT.sub("", check_registry(registry))
    return insecure or host in ("localhost", "[::1]") or host.startswith("127.")


def check_complete(defn: ImageDef, present: Sequence[Arch], registry: str) -> None:
    missing = [a.name for a in defn.arches if a not in present]
    if missing:
        raise RuntimeFailure(
            f"refusing to merge {defn.manifest_ref(registry)}: {defn.path.name} declares "
            f"{', '.join(a.name for a in defn.arches)} but no local image exists for "
            f"{', '.join(missing)}; run `invoke build --image {defn.name} --arch {missing[0]}` first"
        )


def merge_commands(builder: Builder, target: str, sources: Sequence[str], *, insecure: bool) -> list[list[str]]:
    """The CLI commands that write ``target`` as a list of the per-arch ``sources``."""
    if builder.buildx:
        return [[builder.docker, "buildx", "imagetools", "create", "-t", target, *sources]]
    flag = ["--insecure"] if insecure else []
    return [
        [builder.docker, "manifest", "create", *flag, "--amend", target, *sources],
        [builder.docker, "manifest", "push", *flag, "--purge", target],
    ]


def digest_command(builder: Builder, target: str, *, insecure: bool) -> list[str] | None:
    """How to read the merged name's digest back (None: `manifest push` printed it)."""
    if builder.buildx:
        return [builder.docker, "buildx", "imagetools", "inspect", target, "--format", "{{json .Manifest}}"]
    return None



def _cli(argv: Sequence[str], what: str) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeFailure(f"{what} failed (exit {proc.returncode}): {detail[0][:300]}; "
                             f"command: {' '.join(argv[:5])} ...; are you logged in (`docker login`)?")
    return proc.stdout


def _push_one(client, remote: str, tag: str) -> str:
    """Push ``remote:tag`` with the engine; the digest the registry stored."""
    digest = None
    for event in client.images.push(remote, tag, stream=True, decode=True):
        if "error" in event:
            raise RuntimeFailure(f"push of {remote}:{tag} failed: {event['error']}")
        aux = event.get("aux") or {}
        if aux.get("Digest"):
            digest = aux["Digest"]
    if digest is None:
        raise RuntimeFailure(f"push of {remote}:{tag} reported no digest; check the registry's log")
    return digest


def push(defn: ImageDef, registry: str, *, insecure: bool = False) -> PushResult:
    plain = plain_http(registry, insecure)
    client = host.docker_client()
    present = [a for a in defn.arches if host.image_exists(client, defn.ref(a))]
    check_complete(defn, present, registry)
    remote = f"{registry}/{defn.repository}"
    pushed = []
    for arch in defn.arches:
        image = client.images.get(defn.ref(arch))
        recorded = f"{image.attrs.get('Os')}/{image.attrs.get('Architecture')}"
        if recorded != arch.docker:
            raise RuntimeFailure(
                f"{defn.ref(arch)} is recorded as {recorded}, not {arch.docker}; rebuild it with "
                f"`invoke build --image {defn.name} --arch {arch.name}`"
            )
        image.tag(remote, defn.tag(arch))
        print(f"==> pushing {remote}:{defn.tag(arch)}", flush=True)
        try:
            digest = _push_one(client, remote, defn.tag(arch))
        finally:
            client.images.remove(f"{remote}:{defn.tag(arch)}", noprune=True)  # the tag only
        pushed.append((arch.name, f"{remote}:{defn.tag(arch)}", digest))
    builder = host.find_builder()
    target = defn.manifest_ref(registry)
    # by digest: the list names exactly what was pushed above, even if a tag moved since
    sources = [f"{remote}@{digest}" for _, _, digest in pushed]
    out = ""
    for argv in merge_commands(builder, target, sources, insecure=plain):
        out = _cli(argv, f"merging {target}")
    reader = digest_command(builder, target, insecure=plain)
    if reader is not None:
        out = _cli(reader, f"reading back {target}")
    found = [m.group(0) for m in grammars.DIGEST.finditer(out)]
    if not found:
        raise RuntimeFailure(f"merging {target} printed no digest: {out.strip()[:200]!r}")
    return PushResult(images=pushed, manifest_ref=target, manifest_digest=found[0])
