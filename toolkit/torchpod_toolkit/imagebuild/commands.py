"""Pure builders for the commands ``invoke build`` and ``invoke lock`` run.

Each function takes a definition and plain values and returns an argv (and, where
needed, extra environment), or a text the build writes (the labels' Dockerfile). The
modules that run them: :mod:`.pipeline` (the image's build, its labels and their check
against the definition), :mod:`.base` (the Debian base's bootstrap and import),
:mod:`.resolver` (``invoke lock``'s resolution), and :mod:`.locks` and :mod:`.wheelhouse`
(the pip and apt words a lock is read and filled with). :class:`Builder`, the BuildKit
client a command runs on, is found by :mod:`.host` and taken by :mod:`.payload` and
:mod:`.registry` too. Tests assert what these return; integration tests run them for real.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from torchpod.contract import EXAMPLES_DIR, LABEL_KEYS, LOCK_LABEL_KEYS, Arch, label
from torchpod.errors import InputError, RuntimeFailure

from .. import grammars
from .definitions import ImageDef

# glibc of each Debian release: manylinux wheels up to this version run on it.
DEBIAN_GLIBC = {"bullseye": (2, 31), "bookworm": (2, 36), "trixie": (2, 41)}
# Runtime packages every image needs besides the definition's rdma-core list.
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "libstdc++6")
# The Dockerfile's ARG that every stage declares: a new value rebuilds every layer (bench/images.py
# times full rebuilds with it). A build argument, never read from the environment.
REBUILD_ARG = "TORCHPOD_REBUILD"


@dataclass(frozen=True)
class Builder:
    """A docker CLI able to run BuildKit builds, and how to drive it."""

    docker: str  # path of the docker client
    buildx: bool  # `docker buildx build --load` rather than `DOCKER_BUILDKIT=1 docker build`

    def build_argv(self) -> list[str]:
        return [self.docker, "buildx", "build", "--load"] if self.buildx else [self.docker, "build"]

    @property
    def env(self) -> dict[str, str]:
        return {} if self.buildx else {"DOCKER_BUILDKIT": "1"}


def glibc(defn: ImageDef) -> tuple[int, int]:
    release = defn.base.debian
    if release in DEBIAN_GLIBC:
        return DEBIAN_GLIBC[release]
    if release:
        raise InputError(
            f"{defn.path}: base.debian={release!r}; expected one of {', '.join(DEBIAN_GLIBC)}"
        )
    # A registry base of unknown libc: manylinux_2_28 is what torch's own wheels need.
    return (2, 28)


def pip_platforms(defn: ImageDef, arch: Arch) -> list[str]:
    """Every manylinux tag whose wheels run on the base's glibc, newest first."""
    major, minor = glibc(defn)
    tags = [f"manylinux_{major}_{m}_{arch.name}" for m in range(minor, 16, -1)]
    return tags + [f"manylinux2014_{arch.name}"]


def requirements(defn: ImageDef) -> list[str]:
    # pip rides along so that `python -m pip install ...` works in the image's venv.
    return [*defn.torch.requirements, "pip"]


def pip_target(defn: ImageDef, arch: Arch) -> list[str]:
    """pip options that pick the target's wheels from any host: binary only, the image's
    Python, every manylinux tag its base's glibc runs."""
    argv = ["--only-binary=:all:", "--python-version", defn.python, "--implementation", "cp"]
    for tag in pip_platforms(defn, arch):
        argv += ["--platform", tag]
    return argv


def pip_source(defn: ImageDef, wheelhouse: str | None = None) -> list[str]:
    """Where wheels come from: the definition's index (and extra index), or only a wheelhouse."""
    if wheelhouse is not None:
        return ["--no-index", "--find-links", wheelhouse]
    argv = ["--index-url", defn.torch.index_url]
    if defn.torch.extra_index_url:
        argv += ["--extra-index-url", defn.torch.extra_index_url]
    return argv


def base_packages(defn: ImageDef) -> list[str]:
    return [*BASE_PACKAGES, *defn.rdma_core.packages]


# Reproducible layers on top of the base (docker/Dockerfile): /etc/hosts exists, so a RUN's
# container does not create it as a mount point (and leave /etc with the build's time);
# /opt is absent, so the payload's COPY creates it with the payload's fixed time instead of
# stamping an existing one. Fixed text, no value from anywhere ("$1" is mmdebstrap's root).
BASE_HOOKS = ('touch "$1/etc/hosts"', 'rmdir "$1/opt"')


