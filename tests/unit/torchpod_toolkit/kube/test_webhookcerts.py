"""torchpod_toolkit.kube.webhookcerts: the certificates a rotator accepts and the API server
trusts, written where a webhook Secret's keys would be mounted."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from torchpod_toolkit.kube import webhookcerts

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def test_the_certificates_are_what_a_rotator_keeps_and_the_api_server_trusts(tmp_path):
    files = webhookcerts.make_certs(tmp_path, "op-ca", ["op-webhook.ops.svc"], NOW)
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
