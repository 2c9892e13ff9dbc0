"""The webhook CA and serving certificate made here for an operator whose programs run as
processes on this host (``operators`` says why): a CA named as the operator's cert rotator
names its own, and a serving certificate it signs for 127.0.0.1 and the DNS names of the
Services the webhooks name. A rotator that runs keeps them (open-policy-agent
cert-controller v0.10.1, pkg/rotator/rotator.go: ``ValidCert`` checks the CA against the
rotator's ``CAName`` and the serving certificate against ``<service>.<namespace>.svc``, 90
days ahead; the CA key is parsed as PKCS #1) and injects the same ``caBundle``.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torchpod_toolkit.kube import plane

# A rotator that runs refreshes a certificate valid for under 90 days (module docstring).
CERT_DAYS = 365


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS #1: the rotator parses the CA key of its Secret with x509.ParsePKCS1PrivateKey
    # before it injects the CA (cert-controller v0.10.1, rotator.go, buildArtifactsFromSecret).
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _certificate(subject: str, names: Sequence[x509.GeneralName], key: rsa.RSAPrivateKey,
                 issuer: tuple[x509.Certificate, rsa.RSAPrivateKey] | None,
                 now: datetime.datetime) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    signer_name, signer_key = (name, key) if issuer is None else (issuer[0].subject, issuer[1])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(signer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
               .add_extension(x509.SubjectAlternativeName(list(names)), critical=False))
    if issuer is None:
        builder = builder.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                      content_commitment=False, key_encipherment=False,
                                                      data_encipherment=False, key_agreement=False,
                                                      encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(signer_key, hashes.SHA256())


def make_certs(folder: Path, ca_name: str, hosts: Sequence[str], now: datetime.datetime) -> dict[str, bytes]:
    """A CA (named ``ca_name``, also as a DNS name: what a rotator checks) and a serving
    certificate it signs for 127.0.0.1 and ``hosts``, written to ``folder`` as ``ca.crt``,
    ``ca.key``, ``tls.crt`` and ``tls.key`` (the keys a webhook Secret holds); returns them."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, key = _new_key(), _new_key()
    ca = _certificate(ca_name, [x509.DNSName(ca_name)], ca_key, None, now)
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.IPv4Address(plane.LOOPBACK)),
                                     *(x509.DNSName(h) for h in hosts)]
    served = _certificate(hosts[0] if hosts else plane.LOOPBACK, names, key, (ca, ca_key), now)
    files = {"ca.crt": _pem(ca), "ca.key": _key_pem(ca_key), "tls.crt": _pem(served), "tls.key": _key_pem(key)}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        (folder / name).chmod(0o600)
    return files

