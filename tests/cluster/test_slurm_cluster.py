"""The generated Slurm script on a real Slurm cluster: slurmctld and two slurmd nodes
(Debian's slurm-wlm 22.05 and munge) in containers built on the image under test. The
script is `sbatch`ed as generated (`--runtime none`: the nodes are the image), real `srun`
starts one launcher per node, and every rank's all-reduce is checked. With
`--requeue-lead`, a job with a two-minute limit is signalled by Slurm's own timer, saves,
requeues itself and finishes with every epoch and every step run exactly once."""

from __future__ import annotations

import os
import re

import first_job
import pytest

from torchpod_toolkit.cluster import runner, slurm
from torchpod_toolkit.manifests import spec as spec_mod
from torchpod_toolkit.manifests import submit as submit_mod
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec

from cluster_helpers import EXAMPLES, LABEL, NODE_ENV, label_value
from paths import ROOT
from tasks_cli import invoke

NODES = 2


IMAGE = "registry.example.com/torchpod/pytorch:2.13.0"  # named in the script's header only (--runtime none)


@pytest.fixture(scope="module")
def slurm_cluster(docker_client, cluster_image, dev_volumes, session_id):
    """One cluster for this module's jobs, as a site runs many jobs on one cluster: each job
    writes under its own job id, and starting slurmctld, two slurmd and munge once instead
    of once per test spares their start each time."""
    label = {LABEL: label_value(session_id)}
    image = slurm.node_image(docker_client, cluster_image)
    with slurm.SlurmCluster(docker_client, image, NODES, label, env=dict(NODE_ENV), volumes=dev_volumes) as cl:
        yield cl.start()
    assert not docker_client.containers.list(all=True, filters={"label": f"{LABEL}={label[LABEL]}"})


