"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): one group of pods, a leader and its workers.

Upstream (kubernetes-sigs/lws): pkg/utils/pod/pod_utils.go AddLWSVariables (v0.10.0,
commit 2161f38f) puts three variables in every container of every pod of a group, all per
pod (= per node here), none per process:

- LWS_LEADER_ADDRESS: ``<lws>-<group>.<subdomain>.<namespace>``, the leader pod's DNS name
  (always this form; the subdomain is the LWS's name, or the leader pod's under
  subdomainPolicy UniquePerReplica);
- LWS_GROUP_SIZE: the ``leaderworkerset.sigs.k8s.io/size`` annotation, the pods in the
  group, leader included;
- LWS_WORKER_INDEX: the ``leaderworkerset.sigs.k8s.io/worker-index`` label, 0 for the
  leader and 1..size-1 for the workers (api/leaderworkerset/v1/leaderworkerset_types.go:
  "The leader also gets a workerIndex, and it is always set to 0").

So the leader is node 0, the node count is the group size and the endpoint the leader's
address at torchpod's own port (LWS opens none). Each replica group is its own job: the
rendezvous id comes from the leader's address, which differs between groups. Only LWS
sets these names, so the module is STRONG.
"""

from __future__ import annotations

from ..errors import InputError
from ..options import UserOptions
from .common import (
    Detection,
    Endpoint,
    Env,
    Facts,
    NodeCount,
    check_host,
    get,
    index_below,
    parse_int,
    rdzv_port,
    stable_id,
)

NAME = "lws"
STRONG = True
MARKERS = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")

_HINT = "the LeaderWorkerSet controller sets it in every pod of the group"


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def _required(env: Env, name: str) -> tuple[str, str]:
    found = get(env, name)
    if found is None:
        raise InputError(
            f"{name} is not set in this LeaderWorkerSet pod; expected LWS_LEADER_ADDRESS, "
            "LWS_GROUP_SIZE and LWS_WORKER_INDEX together, as the LWS controller sets them; "
            "run the pod under a LeaderWorkerSet or unset the LWS_* variables"
        )
    return found


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    leader, size_var, index_var = (_required(env, name) for name in MARKERS)
    size = parse_int(*size_var, minimum=1, hint=f"the pods in the group, leader included; {_HINT}")
    index = index_below(index_var, size, of=f"LWS_GROUP_SIZE={size}",
                        hint=f"0 for the leader, 1..LWS_GROUP_SIZE-1 for workers; {_HINT}",
                        tail="; were the variables copied from another pod?")
    host = check_host(f"LWS_LEADER_ADDRESS={leader[1]!r}", leader[1])
    port, port_notes = rdzv_port(env)
    ep = Endpoint(host, port)
    notes = (
        f"node {index} of {size} from LWS_WORKER_INDEX and LWS_GROUP_SIZE (the leader is node 0)",
        f"rendezvous endpoint {ep} from LWS_LEADER_ADDRESS and torchpod's port",
    )
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(size),
        node_rank=index,
        rdzv_endpoint=ep,
        rdzv_id=stable_id("lws", host),
        notes=notes + port_notes,
    )
