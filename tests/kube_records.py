"""Recording what the real operators make of each Kubernetes kind's render, on the module's
plane (torchpod_toolkit.kube.recording), and holding the committed recordings to it.

Each kind is rendered at three sizes with distinct names and namespaces, so every count,
index and name the operator writes differs between them (sizes(): one node, two, three;
a kind that takes MIN:MAX: 3:4 last; GPUS: a different nproc each). Every pod asks for a
node label no node has (``--node-selector``), so the scheduler never binds one: the
operator's pods are read from the API server without running anything.

The check: the operator model derived from a fresh recording (torchpod_toolkit.manifests
.derive) is the one derived from the committed recording. ``TORCHPOD_DEV_RECORD=DIR`` writes
the fresh recordings into DIR as well, to be copied over
toolkit/torchpod_toolkit/manifests/recorded/ when an operator is upgraded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torchpod.errors import InputError
from torchpod_toolkit.kube.recording import record
from torchpod_toolkit.manifests import derive, jobs
from torchpod_toolkit.manifests.spec import JobSpec, check

from kube_helpers import settled
from kube_jobs import WAIT, Cluster, submit

NAMES = ("alpha", "bravo", "charlie")
PLACES = ("one", "two", "three")  # the namespaces' last words: no name, role or number in them
IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"  # never pulled: no pod is bound
UNBOUND = "torchpod.example.com/recording=never"  # a node label no node carries
GPUS = (4, 3, 5)  # GPUs per node (nproc) of the three sizes: no count, index or sum of them ever equals it


# a kind rendered with options that change what its operator writes, recorded as a kind of its own
VARIANTS: Mapping[str, tuple[str, tuple[Mapping[str, Any], ...]]] = {
    # an elasticPolicy naming an etcd's host and port, a different one at each size
    "kubeflow-elastic-etcd": ("kubeflow-elastic", tuple({"rdzv": "etcd", "etcd_endpoint": endpoint} for endpoint in (
        "etcd-one.example.com:2379", "etcd.two.example.net:4001", "203.0.113.7:12379"))),
}


def sizes(kind: str) -> tuple[str, str, str]:
    """The three sizes a kind is recorded at: one node (or four, for a kind that needs two or
    more), two, and three (MIN:MAX 3:4 for a kind that takes a range)."""
    try:
        check(JobSpec(kind, "1", IMAGE, ("train.py",)))
        first = "1"
    except InputError:
        first = "4"
    return first, "2", "3:4" if jobs.kind(kind).node_range else "3"


def _items(cluster: Cluster, namespace: str, types: str) -> list[dict[str, Any]]:
    return json.loads(cluster.kube.kubectl("-n", namespace, "get", types, "-o", "json").stdout)["items"]


def _read(cluster: Cluster, namespace: str, objects: list[dict[str, Any]], want: int, owners: str) -> dict[str, Any]:
    """The recording of the job applied in ``namespace``, once the operator has made its
    ``want`` pods and left them as they are for two reads."""
    last: list[Any] = []

    def steady(pods: list[dict[str, Any]]) -> bool:
        nonlocal last
        key = [(p["metadata"]["name"], p["metadata"]["resourceVersion"]) for p in pods]
        done = len(pods) == want and key == last
        last = key
        return done

    def owned() -> list[dict[str, Any]]:  # an etcd Pod the render brings is no operator's
        return [p for p in _items(cluster, namespace, "pods") if p["metadata"].get("ownerReferences")]

    pods = settled(owned, steady, WAIT, every=2.0)
    assert len(pods) == want, f"{len(pods)} pods in {namespace}, expected {want}"
    assert not [p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")], "a recorded pod was bound"
    return record(objects, pods, _items(cluster, namespace, "configmaps"),
                  _items(cluster, namespace, f"services,{owners}"))


def record_kind(cluster: Cluster, kind: str, owners: str, gpus: tuple[int, ...]) -> dict[str, Any]:
    """The three sizes of ``kind`` applied side by side, recorded, then deleted. ``owners``:
    the resource types whose UIDs may show in a pod (the module's operators' objects);
    ``gpus``: the GPUs per node of the three sizes (their nproc differs, so a count times
    nproc is told from a count; Volcano's gang is enqueued only when the cluster has what it
    asks for, so it asks for none)."""
    applied = []
    rendered, options = VARIANTS.get(kind, (kind, ({}, {}, {})))
    for nodes, per_node, name, place, more in zip(sizes(rendered), gpus, NAMES, PLACES, options):
        namespace = f"rec-{sorted([*jobs.NAMES, *VARIANTS]).index(kind)}-{place}"
        job = submit(cluster, rendered, name, nodes, ("train.py",), image=IMAGE, namespace=namespace,
                     gpus_per_node=per_node, node_selector=(UNBOUND,), **more)
        applied.append((namespace, nodes, job["objects"]))
    out = [_read(cluster, namespace, objects, int(nodes.split(":")[-1]), owners)
           for namespace, nodes, objects in applied]
    for namespace, _, _ in applied:
        cluster.kube.kubectl("delete", "namespace", namespace, "--wait=false")
    return {"kind": kind, "recordings": out}


def record_jobs(cluster: Cluster, name: str, objects: Sequence[dict[str, Any]], owners: str,
                pods: Callable[[dict[str, Any]], int]) -> dict[str, Any]:
    """Job objects of shapes torchpod does not render (each in its own namespace, which it
    names; ``pods``: how many pods each makes) applied side by side, recorded, then deleted."""
    namespaces = [job["metadata"]["namespace"] for job in objects]
    for namespace, job in zip(namespaces, objects):
        path = cluster.folder / f"record-{name}-{namespace}.json"
        path.write_text(json.dumps(job))
        cluster.kube.namespace(namespace)
        cluster.kube.kubectl("apply", "--server-side", "-f", str(path))
    out = [_read(cluster, namespace, [job], pods(job), owners) for namespace, job in zip(namespaces, objects)]
    for namespace in namespaces:
        cluster.kube.kubectl("delete", "namespace", namespace, "--wait=false")
    return {"kind": name, "recordings": out}


def assert_recordings_hold(cluster: Cluster, kinds: tuple[str, ...], owners: str, gpus: tuple[int, ...] = GPUS,
                           more: Mapping[str, Callable[[], dict[str, Any]]] | None = None) -> None:
    """Each kind's model derived from a fresh recording is the one its committed recording
    gives; ``more``: other recordings by name, each made by its function."""
    into = os.environ.get("TORCHPOD_DEV_RECORD")
    fresh = {kind: record_kind(cluster, kind, owners, gpus) for kind in kinds}
    fresh.update({name: made() for name, made in (more or {}).items()})
    if into:
        Path(into).mkdir(parents=True, exist_ok=True)
        for kind, recording in fresh.items():
            (Path(into) / f"{kind}.json").write_text(json.dumps(recording, indent=1, sort_keys=True) + "\n")
    differ = [kind for kind in fresh if derive.derive(fresh[kind]["recordings"])
              != derive.derive(derive.recorded(kind)["recordings"])]
    assert not differ, (f"the operators no longer make the pods recorded for {differ}: record them again "
                        "(TORCHPOD_DEV_RECORD=DIR, see tests/kube_records.py)")
