"""torchpod_toolkit.manifests.models.leaderworkerset: the leader and workers of each group, with
the names and variables LeaderWorkerSet's controllers give them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod_toolkit.manifests import kube, operators
from torchpod_toolkit.manifests.models.leaderworkerset import LWS_ENV, leaderworkerset
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


# --- LeaderWorkerSet: the pods its controllers make ---------------------------------------
def _objects(kind: str, nodes: int = 3, **kw):
    return kube.objects(check(JobSpec(kind, nodes, IMAGE, ("train.py",), name="llama", namespace="ml",
                                      gpus_per_node=0, **kw)))


def test_lws_makes_the_leader_and_its_workers_with_the_controllers_variables():
    pods = operators.pods(_objects("lws"))
    assert [(p.name, p.hostname) for p in pods] == [("llama-0", "llama-0"), ("llama-0-1", "llama-0-1"),
                                                     ("llama-0-2", "llama-0-2")]
    assert [p.env_dict["LWS_WORKER_INDEX"] for p in pods] == ["0", "1", "2"]
    assert {(p.env_dict["LWS_LEADER_ADDRESS"], p.env_dict["LWS_GROUP_SIZE"]) for p in pods} \
        == {("llama-0.llama.ml", "3")}
    assert pods[0].dns_names == ("llama-0.llama", "llama-0.llama.ml")
    labels = dict(pods[2].labels)
    assert (labels["leaderworkerset.sigs.k8s.io/group-index"], labels["leaderworkerset.sigs.k8s.io/worker-index"]) \
        == ("0", "2")


def test_each_lws_group_has_its_own_leader_and_a_subdomain_of_its_own_when_asked():
    (lws,) = _objects("lws")
    lws["spec"].update(replicas=2, networkConfig={"subdomainPolicy": "UniquePerReplica"})
    pods = leaderworkerset(lws)
    assert [p.name for p in pods] == ["llama-0", "llama-0-1", "llama-0-2", "llama-1", "llama-1-1", "llama-1-2"]
    assert [p.env_dict["LWS_LEADER_ADDRESS"] for p in pods[2:4]] == ["llama-0.llama-0.ml", "llama-1.llama-1.ml"]


@settings(deadline=None, max_examples=40)
@given(value=st.text(st.characters(exclude_categories=("Cs",)), max_size=12))
def test_a_containers_own_lws_variables_never_win_over_the_controllers(value):
    (lws,) = _objects("lws", 2)
    container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["env"] = [{"name": n, "value": value} for n in LWS_ENV] + [{"name": "MINE", "value": value}]
    pods = leaderworkerset(lws)
    assert [p.env_dict["LWS_WORKER_INDEX"] for p in pods] == ["0", "1"]
    assert {p.env_dict["LWS_LEADER_ADDRESS"] for p in pods} == {"llama-0.llama.ml"}
    assert {p.env_dict["MINE"] for p in pods} == {value}  # the container's other variables are kept as given