def base_tag(defn: ImageDef, arch: Arch, pins: Mapping[str, str] | None = None) -> str:
    """Local tag of the bootstrapped base; the hash changes when what goes in changes
    (the release, the mirror, the packages and, once locked, their versions)."""
    key = "\n".join([defn.base.debian or "", defn.base.mirror, *base_packages(defn), *BASE_HOOKS,
                     *sorted(f"{n}={v}" for n, v in (pins or {}).items())])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"torchpod-base:{defn.base.debian}-{arch.debian}-{digest}"


def rootfs_command(defn: ImageDef, arch: Arch, out_tar: Path, pins: Mapping[str, str] | None = None) -> list[str]:
    """mmdebstrap a minimal Debian with Python and rdma-core into a tarball; with ``pins``
    (the Debian lock) each package is asked for as ``name=version``, apt's syntax, so a
    mirror that no longer serves that version fails the bootstrap instead of drifting.
    mmdebstrap honours SOURCE_DATE_EPOCH (its man page, "ENVIRONMENT VARIABLES")."""
    pins = pins or {}
    include = [f"{n}={pins[n]}" if n in pins else n for n in base_packages(defn)]
    include += sorted(f"{n}={v}" for n, v in pins.items() if n not in base_packages(defn))
    for word in include:
        if not (grammars.DEBIAN_PIN.fullmatch(word) or grammars.DEBIAN_PACKAGE.fullmatch(word)):
            raise InputError(f"Debian package {word!r}; expected NAME or NAME=VERSION (fix the lock or definition)")
    return [
        "mmdebstrap",
        "--variant=minbase",
        f"--arch={arch.debian}",
        "--include=" + ",".join(include),
        "--aptopt=Acquire::Retries=3",
        *(f"--customize-hook={hook}" for hook in BASE_HOOKS),
        str(defn.base.debian),
        str(out_tar),
        defn.base.mirror,
    ]


def base_import_command(builder: Builder, arch: Arch, context: Path, tag: str) -> list[str]:
    """`FROM scratch` + `ADD rootfs.tar /`, built with --platform so the arch is recorded."""
    return [*builder.build_argv(), "--platform", arch.docker, "--progress=plain",
            "-f", str(context / "Dockerfile"), "-t", tag, str(context)]


BASE_DOCKERFILE = 'FROM scratch\nADD rootfs.tar /\nCMD ["bash"]\n'

# The Dockerfile expands list-valued build args unquoted (`pip install ${REQUIREMENTS}`), so
# the shell splits them on whitespace; the payload RUN turns globbing off (`set -f`) and the
# runtime RUN's words (Debian package names) hold no glob character. A list therefore
# arrives word for word only if no word holds whitespace, and a word never becomes an
# option unless it starts with '-'. definitions.py checks every value at load; each word is
# checked again here, whatever built the ImageDef (dataclasses.replace skips the loader).
_WORD = re.compile(r"[!-~]+")


def _words(key: str, words: Sequence[str], grammar: re.Pattern = _WORD, allow_dash: bool = False) -> str:
    for word in words:
        if not grammar.fullmatch(word) or (word.startswith("-") and not allow_dash):
            raise InputError(f"build arg {key}: word {word!r}; expected printable ASCII without spaces"
                             + ("" if allow_dash else ", not starting with '-'") + " (fix the image definition)")
    return " ".join(words)


def build_command(
    builder: Builder,
    defn: ImageDef,
    arch: Arch,
    *,
    context: Path,
    tag: str,
    base_image: str,
    build_base_image: str,
    rebuild: str | None = None,
    netplugin_tarball: str | None = None,
    netplugin_debs: Sequence[str] = (),
    source_date_epoch: int | None = None,
    no_cache: bool = False,
    payload_image: str | None = None,
) -> list[str]:
    """The BuildKit build of docker/Dockerfile for one definition and architecture.

    Two builds make an image. With ``payload_image`` None, the ``runtime-payload`` stage: the
    base and the payload's /opt, which the engine tags as an image of its own. Then, with
    ``payload_image`` naming it, the image itself on top of it. The wheels come from the
    staged lock (:mod:`.wheelhouse`), never from an index: the payload stage has no network
    to use. A definition with a net plugin builds the ``netplugin-image`` stage from
    ``netplugin_tarball`` (a path in the build context) and installs ``netplugin_debs``
    (``name=version`` from its Debian lock); every other one stops at ``runtime``.

    ``rebuild`` (any new token) rebuilds every layer through the REBUILD_ARG build arg;
    ``no_cache`` is BuildKit's ``--no-cache`` (the two-builds-agree test).
    """
    args = {
        "BASE_IMAGE": _words("BASE_IMAGE", [base_image]),
        "BUILD_BASE_IMAGE": _words("BUILD_BASE_IMAGE", [build_base_image]),
        "PYTHON_VERSION": _words("PYTHON_VERSION", [defn.python]),
        "PIP_TARGET": _words("PIP_TARGET", pip_target(defn, arch), allow_dash=True),
        "BASE_PACKAGES": _words("BASE_PACKAGES", base_packages(defn), grammars.DEBIAN_PACKAGE),
        "EXAMPLES_DIR": EXAMPLES_DIR,
        # the payload build reaches no stage FROM it; the frontend still wants a name there
        "PAYLOAD_IMAGE": _words("PAYLOAD_IMAGE", [payload_image or base_image]),
    }
    if source_date_epoch is not None:  # BuildKit >= 0.11 stamps the image config with it
        args["SOURCE_DATE_EPOCH"] = str(int(source_date_epoch))
    if rebuild:
        args[REBUILD_ARG] = _words(REBUILD_ARG, [rebuild])
    # the build machine's own arch has one base for both stages: its payload installs in place
    target = "runtime" if payload_image is not None else (
        "runtime-payload-native" if base_image == build_base_image else "runtime-payload")
    if defn.aws_ofi_nccl is not None and payload_image is not None:
        args.update(_netplugin_args(defn, netplugin_tarball, netplugin_debs))
        target = "netplugin-image"
    argv = [*builder.build_argv(), "--platform", arch.docker, "--progress=plain",
            "-f", str(context / "docker" / "Dockerfile"), "--target", target, "-t", tag]
    if no_cache:
        argv.append("--no-cache")
    for key, value in args.items():
        argv += ["--build-arg", f"{key}={value}"]
    return [*argv, str(context)]


