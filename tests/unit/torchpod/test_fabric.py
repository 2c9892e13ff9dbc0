"""RDMA fabric detection on sysfs trees modelled on real nodes (tests/unit/fixtures/
fabrics.yaml): the NCCL settings each gets, the notes, and a user's variables never changed."""

from __future__ import annotations

import pytest

from torchpod.fabric import detect_fabric
from torchpod.schedulers.common import Facts

from fabric_cases import FIXTURES, write_node
from launcher_cases import added_by_node, plan_for


@pytest.mark.parametrize("name", list(FIXTURES))
def test_fabric_settings_for_each_node(name, tmp_path):
    case = FIXTURES[name]
    sysfs, proc = write_node(tmp_path, case)
    env = dict(case.get("env") or {})
    report = detect_fabric(env, sysfs, proc)
    assert report.fabric == case["expect"]["fabric"], report.notes
    added = {k: v for k, v in report.env if k not in env}
    assert added == case["expect"]["env"], report.notes
    if case.get("notes_contain"):
        assert any(case["notes_contain"] in n for n in report.notes), report.notes
    # through the whole resolver: the plan carries exactly these additions, never a user's variable
    plan = plan_for({**env, "CUDA_VISIBLE_DEVICES": ""},
                    facts=Facts(hostname="node", root=tmp_path, sysfs_root=sysfs))
    assert added_by_node(plan.env) == case["expect"]["env"]
    assert not set(dict(plan.env)) & set(env)


