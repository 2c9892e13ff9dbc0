"""The operator models, derived from what the real operators did: recordings of the pods each
operator made of each Kubernetes kind's render at three sizes (manifests/recorded/<kind>.json,
written and checked afresh on a real control plane by tests/kube_records.py). Pure but for
reading the recordings.

Derivation. Each recorded pod is matched to its slot of the job's shape (shapes.py: role,
indexes and the marks the operator puts on the slot's pod). For every value the operator
wrote (the pod's name, hostname and subdomain, each label and annotation it added, each
variable it put before or after the container's own, each file it mounted) the derivation
finds the templates that give that value at every recorded pod of the role (templates.py).
An entry on some pods of a role only is kept with the condition on a quantity that tells
which. A value no template fits is an error.

Application. A job is modelled only if its shape's signature and every role of it were
recorded, and its container's own variables set none the operator sets. Where several
templates fit every recording (two quantities equal in each, say ``count`` and ``max`` of an
elastic job torchpod always renders with replicas = max) they must agree on the job
modelled, or the job is refused as a shape never recorded: the model never guesses.

What only chance or the API server decides is masked in a recording (kube/recording.py) and
given a stand-in here: a generated name's random part, a UID, a hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from torchpod import readers
from torchpod.errors import InputError

from . import shapes
from .models.common import K8S_ENV, Obj, Pod, last_wins, launcher_args, node_name, resolve, sha1, uid
from .templates import DeriveError, Template, agreed, expressions, render, template

RECORDED = Path(__file__).with_name("recorded")
RANDOM, UID, HASH = "{random}", "{uid}", "{hash}"  # kube/recording.py's masks

# (name, a Template or a recorded valueFrom, None or the conditions under which a pod has it)
Entry = tuple[str, Any, "frozenset[tuple[str, int]] | None"]


# --- a role's pods -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Role:
    """What the operator writes into each pod of one role, as templates."""

    name: Template
    hostname: Template
    subdomain: Template
    service: bool  # a Service of the pod's own name (training-operator's per-pod Services)
    labels: tuple[Entry, ...]
    annotations: tuple[Entry, ...]
    before: tuple[Entry, ...]  # variables ahead of the container's own
    after: tuple[Entry, ...]
    files: tuple[Entry, ...]  # by path


def _added(recorded: Mapping[str, str], own: Mapping[str, str] | None) -> dict[str, str]:
    own = own or {}
    return {k: v for k, v in recorded.items() if own.get(k) != v}


def _defaulted(entry: Obj) -> Obj:
    """A variable as the API server stores it: a fieldRef's apiVersion defaults to v1
    (k8s.io/api core/v1 ObjectFieldSelector; pkg/apis/core/v1/defaults.go)."""
    ref = (entry.get("valueFrom") or {}).get("fieldRef")
    if ref is None or "apiVersion" in ref:
        return entry
    return {**entry, "valueFrom": {**entry["valueFrom"], "fieldRef": {"apiVersion": "v1", **ref}}}


def _split_env(env: Sequence[Obj], own: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """The operator's variables of a recorded container: those ahead of its own, and after
    (all after where the container has none), each part by name: an operator may write its
    variables in another order each time (Volcano's plugins run in Go's map order), and
    only where a name is also the container's does the order decide the value."""
    own = [_defaulted(e) for e in own]
    first = min((n for n, e in enumerate(env) if e in own), default=0)
    return (sorted((e for e in env[:first] if e not in own), key=lambda e: e["name"]),
            sorted((e for e in env[first:] if e not in own), key=lambda e: e["name"]))


def _same(values: Iterable[Any], what: str) -> Any:
    found = list(values)
    if any(v != found[0] for v in found):
        raise DeriveError(f"{what}: the recorded pods differ ({found[:3]}); expected one value for every pod "
                          "of the role")
    return found[0]


