"""Hostile files read by `torchpod plan` and `torchpod doctor` (issue 18, item 3): a node
file, a Volcano host file, sysfs attributes and names, an NCCL log. Each ends with a plan
or report, or exit 2/1 and exactly one line `torchpod: error: ...` naming the file:
never a traceback, a hang or unbounded memory. In-process through ``cli.main(argv, env)``
with a controlled environment; a few cases again in a child process under a timeout, so
a hang fails the test instead of the suite."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod import doctor

from fabric_cases import FIXTURES, write_node
from paths import ROOT as REPO

ROCE = FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"]
PORT = "sys/class/infiniband/mlx5_bond_0/ports/1"
SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
HANG_GUARD_S = 60


def base_env(root: Path, **more: str) -> dict[str, str]:
    """No GPU probe, no scontrol, this node's name fixed, sysfs under root."""
    (root / "bin").mkdir(exist_ok=True)
    return {"TORCHPOD_HOSTNAME": "n1", "TORCHPOD_SYSFS_ROOT": str(root / "sys"), "PATH": str(root / "bin"),
            "CUDA_VISIBLE_DEVICES": "", **more}


@contextlib.contextmanager
def machine_at(root: Path):
    """cli.main with /etc/volcano and /proc under ``root``, and the doctor's machine snapshot
    taken without loading libraries (its sysfs and log reads stay real)."""
    original = cli.gather_facts

    def gather(env, sysfs_root, gpu_count):
        return doctor.Machine(sysfs_root=sysfs_root, proc_root=root / "proc", uverbs=("/dev/infiniband/uverbs0",),
                              providers=("mlx5",), shm_bytes=8 << 30, gpu_count=gpu_count, root=root)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "gather_facts", lambda env: dataclasses.replace(original(env), root=root))
        mp.setattr(doctor, "gather", gather)
        yield


def main(argv: list[str], env: dict[str, str], root: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with machine_at(root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv, env)
    return code, out.getvalue(), err.getvalue()


def ends_well(result: tuple[int, str, str], *, report_codes=(0,)) -> str | None:
    """The error line, or None when a plan/report was printed; anything else fails."""
    code, out, err = result
    if err:
        assert err.count("\n") == 1 and err.startswith("torchpod: error: "), err
        assert code in (1, 2) and out == "", (code, out)
        return err
    assert code in report_codes and out.strip(), (code, out)
    return None


SANE = re.compile(r"[A-Za-z0-9_.:=,\[\]-]*")  # what a host, endpoint or NCCL value may hold


def sane_plan(out: str, scheduler: str) -> None:
    """A plan printed from hostile files still carries only well-formed hosts and values."""
    got = json.loads(out)
    assert got["scheduler"] == scheduler
    for value in (got["rdzv_endpoint"], got["local_addr"] or "", *got["env"].values()):
        assert SANE.fullmatch(value), value


def plan(env, root) -> dict:
    code, out, err = main(["plan"], env, root)
    assert code == 0 and not err, err
    return json.loads(out)


def error_of(argv, env, root) -> str:
    line = ends_well(main(argv, env, root))
    assert line is not None, "expected a one-line error"
    return line


# --- PBS_NODEFILE --------------------------------------------------------------------

def pbs_env(root: Path, nodefile, **more) -> dict[str, str]:
    return base_env(root, PBS_JOBID="7.server", PBS_NODEFILE=str(nodefile), **more)


def test_a_nodefile_with_one_line_per_slot_plans(tmp_path):
    (tmp_path / "nodes").write_text("n1.cluster\nn1.cluster\nn2.cluster # comment\n\n")
    got = plan(pbs_env(tmp_path, tmp_path / "nodes"), tmp_path)
    assert (got["nnodes"], got["node_rank"], got["rdzv_endpoint"]) == ("2", 0, "n1.cluster:29400")


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "cannot be read (No such file or directory)"),
    (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe"), "not UTF-8 text (first at byte 8)"),
    (lambda p: p.write_bytes(b"n1\n" * ((16 << 20) // 3 + 1)), "over the 16 MiB cap"),
    (lambda p: os.truncate(p.write_bytes(b"") or p, 1 << 30), "is 1073741824 bytes, over the 16 MiB cap"),
    (lambda p: p.write_text("n1\n$(touch P);x\n"), "line 2 has host '$(touch'"),
    (lambda p: p.write_text("n1\nn\u00e9\n"), "line 2 has host 'n\u00e9'"),
])
def test_a_hostile_nodefile_is_one_line_naming_it(tmp_path, make, needle):
    path = tmp_path / "nodes"
    make(path)
    line = error_of(["plan"], pbs_env(tmp_path, path), tmp_path)
    assert f"PBS_NODEFILE={str(path)!r}" in line and needle in line, line


def test_two_hosts_with_one_short_name_are_refused_naming_both(tmp_path):
    (tmp_path / "nodes").write_text("n1.a.example\nn1.b.example\n")
    line = error_of(["plan"], pbs_env(tmp_path, tmp_path / "nodes"), tmp_path)
    assert "this host 'n1' matches 'n1.a.example' and 'n1.b.example'" in line and "TORCHPOD_HOSTNAME" in line
    # the full name is exact: no ambiguity, each node its own index
    got = plan(pbs_env(tmp_path, tmp_path / "nodes", TORCHPOD_HOSTNAME="n1.b.example"), tmp_path)
    assert got["node_rank"] == 1
    # one host spelt twice is two lines for one node: refused too, never node 0 twice
    (tmp_path / "nodes").write_text("N1\nn1\n")
    assert "matches 'N1' and 'n1'" in error_of(["plan"], pbs_env(tmp_path, tmp_path / "nodes"), tmp_path)
    # PBS_NODENUM, set per node by the MoM, decides where the name cannot
    (tmp_path / "nodes").write_text("n1.a.example\nn1.b.example\n")
    assert plan(pbs_env(tmp_path, tmp_path / "nodes", PBS_NODENUM="1"), tmp_path)["node_rank"] == 1


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "0x1", "9" * 5000])
def test_a_node_index_of_non_ascii_digits_is_one_line(tmp_path, value):
    (tmp_path / "nodes").write_text("n0\nn1\nn2\nn3\n")
    line = error_of(["plan"], pbs_env(tmp_path, tmp_path / "nodes", PBS_NODENUM=value), tmp_path)
    assert "PBS_NODENUM=" in line and "expected an integer" in line


