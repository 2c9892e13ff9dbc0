"""Hostile scheduler environments: each way a hostile environment could make a silently wrong plan, with an
example, and a property over every variable any scheduler reads: `torchpod plan` ends
with a plan or one line, never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod.errors import InputError
from torchpod.schedulers import NAMES, SCHEDULERS, TORCHRUN_WORKER_VARS
from torchpod.schedulers.slurm import MAX_HOSTS, expand_hostlist, hostlist_size, parse_gpus_per_node
from torchpod.values import Endpoint

from launcher_cases import plan_for, torch_accepts

_EMPTY_SYSFS = Path(tempfile.mkdtemp(prefix="torchpod-hostile-sys-"))
# The helper tools gather_facts looks for on PATH: scontrol as it answers without a
# slurm.conf (exit 1), no nvidia-smi, whatever this machine has installed.
_TOOLS = Path(tempfile.mkdtemp(prefix="torchpod-tools-"))
(_TOOLS / "scontrol").write_text("#!/bin/sh\nexit 1\n")
(_TOOLS / "scontrol").chmod(0o755)
ISOLATED = {"TORCHPOD_HOSTNAME": "n1", "TORCHPOD_SYSFS_ROOT": str(_EMPTY_SYSFS), "CUDA_VISIBLE_DEVICES": ""}


def main(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.dict(os.environ, {"PATH": str(_TOOLS)}):
        code = cli.main(argv, {**env, **ISOLATED})
    return code, out.getvalue(), err.getvalue()


def refused(env: dict[str, str], argv: tuple[str, ...] = ()) -> str:
    """The one line `torchpod plan` prints for ``env``; fails unless it exits 2 with it."""
    code, out, err = main(["plan", *argv], env)
    assert code == 2 and out == "", (code, out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("torchpod: error: ") and "expected" in line, line
    return line


ENV_JOB = {"WORLD_SIZE": "2", "RANK": "1"}
SLURM = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0", "SLURM_STEP_ID": "0"}


# --- MASTER_ADDR carrying a port --------------------------------------------------------

@pytest.mark.parametrize(
    "addr, port, endpoint",
    [
        ("node0:1234", None, Endpoint("node0", 1234)),
        ("[::1]:1234", None, Endpoint("::1", 1234)),
        ("node0:1234", "1234", Endpoint("node0", 1234)),  # agreeing MASTER_PORT
        ("[fd00::2]", "5", Endpoint("fd00::2", 5)),
        ("fd00::2", None, Endpoint("fd00::2", 29400)),  # unbracketed IPv6 stays an address
        ("node0", None, Endpoint("node0", 29400)),
    ],
)
def test_master_addr_with_a_port_is_split_with_a_note(addr, port, endpoint):
    env = {**ENV_JOB, "MASTER_ADDR": addr, **({"MASTER_PORT": port} if port else {})}
    plan = plan_for(env)
    assert plan.rdzv_endpoint == endpoint
    assert f"--rdzv-endpoint={endpoint}" in plan.torchrun_args
    if endpoint.host != addr.strip("[]"):
        assert any(f"MASTER_ADDR={addr} holds a port" in n for n in plan.notes), plan.notes
    torch_accepts(plan.torchrun_args)


def test_master_addr_port_disagreeing_with_master_port_names_both():
    line = refused({**ENV_JOB, "MASTER_ADDR": "node0:1234", "MASTER_PORT": "29500"})
    assert "MASTER_ADDR='node0:1234' names port 1234 and MASTER_PORT='29500'" in line


@pytest.mark.parametrize("addr", ["node0:", "node0:x", "[::1", "[::1]x", "node0:99999", "node0:²"])
def test_master_addr_with_a_broken_port_is_one_line(addr):
    assert "MASTER_ADDR" in refused({**ENV_JOB, "MASTER_ADDR": addr})


def test_master_addr_flag_with_a_port():
    plan = plan_for({}, ["--nnodes=2", "--master-addr=node0:1234"])
    assert plan.rdzv_endpoint == Endpoint("node0", 1234)
    with pytest.raises(InputError, match="--master-addr names port 1234 and --master-port=99"):
        plan_for({}, ["--nnodes=2", "--master-addr=node0:1234", "--master-port=99"])
    assert plan_for({"PET_NNODES": "2", "PET_MASTER_ADDR": "[::1]:7"}).rdzv_endpoint == Endpoint("::1", 7)


# --- Slurm's GPU forms -------------------------------------------------------------------

@pytest.mark.parametrize(
    "value, count",
    [("4", 4), ("a100:4", 4), ("a100:4(S:0-1)", 4), ("gpu:a100:4", 4), ("a100:2,v100:2", 4),
     ("a100:4(S:0,2),v100:1", 5), ("gres/gpu:h100:8", 8), ("nvidia_h100_80gb_hbm3:8", 8), ("1g.10gb:7", 7)],
)
def test_slurm_gpus_per_node_in_every_documented_form(value, count):
    assert parse_gpus_per_node("SLURM_GPUS_PER_NODE", value) == count
    assert plan_for({**SLURM, "SLURM_GPUS_PER_NODE": value}).nproc_per_node == str(count)


@pytest.mark.parametrize("value", ["a100", "a100:", "4k", "a100:4(S:)", "٣", "a:b:c:4", "4,", "-1", "a100:4)"])
def test_slurm_gpus_per_node_garbage_is_one_line(value):
    assert "SLURM_GPUS_PER_NODE" in refused({**SLURM, "SLURM_GPUS_PER_NODE": value})


def test_slurm_zero_gpus_falls_to_the_default_rule_with_a_note():
    plan = plan_for({**SLURM, "SLURM_GPUS_ON_NODE": "0", "CUDA_VISIBLE_DEVICES": ""})
    assert plan.nproc_per_node == "1"
    assert any("SLURM_GPUS_ON_NODE=0: no GPUs allocated" in n for n in plan.notes)


# --- inside a torchrun worker --------------------------------------------------------------

@pytest.mark.parametrize("name", TORCHRUN_WORKER_VARS)
def test_a_torchrun_worker_is_refused_naming_the_variable(name):
    # a worker's whole environment as torchrun writes it, but only one marker: enough
    env = {**SLURM, "MASTER_ADDR": "n1", "WORLD_SIZE": "8", "RANK": "3", name: "2"}
    line = refused(env)
    assert f"{name}='2' is set" in line and "once per node, outside torchrun" in line
    assert "--" not in line.partition("expected")[2]  # no torchrun flags to add


def test_local_rank_alone_is_no_torchrun_marker():
    # DeepSpeed, Accelerate and AzureML set LOCAL_RANK per process too; only torchelastic's
    # own variables say torchrun started this process
    plan = plan_for({**SLURM, "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    assert plan.scheduler == "slurm"


@pytest.mark.parametrize("env", [{"TORCHPOD_SCHEDULER": "bogus"}, {"PET_NNODES": "garbage"},
                                 {"TORCHPOD_SCHEDULER": "standalone"}])
def test_the_worker_check_comes_before_detection_and_options(env):
    assert "TORCHELASTIC_RUN_ID='x' is set" in refused({**env, "TORCHELASTIC_RUN_ID": "x"})


# --- a second Slurm task on the node -------------------------------------------------------

@pytest.mark.parametrize("tasks", [None, "1(x2)", "2(x2)"])
def test_slurm_localid_1_is_a_second_launcher(tasks):
    env = {**SLURM, "SLURM_LOCALID": "1", **({"SLURM_STEP_TASKS_PER_NODE": tasks} if tasks else {})}
    line = refused(env)
    assert "SLURM_LOCALID='1'" in line and "srun --ntasks-per-node=1" in line


def test_slurm_localid_0_is_the_launcher_and_garbage_is_one_line():
    assert plan_for({**SLURM, "SLURM_LOCALID": "0"}).node_rank == 0
    assert "SLURM_LOCALID" in refused({**SLURM, "SLURM_LOCALID": "one"})


# --- a forced scheduler with nothing set ---------------------------------------------------

@pytest.mark.parametrize("missing", ["MASTER_ADDR", "WORLD_SIZE", "RANK"])
def test_forced_env_names_the_missing_variable(missing):
    env = {"TORCHPOD_SCHEDULER": "env", "MASTER_ADDR": "m0", "WORLD_SIZE": "2", "RANK": "0"}
    del env[missing]
    assert f"{missing} is not set" in refused(env)


@pytest.mark.parametrize("name", NAMES)
def test_every_forced_scheduler_with_an_empty_environment_plans_or_says_one_line(name):
    code, out, err = main(["plan"], {"TORCHPOD_SCHEDULER": name})
    if code == 0:
        assert json.loads(out)["scheduler"] == name
    else:
        line = refused({"TORCHPOD_SCHEDULER": name})
        # nothing is set, so the line may not claim that something is
        assert " is set" not in line, line


# --- Slurm host lists that multiply out ----------------------------------------------------

def test_host_list_product_is_capped_before_expanding():
    with pytest.raises(InputError, match=f"names 1000000000 hosts, more than the {MAX_HOSTS}"):
        expand_hostlist("SLURM_JOB_NODELIST", "a[0-999]b[0-999]c[0-999]")
    assert hostlist_size("V", "a[0-999]b[0-999]c[0-999],d") == 10**9 + 1
    assert len(expand_hostlist("V", f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS
    with pytest.raises(InputError, match="is not N or N-M"):
        expand_hostlist("V", "n[0-" + "9" * 5000 + "]")  # beyond int()'s digit limit


def test_plan_on_a_host_list_that_multiplies_out_ends_with_one_line(tmp_path):
    env = {**SLURM, "SLURM_JOB_NODELIST": "a[0-999]b[0-999]c[0-999]", **ISOLATED, "PATH": "/usr/bin:/bin"}
    try:  # a hang guard only: the test fails if the plan does not end, never on a figure
        done = subprocess.run([sys.executable, "-m", "torchpod", "plan"], env=env, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("torchpod plan did not end on a host list of 10^9 names")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"more than the {MAX_HOSTS} torchpod expands" in line


# --- any environment: a plan or one line ---------------------------------------------------

# every variable a detector, the options reader or the fabric reads
VARIABLES = sorted({
    *(name for module in SCHEDULERS for name in module.MARKERS), *TORCHRUN_WORKER_VARS,
    "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_NNODES", "SLURM_JOB_NUM_NODES",
    "SLURM_STEP_NUM_NODES", "SLURM_NODEID", "SLURM_STEP_ID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_LOCALID",
    "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "PBS_NODEFILE", "PBS_NODENUM", "PALS_NODEID",
    "PALS_LOCAL_RANKID", "VC_WORKER_HOSTS", "VC_WORKER_NUM", "VC_MASTER_HOSTS", "VC_MASTER_NUM",
    "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE", "KUBERNETES_SERVICE_HOST",
    "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_RDZV_ENDPOINT",
    "PET_RDZV_BACKEND", "PET_RDZV_CONF", "PET_RDZV_ID", "PET_MAX_RESTARTS", "PET_NPROC_PER_NODE",
    "PET_N_PROC_PER_NODE", "PET_LOCAL_ADDR", "PET_STANDALONE", "PET_SIGNALS_TO_HANDLE", "JOB_COMPLETION_INDEX",
    "REPLICA_INDEX", "POD_NAME", "RUNAI_JOB_UUID", "JOB_UUID", "JOB_NAME", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "PMIX_NAMESPACE", "TORCHPOD_SCHEDULER", "TORCHPOD_RDZV_PORT",
    "TORCHPOD_RDZV_TIMEOUT", "TORCHPOD_PRESET", "NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME",
    "FI_PROVIDER", "NVIDIA_VISIBLE_DEVICES",
})
SHAPES = [
    {},
    {"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": "2", "RANK": "1"},
    {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0"},
    {"PET_NNODES": "2", "PET_RDZV_ENDPOINT": "w-0:29400"},
    {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0", "MASTER_ADDR": "n1"},
    {"RUNAI_JOB_NAME": "j", "WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "10.0.0.1"},
    {"VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "w-0.j,w-1.j", "VC_WORKER_NUM": "2"},
]
VALUES = st.one_of(
    st.text(st.characters(codec=None), max_size=16),  # all of Unicode, controls and surrogates too
    st.sampled_from(["²", "٣", "１", "9" * 5000, "-1", "1e3", "0x10", "a[0-999]b[0-999]", "n[1-2]:x",
                     "[::1]:1", "node0:1234", "\x00", "\n", "$(touch M)", "4(x99999999999)", "a100:4(S:0-1)"]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(SHAPES), extra=st.dictionaries(st.sampled_from(VARIABLES), VALUES, max_size=6))
@example(shape={}, extra={"TORCHPOD_SCHEDULER": "env", "MASTER_ADDR": "m"})
@example(shape=SHAPES[2], extra={"SLURM_STEP_TASKS_PER_NODE": "4(x99999999999)"})
@example(shape=SHAPES[2], extra={"SLURM_NODEID": "9" * 5000})
def test_plan_of_any_environment_is_json_or_one_line(shape, extra):
    code, out, err = main(["plan"], {**shape, **extra})
    event("plan" if code == 0 else "one line")
    if code == 0:
        data = json.loads(out)
        torch_accepts(data["torchrun_args"])
        assert err == ""
    else:
        assert code == 2 and out == "", (code, err)
        (line,) = err.strip().splitlines()
        assert line.startswith("torchpod: error: "), line
