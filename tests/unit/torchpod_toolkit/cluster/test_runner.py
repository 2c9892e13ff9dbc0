"""torchpod_toolkit.cluster.runner, its pure parts: the results read back from a node's log and
the development bind mounts. (Running containers as nodes is the cluster tier's.)"""

from __future__ import annotations

from pathlib import Path

from torchpod.contract import EXAMPLES_DIR, RESULT_PREFIX
from torchpod_toolkit.cluster import runner
from torchpod_toolkit.cluster.runner import dev_mounts, parse_results

from paths import ROOT


def test_results_are_every_prefixed_json_line_in_order_and_a_cut_line_is_skipped():
    log = "\n".join([
        "torchpod: slurm: node 0 of 2",
        f'{RESULT_PREFIX}{{"rank": 0, "ok": true}}',
        f'[default1]:{RESULT_PREFIX}{{"rank": 1, "ok": false}}',  # torchrun's --tee prefix before it
        f'{RESULT_PREFIX}{{"rank": 2, "o',  # killed mid-write
        f'{RESULT_PREFIX}{{"rank": 3}}\r',  # a CRLF log
        "TORCHPOD_RESULT{}",  # not the prefix: it ends in a space
    ])
    assert parse_results(log) == [{"rank": 0, "ok": True}, {"rank": 1, "ok": False}, {"rank": 3}]
    assert parse_results("") == []


def test_dev_mounts_put_this_checkout_over_the_images_launcher_and_examples_read_only():
    mounts = dev_mounts(ROOT, "3.12")
    assert mounts == {
        str(ROOT / "entrypoints" / "torchpod"): {"bind": "/opt/venv/lib/python3.12/site-packages/torchpod",
                                                 "mode": "ro"},
        str(ROOT / "examples"): {"bind": EXAMPLES_DIR, "mode": "ro"},
    }
    assert all(Path(host).is_dir() for host in mounts)


def test_security_kwargs_are_what_docker_create_takes():
    from torchpod_toolkit.cluster.nodes import Security

    sec = Security(user="1000:1000", groups=("1000",), read_only=True, tmpfs=("/tmp",), cap_drop=("ALL",),
                   no_new_privileges=True)
    assert runner.security_kwargs(sec) == {"read_only": True, "user": "1000:1000", "group_add": ["1000"],
                                           "tmpfs": {"/tmp": ""}, "cap_drop": ["ALL"],
                                           "security_opt": ["no-new-privileges"]}
    assert runner.security_kwargs(Security()) == {"read_only": False}
