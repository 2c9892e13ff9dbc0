"""The resolver's decisions one at a time (torchpod.resolve.decide_*), and the one rule for
MASTER_ADDR-style endpoints every scheduler shares."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.options import read_user_options
from torchpod.resolve import decide_endpoint, decide_nnodes, decide_rdzv_id, decide_signals
from torchpod.schedulers.common import Detection, Facts, master_endpoint
from torchpod.torchrun_flags import split_command_line
from torchpod.values import Endpoint, NodeCount

SLURM = Detection(scheduler="slurm", nnodes=NodeCount.exactly(4), node_rank=1,
                  rdzv_endpoint=Endpoint("gpu001", 29400), rdzv_id="slurm-7",
                  hosts=("gpu001", "gpu002", "gpu003", "gpu004"), local_addr="gpu002")


def user(*argv, env=None):
    return read_user_options(env or {}, split_command_line([*argv, "train.py"]))


def test_master_port_variable_is_used_and_no_ephemeral_warning_is_given_for_it():
    env = {"MASTER_ADDR": "m0", "MASTER_PORT": "40000", "TORCHPOD_RDZV_PORT": "45000"}
    ep, notes = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))
    assert ep == Endpoint("m0", 40000)
    assert notes == ("rendezvous endpoint m0:40000 from MASTER_ADDR and MASTER_PORT",)
    # torchpod chose the port (TORCHPOD_RDZV_PORT) inside the ephemeral range: now it warns
    ep, notes = master_endpoint({"MASTER_ADDR": "m0", "TORCHPOD_RDZV_PORT": "45000"},
                                ("MASTER_ADDR",), ("MASTER_PORT",))
    assert ep == Endpoint("m0", 45000) and "ephemeral range" in notes[-1]
    assert master_endpoint({}, ("MASTER_ADDR",), ("MASTER_PORT",)) is None


def test_nnodes_override_is_noted_and_must_fit_the_host_list():
    step = decide_nnodes({}, SLURM, user("--nnodes=2:4"))
    assert step.value == NodeCount(2, 4)
    assert step.notes == ("--nnodes=2:4 overrides slurm's nnodes=4",)
    with pytest.raises(InputError, match="--nnodes='2' does not fit the 4 hosts slurm lists"):
        decide_nnodes({}, SLURM, user("--nnodes=2"))
    assert decide_nnodes({}, SLURM, user()).value == NodeCount.exactly(4)


def test_master_flags_move_the_endpoint_and_keep_the_detected_port():
    step = decide_endpoint(SLURM, user("--master-addr=10.0.0.9"), NodeCount.exactly(4), "c10d")
    assert step.value.endpoint == Endpoint("10.0.0.9", 29400) and not step.value.single_node
    with pytest.raises(InputError, match="--master-port given without a master address"):
        decide_endpoint(Detection("explicit", NodeCount.exactly(2), None, None, None),
                        user("--master-port=1234"), NodeCount.exactly(2), "c10d")


def test_one_node_without_an_endpoint_uses_loopback_and_several_need_one():
    alone = Detection("standalone", NodeCount.exactly(1), 0, None, "standalone-h", single_node=True)
    step = decide_endpoint(alone, user(), NodeCount.exactly(1), "c10d")
    assert step.value.endpoint == Endpoint("127.0.0.1", 0) and step.value.single_node
    with pytest.raises(InputError, match="nnodes=2 needs a rendezvous endpoint"):
        decide_endpoint(alone, user(), NodeCount.exactly(2), "c10d")


def test_rdzv_id_none_is_replaced_by_the_stable_id_with_a_note():
    step = decide_rdzv_id(SLURM, user(env={"PET_RDZV_ID": "none"}), Endpoint("gpu001", 29400))
    assert step.value == "slurm-7" and step.notes == ("PET_RDZV_ID=none ignored: using slurm-7, stable per job",)


def test_signals_follow_what_this_torchrun_accepts():
    assert decide_signals(user(), Facts()).value == ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    old = decide_signals(user(), Facts(torchrun_signals=False))
    assert old.value is None and "torch < 2.10" in old.notes[0]
    with pytest.raises(InputError, match="--signals-to-handle='SIGNOPE' names no known signal"):
        user("--signals-to-handle=SIGNOPE")


def test_the_endpoint_note_names_where_the_master_address_came_from():
    from launcher_cases import plan_for

    operator = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "4", "PET_MASTER_ADDR": "bert-master-0",
                "PET_MASTER_PORT": "23456", "MASTER_ADDR": "bert-master-0", "MASTER_PORT": "23456",
                "WORLD_SIZE": "8", "RANK": "1", "CUDA_VISIBLE_DEVICES": ""}
    notes = [n for n in plan_for(operator).notes if n.startswith("rendezvous endpoint")]
    assert notes == ["rendezvous endpoint bert-master-0:23456 from PET_MASTER_ADDR and PET_MASTER_PORT"], notes
    flags = ["--nnodes", "2", "--node-rank", "0", "--master-addr", "n0", "--master-port", "1234"]
    notes = [n for n in plan_for({"CUDA_VISIBLE_DEVICES": ""}, flags).notes if n.startswith("rendezvous endpoint")]
    assert notes == ["rendezvous endpoint n0:1234 from --master-addr and --master-port"], notes
