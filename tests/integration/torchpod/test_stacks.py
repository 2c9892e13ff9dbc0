"""`torchpod stacks` on a real hang: `torchpod run` starts two gloo ranks through torchrun,
rank 1 stops in a function of its own before the collective and rank 0 waits in the
all-reduce; `torchpod stacks` finds both, and each one's innermost frame of the script is
where it is: rank 1 in its function, rank 0 at the all-reduce line. Nothing is stopped by
it; the launcher ended afterwards keeps the dumps and says where."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

from torchpod_toolkit.kube.plane import free_ports

HUNG = textwrap.dedent("""
    import time
    import torch, torch.distributed as dist

    def load_the_next_batch():
        print("rank 1 stuck", flush=True)
        time.sleep(300)

    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        load_the_next_batch()
    print("rank 0 in all_reduce", flush=True)
    dist.all_reduce(torch.ones(4))
""")
ALL_REDUCE_LINE = 13  # `dist.all_reduce(...)` above, counting the blank first line


def test_stacks_names_where_each_rank_of_a_hung_job_is(tmp_path):
    script = tmp_path / "hung.py"
    script.write_text(HUNG)
    assert script.read_text().splitlines()[ALL_REDUCE_LINE - 1].strip().startswith("dist.all_reduce")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHPOD_", "SLURM_", "PBS_"))}
    env.update(CUDA_VISIBLE_DEVICES="", GLOO_SOCKET_IFNAME="lo", TORCHPOD_RDZV_PORT=str(free_ports(1)[0]),
               TMPDIR=str(tmp_path))
    # a run id of its own: every standalone job on a host takes the id of its host, and other
    # tests' jobs run beside this one
    run_id = f"stacks-{os.getpid()}-{time.monotonic_ns()}"
    run = subprocess.Popen([sys.executable, "-m", "torchpod", "run", "--nproc-per-node", "2", "--rdzv-id", run_id,
                            str(script)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 120
        assert run.stdout is not None
        def both() -> bool:  # each rank's line, whatever another process wrote on it first
            return all(any(said in ln for ln in lines) for said in ("rank 1 stuck", "rank 0 in all_reduce"))

        while time.monotonic() < deadline and not both():
            line = run.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        assert both(), lines
        # this job's workers alone, under the id the launcher says it gave them
        assert [m.group(1) for ln in lines if (m := re.search(r"\(id ([^)]+)\)$", ln))] == [run_id], lines
        time.sleep(0.5)  # rank 0 has entered the collective
        asked = subprocess.run([sys.executable, "-m", "torchpod", "stacks", "--run-id", run_id, "--format", "json"],
                               env=env,
                               capture_output=True, text=True, timeout=60)
        assert asked.returncode == 0, asked.stderr
        found = {r["rank"]: r for r in json.loads(asked.stdout)}
        assert sorted(found) == [0, 1] and all(r["answered"] for r in found.values()), found
        assert found[1]["innermost"].endswith("hung.py:7 in load_the_next_batch"), found[1]
        assert found[0]["innermost"].endswith(f"hung.py:{ALL_REDUCE_LINE} in <module>"), found[0]
        assert "all_reduce" in found[0]["stacks"], found[0]["stacks"]
        assert run.poll() is None  # asking stopped nothing
        text = subprocess.run([sys.executable, "-m", "torchpod", "stacks", "--run-id", run_id], env=env,
                              capture_output=True, text=True, timeout=60).stdout
        assert "rank 1 (local rank 1, pid" in text and f"run {run_id})" in text, text
        other = subprocess.run([sys.executable, "-m", "torchpod", "stacks", "--run-id", "no-such-run"], env=env,
                               capture_output=True, text=True, timeout=60)
        assert other.returncode == 2 and "of run 'no-such-run'" in other.stderr, other.stderr
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
        out = run.communicate(timeout=120)[0]
    kept = [ln for ln in out.splitlines() if "stack dumps are kept in" in ln]
    assert kept, out[-3000:]
    folder = kept[0].rsplit(" ", 1)[-1]
    assert sorted(p.split(".pid-")[0] for p in os.listdir(folder)) == ["rank-0", "rank-1"], os.listdir(folder)
