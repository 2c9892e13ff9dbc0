"""Image definitions: ``images/*.yaml`` loaded once into frozen dataclasses.

Every list of images, architectures and tags elsewhere (tasks, tests, CI) derives from
what this module returns. Validation happens here, at load: unknown keys, wrong types,
unknown architectures and dangling ``extends`` references are errors that name the file
and the key. Every value is then checked against its grammar (a PEP 440 version, an exact
``NAME==VERSION`` pin, Docker's tag grammar, a URL, a Debian package name, ...) and
re-serialised from what was parsed, so no free text reaches pip, a build arg, a tag or a
path: a value that does not fit is one :class:`InputError` line naming the file, the key,
the value (repr) and the form expected. Reading is bounded too (a size cap, UTF-8 only,
no YAML anchors or aliases, a nesting and an ``extends`` depth). Nothing here touches Docker.

The checks of single values are :mod:`.definition_values`; the bounded reading of one file
and its keys against the schema, :mod:`.definition_yaml`; this module joins the files
(``extends``) and builds the definitions from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from torchpod.arch import Arch, normalise_arch
from torchpod.errors import InputError

from .. import grammars
from .definition_values import (
    CUDA,
    DEBIAN_RELEASE,
    NCCL,
    PROVIDER,
    PYTHON,
    bad,
    check_each,
    check_image_ref,
    check_pin,
    check_plugin_version,
    check_sha256,
    check_tarball,
    check_torchvision,
    check_url,
    check_version,
    checked,
)
from .definition_yaml import read_yaml

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The image `invoke build` builds and the demo and cluster tests run, unless told otherwise.
DEFAULT_IMAGE = "pytorch"
AWS_OFI_NCCL_URL = (
    "https://github.com/aws/aws-ofi-nccl/releases/download/"
    "v{version}/aws-ofi-nccl-{version}.tar.gz"
)
LIBFABRIC_FLAVOURS = ("efa", "cxi")

# How many `extends` steps a definition may stand from its root: one or two in practice; the
# bound keeps a hostile chain cheap.
MAX_EXTENDS = 8


@dataclass(frozen=True)
class Base:
    """Either a Debian release bootstrapped from a mirror, or a registry image."""

    debian: str | None
    mirror: str
    image: str | None

    @property
    def label(self) -> str:
        return self.image if self.image else f"debian:{self.debian} (bootstrapped)"


@dataclass(frozen=True)
class TorchSpec:
    version: str
    torchvision: str
    index_url: str
    extra_index_url: str | None
    extra_packages: tuple[str, ...]
    sdist_packages: tuple[str, ...] = ()  # pure-Python, source-only on PyPI: built into wheels first

    @property
    def wheels(self) -> tuple[str, ...]:
        """Requirements installed as wheels for the target (the sdists are built first)."""
        return (f"torch=={self.version}", f"torchvision=={self.torchvision}", *self.extra_packages)

    @property
    def requirements(self) -> tuple[str, ...]:
        return (*self.wheels, *self.sdist_packages)


@dataclass(frozen=True)
class Expect:
    """Versions the build must read back from the built image."""

    cuda: str
    nccl: str


@dataclass(frozen=True)
class RdmaCore:
    packages: tuple[str, ...]
    providers: tuple[str, ...]


@dataclass(frozen=True)
class AwsOfiNccl:
    version: str
    sha256: str | None
    url: str | None
    tarball: Path | None  # a local source tarball, for air-gapped sites
    libfabric: str  # "efa" (AWS) or "cxi" (HPE Slingshot)


@dataclass(frozen=True)
class ImageDef:
    name: str
    path: Path
    description: str
    arches: tuple[Arch, ...]
    ci: bool
    base: Base
    python: str
    torch: TorchSpec
    expect: Expect
    rdma_core: RdmaCore
    aws_ofi_nccl: AwsOfiNccl | None

    @property
    def repository(self) -> str:
        return f"torchpod/{self.name}"

    @property
    def version_tag(self) -> str:
        """The multi-arch tag; per-arch images carry it with an ``-<arch>`` suffix."""
        return f"{self.torch.version}-cuda{self.expect.cuda}"

    def tag(self, arch: Arch) -> str:
        return f"{self.version_tag}-{arch.name}"

    def ref(self, arch: Arch, registry: str | None = None) -> str:
        repo = f"{registry}/{self.repository}" if registry else self.repository
        return f"{repo}:{self.tag(arch)}"

    def manifest_ref(self, registry: str) -> str:
        return f"{registry}/{self.repository}:{self.version_tag}"

    def arch(self, value: str) -> Arch:
        """The definition's architecture for a user's spelling, or an error naming both."""
        arch = normalise_arch(value)
        if arch not in self.arches:
            declared = ", ".join(a.name for a in self.arches)
            raise InputError(
                f"--arch={value!r}: image {self.name!r} ({self.path.name}) declares "
                f"arches [{declared}]; add it to 'arches' or pick one of those"
            )
        return arch


# --- reading -------------------------------------------------------------------------

_SCHEMA: dict[str, Any] = {
    "extends": str,
    "description": str,
    "arches": list,
    "ci": bool,
    "base": {"debian": str, "mirror": str, "image": str},
    "python": str,
    "torch": {"version": str, "torchvision": str, "index_url": str, "extra_index_url": str,
              "extra_packages": list, "sdist_packages": list},
    "expect": {"cuda": str, "nccl": str},
    "rdma_core": {"packages": list, "providers": list},
    "aws_ofi_nccl": {"version": str, "sha256": str, "url": str, "tarball": str, "libfabric": str},
}
_REQUIRED = ("arches", "base", "python", "torch", "expect", "rdma_core")


def load_definitions(images_dir: Path) -> dict[str, ImageDef]:
    """Load and validate every ``*.yaml`` under ``images_dir``, keyed by file stem."""
    files = sorted(images_dir.glob("*.yaml"))
    if not files:
        raise InputError(f"{images_dir}: no image definitions (*.yaml) found")
    for f in files:  # before reading: the stem is the repository name and appears in every message
        if len(f.stem) > 64 or not grammars.PATH_COMPONENT.fullmatch(f.stem):
            raise InputError(f"{images_dir}: file name {f.name!r}; expected a stem of lower-case letters and "
                             "digits joined by '.', '_' or '-' (a Docker repository name), at most 64 characters")
    paths = {f.stem: f for f in files}
    raw = {name: read_yaml(path, _SCHEMA) for name, path in paths.items()}
    return {name: _build(name, paths[name], _resolve(name, raw, paths, ())) for name in raw}


def select(defs: Mapping[str, ImageDef], name: str) -> ImageDef:
    if name not in defs:
        raise InputError(
            f"--image={name!r} is not defined; expected one of {', '.join(sorted(defs))} "
            "(files in images/)"
        )
    return defs[name]


def _resolve(name: str, raw: Mapping[str, dict], files: Mapping[str, Path], seen: tuple[str, ...]) -> dict:
    data = raw[name]
    parent = data.get("extends")
    if parent is None:
        return data
    if not grammars.PATH_COMPONENT.fullmatch(parent):
        raise bad(files[name], "extends", parent, "the stem of another file in images/, such as 'pytorch'")
    if parent not in raw:
        raise InputError(
            f"{files[name]}: 'extends: {parent}' names no definition; expected one of "
            f"{', '.join(sorted(n for n in raw if n != name))}"
        )
    if parent in seen or parent == name:
        raise InputError(f"{files[name]}: 'extends' forms a cycle: {' -> '.join((*seen, name, parent))}")
    if len(seen) + 1 > MAX_EXTENDS:  # name -> parent is step len(seen) + 1 from the file being loaded
        chain = " -> ".join((*seen, name, parent))
        raise InputError(f"{files[(*seen, name)[0]]}: 'extends' chain {chain} is longer than {MAX_EXTENDS}; "
                         f"expected a definition at most {MAX_EXTENDS} steps from its root")
    merged = _merge(_resolve(parent, raw, files, (*seen, name)), data)
    merged.pop("extends", None)
    return merged


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _need(path: Path, data: Mapping[str, Any], key: str, dotted: str) -> Any:
    if key not in data or data[key] in (None, ""):
        raise InputError(f"{path}: missing required key {dotted!r}")
    return data[key]


def _build(name: str, path: Path, data: Mapping[str, Any]) -> ImageDef:
    for key in _REQUIRED:
        _need(path, data, key, key)
    arches = _arches(path, data["arches"])
    python = checked(path, "python", data["python"], PYTHON, 'MAJOR.MINOR such as "3.11"')
    description = data.get("description", "")
    if len(description) > 300 or not description.isprintable():
        raise bad(path, "description", description, "one line of printable text, at most 300 characters")
    expect = Expect(
        cuda=checked(path, "expect.cuda", _need(path, data["expect"], "cuda", "expect.cuda"), CUDA,
                     'MAJOR.MINOR such as "13.0"'),
        nccl=checked(path, "expect.nccl", _need(path, data["expect"], "nccl", "expect.nccl"), NCCL,
                     'a version such as "2.29.7"'),
    )
    r = data["rdma_core"]
    rdma = RdmaCore(
        packages=check_each(path, _need(path, r, "packages", "rdma_core.packages"), "rdma_core.packages",
                            grammars.DEBIAN_PACKAGE, "a Debian package name such as 'libibverbs1'"),
        providers=check_each(path, _need(path, r, "providers", "rdma_core.providers"), "rdma_core.providers",
                             PROVIDER, "a verbs provider name such as 'mlx5'"),
    )
    defn = ImageDef(name=name, path=path, description=description, arches=arches, ci=data.get("ci", False),
                    base=_base(path, data["base"]), python=python, torch=_torch(path, data["torch"]),
                    expect=expect, rdma_core=rdma, aws_ofi_nccl=_aws_ofi_nccl(path, data.get("aws_ofi_nccl")))
    for arch in arches:
        if not grammars.TAG.fullmatch(defn.tag(arch)):
            raise InputError(
                f"{path}: torch.version={defn.torch.version!r} with expect.cuda={defn.expect.cuda!r} makes the tag "
                f"{defn.tag(arch)!r}; expected a Docker tag ([A-Za-z0-9_][A-Za-z0-9_.-], at most 128): "
                "no local version (+...) or epoch (N!)")
    return defn


def _arches(path: Path, values: list) -> tuple[Arch, ...]:
    arches: list[Arch] = []
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise bad(path, f"arches[{i}]", value, "x86_64 (amd64) or aarch64 (arm64)")
        arch = normalise_arch(value, what=f"{path}: arches[{i}]")
        if arch in arches:
            raise InputError(f"{path}: arches[{i}]={value!r} is listed twice")
        arches.append(arch)
    if not arches:
        raise InputError(f"{path}: 'arches' is empty; expected at least one of x86_64, aarch64")
    return tuple(arches)


def _base(path: Path, b: Mapping[str, Any]) -> Base:
    if bool(b.get("debian")) == bool(b.get("image")):
        raise InputError(
            f"{path}: 'base' needs exactly one of 'debian' (a release to bootstrap, e.g. bookworm) "
            "or 'image' (a registry image, e.g. ubuntu:24.04)"
        )
    debian = b.get("debian") or None
    if debian is not None:
        checked(path, "base.debian", debian, DEBIAN_RELEASE, "a Debian release name such as 'bookworm'")
    image = b.get("image") or None
    if image is not None:
        check_image_ref(path, "base.image", image)
    # mmdebstrap reads its mirror as a positional word after options: a URL, never "--..."
    mirror = check_url(path, "base.mirror", b.get("mirror", DEFAULT_MIRROR), ("http", "https", "file"))
    return Base(debian=debian, mirror=mirror, image=image)


def _torch(path: Path, t: Mapping[str, Any]) -> TorchSpec:
    version = check_version(path, "torch.version", _need(path, t, "version", "torch.version"))
    torchvision = check_version(path, "torch.torchvision", _need(path, t, "torchvision", "torch.torchvision"),
                                "0.28.0")
    extra_index = t.get("extra_index_url") or None
    pins: dict[str, str] = {"torch": "torch.version", "torchvision": "torch.torchvision"}
    lists: dict[str, list[str]] = {"extra_packages": [], "sdist_packages": []}
    for key, out in lists.items():
        for i, value in enumerate(t.get(key, [])):
            dotted = f"torch.{key}[{i}]"
            canonical, requirement = check_pin(path, dotted, value)
            if canonical in pins:
                raise InputError(f"{path}: {dotted}={value!r} pins {canonical!r}, which {pins[canonical]} "
                                 "already pins; expected each package once")
            pins[canonical] = dotted
            out.append(requirement)
    return TorchSpec(
        version=version,
        torchvision=check_torchvision(path, version, torchvision),
        index_url=check_url(path, "torch.index_url", _need(path, t, "index_url", "torch.index_url"),
                            ("https", "http", "file")),
        extra_index_url=None if extra_index is None else check_url(path, "torch.extra_index_url", extra_index,
                                                                   ("https", "http", "file")),
        extra_packages=tuple(lists["extra_packages"]),
        sdist_packages=tuple(lists["sdist_packages"]),
    )


def _aws_ofi_nccl(path: Path, a: Mapping[str, Any] | None) -> AwsOfiNccl | None:
    if a is None:
        return None
    version = check_plugin_version(path, "aws_ofi_nccl.version", _need(path, a, "version", "aws_ofi_nccl.version"))
    flavour = a.get("libfabric", "efa")
    if flavour not in LIBFABRIC_FLAVOURS:
        raise InputError(
            f"{path}: aws_ofi_nccl.libfabric={flavour!r}; expected one of "
            f"{', '.join(LIBFABRIC_FLAVOURS)} (efa for AWS EFA, cxi for HPE Slingshot)"
        )
    # An upstream source without a sha256 loads, and is refused at build with how to pin it
    # (sources.py); a local tarball has no upstream to pin from, so it must carry one here.
    sha256 = None if a.get("sha256") in (None, "") else check_sha256(path, "aws_ofi_nccl.sha256", a["sha256"])
    if "tarball" not in a:
        url = check_url(path, "aws_ofi_nccl.url", a.get("url", AWS_OFI_NCCL_URL.format(version=version)),
                        ("https", "http"))
        return AwsOfiNccl(version=version, sha256=sha256, url=url, tarball=None, libfabric=flavour)
    if "url" in a:
        raise InputError(f"{path}: aws_ofi_nccl has both 'tarball' and 'url'; expected one: 'url' to download "
                         "(pinned by sha256) or 'tarball' for a local copy")
    tarball = check_tarball(path, a["tarball"])
    if sha256 is None:
        raise InputError(f"{path}: aws_ofi_nccl.tarball={a['tarball']!r} has no aws_ofi_nccl.sha256; expected "
                         "the tarball pinned: run `sha256sum` on it and set aws_ofi_nccl.sha256")
    return AwsOfiNccl(version=version, sha256=sha256, url=None, tarball=tarball, libfabric=flavour)


def with_netplugin_source(defn: ImageDef, tarball: Path, version: str, sha256: str | None = None) -> ImageDef:
    """``defn`` with its net plugin source replaced by a local tarball (`invoke build
    --netplugin-tarball`): CI builds the variants from the tests' own plugin this way, so no
    definition is edited."""
    from dataclasses import replace

    if defn.aws_ofi_nccl is None:
        raise InputError(f"--netplugin-tarball: {defn.path.name} has no 'aws_ofi_nccl' section; expected a "
                         "variant that carries a net plugin")
    check_plugin_version(None, "--netplugin-version", version)
    if sha256 is not None:
        check_sha256(None, "--netplugin-sha256", sha256)
    return replace(defn, aws_ofi_nccl=replace(defn.aws_ofi_nccl, tarball=tarball.resolve(), url=None,
                                              sha256=sha256, version=version))


def host_torch_pin(images_dir: Path) -> str:
    """The torch requirement of the default image, for the build host's own venv: the
    launcher's contract tests judge argv with the torch that users' images carry."""
    return f"torch=={load_definitions(images_dir)[DEFAULT_IMAGE].torch.version}"


if __name__ == "__main__":  # `python -m torchpod_toolkit.imagebuild.definitions --host-torch` (setup.sh)
    import sys

    if sys.argv[1:] != ["--host-torch"]:
        raise SystemExit("usage: python -m torchpod_toolkit.imagebuild.definitions --host-torch")
    print(host_torch_pin(Path(__file__).resolve().parents[3] / "images"))