# All of Unicode (lone surrogates written as their UTF-8-like bytes), raw bytes, and text
# biased to what parsers mistake: non-ASCII digits, separators, shell and line-ending characters.
TRICKY = "0123456789\u00b2\u00b9\u0663\u06f5\u0966\uff11.:-_, \t\r\n\x0b\x0c\x1c\x85\u2028#;$()'\"[]=^\x00"
CONTENT = st.one_of(st.binary(max_size=300),
                    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
                    st.text(alphabet=TRICKY + "abn", max_size=60).map(str.encode))


@SETTINGS
@given(CONTENT, st.booleans())
def test_any_bytes_in_a_nodefile_end_with_a_plan_or_one_line(data, first):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "nodes").write_bytes(data + b"\nn1\n" if first else b"n1\n" + data)
        result = main(["plan"], pbs_env(root, root / "nodes"), root)
        if ends_well(result) is None:
            sane_plan(result[1], "pbs")


# --- Volcano host files -----------------------------------------------------------------

def volcano(root: Path, data: bytes | None = None) -> tuple[dict[str, str], Path]:
    folder = root / "etc" / "volcano"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "worker.host"
    if data is not None:
        path.write_bytes(data)
    return base_env(root, VC_TASK_INDEX="0", TORCHPOD_HOSTNAME="job-worker-0"), path


def test_a_volcano_host_file_plans(tmp_path):
    env, _ = volcano(tmp_path, b"job-worker-0.job\njob-worker-1.job\n")
    got = plan(env, tmp_path)
    assert (got["scheduler"], got["nnodes"], got["node_rank"]) == ("volcano", "2", 0)


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"job-worker-0.job\n\xc3\x28"), "not UTF-8 text (first at byte 17)"),
    (lambda p: os.truncate(p.write_bytes(b"") or p, 1 << 30), "over the 16 MiB cap"),
    (lambda p: p.write_text("job-worker-0.job\na b\n"), "line 2 has host 'a b'"),
])
def test_a_hostile_volcano_host_file_is_one_line_naming_it(tmp_path, make, needle):
    env, path = volcano(tmp_path)
    make(path)
    line = error_of(["plan"], env, tmp_path)
    assert f"Volcano host file {str(path)!r}" in line and needle in line, line


@SETTINGS
@given(CONTENT, st.booleans())
def test_any_bytes_in_a_volcano_host_file_end_with_a_plan_or_one_line(data, first):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env, _ = volcano(root, data + b"\njob-worker-0.job\n" if first else b"job-worker-0.job\n" + data)
        result = main(["plan"], env, root)
        if ends_well(result) is None:
            sane_plan(result[1], "volcano")


# --- sysfs ------------------------------------------------------------------------------

def roce_node(root: Path) -> dict[str, str]:
    write_node(root, ROCE)
    return base_env(root)


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


ATTRIBUTES = [f"{PORT}/state", f"{PORT}/link_layer", f"{PORT}/gids/5", f"{PORT}/gid_attrs/types/5",
              f"{PORT}/gid_attrs/ndevs/5", "proc/net/route"]


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


