"""The jobs whose Pod Security level is held against the API server's own admission: every
Kubernetes kind torchpod renders, each with the options that move the level. The unit tier
holds docs/manifests.md's table to torchpod's checker (torchpod_toolkit.manifests.podsecurity)
on these; the cluster tier holds the checker to a real kube-apiserver's Pod Security
admission on the same pods (tests/cluster/test_kube_plane.py)."""

from __future__ import annotations

from typing import Any

import yaml

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs, render
from torchpod_toolkit.manifests.spec import JobSpec

IMAGE = "registry.invalid/torchpod/pytorch:1"
KINDS = tuple(jobs.KUBE)
# the table's rows: the option a user writes, and the JobSpec fields it sets
CASES: dict[str, dict[str, Any]] = {
    "(none)": {},
    "--run-as-user 0": {"run_as_user": 0},
    "--volume hostpath:/data:/data": {"volume": ("hostpath:/data:/data",)},
    "--rdma device-plugin": {"rdma": "device-plugin", "rdma_resource": "rdma/rdma_shared_device_a"},
    "--rdma hostnetwork": {"rdma": "hostnetwork"},
    "--privileged": {"privileged": True},
}
REFUSED = "refused"  # the render itself refuses the combination (one line, exit 2)


def documents(kind: str, case: str) -> list[dict[str, Any]] | None:
    """The objects ``invoke manifests`` writes for ``kind`` with ``case``'s options at two
    nodes (a Master and a Worker where the kind has both), or None where it refuses them."""
    try:
        outs = render.render(JobSpec(kind, 2, IMAGE, ("train.py",), name="adm", namespace="adm", **CASES[case]))
    except InputError:
        return None
    (out,) = [o for o in outs if o.name.endswith(".yaml")]
    return [doc for doc in yaml.safe_load_all(out.text) if doc]
