"""NCCL_NET=IB pinned on InfiniBand/RoCE when torchpod chose the HCAs (fabric/netpin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.fabric import detect_fabric
from torchpod.fabric.netpin import pin_wanted
from torchpod.schedulers.common import Facts

from fabric_cases import FIXTURES, write_node
from launcher_cases import plan_for

ROCE, IB = "roce_bonded_mlx5_ipv4_and_ipv6_both_versions", "infiniband_hdr_node"


def plan_env(tmp_path: Path, fixture: str, env: dict | None = None) -> tuple[dict, tuple[str, ...]]:
    sysfs, _ = write_node(tmp_path, FIXTURES[fixture])
    plan = plan_for({**(env or {}), "CUDA_VISIBLE_DEVICES": ""},
                    facts=Facts(hostname="node", root=tmp_path, sysfs_root=sysfs))
    return dict(plan.env), plan.notes


@pytest.mark.parametrize("fixture", [ROCE, IB])
def test_the_plan_pins_ib_and_says_how_to_allow_sockets(tmp_path, fixture):
    env, notes = plan_env(tmp_path, fixture)
    assert env["NCCL_NET"] == "IB"
    assert any("NCCL_NET=Socket" in n and "TORCHPOD_NCCL_NET_PIN=0" in n for n in notes)


def test_the_users_nccl_net_wins(tmp_path):
    env, notes = plan_env(tmp_path, ROCE, {"NCCL_NET": "Socket"})
    assert "NCCL_NET" not in env  # theirs stays in the environment, unchanged
    assert any("your NCCL_NET wins" in n for n in notes)


@pytest.mark.parametrize("extra", [{"TORCHPOD_NCCL_NET_PIN": "0"}, {"NCCL_NET_PLUGIN": "sharp"}])
def test_no_pin_when_opted_out_or_a_plugin_is_named(tmp_path, extra):
    env, notes = plan_env(tmp_path, IB, extra)
    assert "NCCL_NET" not in env and "NCCL_IB_HCA" in env
    assert any("NCCL_NET not pinned" in n for n in notes)


def test_no_pin_without_rdma(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["container_on_a_docker_bridge_without_rdma"])
    assert "NCCL_NET" not in dict(detect_fabric({}, sysfs, proc).env)


def test_a_plugin_set_to_none_still_pins(tmp_path):
    env, _ = plan_env(tmp_path, IB, {"NCCL_NET_PLUGIN": "none"})
    assert env["NCCL_NET"] == "IB"


@pytest.mark.parametrize("value, pins", [("", True), ("  ", True), (" 0\n", False), ("1 ", True)])
def test_the_pin_is_read_as_every_setting_is_blank_unset_and_blanks_around_stripped(value, pins):
    # contract.setting: a job script that forwards the name unset (enroot's --env NAME) gets the default
    assert pin_wanted({"TORCHPOD_NCCL_NET_PIN": value}) is pins


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20).filter(lambda s: s.strip() not in ("", "0", "1")))
def test_a_bad_pin_value_is_one_line_naming_the_variable(value):
    with pytest.raises(InputError) as exc:
        pin_wanted({"TORCHPOD_NCCL_NET_PIN": value})
    assert "TORCHPOD_NCCL_NET_PIN" in str(exc.value) and "\n" not in str(exc.value).replace(value, "")


def test_a_bad_pin_value_fails_the_plan(tmp_path):
    with pytest.raises(InputError, match="TORCHPOD_NCCL_NET_PIN="):
        plan_env(tmp_path, IB, {"TORCHPOD_NCCL_NET_PIN": "yes"})
