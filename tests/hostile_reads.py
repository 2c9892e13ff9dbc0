"""The hostile-file harness shared by the *_hostile tests of the launcher: ``cli.main`` in
process with a controlled environment and machine, what a run must end with (a plan, a
report, or exactly one line naming the file), and the files each kind of test writes. A
plain module on pytest's pythonpath."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod import doctor

from fabric_cases import FIXTURES, write_node
from launcher_cases import added_by_node
from paths import ROOT as REPO

ROCE = FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"]


PORT = "sys/class/infiniband/mlx5_bond_0/ports/1"


# The time bound the property tests hold every example to: far above what a linear read of
# these inputs costs (milliseconds), far below what a hang or a quadratic pattern on the
# large inputs costs (the 200 KB line of spaces took 93 s before the reader was bounded).
# A guard against hangs and super-linear work, not a performance figure (those are bench/).
BOUND = timedelta(seconds=10)
SETTINGS = settings(deadline=BOUND, max_examples=60, suppress_health_check=[HealthCheck.too_slow])


HANG_GUARD_S = 60


def base_env(root: Path, **more: str) -> dict[str, str]:
    """No GPU probe, no scontrol, this node's name fixed, sysfs under root."""
    (root / "bin").mkdir(exist_ok=True)
    return {"TORCHPOD_HOSTNAME": "n1", "TORCHPOD_SYSFS_ROOT": str(root / "sys"), "PATH": str(root / "bin"),
            "CUDA_VISIBLE_DEVICES": "", "HOME": str(root), **more}  # a writable HOME: no torchpod.home note


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
    mine = added_by_node(got["env"].items())  # the shim's path is torchpod's own, not read from input
    for value in (got["rdzv_endpoint"], got["local_addr"] or "", *mine.values()):
        assert SANE.fullmatch(value), value


def plan(env, root) -> dict:
    code, out, err = main(["plan"], env, root)
    assert code == 0 and not err, err
    return json.loads(out)


def error_of(argv, env, root) -> str:
    line = ends_well(main(argv, env, root))
    assert line is not None, "expected a one-line error"
    return line


def pbs_env(root: Path, nodefile, **more) -> dict[str, str]:
    return base_env(root, PBS_JOBID="7.server", PBS_NODEFILE=str(nodefile), **more)


# All of Unicode (lone surrogates written as their UTF-8-like bytes), raw bytes, and text
# biased to what parsers mistake: non-ASCII digits, separators, shell and line-ending characters.
TRICKY = "0123456789\u00b2\u00b9\u0663\u06f5\u0966\uff11.:-_, \t\r\n\x0b\x0c\x1c\x85\u2028#;$()'\"[]=^\x00"


CONTENT = st.one_of(st.binary(max_size=300),
                    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
                    st.text(alphabet=TRICKY + "abn", max_size=60).map(str.encode),
                    # large: a short tricky chunk repeated up to ~1 MB, where a quadratic pattern shows
                    st.tuples(st.text(alphabet=TRICKY + "abn", min_size=1, max_size=8).map(str.encode),
                              st.integers(1_000, 120_000)).map(lambda t: t[0] * t[1]))


def volcano(root: Path, data: bytes | None = None) -> tuple[dict[str, str], Path]:
    folder = root / "etc" / "volcano"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "worker.host"
    if data is not None:
        path.write_bytes(data)
    return base_env(root, VC_TASK_INDEX="0", TORCHPOD_HOSTNAME="job-worker-0"), path


def roce_node(root: Path) -> dict[str, str]:
    write_node(root, ROCE)
    return base_env(root)


ATTRIBUTES = [f"{PORT}/state", f"{PORT}/link_layer", f"{PORT}/gids/5", f"{PORT}/gid_attrs/types/5",
              f"{PORT}/gid_attrs/ndevs/5", "proc/net/route"]


def _file_name(text: str) -> bool:
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        return False
    return text not in (".", "..") and b"/" not in raw and b"\0" not in raw and 0 < len(raw) <= 200


DIGITS = st.text(alphabet="0123456789\u00b2\u00b9\u0663\u06f5\u0966\uff11", min_size=1, max_size=3)


NAMES = st.one_of(st.text(min_size=1, max_size=30), st.text(alphabet=TRICKY + "mlx5_bond", min_size=1, max_size=12),
                  DIGITS).filter(_file_name)


RDMA_LOG = ("node-0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB net1:172.18.128.3<0>\n"
            "node-0:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0(1)/GDRDMA\n")


def doctor_log(path, root: Path, *extra: str):
    return main(["doctor", "--nccl-log", str(path), *extra], base_env(root), root)


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
