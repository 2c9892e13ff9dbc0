"""NCCL_*/FI_* names nobody reads, with the nearest real one (fabric/names.py)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.fabric import names
from torchpod.fabric.names import NAMES_FILE, known, labels, unknown


def codes(env):
    return {f.message.split()[0]: (f.code, f.fix) for f in unknown(env)}


def test_the_issues_misspellings_name_the_real_variable():
    found = codes({"CCL_NET_GDR_LEVEL": "PHB", "NCCL_IB_HCAS": "mlx5_0", "FI_PROVIDR": "efa",
                   "FI_EFA_USE_DEVICE_RDAM": "1"})
    assert found["CCL_NET_GDR_LEVEL"] == ("names.env.misspelt", "rename it to NCCL_NET_GDR_LEVEL")
    assert found["NCCL_IB_HCAS"] == ("names.env.misspelt", "rename it to NCCL_IB_HCA")
    assert found["FI_PROVIDR"] == ("names.env.misspelt", "rename it to FI_PROVIDER")
    assert found["FI_EFA_USE_DEVICE_RDAM"] == ("names.env.misspelt", "rename it to FI_EFA_USE_DEVICE_RDMA")


def test_real_names_and_other_programs_names_pass():
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "=mlx5_0", "NCCL_NET": "IB", "NCCL_SOCKET_IFNAME": "eth0",
           "NCCL_ASYNC_ERROR_HANDLING": "1", "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
           "FI_CXI_RX_MATCH_MODE": "software", "FI_VERBS_IFACE": "ib0", "PATH": "/bin", "HOME": "/root",
           "OFI_NCCL_PROTOCOL": "RDMA", "TORCH_NCCL_BLOCKING_WAIT": "1", "CUDA_VISIBLE_DEVICES": "0"}
    assert unknown(env) == []


def test_the_label_nvidia_cuda_images_set_is_said_once_as_ok_not_as_a_name_to_remove():
    # seen on an H200 machine whose PyTorch image was built on nvidia/cuda:
    # NCCL_VERSION=2.28.3-1 beside CUDA_VERSION=13.0.2, while torch's own NCCL was 2.28.9
    env = {"NCCL_VERSION": "2.28.3-1", "CUDA_VERSION": "13.0.2"}
    assert unknown(env) == []
    (row,) = labels(env)
    assert (row.code, row.severity.value) == ("names.env.label", "ok") and row.message.startswith("NCCL_VERSION ")
    assert labels({"NCCL_DEBUG": "INFO"}) == []


def test_a_near_miss_of_a_label_is_still_judged():
    assert codes({"NCCL_VERSIONS": "2.28.3-1"})["NCCL_VERSIONS"][0] in {"names.env.unknown", "names.env.misspelt"}
    assert labels({"NCCL_VERSIONS": "2.28.3-1"}) == []


def test_an_nccl_name_with_nothing_near_is_still_unknown():
    assert codes({"NCCL_ZZZZZZZZ": "1"})["NCCL_ZZZZZZZZ"][0] == "names.env.unknown"


def test_the_data_file_cites_its_releases():
    data = json.loads(NAMES_FILE.read_text())
    assert data["nccl"]["release"] == "v2.30.7-1" and len(data["nccl"]["commit"]) == 40
    assert data["libfabric"]["release"] == "v2.6.0" and len(data["libfabric"]["commit"]) == 40
    nccl, fi = known()
    assert {"NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL", "NCCL_MNNVL_ENABLE", "NCCL_CONF_FILE"} <= nccl
    assert "FI_PROVIDER" in fi[""] and "FI_EFA_USE_DEVICE_RDMA" in fi["EFA"]
    assert "nvidia/cuda" in data["labels"]["source"] and not set(data["labels"]["names"]) & nccl


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: p.write_bytes(b'{"labels": "\xff"}'), "not UTF-8 text (first at byte 12)"),
    (lambda p: p.write_bytes(b" " * ((1 << 20) + 1)), "over the 1 MiB cap"),
])
def test_the_data_file_is_read_through_the_bounded_reader(tmp_path, monkeypatch, make, says):
    make(tmp_path / "known_names.json")
    monkeypatch.setattr(names, "NAMES_FILE", tmp_path / "known_names.json")
    with pytest.raises(InputError) as info:
        names._names()
    assert str(info.value).startswith(str(tmp_path / "known_names.json")) and says in str(info.value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=40), st.text(max_size=10), max_size=20))
def test_any_environment_is_judged_in_one_line_per_finding(env):
    for f in unknown(env):
        assert "\n" not in f.message and f.severity.value == "warn"
