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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping
from urllib.parse import urlsplit

from torchpod import readers
from torchpod.arch import Arch, normalise_arch
from torchpod.errors import InputError

from .. import grammars

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The image `invoke build` builds and the demo and cluster tests run, unless told otherwise.
DEFAULT_IMAGE = "pytorch"
AWS_OFI_NCCL_URL = (
    "https://github.com/aws/aws-ofi-nccl/releases/download/"
    "v{version}/aws-ofi-nccl-{version}.tar.gz"
)
LIBFABRIC_FLAVOURS = ("efa", "cxi")

# Bounds on reading: a definition is a few hundred bytes, two levels deep, one or two
# `extends` away from its root; these leave room while keeping a hostile file cheap.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 4096  # the largest shipped definition has about 60; PyYAML spends tens of us on each
MAX_EXTENDS = 8

# Grammars. All ASCII and matched with fullmatch (`$` would let a trailing newline through).
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A file stem becomes the repository path component `torchpod/<name>` (grammars.PATH_COMPONENT,
# capped); a tag is grammars.TAG.
_PYTHON = re.compile(r"3\.[0-9]{1,2}")
_CUDA = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")
_NCCL = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,4}){1,3}")
# A requirement pinned exactly; the name is PEP 508's (packaging.utils: `^([A-Z0-9]|[A-Z0-9]
# [A-Z0-9._-]*[A-Z0-9])$`, case-insensitive); the version is parsed separately as PEP 440.
_PIN = re.compile(r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?)==(?P<version>[!-~]{1,64})")
# Debian policy 5.6.7: lower case, digits, + - . ; at least two characters, starting alphanumeric.
DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{1,99}")
_DEBIAN_RELEASE = re.compile(r"[a-z][a-z0-9]{0,31}")
_PROVIDER = re.compile(r"[a-z0-9_]{1,32}")
# aws-ofi-nccl's PACKAGE_VERSION as its library reports it (plugin.PACKAGE_RE).
_PLUGIN_VERSION = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}(?:-aws)?")
# RFC 3986's characters less the quote: no space or quote, so a URL is one word anywhere.
_URL = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&()*+,;=%-]{1,2048}")
_TARBALL = re.compile(r"[A-Za-z0-9._+-]{1,255}(?:/[A-Za-z0-9._+-]{1,255}){0,31}")


