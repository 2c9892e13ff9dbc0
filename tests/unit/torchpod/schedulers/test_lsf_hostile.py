"""torchpod.schedulers.lsf, hostile: LSB_DJOB_HOSTFILE holding any bytes, LSB_MCPU_HOSTS
any text (all of Unicode, control characters), special files where the host file should
be: a plan naming only well-formed hosts, or exactly one line, through ``cli.main``."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import CONTENT, SETTINGS, TRICKY, base_env, ends_well, error_of, main, sane_plan

MCPU = st.one_of(st.none(), st.text(max_size=40), st.text(alphabet=TRICKY + "n1 ", max_size=30),
                 st.just("batch1 1 n1 4 n2 4"), st.just("n1 2 n2 2"))


def lsf_env(root: Path, hostfile: Path | None, mcpu: str | None = None) -> dict[str, str]:
    more = {"LSB_JOBID": "31"}
    if hostfile is not None:
        more["LSB_DJOB_HOSTFILE"] = str(hostfile)
    if mcpu is not None:
        more["LSB_MCPU_HOSTS"] = mcpu
    return base_env(root, **more)


@pytest.mark.parametrize("make, needle", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe)"),
    (lambda p: p.symlink_to("/dev/zero"), "is a character device"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.write_bytes(b"n1\n\xc3\x28"), "not UTF-8 text"),
    (lambda p: p.write_text("n1\n;x\n"), "line 2 has host ';x'"),
    (lambda p: None, "LSB_DJOB_HOSTFILE"),
])
def test_a_broken_host_file_is_one_line_naming_it(tmp_path, make, needle):
    path = tmp_path / "hostfile"
    make(path)
    line = error_of(["plan"], lsf_env(tmp_path, path), tmp_path)
    assert needle in line and "LSB_DJOB_HOSTFILE" in line, line


@SETTINGS
@given(data=CONTENT, mcpu=MCPU)
def test_any_host_file_gives_a_plan_or_one_line(data, mcpu):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "hostfile"
        path.write_bytes(data)
        code, out, err = main(["plan"], lsf_env(root, path, mcpu), root)
        if ends_well((code, out, err)) is None:
            sane_plan(out, "lsf")
            got = json.loads(out)
            assert got["local_addr"].split(".")[0].lower() == "n1"  # TORCHPOD_HOSTNAME


@SETTINGS
@given(mcpu=st.text(max_size=60).filter(str.strip))
def test_any_mcpu_hosts_gives_a_plan_or_one_line(mcpu):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        code, out, err = main(["plan"], lsf_env(root, None, mcpu), root)
        if ends_well((code, out, err)) is None:
            sane_plan(out, "lsf")
