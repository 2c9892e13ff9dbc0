"""`torchpod doctor`: preflight checks on sysfs trees modelled on real nodes, the NCCL log
verdict, output formats and exit codes (torchpod.doctor, torchpod.cli)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import torchpod.cli as cli
from torchpod.doctor import Machine, exit_code, preflight, refusal

from fabric_cases import FIXTURES, write_node

SEED_SOCKET = ("node-0:1:1 [0] NCCL INFO NET/Socket : Using [0]net1:172.18.128.3<0> [1]eth0:172.16.46.52<0>\n"
               "node-0:1:1 [0] NCCL INFO Using network Socket\n")
SEED_RDMA = ("node-0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB net1:172.18.128.3<0>\n"
             "node-0:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA\n")


def healthy(sysfs: Path, proc: Path, **changes) -> Machine:
    base = dict(sysfs_root=sysfs, proc_root=proc, uverbs=("/dev/infiniband/uverbs0",), memlock=None,
                shm_bytes=8 << 30, verbs_error=None, providers=("efa", "mlx5"), net_plugins=(), gpu_count=8)
    return Machine(**{**base, **changes})


def statuses(checks) -> dict[str, str]:
    return {c.name: c.status for c in checks}


def test_a_healthy_roce_node_passes(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    fabric, checks = preflight({}, healthy(sysfs, proc))
    assert fabric.fabric == "roce"
    assert statuses(checks) == {"fabric": "ok", "uverbs": "ok", "memlock": "ok", "verbs": "ok", "gid": "ok",
                                "shm": "ok", "gpus": "ok", "net-plugin": "ok", "env-name": "ok", "driver": "ok"}
    assert exit_code(fabric, checks, None) == 0 and refusal(checks) is None


@pytest.mark.parametrize("changes, name, needle", [
    ({"uverbs": ()}, "uverbs", "no /dev/infiniband/uverbs*"),
    ({"memlock": 64 << 10}, "memlock", "locked-memory limit 64 KiB"),
    ({"providers": ("efa",)}, "verbs", "no loadable mlx5 verbs provider"),
    ({"verbs_error": "libibverbs.so.1: cannot open shared object file"}, "verbs", "does not load"),
])
def test_each_failure_names_the_check_and_the_fix(tmp_path, changes, name, needle):
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    fabric, checks = preflight({}, healthy(sysfs, proc, **changes))
    failed = [c for c in checks if c.status == "fail"]
    assert [c.name for c in failed] == [name] and needle in failed[0].detail and failed[0].fix
    assert exit_code(fabric, checks, None) == 1
    assert refusal(checks).startswith(f"TORCHPOD_DOCTOR=1 and the preflight failed: {name}: ")


# What netplugin.run_probe returns for aws-ofi-nccl 1.16 on NCCL 2.30 (shape of the JSON).
LOADED = {"loaded": "libnccl-net.so", "path": "/opt/torchpod/site/lib/libnccl-net.so", "tried": [],
          "exported": [10, 9, 8, 7, 6, 5], "nccl": "2.30.7", "wanted": [12, 11, 10, 9, 8, 7, 6], "chosen": 10,
          "plugin_name": "Libfabric",
          "libfabric": {"path": "/opt/torchpod/site/lib/libfabric.so.1", "abi": "FABRIC_1.8", "version": "2.1"}}
NOT_FOUND = {"loaded": None, "tried": [{"name": "libnccl-net.so", "error": "libnccl-net.so: cannot open shared "
                                        "object file: No such file or directory"}]}


def test_slingshot_without_the_plugin_fails_and_a_wrong_provider_warns(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["gh200_slingshot_node"])
    fabric, checks = preflight({"FI_PROVIDER": "efa"}, healthy(sysfs, proc, gpu_count=4, net_probe=NOT_FOUND))
    got = statuses(checks)
    assert got["net-plugin"] == "fail" and got["user-setting"] == "warn"
    assert "No such file or directory" in next(c.detail for c in checks if c.name == "net-plugin")
    fabric, checks = preflight({}, healthy(sysfs, proc, net_probe=LOADED, fi_providers=("cxi", "tcp"),
                                           fi_devices=("cxi",)))
    got = statuses(checks)
    assert got["net-plugin"] == got["net-plugin-api"] == got["libfabric"] == got["fi-provider"] == "ok", got
    assert exit_code(fabric, checks, None) == 0


@pytest.mark.parametrize("env, changes, name, needle", [
    ({}, {"net_probe": {**LOADED, "exported": [4, 3], "chosen": None}}, "net-plugin-api", "none matches"),
    ({}, {"net_probe": {"loaded": None, "tried": [{"name": "libnccl-net.so", "error":
      "/opt/torchpod/site/lib/libfabric.so.1: version `FABRIC_1.7' not found (required by libnccl-net.so)"}]}},
     "net-plugin", "version `FABRIC_1.7' not found"),
    ({}, {"fi_providers": ("tcp", "udp", "shm")}, "fi-provider", "no cxi provider"),
    ({}, {"fi_devices": ()}, "fi-provider", "`fi_info -p cxi` finds no device"),
    ({"FI_PROVIDER": "efa"}, {}, "fi-provider-env", "FI_PROVIDER=efa names a provider this libfabric lacks"),
    ({"NCCL_NET_PLUGIN": "ofi"}, {}, "net-plugin-env", "never tries libnccl-net.so"),
])
def test_each_plugin_failure_names_the_check(tmp_path, env, changes, name, needle):
    sysfs, proc = write_node(tmp_path, FIXTURES["gh200_slingshot_node"])
    lib = tmp_path / "opt" / "torchpod" / "site" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl-net.so").write_bytes(b"")
    machine = healthy(sysfs, proc, **{"root": tmp_path, "net_probe": LOADED, "fi_providers": ("cxi", "tcp"),
                                      "fi_devices": ("cxi",), **changes})
    fabric, checks = preflight(env, machine)
    failed = [c for c in checks if c.status == "fail"]
    assert [c.name for c in failed] == [name], [(c.name, c.detail) for c in failed]
    assert needle in failed[0].detail and failed[0].fix
    assert exit_code(fabric, checks, None) == 1


def test_doctor_command_json_with_a_log(tmp_path, capsys):
    sysfs, _ = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    log = tmp_path / "nccl.log"
    log.write_text(SEED_RDMA)
    code = cli.main(["doctor", "--sysfs-root", str(sysfs), f"--nccl-log={log}", "--format", "json"],
                    {"CUDA_VISIBLE_DEVICES": "0"})
    data = json.loads(capsys.readouterr().out)
    assert data["transport"] == "ib-gdrdma" and data["gdrdma"] is True
    assert "via NET/IB/0(1)/GDRDMA" in data["evidence"][0]
    assert {"name", "status", "detail", "fix"} <= set(data["checks"][0])
    assert code == 1  # this test machine has no /dev/infiniband/uverbs*: the uverbs check fails
    assert any(c["name"] == "uverbs" and c["status"] == "fail" for c in data["checks"])


def test_sockets_on_a_node_with_rdma_hardware_exit_1(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    log = tmp_path / "nccl.log"
    log.write_text(SEED_SOCKET)
    from torchpod.doctor import read_log

    fabric, checks = preflight({}, healthy(sysfs, proc))
    assert exit_code(fabric, checks, read_log(str(log))) == 1
    assert exit_code(fabric, checks, None) == 0


def test_sockets_in_a_log_of_one_node_communicators_are_no_fallback(tmp_path, capsys):
    """A job on one node (nNodes 1 in NCCL's comm lines) sends nothing over its network: on
    a node with RDMA hardware that Socket is said, and the exit stays the checks' own."""
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    log = tmp_path / "nccl.log"
    log.write_text(SEED_SOCKET + "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0\n")
    from torchpod.doctor import read_log

    fabric, checks = preflight({}, healthy(sysfs, proc))
    assert exit_code(fabric, checks, read_log(str(log))) == 0
    assert cli.main(["doctor", "--sysfs-root", str(tmp_path), f"--nccl-log={log}", "--format", "json"], {}) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nodes"] == 1 and data["transport"] == "socket"


def test_a_label_the_image_set_is_an_ok_row_not_a_warning(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    _, checks = preflight({"NCCL_VERSION": "2.28.3-1"}, healthy(sysfs, proc))
    rows = {(c.name, c.finding.code, c.status) for c in checks}
    assert ("env-name", "names.env.label", "ok") in rows and ("env-name", "doctor.env-name.ok", "ok") in rows
    assert not any(c.name == "env-name" and c.status == "warn" for c in checks)


def test_text_report_quotes_the_evidence(tmp_path, capsys):
    log = tmp_path / "nccl.log"
    log.write_text(SEED_SOCKET)
    argv = ["doctor", "--sysfs-root", str(tmp_path), "--nccl-log", str(log)]
    assert cli.main(argv, {"CUDA_VISIBLE_DEVICES": ""}) == 0
    out = capsys.readouterr().out
    assert "transport: socket" in out and "  > node-0:1:1 [0] NCCL INFO Using network Socket" in out
    assert "warn  gpus" in out


@pytest.mark.parametrize("argv, needle", [
    (["doctor", "--nccl-log", "/nonexistent/nccl.log"], "--nccl-log='/nonexistent/nccl.log' cannot be read"),
    (["doctor", "--format", "yaml"], "--format 'yaml' is not a doctor format"),
    (["doctor", "--verbose"], "unknown doctor option '--verbose'"),
])
def test_doctor_bad_input_is_one_line_exit_2(argv, needle, capsys):
    assert cli.main(argv, {}) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_a_log_without_nccl_lines_is_bad_input(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text("epoch 1 loss 0.3\n")
    assert cli.main(["doctor", "--nccl-log", str(log)], {}) == 2
    assert "holds no NCCL lines" in capsys.readouterr().err


def test_run_with_torchpod_doctor_refuses_on_a_failed_preflight(tmp_path, monkeypatch, capsys):
    sysfs, _ = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    (tmp_path / "train.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr(cli, "supervise", lambda *a, **k: started.append(a) or 0)
    env = {"TORCHPOD_DOCTOR": "1", "TORCHPOD_SYSFS_ROOT": str(sysfs), "CUDA_VISIBLE_DEVICES": ""}
    assert cli.main(["train.py"], env) == 1  # no uverbs device nodes on this machine
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torchpod: error: TORCHPOD_DOCTOR=1 and the preflight failed: uverbs:")
    assert not started
    assert cli.main(["train.py"], {"TORCHPOD_SYSFS_ROOT": str(sysfs), "CUDA_VISIBLE_DEVICES": ""}) == 0  # without it
    assert started


# --- the machine read once: one runner, one bound, one GPU count ------------------------------

FI_INFO = """#!/bin/sh
echo "$*" >> "{calls}"
case "$1" in
  -l) printf 'cxi:\\n    version: 1.0\\ntcp:\\n    version: 1.0\\nshm:\\n    version: 1.0\\n' ;;
  -p) [ "$2" = cxi ] || exit 61; echo "provider: cxi" ;;
esac
{tail}
"""


def _tool(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    (folder / name).chmod(0o755)


def test_fi_info_is_asked_side_by_side_through_the_one_runner(tmp_path):
    from torchpod import doctor

    calls = tmp_path / "calls"
    _tool(tmp_path / "bin", "fi_info", FI_INFO.format(calls=calls, tail=""))
    providers, devices = doctor._libfabric({"PATH": str(tmp_path / "bin")}, doctor.site.SiteLibs())
    assert providers == ("cxi", "shm", "tcp") and devices == ("cxi",)
    assert sorted(calls.read_text().split("\n")[:-1]) == ["-l", "-p cxi", "-p efa"]
    assert doctor._libfabric({"PATH": str(tmp_path / "nothing")}, doctor.site.SiteLibs()) == (None, ())


def test_a_hanging_fi_info_costs_one_helper_bound(tmp_path):
    import time

    from torchpod import doctor, readers

    _tool(tmp_path / "bin", "fi_info", FI_INFO.format(calls=tmp_path / "calls", tail="exec /bin/sleep 300"))
    started = time.monotonic()
    providers, devices = doctor._libfabric({"PATH": str(tmp_path / "bin")}, doctor.site.SiteLibs())
    # three fi_info calls hang side by side: one bound, not three (the doctor then reports it)
    assert time.monotonic() - started < 3 * readers.HELPER_TIMEOUT_S
    assert providers is None and devices == ()  # reported as "no fi_info" (a warning), as before


def test_the_doctor_asks_nvidia_smi_once_and_counts_the_gpus_the_plan_counts(tmp_path, monkeypatch, capsys):
    from torchpod import gpus

    calls = tmp_path / "calls"
    _tool(tmp_path / "bin", "nvidia-smi", f'#!/bin/sh\necho x >> "{calls}"\n'
          "echo 'GPU 0: NVIDIA H100 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA H100 (UUID: GPU-2)'\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    code = cli.main(["doctor", "--sysfs-root", str(tmp_path), "--format", "json"], {"PATH": str(tmp_path / "bin")})
    rows = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 0 and calls.read_text() == "x\n"
    assert rows["gpus"]["detail"] == "2 GPUs visible" and rows["gpus"]["code"] == "doctor.gpus.ok"
    assert gpus.default_nproc({}, 2)[0] == "2"


def test_the_doctor_judges_what_nccl_sees_with_its_conf_files(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "etc" / "nccl.conf").write_text("NCCL_IB_HCAS=mlx5_0\nNCCL_IB_HCA=mlx5_9\n")
    _, checks = preflight({}, healthy(sysfs, proc, root=tmp_path))
    rows = {(c.name, c.finding.code) for c in checks}
    assert ("nccl-conf", "ncclconf.file.read") in rows and ("env-name", "names.env.misspelt") in rows
    assert ("user-setting", "verbs.user.hca-selects-none") in rows  # the file's NCCL_IB_HCA, as NCCL reads it


# What netplugin.run_probe returns for the SHARP plugin (nccl-rdma-sharp-plugins as libnccl-net.so).
SHARP = {"loaded": "libnccl-net.so", "path": "/usr/lib/x86_64-linux-gnu/libnccl-net.so", "tried": [],
         "exported": [8, 7, 6, 5], "chosen": 8, "plugin_name": "IBext_v8"}


@pytest.mark.parametrize("env, probe, code, status", [
    ({}, SHARP, "doctor.net-plugin.unwanted", "warn"),
    ({"NCCL_NET_PLUGIN": "none"}, {"skipped": "NCCL_NET_PLUGIN=none"}, "doctor.net-plugin.none", "ok"),
    ({"NCCL_NET_PLUGIN": "sharp"}, NOT_FOUND, "doctor.net-plugin.not-loaded", "fail"),
    ({"NCCL_NET_PLUGIN": "libnccl-net.so"}, SHARP, "doctor.net-plugin.ok", "ok"),
    ({}, {"loaded": None, "tried": []}, "doctor.net-plugin.none", "ok"),
])
def test_a_plugin_on_infiniband_or_roce_unwanted_or_not_loading(tmp_path, env, probe, code, status):
    sysfs, proc = write_node(tmp_path, FIXTURES["infiniband_hdr_node"])
    _, checks = preflight(env, healthy(sysfs, proc, net_probe=probe, root=tmp_path))
    [row] = [c for c in checks if c.name == "net-plugin"]
    assert (row.finding.code, row.status) == (code, status)


def test_the_driver_row_fails_an_old_driver_for_a_cuda_13_image(tmp_path):
    sysfs, proc = write_node(tmp_path, FIXTURES["infiniband_hdr_node"])
    (proc / "driver" / "nvidia").mkdir(parents=True)
    (proc / "driver" / "nvidia" / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
                                                         "570.133.20  Fri Mar 14 2025\n")
    fabric, checks = preflight({}, healthy(sysfs, proc, cuda=(13, 0), root=tmp_path))
    [row] = [c for c in checks if c.name == "driver"]
    assert row.status == "fail" and "the node has 570.133.20" in row.detail and exit_code(fabric, checks, None) == 1
