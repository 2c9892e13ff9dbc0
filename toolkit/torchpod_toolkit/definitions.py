"""Image definitions: ``images/*.yaml`` loaded once into frozen dataclasses.

Every list of images, architectures and tags elsewhere (tasks, tests, CI) derives from
what this module returns. Validation happens here, at load: unknown keys, wrong types,
unknown architectures and dangling ``extends`` references are errors that name the file
and the key. Nothing here touches Docker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from torchpod.arch import Arch, normalise_arch
from torchpod.errors import InputError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The image `invoke build` builds and the demo and cluster tests run, unless told otherwise.
DEFAULT_IMAGE = "pytorch"
AWS_OFI_NCCL_URL = (
    "https://github.com/aws/aws-ofi-nccl/releases/download/"
    "v{version}/aws-ofi-nccl-{version}.tar.gz"
)
LIBFABRIC_FLAVOURS = ("efa", "cxi")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


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


def torchvision_series(torch_version: str) -> str | None:
    """The torchvision minor series built for a torch release: torchvision 0.(N+15) goes
    with torch 2.N (pytorch/vision README, "Installation": 0.15 for 2.0 ... 0.24 for 2.9,
    0.28 for 2.13, 0.29 for 2.14). None for a version this rule does not cover."""
    m = re.match(r"^2\.(\d+)\.", torch_version + ".")
    return f"0.{int(m.group(1)) + 15}" if m else None


def check_torchvision(path: Path, torch_version: str, torchvision: str) -> str:
    series = torchvision_series(torch_version)
    if series is None:
        raise InputError(f"{path}: torch.version={torch_version!r}; expected a torch 2.x release such as \"2.13.0\"")
    if not re.match(rf"^{re.escape(series)}(\.\d+)?$", torchvision):
        raise InputError(
            f"{path}: torch.torchvision={torchvision!r} does not match torch.version={torch_version!r}; "
            f"expected a torchvision {series}.x release (torchvision {series} is built for torch "
            f"{torch_version.rsplit('.', 1)[0]})"
        )
    return torchvision


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


# --- loading -------------------------------------------------------------------------

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
    paths = {f.stem: f for f in files}
    raw = {name: _read_yaml(path) for name, path in paths.items()}
    return {name: _build(name, paths[name], _resolve(name, raw, paths, ())) for name in raw}


def select(defs: Mapping[str, ImageDef], name: str) -> ImageDef:
    if name not in defs:
        raise InputError(
            f"--image={name!r} is not defined; expected one of {', '.join(sorted(defs))} "
            "(files in images/)"
        )
    return defs[name]


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # build-host dependency only

    class Strict(yaml.SafeLoader):
        """PyYAML keeps the last of two equal keys; a definition must not (two aws_ofi_nccl
        sections would enable two net plugins, one of them silently dropped)."""

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise InputError(f"{path}: line {key_node.start_mark.line + 1}: key {key!r} appears twice; "
                                 "expected each key once (one net plugin, one torch, ...)")
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        data = yaml.load(path.read_text(), Loader=Strict)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}:{where}: malformed YAML: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    _check_keys(path, data, _SCHEMA, "")
    return data


def _check_keys(path: Path, data: Mapping[str, Any], schema: Mapping[str, Any], prefix: str) -> None:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in schema:
            raise InputError(
                f"{path}: unknown key {dotted!r}; expected one of "
                f"{', '.join(prefix + k for k in schema)}"
            )
        expected = schema[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                raise InputError(f"{path}: {dotted!r} must be a mapping, got {value!r}")
            _check_keys(path, value, expected, dotted + ".")
        elif not isinstance(value, expected):
            raise InputError(
                f"{path}: {dotted!r} must be a {expected.__name__}, got {value!r} "
                + ("(quote version numbers: \"3.11\")" if expected is str else "")
            )


def _resolve(name: str, raw: Mapping[str, dict], files: Mapping[str, Path], seen: tuple[str, ...]) -> dict:
    data = raw[name]
    parent = data.get("extends")
    if parent is None:
        return data
    if parent not in raw:
        raise InputError(
            f"{files[name]}: 'extends: {parent}' names no definition; expected one of "
            f"{', '.join(sorted(n for n in raw if n != name))}"
        )
    if parent in seen or parent == name:
        raise InputError(f"{files[name]}: 'extends' forms a cycle: {' -> '.join((*seen, name, parent))}")
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


def _strings(path: Path, values: list, dotted: str) -> tuple[str, ...]:
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise InputError(f"{path}: {dotted}[{i}] must be a non-empty string, got {value!r}")
    return tuple(values)


def _build(name: str, path: Path, data: Mapping[str, Any]) -> ImageDef:
    if not _NAME.match(name):
        raise InputError(f"{path}: file name {name!r} must be lower-case letters, digits, '.', '_' or '-'")
    for key in _REQUIRED:
        _need(path, data, key, key)

    arches = []
    for i, value in enumerate(data["arches"]):
        arch = normalise_arch(str(value), what=f"{path}: arches[{i}]")
        if arch in arches:
            raise InputError(f"{path}: arches[{i}]={value!r} is listed twice")
        arches.append(arch)
    if not arches:
        raise InputError(f"{path}: 'arches' is empty; expected at least one of x86_64, aarch64")

    b = data["base"]
    if bool(b.get("debian")) == bool(b.get("image")):
        raise InputError(
            f"{path}: 'base' needs exactly one of 'debian' (a release to bootstrap, e.g. bookworm) "
            "or 'image' (a registry image, e.g. ubuntu:24.04)"
        )
    base = Base(debian=b.get("debian"), mirror=b.get("mirror", DEFAULT_MIRROR), image=b.get("image"))

    if not re.match(r"^3\.\d+$", data["python"]):
        raise InputError(f"{path}: 'python'={data['python']!r}; expected MAJOR.MINOR such as \"3.11\"")

    t = data["torch"]
    version = _need(path, t, "version", "torch.version")
    torch = TorchSpec(
        version=version,
        torchvision=check_torchvision(path, version, _need(path, t, "torchvision", "torch.torchvision")),
        index_url=_need(path, t, "index_url", "torch.index_url"),
        extra_index_url=t.get("extra_index_url"),
        extra_packages=_strings(path, t.get("extra_packages", []), "torch.extra_packages"),
        sdist_packages=_strings(path, t.get("sdist_packages", []), "torch.sdist_packages"),
    )
    e = data["expect"]
    expect = Expect(cuda=_need(path, e, "cuda", "expect.cuda"), nccl=_need(path, e, "nccl", "expect.nccl"))
    r = data["rdma_core"]
    rdma = RdmaCore(
        packages=_strings(path, _need(path, r, "packages", "rdma_core.packages"), "rdma_core.packages"),
        providers=_strings(path, _need(path, r, "providers", "rdma_core.providers"), "rdma_core.providers"),
    )
    return ImageDef(
        name=name,
        path=path,
        description=data.get("description", ""),
        arches=tuple(arches),
        ci=data.get("ci", False),
        base=base,
        python=data["python"],
        torch=torch,
        expect=expect,
        rdma_core=rdma,
        aws_ofi_nccl=_aws_ofi_nccl(path, data.get("aws_ofi_nccl")),
    )


def _aws_ofi_nccl(path: Path, a: Mapping[str, Any] | None) -> AwsOfiNccl | None:
    if a is None:
        return None
    version = _need(path, a, "version", "aws_ofi_nccl.version")
    flavour = a.get("libfabric", "efa")
    if flavour not in LIBFABRIC_FLAVOURS:
        raise InputError(
            f"{path}: aws_ofi_nccl.libfabric={flavour!r}; expected one of "
            f"{', '.join(LIBFABRIC_FLAVOURS)} (efa for AWS EFA, cxi for HPE Slingshot)"
        )
    tarball = Path(a["tarball"]) if a.get("tarball") else None
    if tarball is not None and not tarball.is_absolute():
        tarball = (path.parent.parent / tarball).resolve()
    sha256 = a.get("sha256")  # an upstream source without one loads, and is refused at build (sources.py)
    if sha256 and not _SHA256.match(sha256):
        raise InputError(f"{path}: aws_ofi_nccl.sha256={sha256!r}; expected 64 lower-case hex digits")
    url = None if tarball else a.get("url", AWS_OFI_NCCL_URL.format(version=version))
    return AwsOfiNccl(version=version, sha256=sha256, url=url, tarball=tarball, libfabric=flavour)


def with_netplugin_source(defn: ImageDef, tarball: Path, version: str, sha256: str | None = None) -> ImageDef:
    """``defn`` with its net plugin source replaced by a local tarball (`invoke build
    --netplugin-tarball`): CI builds the variants from the tests' own plugin this way, so no
    definition is edited."""
    from dataclasses import replace

    if defn.aws_ofi_nccl is None:
        raise InputError(f"--netplugin-tarball: {defn.path.name} has no 'aws_ofi_nccl' section; expected a "
                         "variant that carries a net plugin")
    if sha256 is not None and not _SHA256.match(sha256):
        raise InputError(f"--netplugin-sha256={sha256!r}; expected 64 lower-case hex digits")
    return replace(defn, aws_ofi_nccl=replace(defn.aws_ofi_nccl, tarball=tarball.resolve(), url=None,
                                              sha256=sha256, version=version))


def host_torch_pin(images_dir: Path) -> str:
    """The torch requirement of the default image, for the build host's own venv: the
    launcher's contract tests judge argv with the torch that users' images carry."""
    return f"torch=={load_definitions(images_dir)[DEFAULT_IMAGE].torch.version}"


if __name__ == "__main__":  # `python -m torchpod_toolkit.definitions --host-torch` (setup.sh)
    import sys

    if sys.argv[1:] != ["--host-torch"]:
        raise SystemExit("usage: python -m torchpod_toolkit.definitions --host-torch")
    print(host_torch_pin(Path(__file__).resolve().parents[2] / "images"))
