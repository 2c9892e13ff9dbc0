"""The cluster harness's topologies resolve as the launcher expects, the rendezvous-timeout
message counts arrivals, and restarts get the TCPStore opt-out (launcher fixes found by
tests/cluster)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from torchpod.cluster import topology
from torchpod.resolve import resolve
from torchpod.schedulers.common import Facts
from torchpod.torchrun_flags import split_command_line


def _plan(node, argv=("x.py",), tmp_path=None):
    env = dict(node.env)
    for path, text in node.files:  # PBS_NODEFILE: write it under a temp root
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        env = {k: (str(target) if v == path else v) for k, v in env.items()}
    env = {k: v.replace(topology.IP_OF_NODE0, "10.0.0.10") for k, v in env.items()}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return resolve(env, Facts(hostname=node.hostname), split_command_line(list(argv)))


# Host-network style applies where a scheduler lists names of its own; RunAI, Kubeflow
# master+worker and PBS address nodes by pod IP or hostname, so they are played without.
HOST_NETWORK_CASES = [(s, False) for s in topology.SCENARIOS] + [
    (s, True) for s in topology.SCENARIOS if s not in ("runai", "kubeflow", "pbs")]


@pytest.mark.parametrize("scenario, host_network", HOST_NETWORK_CASES)
def test_every_node_of_a_topology_resolves_to_its_own_index(scenario, host_network, tmp_path):
    topo = topology.build(scenario, 3, "job-1", nproc=(2, 1, 1), host_network=host_network)
    plans = [_plan(n, tmp_path=tmp_path) for n in topo.nodes]
    assert {p.scheduler for p in plans} == {topo.scheduler}
    assert len({p.rdzv_endpoint for p in plans}) == 1 and len({p.rdzv_id for p in plans}) == 1
    assert [p.nproc_per_node for p in plans] == ["2", "1", "1"]
    if scenario != "kubeflow-elastic":
        assert {p.nnodes for p in plans} == {"3"}
    assert [p.node_rank for p in plans] == [0, 1, 2]
    for node, plan in zip(topo.nodes, plans):
        if plan.local_addr is not None:
            assert plan.local_addr in node.names  # what other containers can resolve


def test_topology_rejects_unknown_scheduler_and_bad_counts():
    from torchpod.errors import InputError

    with pytest.raises(InputError, match="expected one of"):
        topology.build("lsf", 2, "j")
    with pytest.raises(InputError, match="one per node"):
        topology.build("slurm", 2, "j", nproc=(1,))


def test_max_restarts_disables_the_shared_store_unless_the_user_set_it():
    env = {"VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "a-worker-0.a,a-worker-1.a", "VC_WORKER_NUM": "2",
           "CUDA_VISIBLE_DEVICES": ""}
    plan = resolve(env, Facts(hostname="a-worker-1"), split_command_line(["--max-restarts", "3", "x.py"]))
    assert dict(plan.env)["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    plan = resolve(env, Facts(hostname="a-worker-1"), split_command_line(["x.py"]))
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in dict(plan.env)
    mine = dict(env, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="0")
    plan = resolve(mine, Facts(hostname="a-worker-1"), split_command_line(["--max-restarts=2", "x.py"]))
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in dict(plan.env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rendezvous_timeout_says_how_many_nodes_came(tmp_path):
    """One node of two starts; torchrun's bare RendezvousTimeoutError becomes one line."""
    script = tmp_path / "w.py"
    script.write_text("print('never')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_"))}
    cmd = [sys.executable, "-m", "torchpod.torchrun", "--nnodes=2", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=localhost:{_free_port()}", "--rdzv-id=t1",
           "--rdzv-conf=join_timeout=3,is_host=true", str(script)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("torchpod: error: rendezvous 't1' timed out after 3 s: expected 2 nodes, 1 arrived"), done.stderr[-2000:]
    assert "Traceback" not in done.stderr, textwrap.shorten(done.stderr, 400)
