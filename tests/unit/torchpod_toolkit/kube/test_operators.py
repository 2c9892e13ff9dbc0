"""torchpod_toolkit.kube.operators, the parts that need no plane: the module cache's answer,
an overlay's objects sorted, what the Deployment mounts and runs as, the webhook
configurations pointed at 127.0.0.1 with the CA made here, the Secret a rotator reads, the
certificates a rotator accepts, a token kubeconfig, and each operator's command line."""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.kube import operators

from paths import ROOT

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
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
    assert operators.parse_download(json.dumps({"Path": "m", "Dir": "/go/pkg/mod/m@v1.0.0"}), "m@v1.0.0") == \
        Path("/go/pkg/mod/m@v1.0.0")
    for text, words in [("{", "not JSON"), (json.dumps({"Error": "410 Gone"}), "410 Gone"),
                        (json.dumps({"Path": "m"}), "no Dir"), ("[]", "no Dir")]:
        with pytest.raises(RuntimeFailure, match=f"go mod download -json m@v1.0.0: .*{words}"):
            operators.parse_download(text, "m@v1.0.0")


def test_an_overlay_is_sorted_by_what_the_install_does_with_each_object():
    manifests = operators.sort_manifests(operators.parse_objects(yaml.safe_dump_all(OVERLAY), "overlay"))
    assert [c["metadata"]["name"] for c in manifests.crds] == ["things.example.com"]
    assert [o["kind"] for o in manifests.objects] == ["Namespace", "ServiceAccount", "Secret", "ConfigMap"]
    assert manifests.webhooks == [WEBHOOK] and manifests.deployments == [DEPLOYMENT]
    assert operators.service_account(manifests.deployments, "overlay") == "op-sa"
    assert operators.mounted(manifests.deployments, "secret") == ["op-cert"]
    assert operators.mounted(manifests.deployments, "configMap") == ["op-config"]
    assert operators.config_files(manifests.objects, ["op-config"]) == {"config.yaml": "port: 9443\n"}


@pytest.mark.parametrize("text", ["a: [", "- 1\n", "kind: Secret\n", "kind: Secret\nmetadata: {}\n", "just text"])
def test_what_is_not_a_stream_of_named_objects_is_refused_naming_the_overlay(text):
    with pytest.raises(RuntimeFailure, match="^overlay/x: "):
        operators.parse_objects(text, "overlay/x")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_is_objects_or_one_error(text):
    try:
        docs = operators.parse_objects(text, "overlay")
    except RuntimeFailure as exc:
        assert str(exc).startswith("overlay: ")
        return
    assert all(isinstance(d, dict) and d["kind"] and d["metadata"]["name"] for d in docs)


def test_a_deployment_without_one_service_account_is_refused():
    other = {**DEPLOYMENT, "spec": {"template": {"spec": {"serviceAccountName": "other"}}}}
    for deployments in ([], [other, DEPLOYMENT]):
        with pytest.raises(RuntimeFailure, match="expected one Deployment naming one"):
            operators.service_account(deployments, "overlay")


def test_webhooks_point_at_loopback_with_the_ca_and_keep_their_rules():
    (config,) = operators.rewrite_webhooks([WEBHOOK], 19443, b"CA PEM")
    (hook,) = config["webhooks"]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:19443/validate-thing",
                                    "caBundle": base64.b64encode(b"CA PEM").decode()}
    assert hook["rules"] == WEBHOOK["webhooks"][0]["rules"] and hook["failurePolicy"] == "Fail"
    assert WEBHOOK["webhooks"][0]["clientConfig"]["service"]["path"] == "/validate-thing"  # the input is kept
    assert operators.service_hosts([WEBHOOK, WEBHOOK]) == ["op-webhook.ops.svc"]


def test_the_webhook_paths_are_each_hooks_once():
    two = {**WEBHOOK, "webhooks": [*WEBHOOK["webhooks"], {"name": "m", "clientConfig": {"service": {"name": "s"}}}]}
    assert operators.webhook_paths([two, WEBHOOK]) == ["/", "/validate-thing"]  # no path: the server's root
    assert operators.webhook_paths([]) == []


def test_a_webhook_path_that_is_not_absolute_is_refused():
    bad = {**WEBHOOK, "webhooks": [{"name": "v", "clientConfig": {"service": {"name": "s", "path": "@evil.example"}}}]}
    with pytest.raises(RuntimeFailure, match="webhook v: path '@evil.example'; expected one starting with /"):
        operators.rewrite_webhooks([bad], 1, b"")


