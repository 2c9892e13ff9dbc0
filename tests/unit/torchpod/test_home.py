"""torchpod.home: any user gets a writable HOME and temporary directory; a HOME that works
is never touched; the directory torchpod names is created private, and one another user
left at that name is refused. Hostile paths next to the happy ones."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod import home
from torchpod.errors import RuntimeFailure
from torchpod.plan import LaunchPlan
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line
from torchpod.values import Endpoint, NodeCount


def test_a_working_home_and_tmp_are_left_alone():
    assert home.decide({"HOME": "/home/u"}, True, True, "/tmp", 1000) == ((), ())


def test_an_unusable_home_moves_under_the_writable_temporary_directory_with_a_note():
    added, notes = home.decide({"HOME": "/"}, False, True, "/tmp", 12345)
    assert added == (("HOME", "/tmp/torchpod-home-12345"),)
    assert len(notes) == 1 and "HOME='/' is not a writable directory" in notes[0]


def test_a_read_only_root_moves_tmpdir_and_home_to_dev_shm():
    added, notes = home.decide({"HOME": "/root"}, False, False, "/dev/shm", 0)
    assert added == (("TMPDIR", "/dev/shm"), ("HOME", "/dev/shm/torchpod-home-0"))
    assert any("TMPDIR=/dev/shm" in n for n in notes)


def test_nowhere_to_write_is_said_not_guessed():
    added, notes = home.decide({"HOME": "/"}, False, False, None, 7)
    assert added == () and "mount a writable volume" in notes[0]


def test_probe_reads_the_filesystem_as_this_user(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        home_ok, tmp_ok, place = home.probe({"HOME": str(tmp_path), "TMPDIR": str(ro)})
        assert home_ok
        if os.getuid() != 0:  # root writes through mode bits
            assert not tmp_ok and place == "/tmp"
        assert home.probe({"HOME": "/"})[0] is False and home.probe({})[0] is False
        assert home.probe({"HOME": "relative/dir"})[0] is False
    finally:
        ro.chmod(0o700)


@given(st.text())
def test_any_home_or_tmpdir_text_is_judged_without_raising(text):
    home_ok, tmp_ok, place = home.probe({"HOME": text, "TMPDIR": text})
    assert place is None or os.path.isabs(place)


def test_the_plan_replaces_an_unusable_home_and_keeps_every_other_user_variable(tmp_path):
    facts = Facts(hostname="h", root=tmp_path, sysfs_root=tmp_path / "sys", uid=12345, home_writable=False,
                  writable_tmp=str(tmp_path))
    env = {"HOME": "/", "NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": ""}
    plan = resolve(env, facts, split_command_line(["t.py"]))
    assert dict(plan.env)["HOME"] == f"{tmp_path}/torchpod-home-12345"
    child = cli.child_env(env, plan)
    assert child["HOME"] == f"{tmp_path}/torchpod-home-12345" and child["NCCL_DEBUG"] == "INFO"


def _plan_with_home(path) -> LaunchPlan:
    return LaunchPlan(scheduler="standalone", nnodes=NodeCount(1, 1), node_rank=0, nproc_per_node="1",
                      rdzv_backend="c10d", rdzv_endpoint=Endpoint("localhost", 1), rdzv_id="x", rdzv_conf=(),
                      local_addr=None, max_restarts=0, env=(("HOME", str(path)),))


def test_the_chosen_home_is_created_private_and_reused(tmp_path):
    path = tmp_path / "torchpod-home-1"
    cli.private_home(_plan_with_home(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    cli.private_home(_plan_with_home(path))  # this user's own: used again


@pytest.mark.parametrize("make", ["link", "shared", "file"])
def test_a_home_someone_else_could_have_left_at_that_name_is_refused(tmp_path, make):
    path = tmp_path / "torchpod-home-1"
    if make == "link":
        (tmp_path / "theirs").mkdir()
        path.symlink_to(tmp_path / "theirs")
    elif make == "shared":
        path.mkdir()
        path.chmod(0o777)
    else:
        path.write_text("x")
    with pytest.raises(RuntimeFailure, match="is not a private directory of this user"):
        cli.private_home(_plan_with_home(path))
