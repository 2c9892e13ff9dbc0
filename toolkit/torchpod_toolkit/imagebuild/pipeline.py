"""One image build as a one-way pipeline of named stages, and the tables ``invoke build`` prints.

    Request --read_sources--> Sources --connect--> Connected --prepare--> Prepared
      --build_payload--> PayloadBuilt --build_layers--> LayersBuilt --probe_staging--> Probed
      --label--> Labelled --finish--> BuildResult

Each stage is a function of the previous stage's result, a frozen dataclass that keeps the
result before it as its first field and exposes what the stages after it read: a stage looks
no further than the result it takes and the ones that result names, and every accessor reaches
one result back. The definition enters once, in the :class:`Request`; every result after
:func:`connect` gives the request, the Docker engine and the BuildKit builder (:class:`Later`).
A stage times itself on the build's :class:`torchpod_toolkit.timing.Clock` under the
phase names of :data:`torchpod_toolkit.timing.PHASES`. Nothing is left half-tagged: the image
is built under a staging tag and gets its final tag only in :func:`label`, once its versions
were read back and matched its definition; the staging tag is removed whatever happens.
"""

from __future__ import annotations

import subprocess
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from torchpod.contract import Arch
from torchpod.errors import RuntimeFailure

from ..timing import PHASES, Clock
from . import base, commands, host, inputs, locks, payload, probe, sources
from .commands import Builder
from .definitions import ImageDef
from .proc import run


@dataclass(frozen=True)
class BuildResult:
    defn: ImageDef
    arch: Arch
    tag: str
    size: int
    versions: Mapping[str, str]
    seconds: float
    # where the time went, in the order the phases ran (PHASES); wheels and base overlap
    phases: Mapping[str, float] = field(default_factory=dict)
    payload: str = ""  # the payload image it stands on (PAYLOAD_REPOSITORY:<arch>-<key>)


def build(defn: ImageDef, arch: Arch, *, root: Path, offline: bool = False,
          ca_bundle: Path | None = None, rebuild: str | None = None, quiet: bool = False,
          tag: str | None = None, no_cache: bool = False) -> BuildResult:
    """Build, probe, check and label one image; the final tag appears only if all pass.
    ``tag`` replaces the definition's tag (the two-builds-agree test builds beside it).

    Two BuildKit builds: the payload image (the base and the locked wheels, tagged under
    :data:`.payload.PAYLOAD_REPOSITORY` by :func:`.payload.payload_key`, and reused while that
    key holds, even after BuildKit's cache is pruned), then the image's own layers on it.
    ``no_cache`` builds both from nothing, the payload under a tag of its own that is removed
    afterwards."""
    clock = Clock()
    request = Request(defn, arch, root, offline=offline, ca_bundle=ca_bundle, rebuild=rebuild, quiet=quiet,
                      tag=tag, no_cache=no_cache)
    built = build_payload(prepare(connect(read_sources(request)), clock), clock)
    try:
        labelled = label(probe_staging(build_layers(built, clock), clock), clock)
    finally:
        _remove_scratch(built)
    return finish(labelled, clock)


@dataclass(frozen=True)
class Request:
    """What to build and how: the definition, the arch and the build's options. The one place
    the definition enters a build."""

    defn: ImageDef
    arch: Arch
    root: Path  # the checkout: images/, docker/ and the build context
    offline: bool = False
    ca_bundle: Path | None = None
    rebuild: str | None = None  # a new token rebuilds every layer (commands.REBUILD_ARG)
    quiet: bool = False
    tag: str | None = None  # replaces the definition's tag
    no_cache: bool = False

    @property
    def final(self) -> str:
        """The tag the image gets once it passed."""
        return self.tag or self.defn.ref(self.arch)


@dataclass(frozen=True)
class Sources:
    """Read and checked before Docker runs: the net plugin's verified source staged in the build
    context (its context path; None without a plugin), and both locks."""

    request: Request
    netplugin_tarball: str | None
    wheels: locks.Lock
    debs: locks.Lock | None


