"""The payload image: the base and the locked wheels installed in /opt, built once per
:func:`payload_key` and tagged under :data:`PAYLOAD_REPOSITORY`, so an image whose payload is
unchanged rebuilds only its own small layers, even after BuildKit's cache is pruned.

Also the sweep of payload images no image stands on any more (each is 5 GB).
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Sequence

from torchpod import readers
from torchpod.contract import Arch
from torchpod.errors import RuntimeFailure

from . import host, sources, wheelhouse
from .commands import Builder

PAYLOAD_REPOSITORY = "torchpod-payload"
# the part of docker/Dockerfile that makes the payload image (up to the stage FROM it)
_PAYLOAD_END = "FROM ${PAYLOAD_IMAGE} AS runtime-base"


# what the payload stages run, besides the Dockerfile: every file of this folder (payload.sh and
# the shard helper it calls), mounted into the stage
PAYLOAD_DIR = Path("docker") / "payload"
STAGED_FILE_CAP = 16 << 20  # a staged lock or list of built wheels: a line per wheel


def _read(path: Path, expected: str, cap: int) -> bytes:
    return readers.read_bytes(path, what=str(path), expected=expected, cap=cap)


def payload_scripts(root: Path) -> bytes:
    """Every file of :data:`PAYLOAD_DIR`, each as its path and its bytes, in path order: what
    :func:`payload_key` hashes as the scripts the payload stages run."""
    folder = root / PAYLOAD_DIR
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return b"".join(f"{p.relative_to(folder)}\0".encode() + _read(p, "a script torchpod ships", readers.DATA_CAP)
                    + b"\0" for p in files)


def payload_key(argv: Sequence[str], dockerfile: str, staged: Path, base_ids: Sequence[str],
                script: bytes = b"") -> str:
    """What decides the payload image's every byte: its build command (the build args: bases,
    Python, the pip target, a rebuild token; not its tag), the Dockerfile up to the stage that
    stands on it and the ``script`` its payload stages run, the staged lock lines (each with
    its sha256) and the wheels built from sdists, and the base images' IDs. A net plugin
    variant whose wheel lines and bases are its default image's gets the same key, and so the
    same payload image. ``script`` is what the payload stages run (:func:`payload_scripts`)."""
    if _PAYLOAD_END not in dockerfile:
        raise RuntimeFailure(f"docker/Dockerfile has no line {_PAYLOAD_END!r}; the payload image cannot be keyed")
    digest = hashlib.sha256()
    for part in ("\0".join(_key_words(argv)), dockerfile.split(_PAYLOAD_END)[0], *base_ids):
        digest.update(part.encode() + b"\n")
    digest.update(hashlib.sha256(script).hexdigest().encode() + b"\n")
    for path in sorted(p for p in staged.rglob("*") if p.is_file() and p.suffix != ".whl"):
        digest.update(f"{path.relative_to(staged)}\0".encode() + _read(path, "a file wheelhouse.stage wrote",
                                                                        STAGED_FILE_CAP) + b"\n")
    for path in sorted((staged / wheelhouse.BUILT).glob("*.whl")):  # the lock's wheels are named by hash
        digest.update(f"{path.name}\0{sources.sha256_of(path)}\n".encode())
    return digest.hexdigest()


# Build args that name no input of the payload's bytes: the commit's time (SOURCE_DATE_EPOCH,
# which every commit moves; the payload stages declare no such ARG and give every file time 0)
_NOT_PAYLOAD_INPUTS = ("SOURCE_DATE_EPOCH=",)


def _key_words(argv: Sequence[str]) -> list[str]:
    """The words of a payload build that decide its result: the target, the platform, the
    build args (but :data:`_NOT_PAYLOAD_INPUTS`) and --no-cache; not the tag, the Dockerfile's
    path or the context's (a fresh clone sits elsewhere), whose contents are hashed apart."""
    words = []
    for flag, value in zip(argv, [*argv[1:], ""]):
        if flag in ("--target", "--platform") or (flag == "--build-arg" and not value.startswith(_NOT_PAYLOAD_INPUTS)):
            words += [flag, value]
    return words + (["--no-cache"] if "--no-cache" in argv else [])


def payload_ref(client, argv: list[str], root: Path, base_ids: Sequence[str], arch: Arch, *,
                no_cache: bool) -> tuple[str, bool]:
    """The payload image's tag, and whether an image with its key exists (never with
    ``no_cache``, whose tag is a fresh one). The key reads the staged lock lines, not the
    wheels: an existing payload is found with none of them on disk."""
    dockerfile = root / "docker" / "Dockerfile"
    text = readers.read_text(dockerfile, what=str(dockerfile), expected="the Dockerfile torchpod ships",
                             cap=readers.DATA_CAP)
    key = payload_key(argv, text, root / wheelhouse.STAGE, base_ids, payload_scripts(root))
    if no_cache:
        return f"torchpod-staging/payload:{arch.name}-{uuid.uuid4().hex[:8]}", False
    payload = f"{PAYLOAD_REPOSITORY}:{arch.name}-{key[:24]}"
    return payload, host.image_exists(client, payload)


def build_payload_image(builder: Builder, argv: list[str], payload: str, *, quiet: bool) -> float:
    """Build the payload image under ``payload``; BuildKit's export seconds."""
    print(f"==> building the payload image {payload}", flush=True)
    argv = list(argv)
    argv[argv.index("-t") + 1] = payload
    return host.run_build(argv, env=builder.env, quiet=quiet, what=f"docker build of {payload}")


def drop_stale_payloads(client) -> list[str]:
    """Remove every payload image that no tagged torchpod image stands on (its top layer is in
    none of theirs): once an image is rebuilt on a new payload, the old payload's 5 GB would
    otherwise stay. A payload whose images are not rebuilt yet is still stood on, and kept."""
    used = {layer for image in client.images.list() if any(t.startswith("torchpod/") for t in image.tags)
            for layer in image.attrs["RootFS"]["Layers"]}
    return _remove_payloads(client, lambda image, tag: image.attrs["RootFS"]["Layers"][-1] not in used)


def drop_payloads(client, keep: set[str]) -> list[str]:
    """Remove every payload image but those tagged ``keep`` (an image built on a removed one
    keeps its layers); the tags removed. CI calls it once every image is built, so a lock
    that changed leaves no 5 GB payload behind."""
    return _remove_payloads(client, lambda image, tag: tag not in keep)


def _remove_payloads(client, stale) -> list[str]:
    """Untag each payload image tag for which ``stale(image, tag)``; the tags removed."""
    import docker

    gone = []
    for image in client.images.list(name=PAYLOAD_REPOSITORY):
        for tag in image.tags:
            if tag.startswith(f"{PAYLOAD_REPOSITORY}:") and stale(image, tag):
                try:
                    client.images.remove(tag)
                    gone.append(tag)
                except docker.errors.APIError:  # in use by a running build or container: kept
                    pass
    return gone