def _file_name(text: str) -> bool:
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        return False
    return text not in (".", "..") and b"/" not in raw and b"\0" not in raw and 0 < len(raw) <= 200


DIGITS = st.text(alphabet="0123456789\u00b2\u00b9\u0663\u06f5\u0966\uff11", min_size=1, max_size=3)
NAMES = st.one_of(st.text(min_size=1, max_size=30), st.text(alphabet=TRICKY + "mlx5_bond", min_size=1, max_size=12),
                  DIGITS).filter(_file_name)


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


# --- NCCL logs --------------------------------------------------------------------------

RDMA_LOG = ("node-0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB net1:172.18.128.3<0>\n"
            "node-0:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA\n")


def doctor_log(path, root: Path, *extra: str):
    return main(["doctor", "--nccl-log", str(path), *extra], base_env(root), root)


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "cannot be read (No such file or directory)"),
    (lambda p: p.write_bytes(bytes(range(256)) * 64), "holds no NCCL lines"),
    (lambda p: p.write_bytes(b" " * 200_000), "holds no NCCL lines"),
])
def test_a_hostile_nccl_log_is_one_line_naming_it(tmp_path, make, needle):
    path = tmp_path / "nccl.log"
    make(path)
    line = ends_well(doctor_log(path, tmp_path))
    assert line is not None and f"--nccl-log={str(path)!r}" in line and needle in line, line


def test_a_300_character_log_name_is_one_line(tmp_path):
    line = ends_well(doctor_log(tmp_path / ("x" * 300), tmp_path))
    assert line is not None and "File name too long" in line


@pytest.mark.parametrize("long_line", [
    "h:1:1 [0] NCCL INFO Using network " + " " * 200_000 + "x",  # 93 s before: a lazy group and \s*$
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/" + "IB" * 100_000,
    "h:1:1 [0] NCCL INFO NET/IB : Using " + "[0]mlx5_0:1/IB " * 20_000,
], ids=["using-network-then-spaces", "channel-without-its-end", "devices-repeated"])
def test_an_over_long_line_is_cut_and_the_verdict_still_comes(tmp_path, long_line):
    path = tmp_path / "nccl.log"
    path.write_text(long_line + "\n" + RDMA_LOG)
    code, out, err = doctor_log(path, tmp_path, "--format", "json")
    assert not err and code == 0, err
    got = json.loads(out)
    assert got["transport"] == "ib-gdrdma" and any("over-long lines" in n for n in got["log_notes"])


@SETTINGS
@given(st.lists(st.one_of(
    st.sampled_from(RDMA_LOG.splitlines() + ["x NCCL INFO Using network Socket", "x NCCL INFO NCCL version 2.21.5",
                                             "x NCCL WARN NET/OFI Selected provider is efa",
                                             "x NCCL INFO Using network "]),
    st.text(max_size=60), st.binary(max_size=60).map(lambda b: b.decode("latin-1"))), max_size=8),
    st.sampled_from(["\n", "\r\n", "\r", "\x85", "\u2028"]), st.binary(max_size=40))
def test_any_nccl_log_ends_with_a_report_or_one_line(pieces, eol, junk):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "nccl.log").write_bytes(eol.join(pieces).encode("utf-8", "surrogatepass") + junk)
        ends_well(doctor_log(root / "nccl.log", root), report_codes=(0,))
        ends_well(doctor_log(root / "nccl.log", root, "--format", "json"), report_codes=(0,))


# --- the same kinds of file in a child process, under a timeout -------------------------

def child(argv: list[str], env: dict[str, str], code: str | None = None) -> subprocess.CompletedProcess:
    """``python -m torchpod ARGV`` (or ``python -c CODE``); a hang fails the test here."""
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "torchpod", *argv]
    full = {**env, "PYTHONPATH": str(REPO / "entrypoints"), "PATH": env["PATH"] + os.pathsep + os.defpath}
    try:
        return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=HANG_GUARD_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{cmd} did not end within {HANG_GUARD_S} s: a read hung")


def one_error_line(done: subprocess.CompletedProcess, needle: str) -> None:
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("torchpod: error: ") and needle in done.stderr