def read_sources(request: Request) -> Sources:
    """The definition's sources and locks, each checked: a bad one stops the build before the
    Docker engine is asked anything."""
    defn, arch, images = request.defn, request.arch, request.root / "images"
    tarball = None
    if defn.aws_ofi_nccl is not None:
        tarball = sources.stage_netplugin_source(defn, request.root, request.ca_bundle)
    wheels = locks.load(images, defn, arch, debian=False)
    debs = locks.load(images, defn, arch, debian=True) if defn.base.debian else None
    return Sources(request, tarball, wheels, debs)


@dataclass(frozen=True)
class Connected:
    """The Docker engine and the BuildKit client the build runs on."""

    sources: Sources
    client: Any  # a docker SDK client
    builder: Builder

    @property
    def request(self) -> Request:
        return self.sources.request

    @property
    def netplugin_tarball(self) -> str | None:
        return self.sources.netplugin_tarball


class Later:
    """A result after :func:`connect`: the request, the engine and the BuildKit builder every
    stage reads, each taken from the result it keeps (:attr:`before`)."""

    @property
    def before(self) -> Connected | Later:
        """The result this one keeps: its first field."""
        raise NotImplementedError

    @property
    def request(self) -> Request:
        return self.before.request

    @property
    def client(self) -> Any:  # a docker SDK client
        return self.before.client

    @property
    def builder(self) -> Builder:
        return self.before.builder


def connect(found: Sources) -> Connected:
    """The engine and a BuildKit-capable client, and QEMU registered for a foreign arch."""
    client = host.docker_client()
    builder = host.find_builder()
    host.check_emulation(found.request.arch, host.host_arch())
    return Connected(found, client, builder)


@dataclass(frozen=True)
class Prepared(Later):
    """The wheelhouse's files and the SBOM staged in the build context, and the Debian bases:
    the target's (``base``) and the build host's (``build_base``, where the payload's
    wheels are unpacked), with their image IDs."""

    connected: Connected
    inputs: inputs.Inputs
    base: str
    build_base: str
    base_ids: tuple[str, str]
    wheels_staged: bool  # the lock's wheels too, fetched beside a base being bootstrapped

    @property
    def before(self) -> Connected:
        return self.connected

    @property
    def netplugin_tarball(self) -> str | None:
        return self.connected.netplugin_tarball


def prepare(connected: Connected, clock: Clock) -> Prepared:
    """The wheelhouse filled and staged with the SBOM (phases wheels and sbom) while the
    target's and the build host's Debian bases are bootstrapped or found (phase base): both
    wait on mirrors, so they run side by side."""
    request, client, builder, found = connected.request, connected.client, connected.builder, connected.sources
    defn, arch, root = request.defn, request.arch, request.root
    cache = root / ".cache"
    # A base bootstrapped now has an image ID no payload was built on, so the payload will be
    # built (a fresh machine's first build): its wheels are fetched beside the bootstrap
    # rather than after it. Otherwise only a payload that is built fetches them.
    early = base.needs_bootstrap(client, defn, arch, found.debs)
    print(f"==> wheels and Debian bases of {defn.name} for {arch.name}, side by side", flush=True)

    def bases() -> tuple[str, str]:
        with clock("base"):
            return (base.ensure_base(client, builder, defn, arch, cache, found.debs, quiet=True),
                    base.ensure_base(client, builder, defn, host.host_arch(), cache, base.host_debs(root, defn),
                                     quiet=True))

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(bases)
        staged = inputs.prepare(defn, arch, found.wheels, found.debs, root=root,
                                offline=request.offline, ca_bundle=request.ca_bundle, clock=clock)
        if early:
            inputs.wheels(defn, arch, found.wheels, root=root, offline=request.offline,
                          ca_bundle=request.ca_bundle, clock=clock)
        target, build_base = pending.result()
    ids = (client.images.get(target).id, client.images.get(build_base).id)
    return Prepared(connected, staged, target, build_base, ids, wheels_staged=early)


