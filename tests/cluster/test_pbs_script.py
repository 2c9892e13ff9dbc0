"""The generated PBS scripts start one launcher per node, and the nodes form one group.

PBS has no Debian package, so the job script itself runs on this host with stand-ins for
the two fan-out tools, each doing what the real one does with the script's arguments:
``pbsdsh`` starts one task per PBS_NODEFILE line on that line's host (openpbs
src/tools/pbsdsh.c, no per-host option), ``mpiexec -n N --ppn 1`` (Cray PALS) one rank on
each of the first N hosts. A "host" is a container of the default image playing the node,
with the variables PBS/PALS set (PBS_NODEFILE, PBS_NODENUM, PALS_NODEID) from the harness
model; the script's `--runtime none` command runs there through `docker exec`. The submit
directory is shared with every node (bind-mounted at the same path), as a job's is on a
cluster: the pbsdsh script's tasks write their exit statuses there. Like the real pbsdsh,
the stand-in exits 0 whatever its tasks did, so the script's own check decides.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from torchpod_toolkit.cluster import runner, topology
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from cluster_helpers import EXAMPLES, LABEL, NODE_ENV

PBSDSH = r"""#!/bin/bash
# pbsdsh stand-in: one task per PBS_NODEFILE line, on that line's host (a container)
[ "$1" = "--" ] && shift
pids=()
while read -r host; do
  c=$(awk -v h="$host" '$1 == h {print $2}' "$TP_HOSTS")
  [ -n "$c" ] || { echo "pbsdsh stand-in: no container for $host" >&2; exit 3; }
  docker exec "$c" "$@" & pids+=($!)
done < "$PBS_NODEFILE"
for p in "${pids[@]}"; do wait "$p" || echo "pbsdsh: task exit status $?"; done; exit 0
"""

MPIEXEC = r"""#!/bin/bash
# Cray PALS mpiexec stand-in: -n N --ppn 1 starts one rank on each of the first N hosts
n=""; ppn=""
while [ $# -gt 0 ]; do
  case "$1" in -n) n=$2; shift 2 ;; --ppn) ppn=$2; shift 2 ;; *) break ;; esac
done
[ "$ppn" = 1 ] || { echo "mpiexec stand-in: only --ppn 1 is modelled, got '$ppn'" >&2; exit 3; }
pids=()
for host in $(awk '!seen[$0]++' "$PBS_NODEFILE" | head -n "$n"); do
  c=$(awk -v h="$host" '$1 == h {print $2}' "$TP_HOSTS")
  docker exec "$c" "$@" & pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done; exit $rc
"""


@pytest.mark.parametrize("scheduler", ["pbs", "pbs-pals"])
def test_generated_pbs_script_runs_one_launcher_per_node(scheduler, tmp_path, docker_client, cluster_image,
                                                         test_label):
    docker = shutil.which("docker")
    assert docker, "the docker CLI runs the stand-ins' `docker exec`"
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", "2", "--expect-nodes", "2")
    (script,) = render(JobSpec(scheduler, 2, "registry.example.com/torchpod/pytorch:2.13.0", check,
                               name="ddp", gpus_per_node=0, runtime="none"))
    topo = topology.build(scheduler, 2, f"pbs-{test_label[LABEL][:6]}", pbs_slots=1)  # mpiprocs=1
    work = tmp_path / "work"  # the submit directory every node sees
    work.mkdir()
    with runner.Cluster(docker_client, cluster_image, topo, ["infinity"], test_label, entrypoint=["sleep"],
                        env=dict(NODE_ENV), volumes={str(work): {"bind": str(work), "mode": "rw"}}) as cl:
        cl.start()
        hosts = tmp_path / "hosts"
        hosts.write_text("".join(f"{n.names[0]} {run.container.name}\n" for n, run in zip(topo.nodes, cl.nodes)))
        (path, text), = topo.nodes[0].files
        nodefile = tmp_path / "nodefile"
        nodefile.write_text(text)
        bindir = tmp_path / "bin"
        bindir.mkdir()
        for name, body in (("pbsdsh", PBSDSH), ("mpiexec", MPIEXEC)):
            (bindir / name).write_text(body)
            (bindir / name).chmod(0o755)
        job = tmp_path / script.name
        job.write_text(script.text)
        # the script hands its PATH to pbsdsh's tasks: the nodes' software (the image's venv) is on it,
        # as a cluster's shared stack is on every node's
        env = {"PATH": f"{bindir}:{os.path.dirname(docker)}:/opt/venv/bin:/usr/bin:/bin", "TP_HOSTS": str(hosts),
               "PBS_NODEFILE": str(nodefile), "PBS_O_WORKDIR": str(work),
               "PBS_JOBID": dict(topo.nodes[0].env)["PBS_JOBID"]}
        done = subprocess.run(["bash", str(job)], cwd=work, env=env, capture_output=True, text=True, timeout=240)
    runner.sweep(docker_client, LABEL, test_label[LABEL])
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    results = [r for r in runner.parse_results(done.stdout) if r["workload"] == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == [0, 1], out[-6000:]
    assert all(r["ok"] and r["world_size"] == 2 and r["nodes"] == 2 for r in results), results
    assert out.count("torchpod: pbs: node ") == 2, out[-4000:]  # one launcher on each node
