"""torchpod_toolkit.kube.planecerts: the certificates (a CA, servers for loopback and the
API's Service names, clients in the groups RBAC binds, the front proxy's own CA), the
service-account key pair, and the kubeconfigs from the YAML library."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torchpod.errors import InputError
from torchpod_toolkit.kube import planecerts

from plane_cases import NOW


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plane")
    planecerts.make_pki(root / "pki", NOW)
    return root


def _cert(root: Path, stem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((root / "pki" / f"{stem}.crt").read_bytes())


def test_every_certificate_is_signed_by_the_cluster_ca_and_valid_now(prepared):
    ca = _cert(prepared, "ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for stem in ("apiserver", "admin", "controller-manager", "scheduler"):
        cert = _cert(prepared, stem)
        cert.verify_directly_issued_by(ca)
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        assert cert.not_valid_before_utc < NOW < cert.not_valid_after_utc
        key = serialization.load_pem_private_key((prepared / "pki" / f"{stem}.key").read_bytes(), password=None)
        assert key.public_key() == cert.public_key()
        assert (prepared / "pki" / f"{stem}.key").stat().st_mode & 0o077 == 0


def test_the_api_server_answers_to_loopback_and_its_service_names(prepared):
    names = _cert(prepared, "apiserver").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == set(planecerts.API_NAMES)
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.0.0.1"}
    usages = _cert(prepared, "apiserver").extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages


@pytest.mark.parametrize("stem, user, group", planecerts.CLIENTS)
def test_each_client_is_the_user_and_group_bootstrap_rbac_binds(prepared, stem, user, group):
    subject = _cert(prepared, stem).subject
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [user]
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ([group] if group else [])
    assert ExtendedKeyUsageOID.CLIENT_AUTH in _cert(prepared, stem).extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value


def test_the_front_proxy_has_a_ca_of_its_own(prepared):
    # the aggregation layer's requests carry the user in headers: only this client may send them
    front_ca, client = _cert(prepared, "front-proxy-ca"), _cert(prepared, "front-proxy-client")
    client.verify_directly_issued_by(front_ca)
    assert front_ca.subject != _cert(prepared, "ca").subject
    assert [a.value for a in client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == \
        [planecerts.FRONT_PROXY_CLIENT]


def test_the_service_account_keys_are_a_pair(prepared):
    key = serialization.load_pem_private_key((prepared / "pki" / "sa.key").read_bytes(), password=None)
    public = serialization.load_pem_public_key((prepared / "pki" / "sa.pub").read_bytes())
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.public_key() == public



@pytest.mark.parametrize("stem", [c[0] for c in planecerts.CLIENTS])
def test_each_kubeconfig_names_the_server_the_ca_and_its_own_certificate(prepared, stem):
    config = yaml.safe_load(planecerts.kubeconfig("https://127.0.0.1:36443", prepared / "pki", stem))
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    assert cluster["server"] == "https://127.0.0.1:36443"
    assert Path(cluster["certificate-authority"]) == prepared / "pki" / "ca.crt"
    assert Path(user["client-certificate"]) == prepared / "pki" / f"{stem}.crt"
    assert config["current-context"] == config["contexts"][0]["name"]


def test_a_serving_certificate_for_a_node_answers_to_its_address_alone(prepared):
    cert = x509.load_pem_x509_certificate(
        planecerts.issue_server(prepared / "pki", "kubelet-a", "torchpod-kubelet", ["172.18.0.5"]).read_bytes())
    cert.verify_directly_issued_by(_cert(prepared, "ca"))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["172.18.0.5"]
    assert names.get_values_for_type(x509.DNSName) == []


def test_a_ca_key_that_is_no_file_is_one_error(tmp_path):
    pki = tmp_path / "pki"
    planecerts.make_pki(pki, datetime.datetime.now(datetime.timezone.utc))
    (pki / "ca.key").unlink()
    os.mkfifo(pki / "ca.key")
    with pytest.raises(InputError, match="ca.key is a FIFO"):
        planecerts.issue_server(pki, "kubelet", "torchpod-kubelet", ["127.0.0.1"])
