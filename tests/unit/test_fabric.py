"""RDMA fabric detection on sysfs trees modelled on real nodes (tests/unit/fixtures/
fabrics.yaml): the NCCL settings each gets, the notes, and a user's variables never changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from launcher_cases import plan_for
from torchpod.fabric import detect_fabric
from torchpod.schedulers.common import Facts

FIXTURES = yaml.safe_load((Path(__file__).parent / "fixtures" / "fabrics.yaml").read_text())
ROUTE_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"


def write_node(root: Path, case: dict) -> tuple[Path, Path]:
    """The case's sysfs under root/sys and its /proc/net/route under root/proc."""
    sysfs = root / "sys"
    for device, ports in (case.get("devices") or {}).items():
        for port, spec in ports.items():
            base = sysfs / "class" / "infiniband" / device / "ports" / str(port)
            (base / "gids").mkdir(parents=True)
            (base / "gid_attrs" / "types").mkdir(parents=True)
            (base / "gid_attrs" / "ndevs").mkdir(parents=True)
            (base / "state").write_text(spec["state"] + "\n")
            (base / "link_layer").write_text(spec["link_layer"] + "\n")
            for index, (gid, kind, ndev) in (spec.get("gids") or {}).items():
                (base / "gids" / str(index)).write_text(gid + "\n")
                if kind is not None:  # unreadable in a container: absent here
                    (base / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
                if ndev is not None:
                    (base / "gid_attrs" / "ndevs" / str(index)).write_text(ndev + "\n")
            for index in range(len(spec.get("gids") or {}), 8):  # the kernel lists empty slots too
                if not (base / "gids" / str(index)).exists():
                    (base / "gids" / str(index)).write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    for cxi in case.get("cxi") or []:
        (sysfs / "class" / "cxi" / cxi / "device").mkdir(parents=True)
    for dev in case.get("netdevs") or []:
        (sysfs / "class" / "net" / dev).mkdir(parents=True)
    proc = root / "proc"
    (proc / "net").mkdir(parents=True)
    route = ROUTE_HEADER
    if case.get("route"):
        route += f"{case['route']}\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
    (proc / "net" / "route").write_text(route)
    return sysfs, proc


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
    assert dict(plan.env) == case["expect"]["env"]
    assert not set(dict(plan.env)) & set(env)


def test_a_local_only_default_route_sets_no_socket_interface(tmp_path):
    case = dict(FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"], route="docker0")
    sysfs, proc = write_node(tmp_path, case)
    report = detect_fabric({}, sysfs, proc)
    assert "NCCL_SOCKET_IFNAME" not in dict(report.env)
    assert any("docker0, a local-only interface" in n for n in report.notes)


def test_hca_syntax_as_nccl_reads_it():
    from torchpod.fabric import hca

    assert hca.selects("mlx5_1", "mlx5_10", 1)  # a prefix without '='
    assert not hca.selects("=mlx5_1", "mlx5_10", 1)
    assert not hca.selects("^=mlx5_0", "mlx5_0", 1) and hca.selects("^mlx5_0", "mlx5_1", 1)
    assert hca.selects("=mlx5_0:1", "mlx5_0", 1) and not hca.selects("=mlx5_0:2", "mlx5_0", 1)
    assert hca.value([("mlx5_0", 1), ("mlx5_1", 2)]) == "=mlx5_0,mlx5_1:2"


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
