"""torchpod_toolkit.kube.podenv: a container's environment and command as the kubelet makes
them (kubernetes v1.37.2, pkg/kubelet/kubelet_pods.go makeEnvironmentVariables and
third_party/forked/golang/expansion), with the kubelet's own words for what is missing, and
hostile names, values and references."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod_toolkit.kube import podenv

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "demo", "b": 'q"x'},
                    "annotations": {"note": "line\nbreak"}},
       "spec": {"nodeName": "node-0", "serviceAccountName": "sa",
                "containers": [{"name": "main", "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}]}}
KUBERNETES = {"metadata": {"name": "kubernetes", "namespace": "default"},
              "spec": {"clusterIP": "10.0.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}


def context(container, config_maps=None, secrets=None, services=None):
    maps, hidden = config_maps or {}, secrets or {}
    return podenv.PodContext(POD, container, pod_ip="172.18.0.5", host_ip="172.18.0.1",
                             config_maps=maps.get, secrets=hidden.get, services=services or {},
                             allocatable={"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi"})


# --- expansion ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("$(A)", "a"), ("$(A)-$(B)", "a-b"), ("$$(A)", "$(A)"), ("$(MISSING)", "$(MISSING)"), ("$(A", "$(A"),
    ("$", "$"), ("a$", "a$"), ("$x$(A)", "$xa"), ("$$$(A)", "$a"), ("$()", ""), ("(A)", "(A)"), ("$(A)$(A)", "aa"),
    ("é$(A)é", "éaé"),
])
def test_expand_follows_the_forked_go_expansion(text, expected):
    mapping = podenv.mapping_for({"A": "a", "B": "b", "": ""})
    assert podenv.expand(text, mapping) == expected


@given(st.text())
def test_expand_without_a_dollar_is_the_identity(text):
    text = text.replace("$", "")
    assert podenv.expand(text, podenv.mapping_for({})) == text


@given(st.text())
def test_an_unknown_reference_is_left_as_written(text):
    # every name unknown: the only change is $$ becoming $
    assert podenv.expand(text, podenv.mapping_for({})) == _unescape(text)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text) and text[i + 1] == "$":
            out.append("$")
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def test_command_and_args_expand_against_the_containers_own_environment():
    container = {"command": ["echo", "$(A)"], "args": ["$(B)", "$$(A)", "$(C)"]}
    assert podenv.expand_command(container, {"A": "1", "B": "2"}) == (["echo", "1"], ["2", "$(A)", "$(C)"])
    assert podenv.expand_command({}, {}) == ([], [])


# --- quantities and resources ----------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [("500m", Fraction(1, 2)), ("2", 2), ("1Gi", 2**30), ("1.5k", 1500),
                                         ("1e3", 1000), ("100Mi", 100 * 2**20), ("0.1", Fraction(1, 10))])
def test_quantities(text, value):
    assert podenv.quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "10 Mi", "Mi", "1x", "--1", None, "1e9999"])
def test_a_malformed_quantity_is_a_config_error(text):
    with pytest.raises(podenv.ConfigError, match="quantit"):
        podenv.quantity(text)


def test_resource_values_round_up_and_default_limits_to_allocatable():
    main = POD["spec"]["containers"][0]
    assert podenv.resource_value(POD, main, {"resource": "limits.cpu"}, {"cpu": "16"}) == "2"
    assert podenv.resource_value(POD, main, {"resource": "limits.cpu", "divisor": "1m"}, {}) == "1500"
    assert podenv.resource_value(POD, main, {"resource": "limits.memory", "divisor": "1Mi"}, {}) == "1024"
    assert podenv.resource_value(POD, {"name": "x"}, {"resource": "limits.memory", "containerName": "x"},
                                 {"memory": "64Gi"}) == str(64 * 2**30)
    assert podenv.resource_value(POD, main, {"resource": "requests.cpu"}, {"cpu": "16"}) == "0"
    with pytest.raises(podenv.ConfigError, match="unsupported container resource : limits.gpu"):
        podenv.resource_value(POD, main, {"resource": "limits.gpu"}, {})


# --- fields -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, value", [
    ("metadata.name", "p"), ("metadata.namespace", "ns"), ("metadata.uid", "u-1"), ("spec.nodeName", "node-0"),
    ("spec.serviceAccountName", "sa"), ("status.podIP", "172.18.0.5"), ("status.hostIP", "172.18.0.1"),
    ("metadata.labels['app']", "demo"), ("metadata.labels['absent']", ""),
    ("metadata.annotations['note']", "line\nbreak"),
    ("metadata.labels", 'app="demo"\nb="q\\"x"'), ("metadata.annotations", 'note="line\\nbreak"'),
])
def test_field_values(path, value):
    assert podenv.field_value(POD, path, "172.18.0.5", "172.18.0.1") == value


@pytest.mark.parametrize("path, words", [("metadata.generateName", "unsupported fieldPath"),
                                         ("metadata.name['x']", "does not support subscript"),
                                         ("", "unsupported fieldPath")])
def test_an_unknown_field_is_a_config_error(path, words):
    with pytest.raises(podenv.ConfigError, match=words):
        podenv.field_value(POD, path, "", "")


def test_go_quote_escapes_as_strconv_quote():
    assert podenv.go_quote('a"b\\c\n\x01\x7fé\u200b') == '"a\\"b\\\\c\\n\\x01\\x7fé\\u200b"'


# --- the environment ------------------------------------------------------------------------------------

def test_env_from_then_env_in_order_with_prefixes_expansion_and_service_variables_last():
    container = {"name": "main",
                 "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}, {"secretRef": {"name": "s"}}],
                 "env": [{"name": "A", "value": "$(CM_x)+$(KUBERNETES_SERVICE_HOST)"},
                         {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "x"}}},
                         {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
                         {"name": "D", "value": "$(A)"}, {"name": "E"},
                         {"name": "KUBERNETES_SERVICE_PORT", "value": "mine"}]}
    services = podenv.service_env([KUBERNETES], "ns", True)
    env = podenv.resolve_env(context(container, {"cm": {"x": "1"}}, {"s": {"token": "t"}}, services))
    assert env["CM_x"] == "1" and env["token"] == "t"
    assert env["A"] == "1+10.0.0.1" and env["B"] == "1" and env["C"] == "t" and env["D"] == "1+10.0.0.1"
    assert env["E"] == "" and env["KUBERNETES_SERVICE_PORT"] == "mine"
    assert env["KUBERNETES_PORT_443_TCP_ADDR"] == "10.0.0.1"


@pytest.mark.parametrize("ref, message", [
    ({"configMapKeyRef": {"name": "cm", "key": "absent"}}, "couldn't find key absent in ConfigMap ns/cm"),
    ({"secretKeyRef": {"name": "s", "key": "absent"}}, "couldn't find key absent in Secret ns/s"),
    ({"configMapKeyRef": {"name": "nothing", "key": "x"}}, 'configmaps "nothing" not found'),
    ({"secretKeyRef": {"name": "nothing", "key": "x"}}, 'secrets "nothing" not found'),
    ({"fileKeyRef": {"path": "x", "key": "y"}}, "unsupported valueFrom"),
])
def test_a_missing_reference_fails_in_the_kubelets_words(ref, message):
    container = {"name": "main", "env": [{"name": "X", "valueFrom": ref}]}
    with pytest.raises(podenv.ConfigError) as raised:
        podenv.resolve_env(context(container, {"cm": {"x": "1"}}, {"s": {"t": "2"}}))
    assert str(raised.value).startswith(message)


def test_an_optional_reference_to_nothing_leaves_the_variable_out():
    container = {"name": "main", "envFrom": [{"configMapRef": {"name": "nothing", "optional": True}}],
                 "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "no", "optional": True}}},
                         {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "none", "key": "k", "optional": True}}}]}
    assert podenv.resolve_env(context(container, {"cm": {"x": "1"}})) == {}
    with pytest.raises(podenv.ConfigError, match='configmaps "nothing" not found'):
        podenv.resolve_env(context({"name": "m", "envFrom": [{"configMapRef": {"name": "nothing"}}]}))


@given(name=st.text(min_size=1, max_size=40), value=st.text(max_size=200_000))
def test_any_value_passes_through_unchanged_when_it_holds_no_reference(name, value):
    value = value.replace("$", "")
    container = {"name": "main", "env": [{"name": name, "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}
    assert podenv.resolve_env(context(container, {"cm": {"k": value}}))[name] == value


def test_service_variables_follow_envvars_from_services():
    web = {"metadata": {"name": "my-web", "namespace": "ns"},
           "spec": {"clusterIP": "10.0.0.9",
                    "ports": [{"port": 80}, {"name": "admin-port", "port": 81, "protocol": "UDP"}]}}
    headless = {"metadata": {"name": "peers", "namespace": "ns"}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}
    other = {"metadata": {"name": "elsewhere", "namespace": "other"},
             "spec": {"clusterIP": "10.0.0.7", "ports": [{"port": 1}]}}
    env = podenv.service_env([KUBERNETES, web, headless, other], "ns", True)
    assert env["MY_WEB_SERVICE_HOST"] == "10.0.0.9" and env["MY_WEB_SERVICE_PORT"] == "80"
    assert env["MY_WEB_SERVICE_PORT_ADMIN_PORT"] == "81" and env["MY_WEB_PORT"] == "tcp://10.0.0.9:80"
    assert env["MY_WEB_PORT_81_UDP_PROTO"] == "udp" and env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert not [k for k in env if k.startswith(("PEERS", "ELSEWHERE"))]
    assert set(podenv.service_env([KUBERNETES, web], "ns", False)) == set(podenv.service_env([KUBERNETES], "x", True))