def test_a_local_only_default_route_sets_no_socket_interface(tmp_path):
    case = dict(FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"], route="docker0")
    sysfs, proc = write_node(tmp_path, case)
    report = detect_fabric({}, sysfs, proc)
    assert "NCCL_SOCKET_IFNAME" not in dict(report.env)
    assert any("docker0, a local-only interface" in n for n in report.notes)


def test_plan_reads_sysfs_where_torchpod_sysfs_root_points(tmp_path, capsys):
    import json

    import torchpod.cli as cli

    sysfs, _ = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    assert cli.main(["plan"], {"TORCHPOD_SYSFS_ROOT": str(sysfs), "CUDA_VISIBLE_DEVICES": ""}) == 0
    env = json.loads(capsys.readouterr().out)["env"]
    assert env["NCCL_IB_HCA"] == "=mlx5_bond_0" and env["NCCL_IB_GID_INDEX"] == "5"
    # set by the user: kept, and the plan adds nothing over it
    assert cli.main(["plan"], {"TORCHPOD_SYSFS_ROOT": str(sysfs), "CUDA_VISIBLE_DEVICES": "",
                               "NCCL_IB_GID_INDEX": "4"}) == 0
    out = json.loads(capsys.readouterr().out)
    assert "NCCL_IB_GID_INDEX" not in out["env"]
    assert any("your NCCL_IB_GID_INDEX=4 is not a RoCE v2 IPv4 GID" in n for n in out["notes"])


def test_preset_beats_detection_and_the_user_beats_the_preset(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["oci_bm_gpu_h100_8_sixteen_plus_two"])
    env = {"TORCHPOD_PRESET": "oci-bm-gpu-h100.8", "NCCL_IB_TIMEOUT": "23"}
    report = detect_fabric(env, sysfs, proc)
    got = dict(report.env)
    # the doc's 16 NICs, without the front-end mlx5_2 and mlx5_11 detection included
    assert got["NCCL_IB_HCA"].split(",")[1:3] == ["mlx5_1", "mlx5_3"] and "mlx5_11," not in got["NCCL_IB_HCA"]
    assert got["NCCL_IB_TC"] == "41" and got["NCCL_IB_SL"] == "0" and got["NCCL_IB_GID_INDEX"] == "3"
    assert any("NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_3" in n and "over detection's" in n and "front-end" in n
               for n in report.notes), report.notes
    plan = plan_for({**env, "CUDA_VISIBLE_DEVICES": ""}, facts=Facts(hostname="n", root=tmp_path, sysfs_root=sysfs))
    assert "NCCL_IB_TIMEOUT" not in dict(plan.env)  # the user's 23 stays, untouched
    assert dict(plan.env)["NCCL_IB_TC"] == "41"


def test_preset_for_another_shape_is_noted(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    report = detect_fabric({"TORCHPOD_PRESET": "oci-bm-gpu-h200.8"}, sysfs, proc)
    assert any("names mlx5_0, mlx5_3" in n and "which this node does not have" in n for n in report.notes)
    report = detect_fabric({"TORCHPOD_PRESET": "hpe-slingshot-gh200"}, sysfs, proc)
    assert any("is for slingshot but this node shows roce" in n for n in report.notes)


def test_unknown_preset_is_one_line_listing_the_known_ones(tmp_path):
    from torchpod.errors import InputError

    with pytest.raises(InputError) as info:
        detect_fabric({"TORCHPOD_PRESET": "oci-bm-gpu-h100"}, tmp_path, tmp_path)
    assert str(info.value) == ("TORCHPOD_PRESET='oci-bm-gpu-h100' is not a known preset; expected one of "
                               "oci-bm-gpu-b4.8, oci-bm-gpu-h100.8, oci-bm-gpu-h200.8, aws-p5, hpe-slingshot-gh200")


def test_a_users_address_family_is_kept(tmp_path):
    sysfs, _ = write_node(tmp_path, FIXTURES["roce_ipv6_only_cluster"])
    plan = plan_for({"NCCL_IB_ADDR_FAMILY": "AF_INET", "CUDA_VISIBLE_DEVICES": ""},
                    facts=Facts(hostname="node", root=tmp_path, sysfs_root=sysfs))
    assert "NCCL_IB_ADDR_FAMILY" not in dict(plan.env) and dict(plan.env)["NCCL_IB_GID_INDEX"] == "3"


# --- the notes never contradict the exports -----------------------------------------------------

NODES = ["", *FIXTURES]  # "": a node whose sysfs shows no RDMA device at all


def _node(tmp_path, name):
    if not name:
        (tmp_path / "sys").mkdir()
        (tmp_path / "proc" / "net").mkdir(parents=True)
        return tmp_path / "sys"
    return write_node(tmp_path, FIXTURES[name])[0]


def contradictions(notes, exported) -> list[str]:
    """Notes that say what the exports belie: no NCCL settings while NCCL_*/FI_* are
    exported, or sockets while NCCL_NET names another network."""
    nccl = sorted(k for k in exported if k.startswith(("NCCL_", "FI_")))
    net = exported.get("NCCL_NET")
    found = [n for n in notes if "no NCCL settings" in n and nccl]
    found += [n for n in notes if ("NCCL will use sockets" in n or "NCCL uses sockets" in n)
              and net not in (None, "Socket")]
    return found


@pytest.mark.parametrize("preset", ["", "oci-bm-gpu-b4.8", "oci-bm-gpu-h100.8", "aws-p5", "hpe-slingshot-gh200"])
@pytest.mark.parametrize("node", NODES)
def test_no_note_contradicts_what_the_plan_exports(preset, node, tmp_path):
    sysfs = _node(tmp_path, node)
    env = {**(FIXTURES[node].get("env") or {} if node else {}), "CUDA_VISIBLE_DEVICES": ""}
    if preset:
        env["TORCHPOD_PRESET"] = preset
    plan = plan_for(env, facts=Facts(hostname="node", root=tmp_path, sysfs_root=sysfs))
    assert contradictions(plan.notes, dict(plan.env)) == [], (dict(plan.env), plan.notes)


def test_a_preset_on_a_node_without_rdma_says_whose_settings_they_are(tmp_path):
    sysfs = _node(tmp_path, "")
    plan = plan_for({"TORCHPOD_PRESET": "oci-bm-gpu-h100.8", "CUDA_VISIBLE_DEVICES": ""},
                    facts=Facts(hostname="node", root=tmp_path, sysfs_root=sysfs))
    exported = dict(plan.env)
    assert exported["NCCL_NET"] == "IB" and exported["NCCL_IB_HCA"].startswith("=mlx5_0")
    assert any(n.startswith(f"no RDMA fabric detected under {sysfs}: the NCCL settings are preset "
                            "oci-bm-gpu-h100.8's, for roce") for n in plan.notes), plan.notes
    report = detect_fabric({"TORCHPOD_PRESET": "oci-bm-gpu-h100.8"}, sysfs, tmp_path / "proc")
    assert report.findings[0].code == "preset.fabric.undetected"  # the doctor's fabric row says the same


def test_the_check_finds_a_contradiction():
    assert contradictions(["no RDMA fabric detected under /sys: no NCCL settings (NCCL uses sockets)"],
                          {"NCCL_IB_HCA": "=mlx5_0", "NCCL_NET": "IB"})
    assert contradictions(["no NCCL net plugin: ...: NCCL will use sockets"], {"NCCL_NET": "AWS Libfabric"})
    assert not contradictions(["no RDMA fabric detected under /sys: no NCCL settings (NCCL uses sockets)"],
                              {"HOME": "/tmp/h"})
