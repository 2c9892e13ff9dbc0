"""torchpod.fabric.sysfs, hostile: sysfs attributes and names (GID indices of non-ASCII digits,
GIDs that are not GIDs, unreadable attributes, device names that are not names, route
tables, any bytes): a plan and a doctor report, or exactly one line naming the file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import (
    ATTRIBUTES,
    CONTENT,
    NAMES,
    PORT,
    SETTINGS,
    ends_well,
    error_of,
    main,
    plan,
    roce_node,
    sane_plan,
)


def test_the_roce_node_plans_and_passes_the_doctor(tmp_path):
    env = roce_node(tmp_path)
    assert plan(env, tmp_path)["env"]["NCCL_IB_GID_INDEX"] == "5"
    assert ends_well(main(["doctor"], env, tmp_path)) is None


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "5;x", "-1", "9" * 5000])
def test_a_gid_index_of_non_ascii_digits_is_a_note_never_a_crash(tmp_path, value):
    env = {**roce_node(tmp_path), "NCCL_IB_GID_INDEX": value}
    notes = plan(env, tmp_path)["notes"]
    assert any(f"your NCCL_IB_GID_INDEX={value!r} is not a number of ASCII digits" in n for n in notes), notes
    assert ends_well(main(["doctor"], env, tmp_path)) is None


def test_a_gid_entry_named_with_a_non_ascii_digit_is_not_a_slot(tmp_path):
    env = roce_node(tmp_path)
    gids = tmp_path / PORT / "gids"
    for name in ("\u00b2", "\u0663", "1" * 40):
        (gids / name).write_text("0000:0000:0000:0000:0000:ffff:ac12:8003\n")
    assert plan(env, tmp_path)["env"]["NCCL_IB_GID_INDEX"] == "5"
    (tmp_path / PORT).rename(tmp_path / PORT.replace("ports/1", "ports/\u00b2"))  # nor a port
    assert "NCCL_IB_GID_INDEX" not in plan(env, tmp_path)["env"]


@pytest.mark.parametrize("attribute", ["state", "link_layer", "gids/5", "gid_attrs/types/5", "gid_attrs/ndevs/5"])
@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"\xff\xfe"), "not UTF-8 text"),
    (lambda p: p.write_bytes(b"x" * (65 << 10)), "over the 64 KiB cap"),
    (lambda p: p.write_text("4: ACTIVE\n\x1b[31m"), "expected a kernel attribute file"),
])
def test_a_hostile_sysfs_attribute_is_one_line_naming_it_in_plan_and_doctor(tmp_path, attribute, make, needle):
    env = roce_node(tmp_path)
    path = tmp_path / PORT / attribute
    path.unlink()
    make(path)
    for argv in (["plan"], ["doctor"], ["doctor", "--format", "json"]):
        line = error_of(argv, env, tmp_path)
        assert f"sysfs file {str(path)!r}" in line and needle in line, line


def test_a_gid_that_is_not_a_gid_is_one_line(tmp_path):
    env = roce_node(tmp_path)
    (tmp_path / PORT / "gids" / "5").write_text("ffff::1\n")
    assert "holds 'ffff::1'; expected a GID" in error_of(["plan"], env, tmp_path)


def test_an_unreadable_attribute_is_still_a_fact_not_an_error(tmp_path):
    env = roce_node(tmp_path)
    (tmp_path / PORT / "gid_attrs" / "types" / "5").unlink()  # EINVAL/absent in a container
    assert "NCCL_IB_GID_INDEX" not in plan(env, tmp_path)["env"]


def test_names_that_are_not_device_names_are_ignored_and_said(tmp_path):
    env = roce_node(tmp_path)
    odd = tmp_path / "sys" / "class" / "infiniband" / "mlx5,9\n"
    (odd / "ports" / "1").mkdir(parents=True)
    (odd / "ports" / "1" / "state").write_text("4: ACTIVE\n")
    got = plan(env, tmp_path)
    assert got["env"]["NCCL_IB_HCA"] == "=mlx5_bond_0"
    assert any("ignored sysfs entries" in n and "mlx5,9\\n" in n for n in got["notes"]), got["notes"]


def test_a_hostile_route_table_is_one_line_or_no_interface(tmp_path):
    env = roce_node(tmp_path)
    route = tmp_path / "proc" / "net" / "route"
    route.write_text("Iface\tDestination\nev\u00e9l\t00000000\t0\n")
    got = plan(env, tmp_path)
    assert "NCCL_SOCKET_IFNAME" not in got["env"] and any("not an interface name" in n for n in got["notes"])
    route.unlink()
    os.mkfifo(route)
    assert "is a FIFO" in error_of(["plan"], env, tmp_path)


@SETTINGS
@given(st.sampled_from(ATTRIBUTES), CONTENT)
def test_any_bytes_in_a_sysfs_attribute_end_with_a_plan_or_one_line(attribute, data):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = roce_node(root)
        (root / attribute).write_bytes(data)
        result = main(["plan"], env, root)
        if ends_well(result) is None:
            sane_plan(result[1], "standalone")
        ends_well(main(["doctor", "--format", "json"], env, root), report_codes=(0, 1))


@SETTINGS
@given(st.sampled_from(["netdev", "device", "gid", "port"]), NAMES)
def test_any_name_in_sysfs_ends_with_a_plan_or_one_line(where, name):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = roce_node(root)
        sys_class = root / "sys" / "class"
        if where == "netdev":
            (sys_class / "net" / name).mkdir(exist_ok=True)
        elif where == "device":
            port = sys_class / "infiniband" / name / "ports" / "1"
            port.mkdir(parents=True, exist_ok=True)
            (port / "state").write_text("4: ACTIVE\n")
            (port / "link_layer").write_text("InfiniBand\n")
        elif where == "gid" and not (root / PORT / "gids" / name).exists():
            (root / PORT / "gids" / name).write_text("0000:0000:0000:0000:0000:ffff:ac12:8004\n")
        elif where == "port" and not (root / PORT).with_name(name).exists():
            (root / PORT).rename((root / PORT).with_name(name))
        result = main(["plan"], env, root)
        if ends_well(result) is None:
            sane_plan(result[1], "standalone")
        ends_well(main(["doctor"], env, root), report_codes=(0, 1))
