"""A container's environment and command line as the kubelet makes them, pure: the pod, the
container and lookups for ConfigMaps and Secrets in, a dict of variables or a list of words out.

Followed line by line (kubernetes v1.37.2):

- ``resolve_env``: pkg/kubelet/kubelet_pods.go, ``makeEnvironmentVariables``. envFrom first
  (a prefix prepended to every key, later sources winning), then ``env`` in order, each
  ``value`` expanded against what came before and the service variables; ``valueFrom``
  resolved from the pod's fields, the container's resources, a ConfigMap key or a Secret
  key. A missing ConfigMap, Secret or key fails the whole container unless the reference
  is ``optional``, with the kubelet's own message. The service variables come last, never
  over a variable the container declared.
- ``service_env``: pkg/kubelet/kubelet_pods.go ``getServiceEnvVarMap`` and
  pkg/kubelet/envvars/envvars.go ``FromServices``: the ``kubernetes`` Service of ``default``
  always, the pod's namespace's Services with a cluster IP when ``enableServiceLinks``.
- ``field_value``: ``podFieldSelectorRuntimeValue`` and pkg/fieldpath/fieldpath.go.
- ``resource_value``: pkg/api/v1/resource/helpers.go ``ExtractContainerResourceValue``,
  limits not set defaulting to the node's allocatable (``defaultPodLimitsForDownwardAPI``).
- ``expand`` and ``expand_command``: third_party/forked/golang/expansion/expand.go and
  pkg/kubelet/container/helpers.go ``ExpandContainerCommandAndArgs``.

Nothing here reads the API, the environment or the clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from torchpod_toolkit import grammars

Obj = Mapping[str, Any]
# name -> its data (Secret values already decoded to text), or None when it does not exist
Lookup = Callable[[str], "Mapping[str, str] | None"]


class ConfigError(Exception):
    """A container whose configuration cannot be made: the kubelet's CreateContainerConfigError."""


# --- $(VAR) expansion ------------------------------------------------------------------------

