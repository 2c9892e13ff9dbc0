"""TORCHPOD_PREFLIGHT=1 for real: two `torchpod run` launchers on this machine play two
Slurm nodes; every worker runs torchpod.preflight (gloo) in the job's own torchrun, then
replaces itself with the user's script, which forms its own group on the same store. Two
nodes without a floor cannot be told apart: preflight says so and stops the job unless
TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED=1 accepts it. When one node's doctor fails, no worker
starts the script and both launchers exit 1. Five gloo processes run preflight's pair rounds
with two nodes slow: every rank asks for the same retest rounds and names the same nodes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap

from fabric_cases import FIXTURES, write_node
from paths import ROOT

WORKER = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    with open(os.path.join(sys.argv[1], f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump({"world": dist.get_world_size(), "sum": t.item(), "args": sys.argv[2:],
                   "nccl_algo": os.environ.get("NCCL_ALGO")}, f)
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(tmp_path, node_env: dict[int, dict[str, str]]) -> tuple[list[int], list[str], list[dict]]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_", "SLURM_", "NCCL_"))}
    base.update(CUDA_VISIBLE_DEVICES="", GLOO_SOCKET_IFNAME="lo", TORCHPOD_RDZV_PORT=str(_free_port()),
                TORCHPOD_RDZV_TIMEOUT="60", TORCHPOD_PREFLIGHT="1", SLURM_JOB_ID="pf", SLURM_STEP_ID="0",
                SLURM_JOB_NODELIST="localhost,127.0.0.1", SLURM_NNODES="2", SLURM_STEP_TASKS_PER_NODE="1(x2)")
    procs = []
    for node in (1, 0):
        env = dict(base, SLURM_NODEID=str(node), **node_env.get(node, {}))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "torchpod", "run", "--nproc-per-node", "1", str(script), str(out), "a b", "$HOME"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    results = [json.loads(f.read_text()) for f in sorted(out.glob("rank*.json"))]
    return [p.returncode for p in procs], outputs, results


ACCEPT = {"TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED": "1"}


def test_preflight_passes_then_the_script_runs_in_the_same_job_with_its_arguments_exactly(tmp_path):
    codes, outputs, results = _launch(tmp_path, {0: ACCEPT, 1: ACCEPT})
    assert codes == [0, 0], "\n".join(o[-3000:] for o in outputs)
    text = "\n".join(outputs)
    assert "# torchpod preflight: 2 nodes, gloo" in text and "failing nodes: undecided (accepted)" in text
    assert "warn preflight.undecided: cannot tell which nodes are slow: two nodes" in text
    assert len(results) == 2
    assert all(r["world"] == 2 and r["sum"] == 3.0 and r["args"] == ["a b", "$HOME"] for r in results)
    assert all(r["nccl_algo"] is None for r in results)  # preflight's own setting does not reach the script


def test_two_nodes_without_a_floor_stop_the_job_before_the_script_unless_accepted(tmp_path):
    codes, outputs, results = _launch(tmp_path, {})
    text = "\n".join(outputs)
    assert results == [] and all(code != 0 for code in codes), text[-3000:]
    assert re.findall(r"^failing nodes: (.*)$", text, re.M) == ["undecided"], text[-3000:]
    assert "TORCHPOD_PREFLIGHT_ALLOW_UNDECIDED=1" in text and "(0, 1)" in text


def test_a_failing_node_stops_the_job_before_the_script_and_is_named(tmp_path):
    sysfs, _ = write_node(tmp_path, FIXTURES["roce_bonded_mlx5_ipv4_and_ipv6_both_versions"])
    # node 1 reads a RoCE node's sysfs but has no uverbs device: the doctor fails it
    codes, outputs, results = _launch(tmp_path, {1: {"TORCHPOD_SYSFS_ROOT": str(sysfs)}})
    text = "\n".join(outputs)
    assert results == [], text[-3000:]
    assert all(code != 0 for code in codes), text[-3000:]
    # c10d numbers the nodes in the order they join: the RoCE-sysfs node is 0 or 1, and alone
    failing = re.findall(r"^failing nodes: (.*)$", text, re.M)
    assert failing in (["0"], ["1"]) and "doctor.uverbs.missing" in text


ROUNDS = textwrap.dedent(
    """
    import json
    import torch, torch.distributed as dist
    from torchpod import localise, preflight
    preflight._init_group(dist, "gloo")
    args = preflight.check_options(["--pair-bytes", "64K", "--iters", "2", "--warmup", "1"])
    measured = preflight._time_pair

    def slow_3_and_4(torch, dist, group, *rest):  # both ranks of a pair with node 3 or 4 see it slow
        # the pair's collectives run for real; its figure is fixed, as a fabric's would be:
        # five processes on two loaded cores spread their own measured figures past any rule
        measured(torch, dist, group, *rest)
        return 0.01 if {3, 4} & set(dist.get_process_group_ranks(group)) else 1.0

    preflight._time_pair = slow_3_and_4
    cpu = torch.device("cpu")
    verdict = localise.localise(5, lambda pairs: preflight._round(torch, dist, list(range(5)), pairs, args, cpu))
    print(json.dumps({"slow": verdict.slow, "rounds": [[p for p, _ in r] for r in verdict.rounds]}))
    dist.destroy_process_group()
    """
)


def test_every_rank_runs_the_same_retest_rounds_and_names_the_same_slow_nodes():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_", "NCCL_"))}
    path = os.pathsep.join(p for p in (str(ROOT / "entrypoints"), env.get("PYTHONPATH", "")) if p)
    env.update(PYTHONPATH=path, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="5",
               GLOO_SOCKET_IFNAME="lo", CUDA_VISIBLE_DEVICES="")
    procs = [subprocess.Popen([sys.executable, "-c", ROUNDS], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(5)]
    try:
        outputs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * 5, "\n".join(o[-2000:] for o in outputs)
    said = [json.loads(o.strip().splitlines()[-1]) for o in outputs]
    assert all(s == said[0] for s in said), said
    assert said[0]["slow"] == [3, 4] and len(said[0]["rounds"]) > 3, said[0]  # named after retest rounds
