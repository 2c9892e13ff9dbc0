"""torchpod_toolkit.kube.operatorspecs: each operator's command line and the files it is
started with, on loopback with the certificate made here, a certificate file that is no
small file refused in one line, and the operators each one needs."""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.kube import operatorspecs, webhookcerts

from paths import ROOT

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def test_each_operator_names_a_module_folder_programs_on_loopback(tmp_path, monkeypatch):
    webhookcerts.make_certs(tmp_path / "certs", "op-ca", ["op-webhook.ops.svc"], NOW)
    monkeypatch.setattr(operatorspecs, "ROTATOR_CERT_DIR", tmp_path / "rotator")
    programs = [program for spec in operatorspecs.OPERATORS.values() for program in spec.programs]
    install = operatorspecs.Install(folder=tmp_path, bindir=Path("/cache/bin"), kubeconfig=tmp_path / "k",
                                    certs=tmp_path / "certs",
                                    ports=operatorspecs.Ports(19443, 18081, 18082, (18083, 18084)), namespace="ns",
                                    config={"controller_manager_config.yaml": "leaderElection:\n  leaderElect: true\n"},
                                    kubeconfigs={program: tmp_path / f"{program}.kubeconfig" for program in programs})
    for name, spec in operatorspecs.OPERATORS.items():
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
    assert kueue["integrations"]["frameworks"] == list(operatorspecs.KUEUE_FRAMEWORKS)
    assert kueue["metrics"] == {"bindAddress": "0"}


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "tls.key is a FIFO (named pipe); expected a regular file"),
    (lambda p: os.symlink("/dev/zero", p), "tls.key is a character device"),
    (lambda p: p.write_bytes(b"-" * (operatorspecs.CERT_CAP + 1)), "over the 64 KiB cap"),
])
def test_a_certificate_file_that_is_no_small_file_is_one_line_never_a_wait(tmp_path, monkeypatch, make, says):
    webhookcerts.make_certs(tmp_path / "certs", "op-ca", ["op-webhook.ops.svc"], NOW)
    monkeypatch.setattr(operatorspecs, "ROTATOR_CERT_DIR", tmp_path / "rotator")
    install = operatorspecs.Install(folder=tmp_path, bindir=Path("/cache/bin"), kubeconfig=tmp_path / "k",
                                    certs=tmp_path / "certs", ports=operatorspecs.Ports(19443, 18081), namespace="ns")
    operatorspecs.OPERATORS["training-operator"].prepare(install)
    served = tmp_path / "tmp" / "k8s-webhook-server" / "serving-certs"
    assert (served / "tls.key").read_bytes() == (tmp_path / "certs" / "tls.key").read_bytes()
    (tmp_path / "certs" / "tls.key").unlink()
    make(tmp_path / "certs" / "tls.key")
    with pytest.raises(InputError, match=re.escape(says)):
        operatorspecs.OPERATORS["training-operator"].prepare(install)


def test_operators_that_need_another_name_one_that_exists():
    for spec in operatorspecs.OPERATORS.values():
        assert set(spec.needs) <= set(operatorspecs.OPERATORS) - {spec.name}


@pytest.mark.parametrize("image", ["", "registry.example/torchpod/pytorch:2.13.0-cuda13.0-x86_64"])
def test_a_site_init_image_names_its_template_and_the_template_keeps_the_defaults_fields(tmp_path, monkeypatch, image):
    monkeypatch.setattr(operatorspecs, "ROTATOR_CERT_DIR", tmp_path / "rotator")
    webhookcerts.make_certs(tmp_path / "certs", "op-ca", ["op-webhook.ops.svc"], NOW)
    install = operatorspecs.Install(folder=tmp_path, bindir=Path("/cache/bin"), kubeconfig=tmp_path / "k",
                                    certs=tmp_path / "certs", ports=operatorspecs.Ports(19443, 18081), namespace="ns",
                                    init_image=image)
    spec = operatorspecs.OPERATORS["training-operator"]
    spec.prepare(install)
    words = spec.programs["training-operator"](install)
    template = tmp_path / operatorspecs.INIT_TEMPLATE
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
