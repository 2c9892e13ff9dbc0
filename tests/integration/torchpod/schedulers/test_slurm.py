"""torchpod's Slurm host-list parser against the real `scontrol show hostnames`.

Inside a container there is usually no `scontrol`, so torchpod expands SLURM_JOB_NODELIST
itself; where `scontrol` is on PATH the launcher asks it instead. Both paths are checked
here with Debian's slurm-client (installed by setup.sh): `show hostnames` expands a list
locally and needs only a slurm.conf to read, no controller.

The generated lists keep to the forms Slurm emits: a prefix, then bracket groups of
zero-padded numbers and ranges, optionally a second group after more text
(`r[1-2]-n[08-09]`). Slurm 22.05 rejects text after the last bracket (`a[1-2]b`), which
torchpod accepts and expands; that difference is outside what Slurm hands a job.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchpod.cli import gather_facts
from torchpod.schedulers.slurm import expand_hostlist


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory, require_tool):
    require_tool("scontrol", "slurm-client")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=torchpod\nSlurmctldHost=localhost\n"
                    "NodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=localhost Default=YES\n")
    return conf


def scontrol_hostnames(nodelist: str, conf) -> tuple[str, ...]:
    done = subprocess.run([shutil.which("scontrol"), "show", "hostnames", nodelist], capture_output=True, text=True,
                          env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}, timeout=20)
    assert done.returncode == 0, f"scontrol rejected {nodelist!r}: {done.stderr.strip()}"
    return tuple(done.stdout.split())


def _number(value: int, pad: int) -> str:
    return str(value).zfill(len(str(value)) + pad)


def _range():
    return st.tuples(st.integers(0, 130), st.integers(0, 6), st.integers(0, 3)).map(
        lambda t: _number(t[0], t[2]) + (f"-{t[0] + t[1]}" if t[1] else ""))


def _bracket():
    return st.lists(_range(), min_size=1, max_size=3).map(lambda r: "[" + ",".join(r) + "]")


_PREFIX = st.from_regex(r"[a-z][a-z0-9-]{0,6}", fullmatch=True)
_INFIX = st.from_regex(r"[a-z.-]{0,3}", fullmatch=True)
_ITEM = st.one_of(
    _PREFIX,
    st.tuples(_PREFIX, _bracket(), st.one_of(st.just(""), st.tuples(_INFIX, _bracket()).map("".join))).map("".join),
)
NODELISTS = st.lists(_ITEM, min_size=1, max_size=4).map(",".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NODELISTS)
def test_parser_agrees_with_scontrol(slurm_conf, nodelist):
    assert expand_hostlist("SLURM_JOB_NODELIST", nodelist) == scontrol_hostnames(nodelist, slurm_conf)


@pytest.mark.parametrize("nodelist", ["gpu[001-004,010]", "nid[0008-10]", "a[1-010]", "r[1-2]-n[08-09]",
                                      "login1,gpu[1,1]", "x[1-2][3-4]"])
def test_edge_cases_agree_with_scontrol(slurm_conf, nodelist):
    assert expand_hostlist("SLURM_JOB_NODELIST", nodelist) == scontrol_hostnames(nodelist, slurm_conf)


def test_launcher_asks_scontrol_when_it_is_on_path(slurm_conf, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_conf))
    facts = gather_facts({"SLURM_JOB_NODELIST": "gpu[009-011]", "TORCHPOD_HOSTNAME": "gpu010"})
    assert facts.slurm_hosts == ("gpu009", "gpu010", "gpu011")
    # scontrol failing (here: no readable slurm.conf) leaves the parser to do the work
    monkeypatch.setenv("SLURM_CONF", str(slurm_conf.parent / "missing.conf"))
    assert gather_facts({"SLURM_JOB_NODELIST": "gpu[009-011]"}).slurm_hosts is None
