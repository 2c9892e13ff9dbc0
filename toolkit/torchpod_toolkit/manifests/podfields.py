"""What a job brings to its pods and nodes beside the image: volumes (`--volume`), node
selectors (`--node-selector`) and tolerations (`--toleration`), each parsed from its one
command-line form into a record, checked against the grammar Kubernetes validates it with,
before anything is rendered. Pure.

Grammars (k8s.io/apimachinery pkg/util/validation, Kubernetes 1.33): label keys are
qualified names with an optional DNS-subdomain prefix (IsQualifiedName), label values at
most 63 characters of alphanumerics with '-', '_', '.' inside (IsValidLabelValue); a
PersistentVolumeClaim or ConfigMap is named by a DNS-1123 subdomain; taint effects are
NoSchedule, PreferNoSchedule or NoExecute (k8s.io/api core/v1 TaintEffect).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchpod.errors import InputError

from .. import grammars

_SUBDOMAIN = grammars.DNS1123_SUBDOMAIN
_NAME = grammars.QUALIFIED_NAME
_VALUE = grammars.LABEL_VALUE
# A path inside the container or on the host (grammars.BIND_PATH)
PATH_CHARS = grammars.BIND_PATH_CHARS
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
VOLUME_KINDS = ("pvc", "hostpath", "configmap")
VOLUME_FORM = ("expected pvc:CLAIM:/MOUNT[:ro], hostpath:/HOST/PATH:/MOUNT[:ro] or configmap:NAME:/MOUNT, "
               "e.g. pvc:datasets:/data:ro")
# Where the manifests mount something of their own: a volume there would hide it.
RESERVED_MOUNTS = ("/dev/shm", "/tmp", "/dev/infiniband", "/opt/torchpod")


@dataclass(frozen=True)
class Volume:
    kind: str  # pvc, hostpath or configmap
    source: str  # the claim's or ConfigMap's name, or the host path
    path: str  # where it is mounted in the container
    read_only: bool


def _path(flag: str, text: str, what: str, form: str = VOLUME_FORM) -> str:
    if (not isinstance(text, str) or not grammars.BIND_PATH.fullmatch(text) or len(text) > grammars.BIND_PATH_MAX
            or "/../" in text + "/" or text.endswith("/..")):
        raise InputError(f"{flag}: {what} {text!r} is not an absolute path of {PATH_CHARS} (no '..'); {form}")
    return text.rstrip("/") or "/"


def check_workdir(text) -> str:
    """--workdir: an absolute path, as a mount path is."""
    return _path("--workdir", text, "the working directory", "expected e.g. /workspace/project")


def parse_volume(text) -> Volume:
    """One --volume: KIND:SOURCE:MOUNT with ``:ro`` for read-only (a ConfigMap always is)."""
    flag = f"--volume={text[:80]!r}" if isinstance(text, str) else f"--volume={text!r}"
    parts = text.split(":") if isinstance(text, str) else []
    read_only = len(parts) == 4 and parts[3] == "ro"
    if len(parts) not in (3, 4) or (len(parts) == 4 and not read_only) or parts[0] not in VOLUME_KINDS:
        raise InputError(f"{flag}; {VOLUME_FORM}")
    kind, source, mount = parts[:3]
    if kind == "hostpath":
        source = _path(flag, source, "the host path")
    elif not _SUBDOMAIN.fullmatch(source) or len(source) > 253:
        raise InputError(f"{flag}: {source!r} is not a Kubernetes object name (a DNS-1123 subdomain: lower-case "
                         "letters, digits, '-', '.'; at most 253)")
    path = _path(flag, mount, "the mount path")
    if path == "/" or any(path == r or path.startswith(r + "/") for r in RESERVED_MOUNTS):
        raise InputError(f"{flag}: {path} is where the job mounts its own "
                         f"({', '.join(RESERVED_MOUNTS)} and /); expected another mount path")
    return Volume(kind, source, path, read_only or kind == "configmap")


def parse_volumes(items) -> tuple[Volume, ...]:
    """Every --volume, no two at one mount path."""
    volumes = tuple(parse_volume(item) for item in items)
    paths = [v.path for v in volumes]
    for path in paths:
        if paths.count(path) > 1:
            raise InputError(f"--volume: two volumes at {path}; expected one volume per mount path")
    return volumes


def _label_key(flag: str, key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if (not _NAME.fullmatch(name) or len(name) > 63
            or (slash and (not _SUBDOMAIN.fullmatch(prefix) or len(prefix) > 253))):
        raise InputError(f"{flag}: key {key!r} is not a label key; expected [PREFIX/]NAME, NAME of at most 63 "
                         "letters, digits, '-', '_', '.' (e.g. nvidia.com/gpu.product)")


def _label_value(flag: str, value: str) -> None:
    if not _VALUE.fullmatch(value) or len(value) > 63:
        raise InputError(f"{flag}: value {value!r} is not a label value; expected at most 63 letters, digits, "
                         "'-', '_', '.', starting and ending with a letter or digit")


def parse_selectors(items) -> tuple[tuple[str, str], ...]:
    """--node-selector KEY=VALUE, each key once."""
    out: dict[str, str] = {}
    for item in items:
        flag = f"--node-selector={item[:80]!r}" if isinstance(item, str) else f"--node-selector={item!r}"
        if not isinstance(item, str) or "=" not in item:
            raise InputError(f"{flag}; expected KEY=VALUE, e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
        key, _, value = item.partition("=")
        _label_key(flag, key)
        _label_value(flag, value)
        if key in out:
            raise InputError(f"--node-selector {key} is given twice; expected each key once")
        out[key] = value
    return tuple(out.items())


@dataclass(frozen=True)
class Toleration:
    key: str
    value: str | None  # None: the Exists operator (any value)
    effect: str

    def as_object(self) -> dict:
        out: dict = {"key": self.key, "operator": "Exists" if self.value is None else "Equal"}
        if self.value is not None:
            out["value"] = self.value
        return {**out, "effect": self.effect}


def parse_toleration(item) -> Toleration:
    """--toleration KEY[=VALUE]:EFFECT (kubectl taint's own spelling of a taint)."""
    flag = f"--toleration={item[:80]!r}" if isinstance(item, str) else f"--toleration={item!r}"
    head, colon, effect = item.rpartition(":") if isinstance(item, str) else ("", "", "")
    if not colon or effect not in EFFECTS:
        raise InputError(f"{flag}; expected KEY[=VALUE]:EFFECT with EFFECT one of {', '.join(EFFECTS)}, "
                         "e.g. nvidia.com/gpu:NoSchedule")
    key, eq, value = head.partition("=")
    _label_key(flag, key)
    if eq:
        _label_value(flag, value)
    return Toleration(key, value if eq else None, effect)
