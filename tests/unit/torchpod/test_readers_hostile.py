"""torchpod.readers, hostile: special files (a FIFO, /dev/zero) given as a node file, an NCCL
log, a sysfs attribute and a Volcano host file, read in a child process under a timeout: each
is exactly one line `torchpod: error: ...` naming the file, never a hang (a hang fails the
test instead of the suite). The in-process cases for each kind of file sit beside the module
that reads it (schedulers/test_pbs_hostile, test_volcano_hostile, fabric/test_sysfs_hostile,
test_nccl_log_hostile, test_values_hostile, test_netplugin_hostile, test_doctor_hostile);
tests/hostile_reads.py holds the harness they share."""

from __future__ import annotations

import os

import pytest

from hostile_reads import (
    PORT,
    base_env,
    child,
    one_error_line,
    pbs_env,
    roce_node,
    volcano,
)


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