@pytest.mark.parametrize("special, needle", [("fifo", "is a FIFO"), ("/dev/zero", "is a character device")])
def test_special_files_never_hang_a_child(tmp_path, special, needle):
    target = tmp_path / "fifo"
    os.mkfifo(target)
    source = str(target) if special == "fifo" else special
    # node file
    one_error_line(child(["plan"], pbs_env(tmp_path, source)), f"PBS_NODEFILE={source!r} {needle}")
    # NCCL log
    one_error_line(child(["doctor", "--nccl-log", source], base_env(tmp_path)), f"--nccl-log={source!r} {needle}")
    # a sysfs attribute, through plan and through the doctor's real machine snapshot
    env = roce_node(tmp_path / "node")
    state = tmp_path / "node" / PORT / "state"
    state.unlink()
    state.symlink_to(source)
    one_error_line(child(["plan"], env), needle)
    one_error_line(child(["doctor"], env), needle)
    # a Volcano host file (under a root of the test's own: cli reads /etc/volcano)
    venv, host = volcano(tmp_path / "vc")
    host.symlink_to(source)
    code = ("import dataclasses, pathlib, sys; import torchpod.cli as cli; g = cli.gather_facts; "
            f"cli.gather_facts = lambda env: dataclasses.replace(g(env), root=pathlib.Path({str(tmp_path / 'vc')!r})); "
            "sys.exit(cli.main(['plan']))")
    one_error_line(child([], venv, code), needle)


# --- integers: ASCII digits only, everywhere ----------------------------------------------

@pytest.mark.parametrize("text, number", [("7", 7), (" +7 ", 7), ("007", 7), ("\u00b2", None), ("\u0663", None),
                                          ("\uff17", None), ("7\u00b2", None), ("0x7", None), ("-7", None),
                                          ("", None), ("9" * 19, None), ("9" * 5000, None)])
def test_integers_are_ascii_digits_only(text, number):
    from torchpod.errors import InputError
    from torchpod.values import NodeCount, ascii_int, parse_int

    assert ascii_int(text) == number
    if number is None:
        with pytest.raises(InputError, match="expected an integer"):
            parse_int("V", text)
        with pytest.raises(InputError, match="is not a node count"):
            NodeCount.parse("V", f"{text}:{text}")
    else:
        assert parse_int("V", text) == number
        assert NodeCount.parse("V", f"1:{text.replace('+', '')}") == NodeCount(1, number)


@settings(deadline=None, max_examples=300)
@given(st.one_of(st.text(), st.text(alphabet=TRICKY, max_size=8), DIGITS))
def test_an_integer_parse_accepts_exactly_ascii_digits(text):
    from torchpod.errors import InputError
    from torchpod.values import parse_int

    wanted = re.fullmatch(r"\+?[0-9]{1,18}", text.strip(), re.ASCII)
    try:
        got = parse_int("V", text)
    except InputError as exc:
        assert not wanted and "\n" not in str(exc).replace(repr(text), "")
    else:
        assert wanted and got == int(text.strip())


def test_a_gpu_list_counts_ascii_indices_only():
    from torchpod.gpus import visible_count

    assert visible_count("0,1,\u0663") == 2 and visible_count("\u00b2") == 0 and visible_count("GPU-ab,3") == 2


# --- what helper processes print --------------------------------------------------------

@pytest.mark.parametrize("stdout", ["1\n", "[]\n", "null\n", "\ufffd\ufffd\n", ""])
def test_a_net_plugin_probe_that_prints_no_json_object_is_a_crash_report(monkeypatch, stdout):
    """A plugin's constructor may print anything last (and in any encoding: errors=replace)."""
    from torchpod import netplugin

    def run(argv, **kw):
        assert kw.get("errors") == "replace" and kw.get("text")
        return subprocess.CompletedProcess(argv, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(netplugin.subprocess, "run", run)
    got = netplugin.run_probe({}, ["libnccl-net.so"])
    assert got["loaded"] is None and got["crashed"].startswith("the probe exited 0")


def test_the_text_report_quotes_log_lines_without_terminal_controls(tmp_path):
    path = tmp_path / "nccl.log"
    path.write_bytes(b"h:1:1 [0] NCCL INFO Using network IB \x1b[2J\x0bX\xc2\x85Y\n")
    code, out, err = doctor_log(path, tmp_path)
    assert code == 0 and not err
    shown = next(line for line in out.splitlines() if line.startswith("  > "))
    assert shown == "  > h:1:1 [0] NCCL INFO Using network IB \\x1b[2J\\x0bX\\x85Y"


def test_one_short_name_in_two_volcano_tasks_is_refused_naming_both(tmp_path):
    env = {**base_env(tmp_path), "VC_TASK_INDEX": "0", "TORCHPOD_HOSTNAME": "gpu7",
           "VC_MASTER_HOSTS": "gpu7.a.example", "VC_WORKER_HOSTS": "gpu7.b.example,gpu8.b.example"}
    line = error_of(["plan"], env, tmp_path)
    assert "'gpu7' is listed in VC_MASTER_HOSTS and VC_WORKER_HOSTS" in line and "POD_NAME" in line
    # the pod's own name, unique, decides
    assert plan({**env, "POD_NAME": "gpu8", "VC_TASK_INDEX": "1"}, tmp_path)["node_rank"] == 2
