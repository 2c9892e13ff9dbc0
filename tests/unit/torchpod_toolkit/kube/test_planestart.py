"""torchpod_toolkit.kube.planestart, what is decided before a process starts: the folder
``prepare`` writes (certificates, a kubeconfig per client naming the plane's API server, the
scheduler's configuration), and the record ``start`` leaves, read back once through the
bounded reader."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.kube import plane, planecerts, planestart

from plane_cases import PORTS, prepared_plane


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return prepared_plane(tmp_path_factory)


@pytest.mark.parametrize("stem", [c[0] for c in planecerts.CLIENTS])
def test_each_kubeconfig_names_the_server_the_ca_and_its_own_certificate(prepared, stem):
    config = yaml.safe_load((prepared / f"{stem}.kubeconfig").read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    assert cluster["server"] == f"https://127.0.0.1:{PORTS.apiserver}"
    assert Path(cluster["certificate-authority"]) == prepared / "pki" / "ca.crt"
    assert Path(user["client-certificate"]) == prepared / "pki" / f"{stem}.crt"
    assert config["current-context"] == config["contexts"][0]["name"]


def test_the_folder_holds_the_scheduler_configuration_and_a_place_for_logs(prepared):
    assert yaml.safe_load((prepared / "scheduler.yaml").read_text())["kind"] == "KubeSchedulerConfiguration"
    assert (prepared / "logs").is_dir() and (prepared / "pki" / "ca.crt").is_file()


def _record(root: Path) -> plane.Plane:
    found = plane.Plane(root=root, ports=PORTS, pids={"etcd": 1}, binaries={"etcd": "/bin/etcd"}, seconds=1.5)
    (root / planestart.STATE).write_text(json.dumps({**asdict(found), "root": str(root)}))
    return found


def test_a_record_is_read_once_through_the_bounded_reader(tmp_path):
    record = _record(tmp_path)
    assert planestart.load(tmp_path) == record and planestart.recorded(tmp_path) == record


def test_no_record_is_none_to_the_question_and_one_error_to_load(tmp_path):
    assert planestart.recorded(tmp_path) is None
    assert planestart.recorded(tmp_path / "gone") is None
    with pytest.raises(RuntimeFailure, match=f"no control plane recorded in {tmp_path}: .* does not exist"):
        planestart.load(tmp_path)


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"{" + b" " * planestart.STATE_CAP + b"}"), "over the 64 KiB cap"),
    (lambda p: p.write_bytes(b'{"root": "\xff"}'), "not UTF-8 text (first at byte 10)"),
    (lambda p: p.symlink_to("/dev/zero"), "(a symbolic link)"),
    (lambda p: None, "does not exist"),
])
def test_a_record_that_is_no_small_text_file_is_one_error(tmp_path, make, needle):
    make(tmp_path / planestart.STATE)
    with pytest.raises(RuntimeFailure) as info:
        planestart.load(tmp_path)
    assert needle in str(info.value) and "\n" not in str(info.value)