def test_the_mounted_secret_gets_the_certificates_and_no_other():
    objects = operators.prefill_secrets(OVERLAY, ["op-cert"], {"tls.crt": b"cert"})
    (prefilled,) = [o for o in objects if o["kind"] == "Secret"]
    assert prefilled["data"] == {"tls.crt": base64.b64encode(b"cert").decode()}
    assert [o for o in objects if o["kind"] != "Secret"] == [o for o in OVERLAY if o["kind"] != "Secret"]
    assert operators.prefill_secrets(OVERLAY, ["another"], {"tls.crt": b"cert"}) == OVERLAY


def test_the_certificates_are_what_a_rotator_keeps_and_the_api_server_trusts(tmp_path):
    files = operators.make_certs(tmp_path, "op-ca", ["op-webhook.ops.svc"], NOW)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    ca, served = x509.load_pem_x509_certificate(files["ca.crt"]), x509.load_pem_x509_certificate(files["tls.crt"])
    # the rotator checks the CA for its CAName and the serving cert for the Service's name, 90 days ahead
    assert ca.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == ["op-ca"]
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["op-webhook.ops.svc"]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert served.issuer == ca.subject and served.not_valid_after_utc - NOW > datetime.timedelta(days=90)
    served.verify_directly_issued_by(ca)
    # PKCS #1, the form the rotator parses its CA key in
    assert files["ca.key"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert isinstance(load_pem_private_key(files["ca.key"], None), rsa.RSAPrivateKey)
    assert all((tmp_path / name).stat().st_mode & 0o077 == 0 for name in files)


def test_a_token_kubeconfig_names_the_service_account():
    config = yaml.safe_load(operators.token_kubeconfig("https://127.0.0.1:6443", Path("/p/ca.crt"), "t0k",
                                                       "system:serviceaccount:ops:op-sa"))
    assert config["users"] == [{"name": "system:serviceaccount:ops:op-sa", "user": {"token": "t0k"}}]
    assert config["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                                "certificate-authority": "/p/ca.crt"}


def test_established_reads_the_condition_of_each_crd():
    listed = {"items": [
        {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Established", "status": "True"}]}},
        {"metadata": {"name": "b"}, "status": {"conditions": [{"type": "Established", "status": "False"}]}},
        {"metadata": {"name": "c"}, "status": {}}, {"metadata": {"name": "d"}}]}
    assert operators.established(listed) == {"a"}


def test_each_operator_names_a_module_folder_programs_on_loopback(tmp_path, monkeypatch):
    operators.make_certs(tmp_path / "certs", "op-ca", ["op-webhook.ops.svc"], NOW)
    monkeypatch.setattr(operators, "ROTATOR_CERT_DIR", tmp_path / "rotator")
    programs = [program for spec in operators.OPERATORS.values() for program in spec.programs]
    install = operators.Install(folder=tmp_path, bindir=Path("/cache/bin"), kubeconfig=tmp_path / "k",
                                certs=tmp_path / "certs", ports=operators.Ports(19443, 18081, 18082, (18083, 18084)),
                                namespace="ns",
                                config={"controller_manager_config.yaml": "leaderElection:\n  leaderElect: true\n"},
                                kubeconfigs={program: tmp_path / f"{program}.kubeconfig" for program in programs})
    for name, spec in operators.OPERATORS.items():
        assert (ROOT / "kube" / "operators" / name / "go.mod").is_file(), name
        spec.prepare(install)
        words = []
        for program, argv in spec.programs.items():
            words += argv(install)
            assert words[0] == f"/cache/bin/{next(iter(spec.programs))}" and f"/cache/bin/{program}" in words
        configs = " ".join(p.read_text() for p in tmp_path.glob(f"{name}*-config.yaml"))
        assert "127.0.0.1:18081" in " ".join(words) + configs, name  # the health probes, on loopback
        listening = [w for w in words if w.startswith(("--healthz-address", "--listen-address", "--health-probe"))]
        assert all("127.0.0.1" in w for w in listening), listening
    for name in ("jobset", "lws"):
        config = yaml.safe_load((tmp_path / f"{name}-config.yaml").read_text())
        assert config["webhook"] == {"port": 19443, "host": "127.0.0.1", "certDir": str(tmp_path / "certs")}
        assert config["internalCertManagement"] == {"enable": False}
        assert config["leaderElection"] == {"leaderElect": False}
    kueue = yaml.safe_load((tmp_path / "kueue-config.yaml").read_text())
    assert kueue["webhook"] == {"port": 19443, "host": "127.0.0.1", "certDir": str(tmp_path / "certs")}
    assert kueue["internalCertManagement"]["enable"] is True and kueue["leaderElection"] == {"leaderElect": False}
    assert kueue["integrations"]["frameworks"] == list(operators.KUEUE_FRAMEWORKS)
    assert kueue["metrics"] == {"bindAddress": "0"}


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "tls.key is a FIFO (named pipe); expected a regular file"),
    (lambda p: os.symlink("/dev/zero", p), "tls.key is a character device"),
    (lambda p: p.write_bytes(b"-" * (operators.CERT_CAP + 1)), "over the 64 KiB cap"),
])
def test_a_certificate_file_that_is_no_small_file_is_one_line_never_a_wait(tmp_path, monkeypatch, make, says):
    operators.make_certs(tmp_path / "certs", "op-ca", ["op-webhook.ops.svc"], NOW)
    monkeypatch.setattr(operators, "ROTATOR_CERT_DIR", tmp_path / "rotator")
    install = operators.Install(folder=tmp_path, bindir=Path("/cache/bin"), kubeconfig=tmp_path / "k",
                                certs=tmp_path / "certs", ports=operators.Ports(19443, 18081), namespace="ns")
    operators.OPERATORS["training-operator"].prepare(install)
    served = tmp_path / "tmp" / "k8s-webhook-server" / "serving-certs"
    assert (served / "tls.key").read_bytes() == (tmp_path / "certs" / "tls.key").read_bytes()
    (tmp_path / "certs" / "tls.key").unlink()
    make(tmp_path / "certs" / "tls.key")
    with pytest.raises(InputError, match=re.escape(says)):
        operators.OPERATORS["training-operator"].prepare(install)


