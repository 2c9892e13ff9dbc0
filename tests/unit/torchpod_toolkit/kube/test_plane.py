"""torchpod_toolkit.kube.plane, what is decided before a process starts: the certificates
(a CA, servers for loopback and the API's Service names, clients in the groups RBAC binds),
the kubeconfigs and scheduler configuration from the YAML library, and each component's
command line (loopback only, every file it names written by ``prepare``)."""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.kube import plane

NOW = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.timezone.utc)
PORTS = plane.Ports(etcd=32379, etcd_peer=32380, apiserver=36443, controller_manager=30257, scheduler=30259)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plane")
    plane.prepare(root, PORTS, NOW)
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
    assert set(names.get_values_for_type(x509.DNSName)) == set(plane.API_NAMES)
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "10.0.0.1"}
    usages = _cert(prepared, "apiserver").extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages


@pytest.mark.parametrize("stem, user, group", plane.CLIENTS)
def test_each_client_is_the_user_and_group_bootstrap_rbac_binds(prepared, stem, user, group):
    subject = _cert(prepared, stem).subject
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [user]
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ([group] if group else [])
    assert ExtendedKeyUsageOID.CLIENT_AUTH in _cert(prepared, stem).extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value


def test_the_front_proxy_has_a_ca_of_its_own_and_the_api_server_trusts_only_its_client(prepared):
    # the aggregation layer's requests carry the user in headers: only this client may send them
    front_ca, client = _cert(prepared, "front-proxy-ca"), _cert(prepared, "front-proxy-client")
    client.verify_directly_issued_by(front_ca)
    assert front_ca.subject != _cert(prepared, "ca").subject
    flags = dict(w[2:].split("=", 1) for w in plane.apiserver_argv(Path("/b"), prepared, PORTS)[1:])
    assert flags["requestheader-client-ca-file"] == str(prepared / "pki" / "front-proxy-ca.crt")
    assert [a.value for a in client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == \
        [flags["requestheader-allowed-names"]]
    assert flags["proxy-client-cert-file"] == str(prepared / "pki" / "front-proxy-client.crt")


def test_the_service_account_keys_are_a_pair(prepared):
    key = serialization.load_pem_private_key((prepared / "pki" / "sa.key").read_bytes(), password=None)
    public = serialization.load_pem_public_key((prepared / "pki" / "sa.pub").read_bytes())
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.public_key() == public


@pytest.mark.parametrize("stem", [c[0] for c in plane.CLIENTS])
def test_each_kubeconfig_names_the_server_the_ca_and_its_own_certificate(prepared, stem):
    config = yaml.safe_load((prepared / f"{stem}.kubeconfig").read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    assert cluster["server"] == f"https://127.0.0.1:{PORTS.apiserver}"
    assert Path(cluster["certificate-authority"]) == prepared / "pki" / "ca.crt"
    assert Path(user["client-certificate"]) == prepared / "pki" / f"{stem}.crt"
    assert config["current-context"] == config["contexts"][0]["name"]


def test_the_scheduler_reads_its_client_from_its_configuration(prepared):
    config = yaml.safe_load((prepared / "scheduler.yaml").read_text())
    assert config["kind"] == "KubeSchedulerConfiguration" and config["apiVersion"].endswith("/v1")
    assert config["clientConnection"]["kubeconfig"] == str(prepared / "scheduler.kubeconfig")
    assert config["leaderElection"] == {"leaderElect": False}


@pytest.mark.parametrize("component", plane.COMPONENTS)
def test_each_command_line_listens_on_loopback_and_names_only_files_prepare_wrote(prepared, component):
    argv = plane.ARGV[component](Path("/cache/bin"), prepared, PORTS)
    assert argv[0] == f"/cache/bin/{component}"
    assert all(isinstance(word, str) for word in argv) and len(set(argv)) == len(argv)
    for word in argv[1:]:
        assert word.startswith("--") and "=" in word, word
        value = word.split("=", 1)[1]
        if not word.startswith("--service-account-issuer="):  # a name in tokens, not an address
            for url in re.findall(r"[a-z]+://([^/,]+)", value):
                assert url.split(":")[0] == "127.0.0.1", word
        if value.startswith(str(prepared)) and not word.startswith("--data-dir"):
            assert Path(value).is_file(), word
    flags = dict(word[2:].split("=", 1) for word in argv[1:])
    if "bind-address" in flags:
        assert flags["bind-address"] == "127.0.0.1"


def test_the_api_server_runs_the_admission_and_authorization_a_cluster_runs(prepared):
    flags = dict(w[2:].split("=", 1) for w in plane.apiserver_argv(Path("/b"), prepared, PORTS)[1:])
    assert {"PodSecurity", "NodeRestriction"} <= set(flags["enable-admission-plugins"].split(","))
    assert "disable-admission-plugins" not in flags
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["etcd-servers"] == f"http://127.0.0.1:{PORTS.etcd}"
    assert flags["secure-port"] == str(PORTS.apiserver)


def test_the_ports_handed_out_are_distinct_loopback_ports():
    ports = plane.free_ports(5)
    assert len(set(ports)) == 5 and all(1024 <= p < 65536 for p in ports)


def test_a_log_tail_is_bounded_and_any_bytes_read(tmp_path):
    log = tmp_path / "x.log"
    log.write_bytes(b"\xff" * 10 + b"end")
    assert plane.log_tail(log, limit=5) == "\ufffd\ufffdend"
    assert plane.log_tail(tmp_path / "absent").startswith("(no log: ")
    with open(log, "wb") as f:
        f.truncate(1 << 30)  # a sparse gigabyte: its end alone is read
        f.seek(0, 2)
        f.write(b"last words\n")
    assert plane.log_tail(log, limit=11) == "last words\n"


def test_a_log_that_is_no_file_is_named_in_the_tail_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "fifo.log")
    assert plane.log_tail(tmp_path / "fifo.log").startswith(f"(no log: {tmp_path / 'fifo.log'} is a FIFO (named pipe)")
    assert "is a directory" in plane.log_tail(tmp_path)


def _record(root: Path) -> plane.Plane:
    found = plane.Plane(root=root, ports=PORTS, pids={"etcd": 1}, binaries={"etcd": "/bin/etcd"}, seconds=1.5)
    (root / plane.STATE).write_text(json.dumps({**asdict(found), "root": str(root)}))
    return found


def test_a_record_is_read_once_through_the_bounded_reader(tmp_path):
    record = _record(tmp_path)
    assert plane.load(tmp_path) == record
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / plane.CURRENT).write_text(f"{tmp_path / 'elsewhere'}\n")
    assert plane.down(tmp_path / "cache") is None  # no record in the folder remembered: nothing to stop


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"{" + b" " * plane.STATE_CAP + b"}"), "over the 64 KiB cap"),
    (lambda p: p.write_bytes(b'{"root": "\xff"}'), "not UTF-8 text (first at byte 10)"),
    (lambda p: p.symlink_to("/dev/zero"), "(a symbolic link)"),
    (lambda p: None, "No such file or directory"),
])
def test_a_record_that_is_no_small_text_file_is_one_error(tmp_path, make, needle):
    make(tmp_path / plane.STATE)
    with pytest.raises(RuntimeFailure) as info:
        plane.load(tmp_path)
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "no control plane remembered: "),  # not a file: none remembered, and no wait
    (lambda p: p.write_bytes(b"/" * (plane.POINTER_CAP + 1)), "over the 4 KiB cap"),
    (lambda p: p.write_bytes(b"/tmp/\xff\n"), "not UTF-8 text"),
])
def test_a_pointer_that_is_no_small_text_file_is_one_error(tmp_path, make, needle):
    make(tmp_path / plane.CURRENT)
    if needle.startswith("no control"):
        assert plane.down(tmp_path) is None
        return
    with pytest.raises(RuntimeFailure, match=re.escape(needle)):
        plane.down(tmp_path)


def test_resident_memory_is_read_from_procfs_and_0_for_a_process_gone():
    found = plane.rss_bytes({"me": os.getpid(), "gone": 1 << 30})
    assert found["me"] > 0 and found["gone"] == 0


def test_a_ca_key_that_is_no_file_is_one_error(tmp_path):
    pki = tmp_path / "pki"
    plane.make_pki(pki, datetime.datetime.now(datetime.timezone.utc))
    (pki / "ca.key").unlink()
    os.mkfifo(pki / "ca.key")
    with pytest.raises(InputError, match="ca.key is a FIFO"):
        plane.issue_server(pki, "kubelet", "torchpod-kubelet", ["127.0.0.1"])
