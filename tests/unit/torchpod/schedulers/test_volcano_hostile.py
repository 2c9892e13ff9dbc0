"""torchpod.schedulers.volcano, hostile: /etc/volcano host files that are broken, hold any
bytes, or name one short name in two tasks: a plan or exactly one line naming the file,
through ``cli.main``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile_reads import (
    CONTENT,
    SETTINGS,
    base_env,
    ends_well,
    error_of,
    main,
    plan,
    sane_plan,
    volcano,
)


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


def test_one_short_name_in_two_volcano_tasks_is_refused_naming_both(tmp_path):
    env = {**base_env(tmp_path), "VC_TASK_INDEX": "0", "TORCHPOD_HOSTNAME": "gpu7",
           "VC_MASTER_HOSTS": "gpu7.a.example", "VC_WORKER_HOSTS": "gpu7.b.example,gpu8.b.example"}
    line = error_of(["plan"], env, tmp_path)
    assert "'gpu7' is listed in VC_MASTER_HOSTS and VC_WORKER_HOSTS" in line and "POD_NAME" in line
    # the pod's own name, unique, decides
    assert plan({**env, "POD_NAME": "gpu8", "VC_TASK_INDEX": "1"}, tmp_path)["node_rank"] == 2
