"""Push an image's built arches to any repository a user names, merged into one name.

``--registry`` names where: a registry (``HOST[:PORT]``: the image goes to
``torchpod/<name>`` there under its version tag, as before) or a whole repository,
``HOST[:PORT]/PATH/NAME[:TAG]`` (``ghcr.io/myorg/ml/pytorch``, a Harbor project, an ECR
path; distribution/reference's grammar, torchpod_toolkit.grammars). Its first component must
be a registry (a ``.`` or ``:`` in it, or ``localhost``: distribution/reference
``splitDockerDomain``), so that a bare ``myorg/pytorch`` never goes to Docker Hub by accident.

Each arch is pushed as ``<tag>-<arch>`` with the engine (Docker SDK), which reads the
user's Docker config (``$DOCKER_CONFIG`` or ``~/.docker/config.json``: ``docker login``'s
credentials and credential helpers). With several arches the name ``<tag>`` is then written
as a manifest list of exactly the pushed digests by the docker CLI, with the same
credentials:

- ``docker buildx imagetools create -t <tag> <repo>@<digest>...`` when buildx is there;
- else ``docker manifest create`` + ``docker manifest push`` (docker/cli
  ``cli/command/manifest``, no experimental mode since Docker 20.10), ``--insecure`` for a
  plain-HTTP registry.

With one arch ``<tag>`` is that image itself (a list of one would only hide its platform).
The arches pushed are those asked for (``--arch``) or every declared arch built here; a
declared arch left out is said, so that a name without aarch64 is never a surprise on a
GH200 node. Every digest is printed as ``REPOSITORY@sha256:...``, the form `--image` takes.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Sequence

from torchpod.arch import Arch
from torchpod.errors import InputError, RuntimeFailure

from .. import grammars
from . import host
from .commands import Builder
from .definitions import ImageDef

_PORT = re.compile(r":[0-9]+\Z")
FORM = "HOST[:PORT] or HOST[:PORT]/PATH/NAME[:TAG], e.g. 127.0.0.1:5000 or ghcr.io/myorg/ml/pytorch:2.13"


@dataclass(frozen=True)
class Target:
    """Where an image goes: the registry, the repository path under it, the merged tag."""

    domain: str
    path: str
    tag: str

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}"

    def ref(self, arch: Arch | None = None) -> str:
        """``REPOSITORY:<tag>``, or the per-arch ``REPOSITORY:<tag>-<arch>``."""
        return f"{self.repository}:{self.tag}" + (f"-{arch.name}" if arch is not None else "")


@dataclass(frozen=True)
class PushResult:
    images: list[tuple[str, str, str]]  # (arch, ref, digest)
    manifest_ref: str
    manifest_digest: str
    repository: str = ""
    skipped: list[str] = field(default_factory=list)  # declared arches with no local image, not pushed

    @property
    def is_list(self) -> bool:
        """Whether the merged name is a manifest list (several arches) or the one image."""
        return len(self.images) > 1


def check_registry(registry: str) -> str:
    """``HOST[:PORT]`` as given, or an InputError saying what form is expected: the domain of an
    image reference (grammars.DOMAIN, distribution/reference's grammar), whole."""
    if not isinstance(registry, str) or not grammars.DOMAIN.fullmatch(registry):
        raise InputError(f"--registry={registry!r}; expected HOST:PORT such as 127.0.0.1:5000 (no scheme, no path)")
    return registry


def _shown(value: str) -> str:
    return repr(value if len(value) <= 100 else value[:100] + "...")


def target(value: str, defn: ImageDef) -> Target:
    """``--registry`` as a Target, or one line naming the value and the form expected."""
    if not isinstance(value, str) or not value:
        raise InputError(f"--registry is required; expected {FORM}")
    if "/" not in value:
        return Target(check_registry(value), defn.repository, defn.version_tag)
    match = grammars.REFERENCE.fullmatch(value) if len(value) <= grammars.REFERENCE_MAX else None
    if match is None or match["digest"] or len(match["name"]) > grammars.NAME_MAX:
        raise InputError(f"--registry={_shown(value)} is not a repository; expected {FORM} (lowercase path, no digest)")
    domain, _, path = match["name"].partition("/")
    if not (set(domain) & {".", ":"} or domain == "localhost"):
        raise InputError(f"--registry={_shown(value)} names no registry ({domain!r} is a path, so docker would send it "
                         f"to Docker Hub); expected {FORM}, or docker.io/{match['name']} for Docker Hub")
    tag = match["tag"] or defn.version_tag
    longest = max(len(a.name) for a in defn.arches) + 1
    if len(tag) + longest > grammars.TAG_MAX:
        raise InputError(f"--registry={_shown(value)}: the tag {_shown(tag)} leaves no room for the per-arch suffix "
                         f"(-<arch>); expected at most {grammars.TAG_MAX - longest} characters")
    return Target(domain, path, tag)


def plain_http(registry: str, insecure: bool) -> bool:
    """Whether to talk HTTP: asked for, or a loopback registry (the engine's own default)."""
    host = _PORT.sub("", check_registry(registry))
    return insecure or host in ("localhost", "[::1]") or host.startswith("127.")


def choose_arches(defn: ImageDef, present: Sequence[Arch], arch: str = "") -> tuple[list[Arch], list[str]]:
    """The arches to push (``arch``, or every declared arch built here) and the declared ones
    left out; an arch asked for, or any at all, with no local image is refused in one line."""
    if arch:
        chosen = defn.arch(arch)
        if chosen not in present:
            raise RuntimeFailure(f"no local image {defn.ref(chosen)}; run `invoke build --image {defn.name} "
                                 f"--arch {chosen.name}` first")
        return [chosen], []
    built = [a for a in defn.arches if a in present]
    if not built:
        raise RuntimeFailure(
            f"no local image of {defn.name} ({', '.join(defn.ref(a) for a in defn.arches)}); run "
            f"`invoke build --image {defn.name} --arch {defn.arches[0].name}` first")
    return built, [a.name for a in defn.arches if a not in present]


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
    from docker.errors import APIError

    digest = None
    domain = remote.split("/", 1)[0]
    try:
        for event in client.images.push(remote, tag, stream=True, decode=True):
            if "error" in event:
                error = " ".join(str(event["error"]).split())[:300]
                login = (f"; log in first: `docker login {domain}` (the engine uses that Docker config's credentials)"
                         if re.search(r"unauthori[sz]ed|authentication required|denied", error, re.I) else "")
                raise RuntimeFailure(f"push of {remote}:{tag} failed: {error}{login}")
            aux = event.get("aux") or {}
            if aux.get("Digest"):
                digest = aux["Digest"]
    except APIError as exc:
        raise RuntimeFailure(f"push of {remote}:{tag} failed: {' '.join(str(exc.explanation or exc).split())[:300]}"
                             ) from None
    if digest is None:
        raise RuntimeFailure(f"push of {remote}:{tag} reported no digest; check the registry's log")
    return digest


def _push_as(client, source: str, remote: str, tag: str) -> str:
    """Tag the local image ``source`` as ``remote:tag``, push it, drop that tag again."""
    client.images.get(source).tag(remote, tag)
    print(f"==> pushing {remote}:{tag}", flush=True)
    try:
        return _push_one(client, remote, tag)
    finally:
        client.images.remove(f"{remote}:{tag}", noprune=True)  # the tag only


def push(defn: ImageDef, registry: str, *, arch: str = "", insecure: bool = False) -> PushResult:
    """Push ``defn``'s arches (``arch``, or every one built here) to ``registry`` (see target)."""
    where = target(registry, defn)
    plain = plain_http(where.domain, insecure)
    client = host.docker_client()
    present = [a for a in defn.arches if host.image_exists(client, defn.ref(a))]
    chosen, skipped = choose_arches(defn, present, arch)
    pushed = []
    for one in chosen:
        image = client.images.get(defn.ref(one))
        recorded = f"{image.attrs.get('Os')}/{image.attrs.get('Architecture')}"
        if recorded != one.docker:
            raise RuntimeFailure(
                f"{defn.ref(one)} is recorded as {recorded}, not {one.docker}; rebuild it with "
                f"`invoke build --image {defn.name} --arch {one.name}`"
            )
        digest = _push_as(client, defn.ref(one), where.repository, f"{where.tag}-{one.name}")
        pushed.append((one.name, where.ref(one), digest))
    if len(pushed) == 1:  # the one image under the plain tag too: same manifest, same digest
        digest = _push_as(client, defn.ref(chosen[0]), where.repository, where.tag)
        return PushResult(pushed, where.ref(), digest, where.repository, skipped)
    builder = host.find_builder()
    # by digest: the list names exactly what was pushed above, even if a tag moved since
    sources = [f"{where.repository}@{digest}" for _, _, digest in pushed]
    out = ""
    for argv in merge_commands(builder, where.ref(), sources, insecure=plain):
        out = _cli(argv, f"merging {where.ref()}")
    reader = digest_command(builder, where.ref(), insecure=plain)
    if reader is not None:
        out = _cli(reader, f"reading back {where.ref()}")
    found = [m.group(0) for m in grammars.DIGEST.finditer(out)]
    if not found:
        raise RuntimeFailure(f"merging {where.ref()} printed no digest: {out.strip()[:200]!r}")
    return PushResult(pushed, where.ref(), found[0], where.repository, skipped)