def _netplugin_args(defn: ImageDef, tarball: str | None, debs: Sequence[str]) -> dict[str, str]:
    """The build args of a variant's plugin stage and its layer."""
    if not tarball:
        raise InputError(f"{defn.path.name} carries a net plugin; its build needs the verified source tarball")
    if not debs:
        raise InputError(f"{defn.path.name} carries a net plugin; its build needs the apt layer's packages "
                         "from its Debian lock (name=version)")
    return {
        "NETPLUGIN_TARBALL": _words("NETPLUGIN_TARBALL", [tarball]),
        "NETPLUGIN_CUDA": cuda_headers(defn),
        # EFA images ask for aws-ofi-nccl's AWS platform code (it enables itself only when
        # configure runs on EC2); Slingshot's cxi builds leave it out.
        "NETPLUGIN_CONFIGURE": NETPLUGIN_CONFIGURE[defn.aws_ofi_nccl.libfabric],  # type: ignore[union-attr]
        "NETPLUGIN_DEBS": _words("NETPLUGIN_DEBS", debs, grammars.DEBIAN_PIN),
    }


# Where the image's own torch payload keeps the CUDA runtime headers and libcudart_static.a
# for each CUDA major (the nvidia-cuda-runtime wheels torch depends on): a net plugin is
# built against the CUDA its image runs.
CUDA_HEADERS = {"13": "nvidia/cu13", "12": "nvidia/cuda_runtime"}
NETPLUGIN_CONFIGURE = {"efa": "--enable-platform-aws", "cxi": ""}


def cuda_headers(defn: ImageDef) -> str:
    major = defn.expect.cuda.split(".")[0]
    if major not in CUDA_HEADERS:
        raise InputError(f"{defn.path.name}: aws_ofi_nccl needs CUDA headers, and no nvidia wheel for CUDA "
                         f"{defn.expect.cuda} is known ({', '.join(CUDA_HEADERS)}); expected an image on CUDA "
                         + " or ".join(CUDA_HEADERS))
    return CUDA_HEADERS[major]


def labels(defn: ImageDef, arch: Arch, found: Mapping[str, str], *, created: str, revision: str) -> dict[str, str]:
    """OCI labels plus the versions read back from the built image (never from the YAML)."""
    out = {
        "org.opencontainers.image.title": defn.repository,
        "org.opencontainers.image.description": defn.description,
        "org.opencontainers.image.version": defn.version_tag,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.base.name": defn.base.label,
        label("definition"): f"images/{defn.path.name}",
        label("arch"): arch.name,
    }
    for key in (*LABEL_KEYS, *LOCK_LABEL_KEYS):
        if found.get(key):
            out[label(key)] = found[key]
    return out


def label_dockerfile(source: str, values: Mapping[str, str]) -> str:
    """A Dockerfile that only adds labels. A label value is a double-quoted Dockerfile word:
    a line break would end the instruction (and start another), and the frontend expands
    ``$name`` inside it (moby/buildkit, frontend/dockerfile/shell/lex.go), so a value must be
    one printable line and its backslash, quote and dollar are escaped."""
    _words("label source", [source])
    lines = [f"FROM {source}"]
    for key, value in sorted(values.items()):
        for text in (key, value):
            if not text.isprintable():
                raise RuntimeFailure(f"label {key!r}={value!r}: not one printable line; expected a version or "
                                     "a name (the definition or the built image's probe gave it)")
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
        lines.append(f'LABEL "{key}"="{escaped}"')
    return "\n".join(lines) + "\n"