@dataclass(frozen=True)
class PayloadBuilt(Later):
    """The payload image the image's layers stand on, and what the image's own build takes
    beside it: the commit's time, the staging tag it is built under, and the image ID the
    final tag named before (removed afterwards if nothing else names it)."""

    prepared: Prepared
    tag: str
    exported: float  # BuildKit's export seconds (0 when the payload was reused)
    epoch: int  # SOURCE_DATE_EPOCH
    staging: str
    previous: str | None

    @property
    def before(self) -> Prepared:
        return self.prepared

    @property
    def inputs(self) -> inputs.Inputs:
        return self.prepared.inputs

    @property
    def base_id(self) -> str:
        """The target's Debian base's image ID."""
        return self.prepared.base_ids[0]


def build_payload(prepared: Prepared, clock: Clock) -> PayloadBuilt:
    """The payload image, built unless one with its key exists (phase payload); only then are
    the lock's wheels fetched and staged (phase wheels), unless :func:`prepare` did so beside
    a base's bootstrap."""
    request, client = prepared.request, prepared.client
    final = request.final
    previous = client.images.get(final).id if host.image_exists(client, final) else None
    staging = f"torchpod-staging/{request.defn.name}:{request.arch.name}-{uuid.uuid4().hex[:8]}"
    epoch = base.source_date_epoch(request.root)
    argv = _command(prepared, epoch, tag="payload")
    tag, reused = payload.payload_ref(client, argv, request.root, prepared.base_ids, request.arch,
                                      no_cache=request.no_cache)
    exported = 0.0
    if reused:
        print(f"==> payload image {tag}: unchanged, reused", flush=True)
    else:
        if not prepared.wheels_staged:
            inputs.wheels(request.defn, request.arch, prepared.inputs.wheels, root=request.root,
                          offline=request.offline, ca_bundle=request.ca_bundle, clock=clock)
        with clock("payload"):
            exported = payload.build_payload_image(prepared.builder, argv, tag, quiet=request.quiet)
    return PayloadBuilt(prepared, tag, exported, epoch, staging, previous)


def _command(prepared: Prepared, epoch: int, **kw) -> list[str]:
    """The BuildKit build of docker/Dockerfile on the prepared bases (the payload's, or with
    ``payload_image`` the image's own)."""
    request = prepared.request
    return commands.build_command(prepared.builder, request.defn, request.arch, context=request.root,
                                  base_image=prepared.base, build_base_image=prepared.build_base,
                                  rebuild=request.rebuild, source_date_epoch=epoch, no_cache=request.no_cache, **kw)


@dataclass(frozen=True)
class LayersBuilt(Later):
    """The image's own layers built on the payload, under the staging tag."""

    payload: PayloadBuilt
    exported: float  # BuildKit's export seconds

    @property
    def before(self) -> PayloadBuilt:
        return self.payload


def build_layers(built: PayloadBuilt, clock: Clock) -> LayersBuilt:
    """The image's own layers on the payload (phase layers): the launcher, the examples and,
    for a net plugin variant, the plugin built from its staged source with its apt layer."""
    prepared, request = built.prepared, built.request
    print(f"==> building {request.final} for {request.arch.docker} on {built.tag}", flush=True)
    debs = built.inputs.debs
    argv = _command(prepared, built.epoch, tag=built.staging, payload_image=built.tag,
                    netplugin_tarball=prepared.netplugin_tarball,
                    netplugin_debs=[d.pin for d in debs.entries if d.layer == "apt"] if debs else ())
    with clock("layers"):
        exported = host.run_build(argv, env=built.builder.env, quiet=request.quiet,
                                  what=f"docker build of {request.final}")
    return LayersBuilt(built, exported)


@dataclass(frozen=True)
class Probed(Later):
    """What the staged image holds, read back from it."""

    layers: LayersBuilt
    versions: Mapping[str, str]

    @property
    def before(self) -> LayersBuilt:
        return self.layers

    @property
    def payload(self) -> PayloadBuilt:
        return self.layers.payload


