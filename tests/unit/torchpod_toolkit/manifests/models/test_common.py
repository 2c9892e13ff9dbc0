"""torchpod_toolkit.manifests.models.common: what every operator model shares: the downward
API resolved as the kubelet would, the launcher's words, the last definition winning, the
container and port a model reads."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests.models.common import (
    Pod,
    container_port,
    flags,
    last_wins,
    launcher_args,
    main_container,
    node_name,
    resolve,
    uid,
)


def test_the_downward_api_is_resolved_as_the_kubelet_would():
    env = [{"name": "A", "value": "1"}, {"name": "EMPTY"},
           {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
           {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['missing']"}}}]
    got = resolve(env, "p-0", "ml", {"app": "train"}, {}, "gpu-node-a")
    assert got == [("A", "1"), ("EMPTY", ""), ("POD", "p-0"), ("NS", "ml"), ("NODE", "gpu-node-a"), ("L", "train"),
                   ("N", "")]
    assert resolve(None, "p", "ns", {}, {}, "n") == []


@pytest.mark.parametrize("item, needle", [
    ({"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}, "only value and fieldRef"),
    ({"name": "U", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, "fieldRef 'status.podIP'"),
])
def test_a_source_the_model_does_not_know_is_one_line(item, needle):
    with pytest.raises(InputError, match=needle) as err:
        resolve([item], "p", "ns", {}, {}, "n")
    assert "\n" not in str(err.value)


def test_the_launcher_is_the_images_torchpod_or_the_container_is_refused():
    assert launcher_args({"args": ["run", "--", "t.py"]}) == ("run", "--", "t.py")
    assert launcher_args({"command": ["torchpod"], "args": ["plan"]}) == ("plan",)
    with pytest.raises(InputError, match=r"command \['sh', '-c'\] is not modelled"):
        launcher_args({"name": "c", "command": ["sh", "-c"]})


def test_the_last_definition_of_a_variable_wins_and_goes_last():
    assert last_wins([("A", "1"), ("B", "2"), ("A", "3")]) == (("B", "2"), ("A", "3"))
    pod = Pod("p", "p", (), last_wins([("X", "1"), ("X", "2")]), (), "img")
    assert pod.env_dict == {"X": "2"}


def test_the_named_container_and_port_else_the_first_and_the_default():
    spec = {"containers": [{"name": "side"}, {"name": "pytorch", "ports": [{"name": "pj", "containerPort": 9}]}]}
    assert main_container(spec, "pytorch")["name"] == "pytorch"
    assert main_container(spec, "absent")["name"] == "side" and main_container(spec)["name"] == "side"
    assert main_container(spec, "absent", "pytorch")["name"] == "pytorch"  # any of the names
    assert container_port(main_container(spec, "pytorch"), "pj", 1) == 9
    assert container_port(main_container(spec), "pj", 1) == 1
    with pytest.raises(InputError, match="pod template has no containers"):
        main_container({"containers": []})


def test_flags_node_names_and_uids_are_stable():
    assert flags(["--master=m", "--port=23456", "plain", "--bare"]) == {"master": "m", "port": "23456"}
    assert [node_name(i) for i in (0, 25, 26, 27)] == ["gpu-node-a", "gpu-node-z", "gpu-node-a1", "gpu-node-b1"]
    assert uid("job") == uid("job") != uid("jbo") and len(uid("job")) == 36
