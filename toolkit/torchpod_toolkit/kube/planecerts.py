"""The certificates and kubeconfigs of a control plane (``plane``), made at start in its
folder: one cluster CA, serving certificates for loopback and the API's Service names,
client certificates in the users and groups RBAC binds, a front-proxy CA and client for the
aggregation layer, the service-account key pair, and a kubeconfig per client from the YAML
library. The set is kubeadm's (kubernetes v1.37.2, cmd/kubeadm/app/phases/certs); the
kubelet stand-in asks the same CA for each node's serving and client certificates.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torchpod import readers
from torchpod.errors import RuntimeFailure

from .plane import API_SERVICE_IP, LOOPBACK

API_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local")
FRONT_PROXY_CLIENT = "front-proxy-client"
CERT_DAYS = 30
PEM_CAP = 64 << 10  # a key or certificate make_pki writes: under 1 KiB


def _name(common: str, organization: str = "") -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


Issuer = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def _issue(pki: Path, stem: str, subject: x509.Name, now: datetime.datetime,
           issuer: Issuer | None, server: bool = False, ips: Sequence[str] = ()) -> Issuer:
    """``<stem>.crt`` and ``<stem>.key`` under ``pki``: a CA when ``issuer`` is None, else a
    certificate the CA signs, for clients and, with ``server``, for loopback servers too (or,
    with ``ips``, for those addresses alone)."""
    key = ec.generate_private_key(ec.SECP256R1())
    signer_name, signer_key = (subject, key) if issuer is None else (issuer[0].subject, issuer[1])
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(signer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True))
    if issuer is not None:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server and ips:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]), critical=False)
    elif server:
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in API_NAMES]
        names += [x509.IPAddress(ipaddress.IPv4Address(LOOPBACK)), x509.IPAddress(API_SERVICE_IP)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    (pki / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki / f"{stem}.key", key)
    return cert, key


# Each client's certificate: (file stem, user, group). The users and groups are those the
# API server's bootstrap RBAC binds (kubernetes, plugin/pkg/auth/authorizer/rbac/bootstrappolicy).
KUBELET_CLIENT = "apiserver-kubelet-client"
CLIENTS = (("admin", "torchpod-admin", "system:masters"),
           ("controller-manager", "system:kube-controller-manager", ""),
           ("scheduler", "system:kube-scheduler", ""))


def make_pki(pki: Path, now: datetime.datetime) -> None:
    """The cluster CA, the servers' certificates, each client's, the front proxy's CA and
    client (the aggregation layer: kubeadm's set, cmd/kubeadm/app/phases/certs), and the
    service-account key."""
    pki.mkdir(parents=True, exist_ok=True)
    ca = _issue(pki, "ca", _name("torchpod-kube-ca"), now, None)
    _issue(pki, "apiserver", _name("kube-apiserver"), now, ca, server=True)
    for stem, user, group in CLIENTS:
        _issue(pki, stem, _name(user, group), now, ca, server=stem != "admin")
    # the API server's client certificate for kubelets (`kubectl logs` goes through it), as kubeadm's
    _issue(pki, KUBELET_CLIENT, _name("kube-apiserver-kubelet-client", "system:masters"), now, ca)
    front_proxy = _issue(pki, "front-proxy-ca", _name("torchpod-front-proxy-ca"), now, None)
    _issue(pki, "front-proxy-client", _name(FRONT_PROXY_CLIENT), now, front_proxy)
    sa = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki / "sa.key", sa)
    (pki / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))


def read_pem(path: Path) -> bytes:
    """A key or certificate ``make_pki`` wrote, through the bounded reader."""
    return readers.read_bytes(path, what=str(path), expected="a PEM file make_pki wrote", cap=PEM_CAP)


def _ca(pki: Path) -> Issuer:
    ca_key = serialization.load_pem_private_key(read_pem(pki / "ca.key"), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise RuntimeFailure(f"{pki / 'ca.key'}: not the EC key make_pki writes")
    return x509.load_pem_x509_certificate(read_pem(pki / "ca.crt")), ca_key


def issue_server(pki: Path, stem: str, common: str, ips: Sequence[str]) -> Path:
    """A serving certificate of the cluster CA for ``ips`` (a kubelet's endpoint on its
    Node's address), ``<stem>.crt`` and ``.key`` under ``pki``."""
    _issue(pki, stem, _name(common), datetime.datetime.now(datetime.timezone.utc), _ca(pki), server=True, ips=ips)
    return pki / f"{stem}.crt"


def issue_client(pki: Path, stem: str, user: str, group: str, now: datetime.datetime | None = None) -> Path:
    """A client certificate of the cluster CA ``make_pki`` made (``<stem>.crt`` and ``.key``
    under ``pki``) for ``user`` in ``group``: a node's is system:node:<name> in system:nodes,
    the identity the Node authorizer and NodeRestriction admission recognise."""
    _issue(pki, stem, _name(user, group), now or datetime.datetime.now(datetime.timezone.utc), _ca(pki))
    return pki / f"{stem}.crt"


def kubeconfig(server: str, pki: Path, stem: str) -> str:
    """A kubeconfig for one client certificate, from the YAML library."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "torchpod",
        "clusters": [{"name": "torchpod", "cluster": {"server": server,
                                                      "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": stem, "user": {"client-certificate": str(pki / f"{stem}.crt"),
                                          "client-key": str(pki / f"{stem}.key")}}],
        "contexts": [{"name": "torchpod", "context": {"cluster": "torchpod", "user": stem}}],
    }, sort_keys=False)
