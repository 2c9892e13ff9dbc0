"""What a torchpod manifest may ask of a cluster, checked on the rendered objects. Pure.

Rules: no ``privileged`` unless the user asked (``allow_privileged``); added capabilities
within {IPC_LOCK}; every image pinned by a version tag or a digest (never ``latest``); GPU
and RDMA device requests equal to their limits (extended resources cannot overcommit, and
a request without a limit is refused by the API server). Returns the violations as lines.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .names import image_problem
from .podsecurity import pod_specs

ALLOWED_CAPABILITIES = {"IPC_LOCK"}
DEVICE_PREFIXES = ("nvidia.com/", "rdma/", "amd.com/")


def violations(docs: Sequence[Mapping[str, Any]], *, allow_privileged: bool = False) -> list[str]:
    out = []
    for doc in docs:
        for where, pod in pod_specs(doc):  # every pod template, as Pod Security reads them
            for c in [*(pod.get("initContainers") or ()), *(pod.get("containers") or ())]:
                at = f"{where} container {c.get('name')}"
                if "image" in c:
                    problem = image_problem(c["image"])
                    if problem:
                        out.append(f"{at}: image {c['image']!r} {problem}")
                sc = c.get("securityContext") or {}
                if sc.get("privileged") and not allow_privileged:
                    out.append(f"{at}: privileged: true without --privileged")
                added = set((sc.get("capabilities") or {}).get("add") or ())
                extra = added - ALLOWED_CAPABILITIES
                if extra:
                    out.append(f"{at}: adds capabilities {sorted(extra)}; "
                               f"only {sorted(ALLOWED_CAPABILITIES)} is allowed")
                res = c.get("resources") or {}
                req, lim = res.get("requests") or {}, res.get("limits") or {}
                for key in sorted(set(req) | set(lim)):
                    if key.startswith(DEVICE_PREFIXES) and str(req.get(key)) != str(lim.get(key)):
                        out.append(f"{at}: {key} requests {req.get(key)} but limits {lim.get(key)}; expected equal")
    return out