def probe_staging(layers: LayersBuilt, clock: Clock) -> Probed:
    """The probe's result for the staged image (phase probe): remembered per lock, base and
    probe source, run otherwise; and a net plugin's identity, read from its file."""
    built, request, client = layers.payload, layers.request, layers.client
    with clock("probe"):
        key = probe.probe_key(built.inputs, built.base_id, request.arch)
        versions = probe.cached_probe(client, built.staging, request.arch, host.user_cache(), key)
        if request.defn.aws_ofi_nccl is not None:
            versions = {**versions, **probe.netplugin_facts(client, built.staging, versions.get("nccl", ""))}
    return Probed(layers, versions)


@dataclass(frozen=True)
class Labelled(Later):
    """The image under its final tag, with the labels it was given."""

    probed: Probed
    labels: Mapping[str, str]

    @property
    def before(self) -> Probed:
        return self.probed

    @property
    def layers(self) -> LayersBuilt:
        return self.probed.layers

    @property
    def payload(self) -> PayloadBuilt:
        return self.probed.payload


def label(probed: Probed, clock: Clock) -> Labelled:
    """The staged image checked against its definition, then tagged final with its labels
    (phase labels): the versions read back, the locks' and the SBOM's digests."""
    built, request, builder = probed.payload, probed.request, probed.builder
    with clock("labels"):
        wrong = commands.mismatches(request.defn, request.arch, probed.versions)
        if wrong:
            raise RuntimeFailure(f"{request.final} differs from {request.defn.path.name}: " + "; ".join(wrong))
        created = datetime.fromtimestamp(built.epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        values = commands.labels(request.defn, request.arch,
                                 {**probed.versions, **built.inputs.labels(request.defn)},
                                 created=created, revision=git_revision(request.root))
        with tempfile.TemporaryDirectory(prefix="torchpod-label-") as tmp:
            dockerfile = Path(tmp) / "Dockerfile"
            dockerfile.write_text(commands.label_dockerfile(built.staging, values))
            run(commands.label_command(builder, request.arch, dockerfile, request.final), env=builder.env,
                quiet=True, what=f"labelling {request.final}")
    return Labelled(probed, values)


def finish(labelled: Labelled, clock: Clock) -> BuildResult:
    """The build's result: the image's size, its versions and where the time went. The image
    the final tag named before is removed when no tag names it any more (a rebuild would
    otherwise leave 5 GB of <none> behind)."""
    built, layers, request, client = labelled.payload, labelled.layers, labelled.request, labelled.client
    image = client.images.get(request.final)
    if built.previous and built.previous != image.id:
        _drop_if_untagged(client, built.previous)
    return BuildResult(request.defn, request.arch, request.final, image.attrs["Size"], labelled.probed.versions,
                       clock.elapsed(), clock.phases({"payload": built.exported, "layers": layers.exported}),
                       "" if request.no_cache else built.tag)


def _remove_scratch(built: PayloadBuilt) -> None:
    """The staging tag, and a ``no_cache`` build's own payload image, removed."""
    for name in (built.staging, built.tag if built.request.no_cache else None):
        if name and host.image_exists(built.client, name):
            built.client.images.remove(name, noprune=False)


def git_revision(root: Path) -> str:
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def _drop_if_untagged(client, image_id: str) -> None:
    import docker

    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
    except docker.errors.APIError:  # still used by a container, or already gone: keep going
        pass


def phase_table(results: Sequence[BuildResult]) -> str:
    """Where each build's time went, one row per image and arch (seconds per phase)."""
    rows: list[tuple[str, ...]] = [("image", "arch", *PHASES, "total")]
    for r in results:
        rows.append((r.defn.name, r.arch.name, *(f"{r.phases.get(p, 0.0):.1f}" for p in PHASES), f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary_table(results: Sequence[BuildResult]) -> str:
    rows = [("image", "arch", "tag", "size", "torch", "cuda", "nccl", "rdma-core", "build")]
    for r in results:
        rows.append((r.defn.name, r.arch.name, r.tag, f"{r.size / 1e9:.2f} GB", r.versions.get("torch", ""),
                     r.versions.get("cuda", ""), r.versions.get("nccl", ""), r.versions.get("rdma-core", ""),
                     f"{r.seconds:.0f} s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