def test_an_unknown_operator_is_refused_with_the_known_ones():
    with pytest.raises(InputError, match="operator 'kube-batch'; expected one of: training-operator, jobset"):
        operators.operator("kube-batch")


def test_an_overlay_without_its_network_resources_points_into_the_module_source():
    upstream = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "ops",
                "resources": ["namespace.yaml", "../../base/crds", "../../third-party/jobset"],
                "secretGenerator": [{"name": "cert", "options": {"disableNameSuffixHash": True}}]}
    local = operators.local_overlay(upstream, Path("/mod/manifests/overlays/manager"), ["../../third-party/jobset"],
                                    Path("/install/overlay"))
    assert local["resources"] == ["../../mod/manifests/overlays/manager/namespace.yaml",
                                  "../../mod/manifests/base/crds"]
    assert local["namespace"] == "ops" and local["secretGenerator"] == upstream["secretGenerator"]
    files = {**upstream, "configMapGenerator": [{"name": "c", "files": ["f"]}]}
    for odd, words in [({**upstream, "patches": [{"path": "p.yaml"}]}, r"fields \['patches'\]"),
                       (files, "generator c reads files")]:
        with pytest.raises(RuntimeFailure, match=words):
            operators.local_overlay(odd, Path("/mod/o"), [], Path("/install/overlay"))


def test_operators_that_need_another_name_one_that_exists():
    for spec in operators.OPERATORS.values():
        assert set(spec.needs) <= set(operators.OPERATORS) - {spec.name}


@pytest.mark.parametrize("image", ["", "registry.example/torchpod/pytorch:2.13.0-cuda13.0-x86_64"])
def test_a_site_init_image_names_its_template_and_the_template_keeps_the_defaults_fields(tmp_path, monkeypatch, image):
    monkeypatch.setattr(operators, "ROTATOR_CERT_DIR", tmp_path / "rotator")
    operators.make_certs(tmp_path / "certs", "op-ca", ["op-webhook.ops.svc"], NOW)
    install = operators.Install(folder=tmp_path, bindir=Path("/cache/bin"), kubeconfig=tmp_path / "k",
                                certs=tmp_path / "certs", ports=operators.Ports(19443, 18081), namespace="ns",
                                init_image=image)
    spec = operators.operator("training-operator")
    spec.prepare(install)
    words = spec.programs["training-operator"](install)
    template = tmp_path / operators.INIT_TEMPLATE
    site = [w for w in words if w.startswith("--pytorch-init-container")]
    if not image:  # the operator's own default (alpine:3.10), no file written
        assert site == [] and not template.exists()
        return
    assert site == [f"--pytorch-init-container-image={image}", f"--pytorch-init-container-template-file={template}"]
    [container] = yaml.safe_load(template.read_text())
    assert container["name"] == "init-pytorch" and container["image"] == "{{.InitContainerImage}}"
    assert "securityContext" not in container and container["imagePullPolicy"] == "IfNotPresent"
    command = container["command"][-1]
    assert "{{.MaxTries}}" in command and "getent hosts {{.MasterAddr}}" in command