def _presence(slots: Sequence[shapes.Slot], present: Sequence[bool], what: str) -> frozenset[tuple[str, int]] | None:
    """None where every pod has the entry, else the conditions ``expression == value`` that
    hold at exactly the pods that have it (training-operator labels an elastic job's Worker 0
    with the master's job-role)."""
    if all(present):
        return None
    first = next(s for s, p in zip(slots, present) if p)
    fits = frozenset((e, v) for e, v in expressions(first.numbers).items()
                     if all((expressions(s.numbers).get(e) == v) == p for s, p in zip(slots, present)))
    if not fits:
        raise DeriveError(f"{what}: on some pods of the role only, and no index or count tells which; "
                          "expected it on every pod, or on those where a quantity has one value")
    return fits


def _entries(pairs: Sequence[tuple[shapes.Slot, Mapping[str, Any]]], what: str) -> tuple[Entry, ...]:
    """Each named entry (a label, an annotation, a variable) of a role's pods: a template of its
    values (a valueFrom: the one recorded), and where it is only on some pods, which."""
    out = []
    for name in sorted({k for _, d in pairs for k in d}):
        having = [(s, d[name]) for s, d in pairs if name in d]
        presence = _presence([s for s, _ in pairs], [name in d for _, d in pairs], f"{what} {name}")
        if isinstance(having[0][1], Mapping):
            value: Any = _same((v for _, v in having), f"{what} {name}")
        else:
            value = template([(s.strings, s.numbers, v) for s, v in having], f"{what} {name}")
        out.append((name, value, presence))
    return tuple(out)


def _env_part(pairs: Sequence[tuple[shapes.Slot, list[Obj]]], what: str) -> tuple[Entry, ...]:
    return _entries([(s, {e["name"]: e.get("valueFrom", e.get("value")) for e in env}) for s, env in pairs], what)


def _role(pairs: Sequence[tuple[shapes.Slot, Obj]], what: str) -> Role:
    def field(key: str) -> Template:
        return template([(s.strings, s.numbers, p[key]) for s, p in pairs], f"{what}: {key}")

    envs = [(s, _split_env(p["env"], s.container.get("env") or [])) for s, p in pairs]
    return Role(
        field("name"), field("hostname"), field("subdomain"), _same((p["service"] for _, p in pairs), what),
        _entries([(s, _added(p["labels"], s.template.get("metadata", {}).get("labels"))) for s, p in pairs],
                 f"{what}: label"),
        _entries([(s, _added(p["annotations"], s.template.get("metadata", {}).get("annotations")))
                  for s, p in pairs], f"{what}: annotation"),
        _env_part([(s, e[0]) for s, e in envs], f"{what}: variable"),
        _env_part([(s, e[1]) for s, e in envs], f"{what}: variable"),
        _entries([(s, p["files"]) for s, p in pairs], f"{what}: file"))


def _recorded_pod(slot: shapes.Slot, pods: Sequence[Obj], job: Obj) -> Obj:
    """The one recorded pod the operator marked as ``slot``'s (shapes.Slot.identity)."""
    found = [p for p in pods if all(p[where].get(key) == value for where, key, value in slot.identity)]
    if len(found) != 1:
        raise DeriveError(f"{job['kind']} {job['metadata']['name']}: {len(found)} recorded pods are marked "
                          f"{slot.identity}; expected one")
    return found[0]


Model = Mapping[tuple[str, str, tuple[str, ...]], Mapping[str, Role]]


def derive(recordings: Sequence[Obj]) -> Model:
    """The roles of each recorded job's operator and signature, from every recording of them."""
    grouped: dict[tuple[str, str, tuple[str, ...]], list[tuple[shapes.Slot, Obj]]] = {}
    for recording in recordings:
        job = job_object(recording["objects"])
        shape = shapes.SHAPES[(job["apiVersion"], job["kind"])](job)
        pods = recording["pods"]
        if len(pods) != len(shape.slots):
            raise DeriveError(f"{job['kind']} {job['metadata']['name']}: {len(pods)} pods recorded, its shape has "
                              f"{len(shape.slots)}; expected one pod per slot")
        grouped.setdefault((job["apiVersion"], job["kind"], shape.signature), []).extend(
            (slot, _recorded_pod(slot, pods, job)) for slot in shape.slots)
    return {key: {role: _role([sp for sp in pairs if sp[0].role == role], f"{key[1]} {role}")
                  for role in dict.fromkeys(s.role for s, _ in pairs)}
            for key, pairs in grouped.items()}


