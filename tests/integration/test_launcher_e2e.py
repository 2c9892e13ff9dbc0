"""End to end: two `torchpod run` launchers on this machine play two nodes of a PBS or
Slurm job, each resolves its own node, torchrun rendezvous over c10d, and a gloo
all_reduce across both proves the group really formed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

WORKER = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
    with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "sum": t.item(),
                   "group_rank": int(os.environ["GROUP_RANK"]), "arg": sys.argv[2]}, f)
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scheduler_env(kind: str, node: int, tmp_path) -> dict[str, str]:
    names = ["localhost", "127.0.0.1"]
    if kind == "pbs":
        nodefile = tmp_path / "nodefile"
        nodefile.write_text("".join(f"{n}\n{n}\n" for n in names))  # two slots per node
        return {"PBS_JOBID": "e2e.pbs", "PBS_NODEFILE": str(nodefile), "TORCHPOD_HOSTNAME": names[node]}
    return {
        "SLURM_JOB_ID": "e2e",
        "SLURM_STEP_ID": "0",
        "SLURM_JOB_NODELIST": ",".join(names),
        "SLURM_NNODES": "2",
        "SLURM_NODEID": str(node),
        "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
    }


@pytest.mark.parametrize("kind", ["pbs", "slurm"])
def test_two_launchers_form_one_gloo_group(kind, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_", "SLURM_", "PBS_"))}
    base.update(
        CUDA_VISIBLE_DEVICES="",
        GLOO_SOCKET_IFNAME="lo",
        TORCHPOD_RDZV_PORT=str(_free_port()),
        TORCHPOD_RDZV_TIMEOUT="60",
    )
    procs = []
    for node in (1, 0):  # the non-host node first: it must wait for the store, not fail
        env = dict(base, **_scheduler_env(kind, node, tmp_path))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "torchpod", "run", str(script), str(out), "x y"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        ))
    try:
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, text in zip(procs, outputs):
        assert p.returncode == 0, text[-3000:]
    results = sorted((json.loads(f.read_text()) for f in out.glob("rank*.json")), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world"] == 2 and r["sum"] == 3.0 and r["arg"] == "x y" for r in results)
    assert {r["group_rank"] for r in results} == {0, 1}
    assert f"torchpod: {kind}: node 1 of 2" in outputs[0]
