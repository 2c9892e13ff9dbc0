"""Property: for any environment and command line, the resolver either returns a plan
torch's own parser accepts, or raises TorchpodError. Nothing else escapes."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchpod.errors import TorchpodError
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line

from launcher_cases import torch_accepts

_ROOT = Path(tempfile.mkdtemp(prefix="torchpod-prop-"))
(_ROOT / "nodes_ok").write_text("n1\nn1\nn2\n")
(_ROOT / "nodes_empty").write_text("")
(_ROOT / "etc" / "volcano").mkdir(parents=True)
(_ROOT / "etc" / "volcano" / "worker.host").write_text("j-worker-0.j\nj-worker-1.j\n")

NAMES = [
    "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_NNODES",
    "SLURM_NODEID", "SLURM_STEP_ID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE",
    "SLURM_GPUS_PER_NODE", "PBS_JOBID", "PBS_NODEFILE", "VC_TASK_INDEX", "VC_WORKER_HOSTS",
    "VC_WORKER_NUM", "VC_MASTER_HOSTS", "RUNAI_JOB_NAME", "WORLD_SIZE", "RANK", "MASTER_ADDR",
    "MASTER_PORT", "KUBERNETES_SERVICE_HOST", "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR",
    "PET_MASTER_PORT", "PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_RDZV_CONF",
    "PET_MAX_RESTARTS", "PET_NPROC_PER_NODE", "PET_RDZV_ID", "REPLICA_INDEX", "POD_NAME",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK",
    "PMIX_RANK", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "TORCHPOD_SCHEDULER",
    "TORCHPOD_RDZV_PORT", "TORCHPOD_RDZV_TIMEOUT", "JOB_COMPLETION_INDEX", "NPROC_PER_NODE",
    "TORCHELASTIC_RUN_ID", "PBS_NODENUM", "PALS_NODEID", "PALS_LOCAL_RANKID",
]
VALUES = st.one_of(
    st.sampled_from([
        "", "0", "1", "2", "3", "-1", "65536", "1:4", "4:1", "0:2", "a100:4", "4(x2)", "x",
        "n[1-2]", "n[1-", "n1,n2", "n1", "j-worker-0.j,j-worker-1.j", "::1", "[::1]:29400",
        "fd00::2", "10.0.0.1", "host:port", "etcd:2379", "c10d", "static", "etcd-v2", "all",
        "void", "GPU-1,GPU-2", "slurm", "pbs", "volcano", "kubeflow", "runai", "mpi",
        "standalone", "explicit", "bogus", "is_host=true", "join_timeout=", "a=b,c",
        str(_ROOT / "nodes_ok"), str(_ROOT / "nodes_empty"), str(_ROOT / "missing"), "none",
    ]),
    st.text(alphabet="abc019:[],-= .", max_size=8),
)
FLAGS = st.lists(
    st.tuples(
        st.sampled_from([
            "--nnodes", "--node-rank", "--node_rank", "--rdzv-endpoint", "--rdzv-backend",
            "--rdzv-id", "--rdzv-conf", "--max-restarts", "--nproc-per-node", "--local-addr",
            "--master-addr", "--master-port", "--log-dir", "--standalone",
        ]),
        VALUES,
    ),
    max_size=4,
)


REPR = re.compile(r"\b(?:NodeCount|Endpoint|Given|Detection|LaunchPlan|UserOptions|Facts)\(")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=10),
    flags=FLAGS,
    hostname=st.sampled_from(["n1", "n2.example", "j-worker-1", "login", "::1"]),
)
def test_resolver_returns_a_torch_valid_plan_or_a_torchpod_error(env, flags, hostname):
    argv: list[str] = []
    for flag, value in flags:
        argv += [flag] if flag == "--standalone" else [f"{flag}={value}"]
    facts = Facts(hostname=hostname, root=_ROOT, sysfs_root=_ROOT / "sys")
    try:
        plan = resolve(env, facts, split_command_line([*argv, "train.py"]))
    except TorchpodError as exc:
        assert "\n" not in str(exc).strip()
        # values as the user spells them ("2", "1:4", "node0:29400"), never a Python repr
        assert not REPR.search(str(exc)), str(exc)
        return
    torch_accepts(plan.torchrun_args)
    # never a silent world of one when the user or scheduler asked for more
    if plan.scheduler == "standalone":
        assert str(plan.nnodes) == "1"
