"""torchpod_toolkit.kube.planeargs: each component's command line (loopback only, every file
it names written by ``planestart.prepare``), the API server's admission, authorization and
front-proxy flags, and the scheduler's configuration from the YAML library."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from torchpod_toolkit.kube import plane, planeargs

from plane_cases import PORTS, prepared_plane


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return prepared_plane(tmp_path_factory)


def _cert(root: Path, stem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((root / "pki" / f"{stem}.crt").read_bytes())


def test_the_api_server_trusts_only_the_front_proxys_client(prepared):
    # the aggregation layer's requests carry the user in headers: only this client may send them
    client = _cert(prepared, "front-proxy-client")
    flags = dict(w[2:].split("=", 1) for w in planeargs.apiserver_argv(Path("/b"), prepared, PORTS)[1:])
    assert flags["requestheader-client-ca-file"] == str(prepared / "pki" / "front-proxy-ca.crt")
    assert [a.value for a in client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == \
        [flags["requestheader-allowed-names"]]
    assert flags["proxy-client-cert-file"] == str(prepared / "pki" / "front-proxy-client.crt")


def test_the_scheduler_reads_its_client_from_its_configuration(prepared):
    config = yaml.safe_load((prepared / "scheduler.yaml").read_text())
    assert config["kind"] == "KubeSchedulerConfiguration" and config["apiVersion"].endswith("/v1")
    assert config["clientConnection"]["kubeconfig"] == str(prepared / "scheduler.kubeconfig")
    assert config["leaderElection"] == {"leaderElect": False}


@pytest.mark.parametrize("component", plane.COMPONENTS)
def test_each_command_line_listens_on_loopback_and_names_only_files_prepare_wrote(prepared, component):
    argv = planeargs.ARGV[component](Path("/cache/bin"), prepared, PORTS)
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
    flags = dict(w[2:].split("=", 1) for w in planeargs.apiserver_argv(Path("/b"), prepared, PORTS)[1:])
    assert {"PodSecurity", "NodeRestriction"} <= set(flags["enable-admission-plugins"].split(","))
    assert "disable-admission-plugins" not in flags
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["etcd-servers"] == f"http://127.0.0.1:{PORTS.etcd}"
    assert flags["secure-port"] == str(PORTS.apiserver)

