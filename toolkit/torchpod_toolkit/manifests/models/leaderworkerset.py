"""The pods of a LeaderWorkerSet, as the lws controllers and its pod webhook make them. Pure.

LeaderWorkerSet (kubernetes-sigs/lws v0.10.0, commit 2161f38f): per group g a leader
pod ``<lws>-<g>`` from the leader StatefulSet ``<lws>`` and workers ``<lws>-<g>-<w>``,
w = 1..size-1, from the worker StatefulSet ``<lws>-<g>`` whose ordinals start at 1
(pkg/controllers/leaderworkerset_controller.go constructLeaderStatefulSetApplyConfiguration,
pod_controller.go constructWorkerStatefulSetApplyConfiguration); the leader runs the
leaderTemplate, else the workerTemplate. Both StatefulSets name the headless Service
``<lws>`` (subdomainPolicy Shared, the default; UniquePerReplica: the leader pod's name),
so hostname = pod name and subdomain = that Service. Labels leaderworkerset.sigs.k8s.io/
name, group-index, worker-index (0 for the leader), group-key (sha1 of
``<ns>/<leader pod>``, pkg/webhooks/pod_webhook.go genGroupUniqueKey); annotations size,
and leader-name on workers. pkg/utils/pod/pod_utils.go AddLWSVariables puts
LWS_LEADER_ADDRESS ``<lws>-<g>.<subdomain>.<ns>``, LWS_GROUP_SIZE (the size annotation)
and LWS_WORKER_INDEX (the worker-index label) first in every container, dropping the
container's own definitions of those names. The revision-key label and the TPU variables
(only for pods requesting TPUs) are left out.
"""

from __future__ import annotations

from typing import Sequence

from .common import K8S_ENV, Obj, Pod, last_wins, launcher_args, main_container, node_name, resolve, sha1

# LeaderWorkerSet's names (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go).
LWS = "leaderworkerset.sigs.k8s.io/"
LWS_ENV = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")


def _lws_pod(name: str, ns: str, group: int, worker: int, size: int, tmpl: Obj, sub: str,
             node: str) -> Pod:
    """One pod of group ``group``: the leader (worker 0) or a worker."""
    leader = f"{name}-{group}"
    pod = leader if worker == 0 else f"{leader}-{worker}"
    labels = {f"{LWS}name": name, f"{LWS}group-index": str(group), f"{LWS}worker-index": str(worker),
              f"{LWS}group-key": sha1(f"{ns}/{leader}")}
    annotations = {f"{LWS}size": str(size)}
    if worker:
        annotations[f"{LWS}leader-name"] = leader
    spec = tmpl.get("spec", {})
    hostnet = bool(spec.get("hostNetwork"))
    c = main_container(spec)
    own = [(k, v) for k, v in resolve(c.get("env"), pod, ns, labels, annotations, node) if k not in LWS_ENV]
    lws_env = [("LWS_LEADER_ADDRESS", f"{leader}.{sub}.{ns}"), ("LWS_GROUP_SIZE", str(size)),
               ("LWS_WORKER_INDEX", str(worker))]
    return Pod(name=pod, hostname=node if hostnet else pod, dns_names=(f"{pod}.{sub}", f"{pod}.{sub}.{ns}"),
               env=last_wins(list(K8S_ENV) + lws_env + own), args=launcher_args(c),
               image=c["image"], labels=tuple(labels.items()), host_network=hostnet)


def leaderworkerset(lws: Obj, node_names: Sequence[str] = ()) -> list[Pod]:
    name, ns = lws["metadata"]["name"], lws["metadata"].get("namespace", "default")
    spec = lws["spec"]
    template = spec["leaderWorkerTemplate"]
    size = int(template.get("size", 1))  # the CRD's defaults: size 1, replicas 1
    policy = (spec.get("networkConfig") or {}).get("subdomainPolicy", "Shared")
    pods: list[Pod] = []
    for group in range(int(spec.get("replicas", 1))):
        sub = f"{name}-{group}" if policy == "UniquePerReplica" else name
        for worker in range(size):
            tmpl = template.get("leaderTemplate") if worker == 0 else None
            k = len(pods)
            node = node_names[k] if k < len(node_names) else node_name(k)
            pods.append(_lws_pod(name, ns, group, worker, size, tmpl or template["workerTemplate"], sub, node))
    return pods
