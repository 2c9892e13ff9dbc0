"""torchpod_toolkit.kube.operatormanifests: the module cache's answer, an overlay's objects
sorted, what the Deployment mounts and runs as, the webhook configurations pointed at
127.0.0.1 with the CA made here, the Secret a rotator reads, and a token kubeconfig."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import operatormanifests

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": "ops"},
    "spec": {"template": {"spec": {
        "serviceAccountName": "op-sa",
        "volumes": [{"name": "cert", "secret": {"secretName": "op-cert"}},
                    {"name": "config", "configMap": {"name": "op-config"}}, {"name": "scratch", "emptyDir": {}}],
    }}},
}
WEBHOOK = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "op-validating"},
    "webhooks": [{"name": "v.op.example.com", "failurePolicy": "Fail", "sideEffects": "None",
                  "clientConfig": {"service": {"name": "op-webhook", "namespace": "ops", "path": "/validate-thing"}},
                  "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                             "resources": ["things"]}]}],
}
OVERLAY = [
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op-sa", "namespace": "ops"}},
    {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
     "metadata": {"name": "things.example.com"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "op-cert", "namespace": "ops"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "op-config", "namespace": "ops"},
     "data": {"config.yaml": "port: 9443\n"}},
    DEPLOYMENT, WEBHOOK,
]


def test_the_module_caches_answer_gives_the_source_folder_or_one_line():
    assert operatormanifests.parse_download(json.dumps({"Path": "m", "Dir": "/go/pkg/mod/m@v1.0.0"}), "m@v1.0.0") == \
        Path("/go/pkg/mod/m@v1.0.0")
    for text, words in [("{", "not JSON"), (json.dumps({"Error": "410 Gone"}), "410 Gone"),
                        (json.dumps({"Path": "m"}), "no Dir"), ("[]", "no Dir")]:
        with pytest.raises(RuntimeFailure, match=f"go mod download -json m@v1.0.0: .*{words}"):
            operatormanifests.parse_download(text, "m@v1.0.0")


def test_an_overlay_is_sorted_by_what_the_install_does_with_each_object():
    docs = operatormanifests.parse_objects(yaml.safe_dump_all(OVERLAY), "overlay")
    manifests = operatormanifests.sort_manifests(docs)
    assert [c["metadata"]["name"] for c in manifests.crds] == ["things.example.com"]
    assert [o["kind"] for o in manifests.objects] == ["Namespace", "ServiceAccount", "Secret", "ConfigMap"]
    assert manifests.webhooks == [WEBHOOK] and manifests.deployments == [DEPLOYMENT]
    assert operatormanifests.service_account(manifests.deployments, "overlay") == "op-sa"
    assert operatormanifests.mounted(manifests.deployments, "secret") == ["op-cert"]
    assert operatormanifests.mounted(manifests.deployments, "configMap") == ["op-config"]
    assert operatormanifests.config_files(manifests.objects, ["op-config"]) == {"config.yaml": "port: 9443\n"}


@pytest.mark.parametrize("text", ["a: [", "- 1\n", "kind: Secret\n", "kind: Secret\nmetadata: {}\n", "just text"])
def test_what_is_not_a_stream_of_named_objects_is_refused_naming_the_overlay(text):
    with pytest.raises(RuntimeFailure, match="^overlay/x: "):
        operatormanifests.parse_objects(text, "overlay/x")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_is_objects_or_one_error(text):
    try:
        docs = operatormanifests.parse_objects(text, "overlay")
    except RuntimeFailure as exc:
        assert str(exc).startswith("overlay: ")
        return
    assert all(isinstance(d, dict) and d["kind"] and d["metadata"]["name"] for d in docs)


def test_a_deployment_without_one_service_account_is_refused():
    other = {**DEPLOYMENT, "spec": {"template": {"spec": {"serviceAccountName": "other"}}}}
    for deployments in ([], [other, DEPLOYMENT]):
        with pytest.raises(RuntimeFailure, match="expected one Deployment naming one"):
            operatormanifests.service_account(deployments, "overlay")


def test_webhooks_point_at_loopback_with_the_ca_and_keep_their_rules():
    (config,) = operatormanifests.rewrite_webhooks([WEBHOOK], 19443, b"CA PEM")
    (hook,) = config["webhooks"]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:19443/validate-thing",
                                    "caBundle": base64.b64encode(b"CA PEM").decode()}
    assert hook["rules"] == WEBHOOK["webhooks"][0]["rules"] and hook["failurePolicy"] == "Fail"
    assert WEBHOOK["webhooks"][0]["clientConfig"]["service"]["path"] == "/validate-thing"  # the input is kept
    assert operatormanifests.service_hosts([WEBHOOK, WEBHOOK]) == ["op-webhook.ops.svc"]


def test_a_webhook_path_that_is_not_absolute_is_refused():
    bad = {**WEBHOOK, "webhooks": [{"name": "v", "clientConfig": {"service": {"name": "s", "path": "@evil.example"}}}]}
    with pytest.raises(RuntimeFailure, match="webhook v: path '@evil.example'; expected one starting with /"):
        operatormanifests.rewrite_webhooks([bad], 1, b"")


def test_the_mounted_secret_gets_the_certificates_and_no_other():
    objects = operatormanifests.prefill_secrets(OVERLAY, ["op-cert"], {"tls.crt": b"cert"})
    (prefilled,) = [o for o in objects if o["kind"] == "Secret"]
    assert prefilled["data"] == {"tls.crt": base64.b64encode(b"cert").decode()}
    assert [o for o in objects if o["kind"] != "Secret"] == [o for o in OVERLAY if o["kind"] != "Secret"]
    assert operatormanifests.prefill_secrets(OVERLAY, ["another"], {"tls.crt": b"cert"}) == OVERLAY


def test_a_token_kubeconfig_names_the_service_account():
    config = yaml.safe_load(operatormanifests.token_kubeconfig("https://127.0.0.1:6443", Path("/p/ca.crt"), "t0k",
                                                               "system:serviceaccount:ops:op-sa"))
    assert config["users"] == [{"name": "system:serviceaccount:ops:op-sa", "user": {"token": "t0k"}}]
    assert config["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                                "certificate-authority": "/p/ca.crt"}