def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """The first context holding a name gives its value; an unknown name stays ``$(name)``."""
    def lookup(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return f"$({name})"
    return lookup


def _read_name(text: str) -> tuple[str, bool, int]:
    """(what to write, whether it is a variable name, characters consumed) after a ``$``."""
    if text[0] == "$":
        return "$", False, 1  # ``$$``: an escaped operator
    if text[0] == "(":
        close = text.find(")", 1)
        if close >= 0:
            return text[1:close], True, close + 1
        return "$(", False, 1  # an unclosed reference stays as written
    return "$" + text[0], False, 1


def expand(text: str, mapping: Callable[[str], str]) -> str:
    """``$(NAME)`` replaced through ``mapping``, ``$$`` to ``$``, anything else as written."""
    out, checkpoint, cursor = [], 0, 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_name, advance = _read_name(text[cursor + 1:])
            out.append(mapping(read) if is_name else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def expand_command(container: Obj, env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The container's command and args, each word expanded against its environment."""
    mapping = mapping_for(env)
    return ([expand(w, mapping) for w in container.get("command") or []],
            [expand(w, mapping) for w in container.get("args") or []])


# --- quantities ------------------------------------------------------------------------------

_SUFFIX: dict[str, int | Fraction] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity(text: object) -> Fraction:
    """A resource quantity (``500m``, ``2Gi``, ``1e3``) as an exact number; anything else is a ConfigError."""
    found = grammars.QUANTITY.fullmatch(str(text)) if isinstance(text, (str, int)) else None
    if found is None:
        raise ConfigError(f"quantities must match the regular expression of a Kubernetes quantity: {str(text)[:64]!r}")
    number = Fraction(found.group(1))
    if found.group(2):
        return number * Fraction(10) ** int(found.group(2)[1:])
    return number * _SUFFIX[found.group(3) or ""]


# --- the pod's own fields ---------------------------------------------------------------------

def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (strconv.Quote): printable characters as they are."""
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def format_map(values: Mapping[str, str]) -> str:
    """pkg/fieldpath's FormatMap: ``key="value"`` lines in key order."""
    return "\n".join(f"{k}={go_quote(values[k])}" for k in sorted(values))


def _subscript(path: str) -> tuple[str, str] | None:
    if not path.endswith("']"):
        return None
    head, sep, key = path[:-2].partition("['")
    return (head, key) if sep and head else None


def field_value(pod: Obj, path: str, pod_ip: str, host_ip: str) -> str:
    """A ``fieldRef`` of the pod: its metadata, node, service account or addresses."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    direct = {"spec.nodeName": spec.get("nodeName", ""), "spec.serviceAccountName": spec.get("serviceAccountName", ""),
              "status.hostIP": host_ip, "status.hostIPs": host_ip, "status.podIP": pod_ip, "status.podIPs": pod_ip,
              "metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", ""),
              "metadata.uid": meta.get("uid", "")}
    if path in direct:
        return str(direct[path])
    if path in ("metadata.labels", "metadata.annotations"):
        return format_map(meta.get(path.split(".")[1]) or {})
    split = _subscript(path)
    if split and split[0] in ("metadata.labels", "metadata.annotations"):
        return str((meta.get(split[0].split(".")[1]) or {}).get(split[1], ""))
    if split:
        raise ConfigError(f'fieldPath "{path}" does not support subscript')
    raise ConfigError(f"unsupported fieldPath: {path}")


RESOURCES = ("limits.cpu", "limits.memory", "limits.ephemeral-storage",
             "requests.cpu", "requests.memory", "requests.ephemeral-storage")


def resource_value(pod: Obj, container: Obj, ref: Obj, allocatable: Mapping[str, str]) -> str:
    """A ``resourceFieldRef``: a limit or request divided by the divisor, rounded up; a limit
    not set is the node's allocatable, as the kubelet defaults it for the downward API."""
    name = ref.get("containerName") or container.get("name")
    target = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == name), container)
    what = str(ref.get("resource", ""))
    if what not in RESOURCES:
        raise ConfigError(f"unsupported container resource : {what}")
    kind, resource = what.split(".", 1)
    given = ((target.get("resources") or {}).get(kind) or {}).get(resource)
    if given is None:
        given = allocatable.get(resource, "0") if kind == "limits" else "0"
    divisor = quantity(ref.get("divisor") or "1")
    if divisor <= 0:
        raise ConfigError(f"divisor of {what} must be positive: {ref.get('divisor')!r}")
    value = quantity(given)
    if resource == "cpu":  # milli-units, each rounded up as resource.Quantity.MilliValue does
        return str(math.ceil(math.ceil(value * 1000) / math.ceil(divisor * 1000)))
    return str(math.ceil(math.ceil(value) / math.ceil(divisor)))


# --- service variables -------------------------------------------------------------------------

def _env_name(name: str) -> str:
    return name.replace("-", "_").upper()


def _service_vars(service: Obj) -> dict[str, str]:
    spec = service.get("spec") or {}
    address, ports = str(spec.get("clusterIP", "")), spec.get("ports") or []
    prefix = _env_name(str((service.get("metadata") or {}).get("name", "")))
    if not ports:
        return {f"{prefix}_SERVICE_HOST": address}
    out = {f"{prefix}_SERVICE_HOST": address, f"{prefix}_SERVICE_PORT": str(ports[0].get("port"))}
    for port in ports:
        if port.get("name"):
            out[f"{prefix}_SERVICE_PORT_{_env_name(port['name'])}"] = str(port.get("port"))
    host = f"[{address}]" if ":" in address else address
    for index, port in enumerate(ports):
        protocol = str(port.get("protocol") or "TCP")
        url = f"{protocol.lower()}://{host}:{port.get('port')}"
        if index == 0:
            out[f"{prefix}_PORT"] = url
        stem = f"{prefix}_PORT_{port.get('port')}_{protocol.upper()}"
        out.update({stem: url, f"{stem}_PROTO": protocol.lower(), f"{stem}_PORT": str(port.get("port")),
                    f"{stem}_ADDR": address})
    return out


def service_env(services: Sequence[Obj], namespace: str, links: bool) -> dict[str, str]:
    """The Docker-link variables of the Services a pod in ``namespace`` sees."""
    chosen: dict[str, Obj] = {}
    for service in services:
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        if spec.get("clusterIP") in (None, "", "None"):
            continue
        if meta.get("namespace") == "default" and meta.get("name") == "kubernetes":
            chosen.setdefault("kubernetes", service)
        elif meta.get("namespace") == namespace and links:
            chosen[str(meta.get("name"))] = service
    out: dict[str, str] = {}
    for service in chosen.values():
        out.update(_service_vars(service))
    return out


# --- the container's environment ---------------------------------------------------------------

def _optional(ref: Obj) -> bool:
    return ref.get("optional") is True


def _from_source(kind: str, ref: Obj, namespace: str, lookup: Lookup) -> Mapping[str, str] | None:
    found = lookup(str(ref.get("name", "")))
    if found is None and not _optional(ref):
        raise ConfigError(f'{kind.lower()}s "{ref.get("name", "")}" not found')
    return found


def _value_from(source: Obj, context: PodContext) -> str | None:
    """One ``valueFrom``; None when an optional reference finds nothing (the variable is left out)."""
    namespace = str((context.pod.get("metadata") or {}).get("namespace", ""))
    if "fieldRef" in source:
        return field_value(context.pod, str(source["fieldRef"].get("fieldPath", "")), context.pod_ip, context.host_ip)
    if "resourceFieldRef" in source:
        return resource_value(context.pod, context.container, source["resourceFieldRef"], context.allocatable)
    for key, kind, lookup in (("configMapKeyRef", "ConfigMap", context.config_maps),
                              ("secretKeyRef", "Secret", context.secrets)):
        if key in source:
            ref = source[key]
            data = _from_source(kind, ref, namespace, lookup)
            if data is None:
                return None
            if ref.get("key") not in data:
                if _optional(ref):
                    return None
                raise ConfigError(f"couldn't find key {ref.get('key')} in {kind} {namespace}/{ref.get('name')}")
            return data[ref["key"]]
    raise ConfigError(f"unsupported valueFrom {sorted(source)}: fieldRef, resourceFieldRef, configMapKeyRef "
                      "and secretKeyRef are supported")


class PodContext:
    """What resolving one container's environment reads: the pod, the container, the
    addresses, the node's allocatable, lookups of the namespace's ConfigMaps and Secrets,
    and the service variables."""

    def __init__(self, pod: Obj, container: Obj, *, pod_ip: str, host_ip: str, config_maps: Lookup,
                 secrets: Lookup, services: Mapping[str, str], allocatable: Mapping[str, str]) -> None:
        self.pod, self.container, self.pod_ip, self.host_ip = pod, container, pod_ip, host_ip
        self.config_maps, self.secrets, self.services, self.allocatable = config_maps, secrets, services, allocatable


def resolve_env(context: PodContext) -> dict[str, str]:
    """The container's variables in the order the kubelet gives them; a ConfigError names
    what is missing in the kubelet's words."""
    namespace = str((context.pod.get("metadata") or {}).get("namespace", ""))
    env: dict[str, str] = {}
    for source in context.container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for key, kind, lookup in (("configMapRef", "ConfigMap", context.config_maps),
                                  ("secretRef", "Secret", context.secrets)):
            if key in source:
                data = _from_source(kind, source[key], namespace, lookup) or {}
                env.update({prefix + k: v for k, v in data.items()})
    mapping = mapping_for(env, context.services)
    for var in context.container.get("env") or []:
        value = str(var.get("value") or "")
        if value:
            env[var["name"]] = expand(value, mapping)
        elif var.get("valueFrom"):
            found = _value_from(var["valueFrom"], context)
            if found is not None:
                env[var["name"]] = found
        else:
            env[var["name"]] = ""
    for key, value in context.services.items():
        env.setdefault(key, value)
    return env
