"""The NVLink domain of a node's GPUs (torchpod.fabric.nvlink), read from recorded
`nvidia-smi -q` Fabric sections (tests/nvidia_smi.py), and what the plan does with it: the
nodes of one domain take contiguous ranks, and the workers learn the node the plan names."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nvidia_smi import HGX, IN_PROGRESS, MNNVL, MNNVL_DOMAIN, NO_FABRIC, other_clique, q_output

from torchpod import facts
from torchpod.contract import ENV_NODE_RANK
from torchpod.fabric import nvlink
from torchpod.order import domain_order
from torchpod.schedulers.common import Facts

from launcher_cases import plan_for

JOBSET = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "JOB_COMPLETION_INDEX": "2", "JOBSET_NAME": "pytorch",
          "REPLICATED_JOB_NAME": "workers", "JOB_INDEX": "0", "JOB_GLOBAL_INDEX": "0", "GLOBAL_REPLICAS": "1",
          "CUDA_VISIBLE_DEVICES": ""}


def read(sections: list[str]) -> tuple[str | None, tuple[str, ...]]:
    return nvlink.domain(nvlink.parse(q_output(sections)))


def test_four_gpus_of_one_nvlink_domain_name_it_as_gpu_feature_discovery_labels_it():
    gpus = nvlink.parse(q_output([MNNVL] * 4))
    assert [g.bus for g in gpus] == ["00000008:01:00.0", "00000008:02:00.0", "00000008:03:00.0", "00000008:04:00.0"]
    assert all(g.attached and g.state == "Completed" and g.clique == "2" for g in gpus)
    assert nvlink.domain(gpus) == (MNNVL_DOMAIN, ())


@pytest.mark.parametrize("section", [HGX, NO_FABRIC], ids=["hgx-one-node-nvswitch", "no-fabric"])
def test_a_board_without_a_multi_node_domain_has_none_and_says_nothing(section):
    assert read([section] * 8) == (None, ())


def test_a_fabric_still_training_is_no_domain_and_a_note():
    domain, notes = read([IN_PROGRESS] * 4)  # its key column is wider: rows split at " : "
    assert domain is None and len(notes) == 1
    assert "State 'In Progress'" in notes[0] and "00000008:01:00.0" in notes[0]


def test_gpus_of_one_node_in_two_domains_name_none():
    domain, notes = read([MNNVL, MNNVL, other_clique(MNNVL, "32766"), other_clique(MNNVL, "32766")])
    assert domain is None and "2 NVLink domains" in notes[0] and MNNVL_DOMAIN in notes[0]


def test_one_gpu_outside_the_domain_names_none_and_that_gpu():
    domain, notes = read([MNNVL, MNNVL, IN_PROGRESS, MNNVL])
    assert domain is None and "GPU 00000008:03:00.0 is not in the NVLink domain" in notes[0]


@pytest.mark.parametrize("edit", [
    ("Status                            : Success", "Status                            : Insufficient Resources"),
    ("dc6e40c4-d722-4357-9ba6-5291dd461278", "DC6E40C4-D722-4357-9BA6-5291DD461278"),  # not how it prints
    ("dc6e40c4-d722-4357-9ba6-5291dd461278", "dc6e40c4d7224357"),
    ("CliqueId                          : 2", "CliqueId                          : 02"),
    ("CliqueId                          : 2", "CliqueId                          : -1"),
    ("CliqueId                          : 2", "CliqueId                          : 99999999999"),
])
def test_a_section_that_is_not_a_clean_attachment_is_no_domain(edit):
    domain, notes = read([MNNVL.replace(*edit)] * 2)
    assert domain is None and notes, notes


def test_rows_outside_a_gpus_fabric_section_are_not_read():
    text = q_output([NO_FABRIC]).replace("    Processes                             : None",
                                         "    Processes\n        State                             : Completed")
    stray = "Fabric\n    State : Completed\n    ClusterUUID : dc6e40c4-d722-4357-9ba6-5291dd461278\n"
    gpus = nvlink.parse(stray + text)
    assert [g.state for g in gpus] == ["N/A"] and nvlink.domain(gpus) == (None, ())


def test_a_flood_of_gpu_sections_is_read_to_a_bound():
    assert len(nvlink.parse(q_output([MNNVL] * (nvlink.MAX_GPUS + 50)))) == nvlink.MAX_GPUS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([MNNVL, HGX, NO_FABRIC, IN_PROGRESS, "garbage : x\n", "    Fabric\n", "\x00 : \n"]),
                max_size=6), st.text(max_size=80))
def test_any_output_reads_to_a_domain_or_none_never_an_error(sections, noise):
    domain, notes = nvlink.domain(nvlink.parse(noise + q_output(sections) + noise))
    assert domain is None or domain == MNNVL_DOMAIN
    assert all("\n" not in n for n in notes)


# --- the plan -------------------------------------------------------------------------------------

def test_a_node_in_an_nvlink_domain_ranks_by_it_then_by_its_index():
    plan = plan_for(JOBSET, ["--nnodes", "4"], facts=Facts(hostname="pytorch-workers-0-2",
                                                          nvlink_domain=MNNVL_DOMAIN))
    assert plan.node_rank == 2 and plan.group_rank is None  # torch's rank depends on the others' domains
    assert plan.domains == (f"nvlink:{MNNVL_DOMAIN}",)
    assert f"torchpod_order={'.'.join(map(str, domain_order(plan.domains, 2)))}" in ",".join(
        f"{k}={v}" for k, v in plan.rdzv_conf)
    assert "NVLink domain (nvidia-smi -q)" in plan.rank_order
    assert dict(plan.env)[ENV_NODE_RANK] == "2"  # preflight names the node as the plan does


def test_slurms_switches_come_before_the_nvlink_domain():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "4", "SLURM_NNODES": "4", "SLURM_NODEID": "2",
           "SLURM_JOB_NODELIST": "c[1-4]", "SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0",
           "SLURM_TOPOLOGY_ADDR": "top.sw-zeta.c3", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node",
           "CUDA_VISIBLE_DEVICES": ""}
    plan = plan_for(env, facts=Facts(hostname="c3", nvlink_domain=MNNVL_DOMAIN))
    assert plan.domains == ("top", "sw-zeta", f"nvlink:{MNNVL_DOMAIN}")
    assert "SLURM_TOPOLOGY_ADDR and the GPUs' NVLink domain" in plan.rank_order


def test_without_a_domain_the_index_is_the_group_rank_and_nothing_is_exported():
    plan = plan_for(JOBSET, ["--nnodes", "4"], facts=Facts(hostname="pytorch-workers-0-2"))
    assert plan.group_rank == 2 and plan.domains == () and ENV_NODE_RANK not in dict(plan.env)


# --- asking the machine -------------------------------------------------------------------------

def _fake(folder: Path, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    tool = folder / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_a_node_of_a_multi_node_job_asks_nvidia_smi_for_its_domain(tmp_path, monkeypatch):
    (tmp_path / "q.txt").write_text(q_output([MNNVL] * 4))
    _fake(tmp_path / "bin", f'echo "$@" >> {tmp_path}/asked; [ "$1" = -q ] && exec cat {tmp_path}/q.txt; exit 2\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    got = facts.gather_facts({**JOBSET, "TORCHPOD_HOSTNAME": "pytorch-workers-0-2"})
    assert got.nvlink_domain == MNNVL_DOMAIN and got.notes == ()
    assert (tmp_path / "asked").read_text() == "-q\n"  # CUDA_VISIBLE_DEVICES counts the GPUs: no -L


def test_a_single_node_run_does_not_ask(tmp_path, monkeypatch):
    _fake(tmp_path / "bin", f"echo \"$@\" >> {tmp_path}/asked; exit 2\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    got = facts.gather_facts({"CUDA_VISIBLE_DEVICES": "", "TORCHPOD_HOSTNAME": "n1"})
    assert got.nvlink_domain is None and not (tmp_path / "asked").exists()


def test_nvidia_smi_failing_is_a_note_and_no_domain(tmp_path, monkeypatch):
    _fake(tmp_path / "bin", "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    got = facts.gather_facts({**JOBSET, "TORCHPOD_HOSTNAME": "pytorch-workers-0-2"})
    assert got.nvlink_domain is None
    assert any(n.startswith("nvidia-smi -q failed (exit 9)") for n in got.notes), got.notes