def test_generated_sbatch_script_runs_one_launcher_per_node(slurm_cluster, tmp_path, capsys):
    """Submitted as `invoke manifests --submit` does (manifests.submit): the script on real
    sbatch's standard input, run on the cluster's controller as on a login node (a `sbatch`
    on PATH that reaches it by `docker exec`, in the directory every node shares); the job
    id is read from what sbatch printed."""
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(NODES), "--expect-nodes", str(NODES),
             "--report-env", "SLURM_NODEID")
    spec = JobSpec("slurm", NODES, IMAGE, check, name="ddp", gpus_per_node=0, runtime="none", walltime="00:10:00")
    (script,) = render(spec)
    path = tmp_path / script.name
    path.write_text(script.text)
    login = tmp_path / "login" / "sbatch"
    login.parent.mkdir()
    controller = slurm_cluster.containers[slurm.CONTROLLER].name
    login.write_text(f'#!/bin/sh\nexec docker exec -i -w {slurm.SHARED} {controller} sbatch "$@"\n')
    login.chmod(0o755)
    env = {**os.environ, "PATH": f"{login.parent}:{os.environ['PATH']}"}
    assert submit_mod.submit(spec_mod.check(spec), path, env) == 0
    said = capsys.readouterr().out
    found = re.search(r"^submitted: ([0-9]+)$", said, re.MULTILINE)
    assert found and f"watch: squeue -j {found.group(1)}" in said, said
    jobid = found.group(1)
    state = slurm_cluster.wait(jobid, timeout=240)
    out = slurm_cluster.read(f"{slurm.SHARED}/ddp-{jobid}.out")
    assert state == "COMPLETED", f"job {jobid}: {state}\n{out[-6000:]}\n{slurm_cluster.logs()}"
    results = [r for r in runner.parse_results(out) if r["workload"] == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == list(range(NODES)), out[-6000:]
    assert all(r["ok"] and r["world_size"] == NODES and r["nodes"] == NODES for r in results), results
    assert {h for r in results for h in r["hosts"]} == set(slurm.node_names(NODES))
    assert out.count("torchpod: slurm: node ") == NODES, out[-4000:]  # one launcher on each node
    # torch's group rank is the node Slurm numbered (SLURM_NODEID), as the launch line says
    assert all(r["group_rank"] == int(r["env"]["SLURM_NODEID"]) == r["rank"] for r in results), results
    for node in range(NODES):
        assert f"torchpod: slurm: node {node} of {NODES} (group rank {node})," in out, out[-4000:]


# a value srun's --export and Apptainer's --env would split, and a shell would run
NOTE = "a,b c $(id) 'q'"


def _cpus_seen(slurm_cluster, **options) -> list[int]:
    """Render the Slurm job with ``options`` and --env NOTE=..., run it, and return the CPUs
    each rank's affinity mask holds (the nodes bind every task to its CPUs: slurm.slurm_conf,
    task/affinity); every rank must have seen NOTE whole."""
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(NODES), "--expect-nodes", str(NODES),
             "--report-env", "NOTE")
    options = {**options, "env": (f"NOTE={NOTE}",)}
    (script,) = render(JobSpec("slurm", NODES, IMAGE, check, name="cpus", gpus_per_node=0, runtime="none",
                               walltime="00:10:00", **options))
    jobid = slurm_cluster.submit(script.text, script.name)
    state = slurm_cluster.wait(jobid, timeout=240)
    out = slurm_cluster.read(f"{slurm.SHARED}/cpus-{jobid}.out")
    assert state == "COMPLETED", f"job {jobid}: {state}\n{out[-6000:]}\n{slurm_cluster.logs()}"
    results = [r for r in runner.parse_results(out) if r["workload"] == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == list(range(NODES)) and all(r["ok"] for r in results), out[-4000:]
    assert [r["env"] for r in results] == [{"NOTE": NOTE}] * NODES, results  # the job's --env, on every worker
    return [r["cpus"] for r in results]


def test_the_generated_step_runs_on_every_cpu_of_its_node_and_on_what_it_asked_for_with_its_env(slurm_cluster):
    """By default the job holds its nodes (--exclusive) and its step gets every CPU of each;
    given --cpus-per-node 1, the step is bound to one, as srun's default would bind it: so
    the CPUs seen are what the script asked for, not an accident of the nodes."""
    assert slurm_cluster.cpus >= 2, f"the nodes need 2 CPUs or more to tell the cases apart; have {slurm_cluster.cpus}"
    assert _cpus_seen(slurm_cluster) == [slurm_cluster.cpus] * NODES
    assert _cpus_seen(slurm_cluster, cpus_per_node=1, memory_per_node="512Mi") == [1] * NODES


def test_a_job_a_user_submits_runs_as_that_user_and_its_files_stay_theirs(slurm_cluster):
    """Not root: `trainer` (1000:1000 on every node) sbatches the generated script from a
    directory of its own; the job runs, and what it writes there belongs to it."""
    check = (f"{EXAMPLES}/allreduce_check.py", "--expect-world", str(NODES), "--expect-nodes", str(NODES),
             "--report-env", "SLURM_NODEID")
    (script,) = render(JobSpec("slurm", NODES, IMAGE, check,
                               name="ddp", gpus_per_node=0, runtime="none", walltime="00:10:00"))
    jobid = slurm_cluster.submit(script.text, script.name, user="trainer")
    state = slurm_cluster.wait(jobid, timeout=240)
    output = f"{slurm.SHARED}/trainer/ddp-{jobid}.out"
    out = slurm_cluster.read(output)
    assert state == "COMPLETED", f"job {jobid}: {state}\n{out[-6000:]}\n{slurm_cluster.logs()}"
    results = [r for r in runner.parse_results(out) if r["workload"] == "allreduce_check"]
    assert sorted(r["rank"] for r in results) == list(range(NODES)) and all(r["ok"] for r in results), out[-4000:]
    assert re.search(r"\bUserId=trainer\(1000\) GroupId=trainer\(1000\)", slurm_cluster.show_job(jobid))
    assert slurm_cluster.owner(output) == "1000:1000"


# Slurm sends the --signal warning at its first 30 s time-limit check (PERIODIC_TIMEOUT) at most
# LEAD + 30 s before the end (send_job_warn_signal, src/slurmctld/job_mgr.c, slurm-22-05-9-1):
# with a 120 s limit, 31 to 61 s into a run. Training takes longer than that (EPOCHS x
# EPOCH_SECONDS plus the start), so the first run is always signalled mid-training; a resumed
# run that outlasts 31 s may be signalled again, which the assertions allow.
WALLTIME, LEAD = "00:02:00", 59
EPOCHS, EPOCH_SECONDS = 16, 4


# Slurm's timers against the epochs' pace: beside the Kubernetes modules' training jobs the
# epochs slowed until the job reached its limit before the requeue signal (TIMEOUT)
@pytest.mark.solo
def test_job_near_its_time_limit_saves_requeues_and_resumes_every_epoch_once(slurm_cluster):
    snapshot = f"{slurm.SHARED}/requeue-snapshot.pt"
    train = (f"{EXAMPLES}/snapshot_trainer.py", str(EPOCHS), "1", "--snapshot-path", snapshot,
             "--epoch-seconds", str(EPOCH_SECONDS), "--dataset-size", "256")
    (script,) = render(JobSpec("slurm", NODES, IMAGE, train, name="requeue", gpus_per_node=0, runtime="none",
                               walltime=WALLTIME, requeue_lead=LEAD))
    jobid = slurm_cluster.submit(script.text, script.name)
    state = slurm_cluster.wait(jobid, timeout=420)
    out = slurm_cluster.read(f"{slurm.SHARED}/requeue-{jobid}.out")  # every run's output (--open-mode=append)
    job = slurm_cluster.show_job(jobid)
    assert state == "COMPLETED", f"job {jobid}: {state}\n{job}\n{out[-8000:]}\n{slurm_cluster.logs()}"
    restarts = int(re.search(r"\bRestarts=(\d+)", job).group(1))
    assert restarts >= 1, f"never requeued:\n{job}\n{out[-6000:]}"
    # each run that was signalled passed USR1 on and requeued itself; the last run was not signalled
    assert out.count(f"torchpod: job {jobid} got USR1 ahead of its time limit") == restarts, out[-6000:]
    assert out.count(f"torchpod: requeueing job {jobid}") == restarts, out[-6000:]
    # every rank of a signalled run stopped before the same step, at least one on the signal itself
    assert out.count("Stopping before epoch") >= NODES and "on SIGUSR1" in out, out[-6000:]
    assert "Resuming training from snapshot at Epoch" in out
    results = [r for r in runner.parse_results(out) if r["workload"] == "snapshot_trainer"]
    assert len(results) == NODES * (restarts + 1), out[-6000:]  # every rank of every run reported
    final = results[-NODES:]
    assert sorted(r["rank"] for r in final) == list(range(NODES)) and all(r["stopped_at"] is None for r in final)
    for rank in range(NODES):
        mine = [r for r in results if r["rank"] == rank]
        assert mine[-1]["ok"] and mine[-1]["epoch_log"] == list(range(EPOCHS)), mine[-1]  # each epoch once
        # the first run stopped mid-training; a later one signalled as its training ended may not have
        assert mine[0]["stopped_at"] is not None and mine[-1]["stopped_at"] is None, mine
        # each step once: the runs' steps add up to the whole training, no step lost or repeated
        assert sum(r["steps"] for r in mine) == EPOCHS * mine[-1]["steps_per_epoch"], mine


def test_the_slurm_first_job_page_runs_as_written(slurm_cluster, cluster_image, tmp_path):
    """docs/first-job/slurm.md on this cluster (first_job.LOCAL and slurm_render name the
    values replaced): render; `cd job && sbatch train.slurm.sbatch` on the controller, as on a
    login node, from the shared directory every node sees; squeue and the output file while
    it runs; `scontrol show job` says COMPLETED 0:0 and the output holds every rank's
    TORCHPOD_RESULT line; then the same script submitted again and `scancel`ed ends CANCELLED."""
    out = tmp_path / "job"
    render = first_job.slurm_render(cluster_image, "batch", out)
    rendered = invoke(*render[1:])
    assert rendered.returncode == 0, rendered.stderr
    controller = slurm_cluster.containers[slurm.CONTROLLER]
    files = {p.name: (p.read_bytes(), 0o644) for p in out.iterdir()}
    controller.put_archive(slurm.SHARED, slurm._tar({f"job/{name}": data for name, data in files.items()}))
    line = first_job.command(first_job.SLURM, ("cd", "job", "&&", "sbatch"))
    sbatch = line[line.index("&&") + 1:]  # `cd job`: the directory it runs in
    where = f"{slurm.SHARED}/job"

    def run(argv: list[str]) -> str:
        code, raw = controller.exec_run(argv, workdir=where)
        text = raw.decode(errors="replace")
        assert code == 0, f"{argv}: exit {code}: {text}"
        return text

    said = run(sbatch)
    jobid = re.search(r"Submitted batch job ([0-9]+)", said).group(1)
    assert jobid in run(first_job.slurm_step(("squeue", "-j"), jobid))  # queued or running
    state = slurm_cluster.wait(jobid, timeout=300)
    output = slurm_cluster.read(f"{where}/train-{jobid}.out")
    assert state == "COMPLETED", f"{state}\n{output[-6000:]}"
    tail = first_job.slurm_step(("tail", "-f"), jobid)
    assert run([w for w in tail if w != "-f"]).strip()  # followed once, not for ever
    shown = run(first_job.slurm_step(("scontrol", "show", "job"), jobid))
    assert "JobState=COMPLETED" in shown and "ExitCode=0:0" in shown, shown
    lines = run(first_job.slurm_step(("grep",), jobid)).splitlines()
    results = [r for r in runner.parse_results("\n".join(lines)) if r["workload"] == "ddp_resnet"]
    assert sorted(r["rank"] for r in results) == [0, 1] and all(r["ok"] and r["steps"] == 2 for r in results), lines
    again = re.search(r"Submitted batch job ([0-9]+)", run(sbatch)).group(1)
    run(first_job.slurm_step(("scancel",), again))
    assert slurm_cluster.wait(again, timeout=120) == "CANCELLED"


STALL_LINE = (ROOT / "examples" / "allreduce_check.py").read_text().splitlines().index("    time.sleep(seconds)") + 1


def test_a_hung_job_ends_with_its_culprit_named_in_the_jobs_output_and_exit_124(slurm_cluster):
    """Rank 1 stalls before the checked all-reduce (allreduce_check.py --stall-rank 1); with
    a 10 s stall window in the job's environment (the script's --env), the watch names rank 1
    on its Slurm node with its frame in the job's output, every node's launcher ends its
    step with 124, and Slurm records the job as failed with that exit code."""
    check = (f"{EXAMPLES}/allreduce_check.py", "--stall-rank", "1", "--stall-seconds", "600")
    (script,) = render(JobSpec("slurm", NODES, IMAGE, check, name="hang", gpus_per_node=0, runtime="none",
                               walltime="00:10:00", env=("TORCHPOD_STALL_WINDOW=10",)))
    jobid = slurm_cluster.submit(script.text, script.name)
    state = slurm_cluster.wait(jobid, timeout=240)
    out = slurm_cluster.read(f"{slurm.SHARED}/hang-{jobid}.out")
    said = [ln for ln in out.splitlines() if ln.startswith("torchpod: hang: ")]
    assert state == "FAILED" and said, f"job {jobid}: {state}\n{out[-6000:]}\n{slurm_cluster.logs()}"
    # Both nodes' launchers print the verdict into the one output file, and srun interleaves
    # their lines, so each kind of line is checked where it is, once per node.
    summaries = [ln for ln in said if ln.startswith("torchpod: hang: no rank went past")]
    culprits = [ln for ln in said if ln.startswith("torchpod: hang: culprit")]
    assert len(summaries) == len(culprits) == NODES and len(set(summaries)) == 1, said
    assert re.fullmatch(r"torchpod: hang: no rank went past collective (\d+) \(gloo:all_reduce, sizes \[\[1024\]\]\) "
                        r"for 10 s; 1 of 2 ranks wait in it \(ranks 0\)", summaries[0]), said
    seq = int(summaries[0].split("collective ", 1)[1].split(" ")[0])
    host = slurm.node_names(NODES)[1]
    for culprit in culprits:
        assert re.fullmatch(rf"torchpod: hang: culprit rank 1 on {host}: never entered it; last in "
                            rf"collective {seq - 1} \([^)]*\); now in {EXAMPLES}/allreduce_check.py:{STALL_LINE} in "
                            r"stall_before_the_collective", culprit), said
    assert said.count("torchpod: hang: 2 of 2 ranks reported their stacks") == NODES, said  # both nodes said it
    assert "ExitCode=124:0" in slurm_cluster.show_job(jobid), slurm_cluster.show_job(jobid) + out[-5000:]