def job_object(docs: Sequence[Obj]) -> Obj:
    """The one training job among a manifest's objects (Services and an etcd Pod may sit beside it)."""
    jobs = [d for d in docs if d and (d.get("apiVersion"), d.get("kind")) in shapes.SHAPES]
    if len(jobs) != 1:
        kinds = ", ".join(f"{d.get('kind')}" for d in docs if d)
        raise InputError("expected exactly one Volcano Job, PyTorchJob, TrainJob, LeaderWorkerSet or JobSet in "
                         f"the manifest; found {kinds or 'nothing'}")
    return jobs[0]


# --- applying a model --------------------------------------------------------------------------

def _stand_ins(text: str, strings: Mapping[str, str], host: str) -> str:
    """The masked parts of a value, each given a stand-in made from the names it stands beside."""
    return (text.replace(RANDOM, uid(host)[:5]).replace(UID, uid(strings["name"]))
            .replace(HASH, sha1(f"{strings['namespace']}/{strings['name']}")))


def _has(presence: frozenset[tuple[str, int]] | None, slot: shapes.Slot) -> bool:
    if presence is None:
        return True
    return agreed((expressions(slot.numbers).get(e) == v for e, v in presence), "which pods have it", slot.strings)


def _values(entries: tuple[Entry, ...], slot: shapes.Slot, host: str) -> dict[str, Any]:
    """The entries a pod of ``slot`` has: a name's text, or its recorded valueFrom."""
    s, n = slot.strings, slot.numbers
    return {name: t if isinstance(t, Mapping) else _stand_ins(render(t, s, n, name), s, host)
            for name, t, presence in entries if _has(presence, slot)}


def _env(role: Role, slot: shapes.Slot, pod: str, labels: dict[str, str], annotations: dict[str, str],
         node: str) -> list[tuple[str, str]]:
    own = slot.container.get("env") or []
    operator = {name for name, _, _ in role.before + role.after}
    clash = sorted(operator & {e.get("name") for e in own})
    if clash:
        raise InputError(f"{slot.strings['name']}: the container sets {', '.join(clash)}, which the operator sets; "
                         "expected them left to the operator (a container that sets them was never recorded)")
    ns = slot.strings["namespace"]

    def part(entries: tuple[Entry, ...]) -> list[tuple[str, str]]:
        objects = [{"name": k, "valueFrom": v} if isinstance(v, Mapping) else {"name": k, "value": v}
                   for k, v in _values(entries, slot, pod).items()]
        return resolve(objects, pod, ns, labels, annotations, node)

    return [*K8S_ENV, *part(role.before), *resolve(own, pod, ns, labels, annotations, node), *part(role.after)]


def pod(role: Role, slot: shapes.Slot, node: str) -> Pod:
    """The pod of ``slot`` as its operator makes it, by the role's templates."""
    s, n = slot.strings, slot.numbers
    host = render(role.hostname, s, n, "hostname")
    name = _stand_ins(render(role.name, s, n, "the pod's name"), s, host)
    host = host or name
    meta = slot.template.get("metadata", {})
    labels = {**(meta.get("labels") or {}), **_values(role.labels, slot, host)}
    annotations = {**(meta.get("annotations") or {}), **_values(role.annotations, slot, host)}
    sub = render(role.subdomain, s, n, "subdomain")
    names = (f"{host}.{sub}", f"{host}.{sub}.{s['namespace']}") if sub else \
        (name, f"{name}.{s['namespace']}") if role.service else ()
    hostnet = bool(slot.template.get("spec", {}).get("hostNetwork"))
    return Pod(name=name, hostname=node if hostnet else host, dns_names=names,
               env=last_wins(_env(role, slot, name, labels, annotations, node)), args=launcher_args(slot.container),
               image=slot.container["image"],
               files=tuple(_values(role.files, slot, host).items()),
               labels=tuple(labels.items()), host_network=hostnet)