def _shown(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut short: a message stays one readable line for any value."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _bad(path: Path | None, key: str, value: Any, expected: str) -> InputError:
    """The one form of a bad value: file, key, the value seen, the form expected."""
    return InputError(f"{str(path) + ': ' if path else ''}{key}={_shown(value)}; expected {expected}")


def _text(path: Path | None, key: str, value: Any, grammar: re.Pattern, expected: str) -> str:
    if not isinstance(value, str) or not grammar.fullmatch(value):
        raise _bad(path, key, value, expected)
    return value


def check_version(path: Path | None, key: str, value: Any, example: str = "2.13.0") -> str:
    """A PEP 440 version, parsed by ``packaging`` and re-serialised.

    ``Version`` itself strips surrounding whitespace (packaging/version.py, VERSION_PATTERN
    between ``^\\s*`` and ``\\s*$``), so a trailing newline would pass it silently; a value
    is accepted only when it is already the normal form ``str(Version(value))`` gives, and
    the message then names that form.
    """
    from packaging.version import InvalidVersion, Version

    if not isinstance(value, str) or not re.fullmatch(r"[!-~]{1,64}", value):
        raise _bad(path, key, value, f"a PEP 440 version such as {example!r} (ASCII, no spaces)")
    try:
        normal = str(Version(value))
    except InvalidVersion:
        raise _bad(path, key, value, f"a PEP 440 version such as {example!r}") from None
    if normal != value:
        raise _bad(path, key, value, f"a PEP 440 version in normal form: {normal!r}")
    return normal


def check_pin(path: Path, key: str, value: Any) -> tuple[str, str]:
    """``NAME==VERSION`` exactly: the canonical name (for duplicates) and the requirement."""
    from packaging.utils import canonicalize_name

    m = _PIN.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise _bad(path, key, value, "a wheel pinned exactly as NAME==VERSION, such as 'numpy==2.4.6' "
                                     "(a PEP 508 name, no spaces, markers or ranges)")
    version = check_version(path, key, m["version"], "2.4.6")
    return canonicalize_name(m["name"]), f"{m['name']}=={version}"


def check_url(path: Path, key: str, value: Any, schemes: tuple[str, ...]) -> str:
    if isinstance(value, str) and _URL.fullmatch(value):
        try:
            parts = urlsplit(value)
            port_ok = parts.port is None or parts.port > 0  # .port raises ValueError out of 0-65535
        except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
            parts, port_ok = None, False
        if port_ok and parts is not None and parts.scheme in schemes and value.startswith(f"{parts.scheme}://") and (
                parts.netloc or parts.scheme == "file"):
            return value
    raise _bad(path, key, value, f"a URL ({', '.join(schemes)}; RFC 3986 characters, no spaces or quotes)")


def check_sha256(path: Path | None, key: str, value: Any) -> str:
    return _text(path, key, value, _SHA256, "64 lower-case hex digits (sha256sum's output)")


def check_plugin_version(path: Path | None, key: str, value: Any) -> str:
    return _text(path, key, value, _PLUGIN_VERSION,
                 "a release version such as '1.14.0' (MAJOR.MINOR.PATCH, optionally -aws)")


def check_image_ref(path: Path, key: str, value: Any) -> str:
    if not grammars.is_reference(value):  # distribution/reference's grammar (torchpod_toolkit.grammars)
        raise _bad(path, key, value, "an image reference such as 'ubuntu:24.04' or "
                                     "'registry.example.com:5000/base/debian:12@sha256:<64 hex>'")
    return value


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
    m = re.match(r"2\.([0-9]{1,4})\.", torch_version + ".")
    return f"0.{int(m.group(1)) + 15}" if m else None


def check_torchvision(path: Path, torch_version: str, torchvision: str) -> str:
    series = torchvision_series(torch_version)
    if series is None:
        raise InputError(f"{path}: torch.version={torch_version!r}; expected a torch 2.x release such as \"2.13.0\"")
    if not re.fullmatch(rf"{re.escape(series)}(\.[0-9]+)?", torchvision):
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
    raw = {name: _read_yaml(path) for name, path in paths.items()}
    return {name: _build(name, paths[name], _resolve(name, raw, paths, ())) for name in raw}


def select(defs: Mapping[str, ImageDef], name: str) -> ImageDef:
    if name not in defs:
        raise InputError(
            f"--image={name!r} is not defined; expected one of {', '.join(sorted(defs))} "
            "(files in images/)"
        )
    return defs[name]


def _printable(text: str) -> str:
    """``text`` on one line: what is not printable written as its escape (YAML's own
    messages quote the offending character, but a message must never break a line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def read_text(path: Path, cap: int = MAX_FILE_BYTES, what: str = "a YAML image definition") -> str:
    """A regular file's text, at most ``cap`` bytes of UTF-8, through the one bounded reader
    (torchpod.readers): a FIFO, a device, a directory, a larger file or undecodable bytes
    are one line naming the file."""
    return readers.read_text(path, what=str(path), expected=what, cap=cap)


def _loader_class(path: Path):
    """A SafeLoader that refuses what a definition never needs and a hostile file abuses.

    Anchors and aliases are refused as the composer meets them (yaml/composer.py,
    ``compose_node``), before any node is copied, so a billion-laughs file costs its own
    size and no more; the composer is also the only recursive stage (the parser keeps an
    explicit state stack), so bounding its depth bounds the recursion, and counting its
    nodes bounds the time a large file costs. Keys must be strings, appear once, and merge
    keys (``<<``) are refused.
    """
    import yaml  # build-host dependency only

    class Loader(yaml.SafeLoader):
        depth = nodes = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise InputError(f"{path}: line {line}: YAML anchors and aliases (&name, *name) are not allowed; "
                                 "expected every value written out")
            if self.depth >= MAX_DEPTH:
                raise InputError(f"{path}: line {line}: nested deeper than {MAX_DEPTH} levels; expected a "
                                 "definition's two levels (torch: {version: ...})")
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise InputError(f"{path}: line {line}: more than {MAX_NODES} keys and values; expected an image "
                                 "definition (a few dozen)")
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_object(self, node, deep=False):
            try:
                return super().construct_object(node, deep=deep)
            except (ValueError, OverflowError) as exc:  # a scalar SafeLoader cannot build: 2024-13-45, 5000 digits
                raise InputError(f"{path}: line {node.start_mark.line + 1}: {_shown(node.value)} cannot be read "
                                 f"({_printable(str(exc))}); expected quoted text for versions and names") from None

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise InputError(f"{path}: line {line}: merge keys (<<) are not allowed; expected the keys written out")
            key = loader.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                shown = _shown(key) if isinstance(key_node, yaml.ScalarNode) else f"of type {type(key).__name__}"
                raise InputError(f"{path}: line {line}: key {shown} is not a string; expected a name "
                                 "such as 'torch' (quote it)")
            if key in seen:
                raise InputError(f"{path}: line {line}: key {key!r} appears twice; "
                                 "expected each key once (one net plugin, one torch, ...)")
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # build-host dependency only

    text = read_text(path)
    loader = None
    try:
        loader = _loader_class(path)(text)  # the reader refuses non-printable characters here
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        said = " ".join(filter(None, (getattr(exc, "context", None), getattr(exc, "problem", None))))
        problem = said or (str(exc).splitlines() or ["?"])[0]
        raise InputError(f"{path}:{where} malformed YAML: {_printable(problem)}") from None
    finally:
        if loader is not None:
            loader.dispose()
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
                raise InputError(f"{path}: {dotted!r} must be a mapping, got {_shown(value)}")
            _check_keys(path, value, expected, dotted + ".")
        elif not isinstance(value, expected):
            raise InputError(
                f"{path}: {dotted!r} must be a {expected.__name__}, got {_shown(value)} "
                + ("(quote version numbers: \"3.11\")" if expected is str else "")
            )


def _resolve(name: str, raw: Mapping[str, dict], files: Mapping[str, Path], seen: tuple[str, ...]) -> dict:
    data = raw[name]
    parent = data.get("extends")
    if parent is None:
        return data
    if not grammars.PATH_COMPONENT.fullmatch(parent):
        raise _bad(files[name], "extends", parent, "the stem of another file in images/, such as 'pytorch'")
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


def _each(path: Path, values: list, dotted: str, grammar: re.Pattern, expected: str) -> tuple[str, ...]:
    return tuple(_text(path, f"{dotted}[{i}]", v, grammar, expected) for i, v in enumerate(values))


def _build(name: str, path: Path, data: Mapping[str, Any]) -> ImageDef:
    for key in _REQUIRED:
        _need(path, data, key, key)
    arches = _arches(path, data["arches"])
    python = _text(path, "python", data["python"], _PYTHON, 'MAJOR.MINOR such as "3.11"')
    description = data.get("description", "")
    if len(description) > 300 or not description.isprintable():
        raise _bad(path, "description", description, "one line of printable text, at most 300 characters")
    expect = Expect(
        cuda=_text(path, "expect.cuda", _need(path, data["expect"], "cuda", "expect.cuda"), _CUDA,
                   'MAJOR.MINOR such as "13.0"'),
        nccl=_text(path, "expect.nccl", _need(path, data["expect"], "nccl", "expect.nccl"), _NCCL,
                   'a version such as "2.29.7"'),
    )
    r = data["rdma_core"]
    rdma = RdmaCore(
        packages=_each(path, _need(path, r, "packages", "rdma_core.packages"), "rdma_core.packages",
                       DEBIAN_PACKAGE, "a Debian package name such as 'libibverbs1'"),
        providers=_each(path, _need(path, r, "providers", "rdma_core.providers"), "rdma_core.providers",
                        _PROVIDER, "a verbs provider name such as 'mlx5'"),
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
            raise _bad(path, f"arches[{i}]", value, "x86_64 (amd64) or aarch64 (arm64)")
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
        _text(path, "base.debian", debian, _DEBIAN_RELEASE, "a Debian release name such as 'bookworm'")
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
    tarball = _tarball(path, a["tarball"])
    if sha256 is None:
        raise InputError(f"{path}: aws_ofi_nccl.tarball={a['tarball']!r} has no aws_ofi_nccl.sha256; expected "
                         "the tarball pinned: run `sha256sum` on it and set aws_ofi_nccl.sha256")
    return AwsOfiNccl(version=version, sha256=sha256, url=None, tarball=tarball, libfabric=flavour)


def _tarball(path: Path, value: Any) -> Path:
    """A local tarball: relative to the repository root (the folder above images/), inside it."""
    expected = ("a relative path inside the repository such as 'vendor/aws-ofi-nccl-1.14.0.tar.gz' "
                "(letters, digits, '._+-' and '/', no '..')")
    if not isinstance(value, str) or not _TARBALL.fullmatch(value) or ".." in PurePosixPath(value).parts:
        raise _bad(path, "aws_ofi_nccl.tarball", value, expected)
    root = path.parent.parent.resolve()
    resolved = (root / value).resolve()
    if not resolved.is_relative_to(root):  # a symlink out of the repository
        raise _bad(path, "aws_ofi_nccl.tarball", value, expected + f"; it resolves to {str(resolved)!r}")
    return resolved


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