def label_command(builder: Builder, arch: Arch, dockerfile: Path, tag: str) -> list[str]:
    return [*builder.build_argv(), "--platform", arch.docker, "--progress=plain",
            "-f", str(dockerfile), "-t", tag, str(dockerfile.parent)]


def mismatches(defn: ImageDef, arch: Arch, found: Mapping[str, str]) -> list[str]:
    """What the built image holds that differs from what its definition expects."""
    wanted = {
        "machine": arch.name,
        "python": defn.python,
        "torch": defn.torch.version,
        "torchvision": defn.torch.torchvision,
        "cuda": defn.expect.cuda,
        "nccl": defn.expect.nccl,
    }
    out = []
    for key, value in wanted.items():
        seen = found.get(key) or ""
        # torch and torchvision carry local versions (2.13.0+cu130); Python its patch level
        ok = seen == value or (key in ("torch", "torchvision", "python") and seen.startswith(value))
        if not ok:
            out.append(f"{key}: expected {value!r} ({defn.path.name}), image has {seen!r}")
    if defn.aws_ofi_nccl is not None:
        if found.get("nccl-net-plugin-version") != defn.aws_ofi_nccl.version:
            out.append(f"net plugin: expected version {defn.aws_ofi_nccl.version!r} ({defn.path.name}), the built "
                       f"library says {found.get('nccl-net-plugin-version')!r}")
        if found.get("nccl-net-plugin-machine") != arch.name:
            out.append(f"net plugin: built for {found.get('nccl-net-plugin-machine')!r}, expected {arch.name}")
        if not found.get("nccl-net-plugin-api"):
            out.append(f"net plugin: exports no ncclNetPlugin_vN that NCCL {found.get('nccl')} tries")
        if not found.get("libfabric"):
            out.append("net plugin: no libfabric.so.1 in the image")
    return out


def push_commands(docker: str, refs: Sequence[str]) -> list[list[str]]:
    return [[docker, "push", ref] for ref in refs]


def wheel_check_command(defn: ImageDef, arch: Arch, requirements: Sequence[str], python: str,
                        ca_bundle: Path | None, wheelhouse: Path | None, scratch: Path) -> list[str]:
    """`pip install --dry-run --no-deps` of wheel pins for ``arch`` from any host: pip reads
    the index (metadata only) and fails when a pin has no wheel for that arch and Python.
    Same selection as the payload stage; ``scratch`` is a --target that is never written."""
    argv = [python, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--dry-run",
            "--ignore-installed", "--no-deps", "--target", str(scratch), *pip_target(defn, arch),
            *pip_source(defn, str(wheelhouse) if wheelhouse else None)]
    if ca_bundle is not None:
        argv += ["--cert", str(ca_bundle)]
    return [*argv, *requirements]


def sdist_download_command(defn: ImageDef, dest: Path, python: str, ca_bundle: Path | None) -> list[str] | None:
    """`pip download` of the definition's source-only packages as sdists (None if there are none):
    ``invoke lock`` hashes them and builds them into wheels to resolve their dependencies."""
    if not defn.torch.sdist_packages:
        return None
    argv = [python, "-m", "pip", "download", "--isolated", "--disable-pip-version-check", "--no-deps",
            "--no-binary=:all:", "--dest", str(dest), *pip_source(defn)]
    if ca_bundle is not None:
        argv += ["--cert", str(ca_bundle)]
    return [*argv, *defn.torch.sdist_packages]


def resolve_command(defn: ImageDef, arch: Arch, python: str, ca_bundle: Path | None, *, scratch: Path,
                    report: Path, find_links: Path | None) -> list[str]:
    """`pip install --dry-run --report` of an image's requirements for ``arch`` from any host:
    pip resolves the whole set for the target (binary only, its Python and manylinux tags,
    the definition's index) and writes what it would install, with each file's URL and
    sha256, without installing (``scratch`` is a --target never written). ``find_links``
    holds the wheels built from the source-only packages."""
    argv = [python, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--quiet", "--dry-run",
            "--ignore-installed", "--target", str(scratch), "--report", str(report), *pip_target(defn, arch),
            *pip_source(defn)]
    if find_links is not None:
        argv += ["--find-links", str(find_links)]
    if ca_bundle is not None:
        argv += ["--cert", str(ca_bundle)]
    return [*argv, *requirements(defn)]