RECORDING_FORM = ('a recording written by tests/kube_records.py: {"kind": KIND, "recordings": [{"objects": '
                  '[...], "pods": [{...}]}, ...]}')
POD_KEYS = frozenset({"name", "hostname", "subdomain", "hostNetwork", "service", "labels", "annotations", "env",
                      "files", "container"})


def recorded(kind: str, folder: Path = RECORDED) -> Obj:
    """The committed recording of ``kind`` (<folder>/<kind>.json), its form checked: a file
    that is not the JSON the recorder writes is one line naming it, never a traceback."""
    path = folder / f"{kind}.json"
    data = readers.read_bytes(path, what=f"the recording of {kind}", expected=RECORDING_FORM, cap=readers.DATA_CAP)
    try:
        text = json.loads(data)
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc}); expected {RECORDING_FORM}") from None
    problem = _recording_problem(text, kind)
    if problem:
        raise InputError(f"{path}: {problem}; expected {RECORDING_FORM}")
    return text


def _recording_problem(text: Any, kind: str) -> str:
    if not isinstance(text, dict) or text.get("kind") != kind:
        return f"its kind is {text.get('kind') if isinstance(text, dict) else None!r}, not {kind!r}"
    recordings = text.get("recordings")
    if not isinstance(recordings, list) or not recordings:
        return "it holds no recordings"
    for n, r in enumerate(recordings):
        if not (isinstance(r, dict) and isinstance(r.get("objects"), list) and isinstance(r.get("pods"), list)
                and all(isinstance(o, dict) for o in r["objects"])):
            return f"recording {n} has no objects and pods lists"
        bad = next((p for p in r["pods"] if not isinstance(p, dict) or set(p) != POD_KEYS), None)
        if bad is not None:
            keys = sorted(bad) if isinstance(bad, dict) else type(bad).__name__
            return f"a pod of recording {n} has {keys}, not the recorder's {sorted(POD_KEYS)}"
    return ""


class Operator:
    """One operator's model: called with a job object (and the nodes its pods run on), the
    pods the operator makes of it, by the roles derived from every recording of its kind."""

    def __init__(self, api_version: str, kind: str) -> None:
        self.key = (api_version, kind)
        self.__name__ = kind

    @cached_property
    def roles(self) -> Mapping[tuple[str, ...], Mapping[str, Role]]:
        recordings = [r for path in sorted(RECORDED.glob("*.json")) for r in recorded(path.stem)["recordings"]]
        mine = [r for r in recordings if (lambda j: (j["apiVersion"], j["kind"]))(job_object(r["objects"])) == self.key]
        return {sig: roles for (api, kind, sig), roles in derive(mine).items()}

    def __call__(self, job: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
        shape = shapes.SHAPES[self.key](job)
        roles = self.roles.get(shape.signature)
        if roles is None:
            raise InputError(f"{self.key[1]} {job['metadata']['name']}: its shape ({', '.join(shape.signature)}) was "
                             f"never recorded; expected one of: "
                             + "; ".join(", ".join(sig) for sig in self.roles))
        unknown = sorted({s.role for s in shape.slots} - set(roles))
        if unknown:
            raise InputError(f"{self.key[1]} {job['metadata']['name']}: role {', '.join(unknown)} was never recorded; "
                             f"expected {', '.join(roles)}")
        return [pod(roles[slot.role], slot, node_names[k] if k < len(node_names) else node_name(k))
                for k, slot in enumerate(shape.slots)]


MODELS: Mapping[tuple[str, str], Operator] = {key: Operator(*key) for key in shapes.SHAPES}


def model(api_version: str, kind: str) -> Operator:
    return MODELS[(api_version, kind)]
