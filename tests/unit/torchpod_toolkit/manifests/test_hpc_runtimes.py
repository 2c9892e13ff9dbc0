"""Every generated HPC script (scheduler x container runtime), run by bash under stand-ins that
do what the real fan-outs and runtimes do (tests/manifest_stubs.py: environment cleared by
enroot, docker and podman; the MoM's environment for pbsdsh's tasks; GPUs as each runtime
exposes them, inside or outside the job's device cgroup; pbsdsh's exit status 0), with the
environment each batch system gives a job, as its documentation and source say:

- Slurm (srun(1), sbatch(1) OUTPUT ENVIRONMENT VARIABLES, Slurm 22.05): SLURM_JOB_ID,
  SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES; a job holding GPUs on a site with
  ConstrainDevices=yes: SLURM_JOB_GPUS (global ids), and per task SLURM_STEP_GPUS and
  CUDA_VISIBLE_DEVICES relative to the task's device cgroup.
- OpenPBS (cd7ab5e): PBS_JOBID, PBS_NODEFILE, PBS_O_WORKDIR, PBS_ENVIRONMENT; its cgroups hook
  (src/hooks/cgroups/pbs_cgroups.PY) sets CUDA_VISIBLE_DEVICES to the GPUs' UUIDs.
- LSF 10.1: LSB_JOBID, LSB_DJOB_HOSTFILE, LSB_MCPU_HOSTS; CUDA_VISIBLE_DEVICES the job's GPUs
  by global id, no device cgroup.

What torchpod sees on each node is then judged by the launcher's own code: its scheduler
detection (torchpod.schedulers: the node's rank among every node of the job) and the GPUs
CUDA would give it (the runtime's enumerated GPUs, filtered by the CUDA_VISIBLE_DEVICES it
sees, as the CUDA runtime does). Every node must see its batch system and exactly the GPUs
the job holds (none for a job that asked for none), and a node whose launcher fails must
fail the job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import choose, lsf, pbs, slurm
from torchpod.schedulers.common import Facts
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.runtimes import image_file
from torchpod_toolkit.manifests.spec import HPC, RUNTIMES, JobSpec

import manifest_stubs as stubs
from launcher_cases import user_options

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
NODES = ("n0", "n1")
BATCH = [s for s in HPC if s != "skypilot"]  # SkyPilot starts its own containers on every node
COMBOS = [(s, r) for s in BATCH for r in jobs.kind(s).runtimes or RUNTIMES]
DETECTOR = {"slurm": slurm, "pbs": pbs, "pbs-pals": pbs, "lsf": lsf}
HANG_GUARD = 30


def job_environment(scheduler: str, gpus: bool, work: Path, nodefile: Path) -> dict[str, str]:
    """What the batch system puts in the job script's environment (module docstring)."""
    model = {"STUB_NODE_GPUS": stubs.NODE_GPUS}
    held = stubs.JOB_GPUS.split(",")
    if scheduler == "slurm":
        env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "train", "SLURM_JOB_NODELIST": "n[0-1]",
               "SLURM_JOB_NUM_NODES": str(len(NODES)), "SLURM_NNODES": str(len(NODES)), "SLURM_SUBMIT_DIR": str(work)}
        if gpus:
            env.update(SLURM_JOB_GPUS=stubs.JOB_GPUS)
    elif scheduler in ("pbs", "pbs-pals"):
        env = {"PBS_JOBID": "7.pbs", "PBS_JOBNAME": "train", "PBS_QUEUE": "workq", "PBS_O_WORKDIR": str(work),
               "PBS_NODEFILE": str(nodefile), "PBS_ENVIRONMENT": "PBS_BATCH", "PBS_O_HOME": str(work.parent / "home")}
        if gpus:
            env.update(CUDA_VISIBLE_DEVICES=",".join(f"GPU-{g}" for g in held), CUDA_DEVICE_ORDER="PCI_BUS_ID")
        model["STUB_CGROUP_GPUS"] = stubs.JOB_GPUS if gpus else ""  # the batch shell is in the job's cgroup
    else:
        env = {"LSB_JOBID": "7", "LSB_DJOB_HOSTFILE": str(nodefile),
               "LSB_MCPU_HOSTS": " ".join(f"{h} 1" for h in NODES)}
        if gpus:
            env.update(CUDA_VISIBLE_DEVICES=stubs.JOB_GPUS)
        model["STUB_CGROUP_GPUS"] = stubs.NODE_GPUS
    if gpus:
        model["STUB_JOB_GPUS"] = stubs.JOB_GPUS
    return {**env, **model}


def prepare_job(spec: JobSpec, tmp: Path, **extra: str) -> tuple[Path, Path, Path, Path, dict[str, str]]:
    """The job's folders, stubs, node file and rendered script under ``tmp``: (script, log,
    nodefile, submit directory, the environment the batch host gives the script)."""
    (out,) = render(spec)
    for name in ("bin", "home", "job", "work"):
        (tmp / name).mkdir()
    log = tmp / "calls.log"
    stubs.install(tmp / "bin", log)
    nodefile = tmp / "job" / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in NODES))
    script = tmp / "job" / "job.sh"
    script.write_text(out.text)
    work = Path(stubs.realpath(tmp / "work"))
    job = {**job_environment(spec.scheduler, spec.gpus_per_node > 0, work, nodefile), **extra}
    return script, log, nodefile, work, stubs.job_env(tmp / "bin", log, HOME=str(tmp / "home"), LC_ALL="C.UTF-8",
                                                      **job)


def run(spec: JobSpec, tmp: Path, **extra: str) -> tuple[subprocess.CompletedProcess, list[stubs.Call], Path]:
    """Run the rendered script as the batch host would; the process, the calls, the nodefile."""
    script, log, nodefile, work, env = prepare_job(spec, tmp, **extra)
    try:
        proc = subprocess.run(["/bin/bash", str(script)], cwd=work, env=env, capture_output=True, text=True,
                              timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job script ran past {HANG_GUARD} s")
    return proc, stubs.read_log(log), nodefile


def environments(calls: list[stubs.Call]) -> list[dict[str, str]]:
    """torchpod's environment on each node, in node order."""
    return [dict(field.split("=", 1) for field in c.args) for c in calls if c.name == stubs.ENVIRON_RECORD]


def visible_gpus(env: dict[str, str]) -> list[str]:
    """The host GPU ids CUDA gives this process: what its runtime exposed (enumerated in host
    order), narrowed by CUDA_VISIBLE_DEVICES as the CUDA runtime reads it: indices into the
    enumerated list or GPU UUIDs, up to the first entry that names no GPU; empty hides all."""
    enumerated = [g for g in env.get("STUB_GPUS_ENUMERATED", "").split(",") if g]
    wanted = env.get("CUDA_VISIBLE_DEVICES")
    if wanted is None:
        return enumerated
    out: list[str] = []
    for entry in (e.strip() for e in wanted.split(",")):
        if entry.isdigit() and int(entry) < len(enumerated):
            out.append(enumerated[int(entry)])
        elif entry.startswith("GPU-") and entry[4:] in enumerated:
            out.append(entry[4:])
        else:
            break
    return out


def detected(scheduler: str, env: dict[str, str], node: int, nodefile: Path) -> tuple[str, int, int]:
    """(scheduler, node rank, node count) the launcher's detection gives on node ``node``."""
    user = user_options(env)
    module, _ = choose(env, user)
    if module is not DETECTOR[scheduler]:
        return module.NAME, -1, -1
    det = module.detect(env, Facts(hostname=NODES[node], root=Path("/"), sysfs_root=nodefile.parent / "sys"), user)
    return module.NAME, det.node_rank, det.nnodes.lo


@pytest.mark.parametrize("gpus", [0, 4], ids=["no-gpu", "4-gpus"])
@pytest.mark.parametrize("scheduler,runtime", COMBOS)
def test_every_node_sees_its_scheduler_and_exactly_the_jobs_gpus(scheduler, runtime, gpus, tmp_path):
    spec = JobSpec(scheduler=scheduler, runtime=runtime, nodes=len(NODES), image=IMAGE, command=("train.py",),
                   gpus_per_node=gpus)
    proc, calls, nodefile = run(spec, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr, calls)
    assert stubs.ERROR not in {c.name for c in calls} and stubs.NOT_FOUND not in {c.name for c in calls}, calls
    envs = environments(calls)
    assert len(envs) == len(NODES), f"torchpod ran on {len(envs)} of {len(NODES)} nodes: {calls}"
    held = stubs.JOB_GPUS.split(",") if gpus else []
    for node, env in enumerate(envs):
        try:
            found = detected(scheduler, env, node, nodefile)
        except InputError as exc:
            pytest.fail(f"node {node}: torchpod refused its environment: {exc}")
        assert found == (DETECTOR[scheduler].NAME, node, len(NODES)), \
            f"node {node} saw {found}; its environment: {sorted(env)}"
        assert visible_gpus(env) == held, (node, env.get("STUB_GPUS_ENUMERATED"), env.get("CUDA_VISIBLE_DEVICES"))


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
def test_a_node_whose_launcher_fails_fails_the_job(scheduler, runtime, tmp_path):
    spec = JobSpec(scheduler=scheduler, runtime=runtime, nodes=len(NODES), image=IMAGE, command=("train.py",))
    proc, calls, _ = run(spec, tmp_path, STUB_FAIL_NODE="1")
    assert proc.returncode != 0, (proc.stdout, proc.stderr, calls)
    assert len(environments(calls)) == len(NODES), calls  # the other node ran


@pytest.mark.parametrize("scheduler", BATCH)
def test_an_import_killed_half_way_is_never_reused(scheduler, tmp_path):
    spec = JobSpec(scheduler=scheduler, runtime="enroot", nodes=len(NODES), image=IMAGE, command=("train.py",))
    proc, calls, _ = run(spec, tmp_path, STUB_KILL_IMPORT="1")
    assert proc.returncode != 0 and not environments(calls), (proc.stderr, calls)
    made = sorted(p.name for p in (tmp_path / "work").iterdir())
    assert image_file(spec, "sqsh") not in made, f"a truncated image is left where the next run takes it: {made}"


def test_docker_under_slurm_without_the_steps_gpu_ids_stops_with_one_line_per_node(tmp_path):
    # a site whose gres.conf does not list the GPUs gives the step no SLURM_STEP_GPUS: docker
    # would otherwise be handed every GPU of the node
    spec = JobSpec(scheduler="slurm", runtime="docker", nodes=len(NODES), image=IMAGE, command=("train.py",),
                   gpus_per_node=4)
    proc, calls, _ = run(spec, tmp_path, STUB_JOB_GPUS="")
    err = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and not environments(calls), (proc.returncode, calls)
    # one line from each node's task, as srun shows them
    assert len(err) == len(NODES) and all("SLURM_STEP_GPUS: is not set: Slurm gave this step no GPU ids" in e
                                          for e in err), err


@pytest.mark.parametrize("site", [{"STUB_PYXIS_EXECUTE_ENTRYPOINT": "1"}, {"PYXIS_CONTAINER_ENTRYPOINT": "1"}],
                         ids=["plugstack-execute_entrypoint", "PYXIS_CONTAINER_ENTRYPOINT"])
def test_pyxis_never_runs_the_images_entrypoint_whatever_the_site_default(site, tmp_path):
    spec = JobSpec(scheduler="slurm", runtime="enroot", nodes=len(NODES), image=IMAGE, command=("train.py",))
    proc, calls, _ = run(spec, tmp_path, **site)
    assert proc.returncode == 0 and len(environments(calls)) == len(NODES), (proc.stderr, calls)


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
def test_every_script_names_the_paths_every_node_must_see(scheduler, runtime):
    (out,) = render(JobSpec(scheduler=scheduler, runtime=runtime, nodes=2, image=IMAGE, command=("train.py",)))
    (shared,) = [ln for ln in out.text.splitlines() if ln.startswith("# Shared: ")]
    assert "the submit directory" in shared
    wanted = {"apptainer": "SIF", "enroot": "squashfs"}.get(runtime)
    assert wanted is None or wanted in shared, shared
    node_file = {"pbs": "$PBS_NODEFILE", "pbs-pals": "$PBS_NODEFILE", "lsf": "$LSB_DJOB_HOSTFILE"}.get(scheduler)
    assert node_file is None or runtime == "none" or node_file in shared, shared
    assert ("pbsdsh" in shared) == (scheduler == "pbs"), shared


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("scheduler", [s for s in BATCH if "docker" in (jobs.kind(s).runtimes or RUNTIMES)])
def test_cancelling_a_docker_job_stops_its_containers(scheduler, tmp_path):
    # scancel, qdel and bkill send TERM to the job's processes before SIGKILL; dockerd's
    # container is not one of them, and its client going away leaves it running
    spec = JobSpec(scheduler=scheduler, runtime="docker", nodes=len(NODES), image=IMAGE, command=("train.py",),
                   gpus_per_node=4)
    script, log, _, work, env = prepare_job(spec, tmp_path, STUB_DOCKER_BLOCK="1")
    proc = subprocess.Popen(["/bin/bash", str(script)], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not environments(stubs.read_log(log)):  # the first node's container is training
            assert time.monotonic() < deadline and proc.poll() is None, stubs.read_log(log)
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=HANG_GUARD)
        while _group_alive(proc.pid):  # as the batch system waits for every process of the job
            assert time.monotonic() < deadline, "the job's processes outlived the grace period"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    boxes = {p.name: p.read_text() for p in (tmp_path / "bin").glob("container-*")}
    assert boxes and set(boxes.values()) == {"removed"}, boxes
    stopped = [c.args[0] for c in stubs.read_log(log) if c.name == "container-stopped"]
    assert stopped == [name.removeprefix("container-") for name in boxes], (stopped, boxes)
    assert all(name.startswith("container-torchpod-7") for name in boxes), boxes  # named for the job


# values the shell, a runtime's own flag parser (Apptainer's --env and srun's --export split
# on ','), or a comment would take apart: each must reach torchpod whole
USER_ENV = ("NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5_0,mlx5_1", "NOTE=two words $(id) `id` 'q' \"d\"", "EMPTY=")


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
def test_the_jobs_env_reaches_torchpod_on_every_node_exactly(scheduler, runtime, tmp_path):
    spec = JobSpec(scheduler=scheduler, runtime=runtime, nodes=len(NODES), image=IMAGE, command=("train.py",),
                   env=USER_ENV)
    proc, calls, nodefile = run(spec, tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr, calls)
    envs = environments(calls)
    assert len(envs) == len(NODES), calls
    want = dict(item.split("=", 1) for item in USER_ENV)
    for node, env in enumerate(envs):
        assert {k: env.get(k) for k in want} == want, (node, {k: env.get(k) for k in want})
        assert detected(scheduler, env, node, nodefile)[1:] == (node, len(NODES))  # detection as without them


@pytest.mark.parametrize("runtime, verb", [("apptainer", "pull"), ("enroot", "import")])
def test_a_job_re_rendered_for_another_image_fetches_that_image(runtime, verb, tmp_path):
    """The image file carries the image (runtimes.image_file): a job rendered for a new tag, run in
    the submit directory where the old tag's file lies, fetches the new image and runs it;
    the same image again reuses its file."""
    def fetched(calls: list[stubs.Call]) -> list[str]:
        return [a for c in calls if c.name == runtime and c.args[:1] == (verb,) for a in c.args
                if a.startswith("docker://")]

    old = JobSpec(scheduler="slurm", runtime=runtime, nodes=len(NODES), image=IMAGE, command=("train.py",))
    new = JobSpec(scheduler="slurm", runtime=runtime, nodes=len(NODES), image=IMAGE.replace("2.13.0", "2.14.1"),
                  command=("train.py",))
    script, log, _, work, env = prepare_job(old, tmp_path)

    def submit(spec: JobSpec) -> list[stubs.Call]:
        before = len(stubs.read_log(log))
        (out,) = render(spec)
        script.write_text(out.text)
        proc = subprocess.run(["/bin/bash", str(script)], cwd=work, env=env, capture_output=True, text=True,
                              timeout=HANG_GUARD)
        assert proc.returncode == 0, proc.stderr
        return stubs.read_log(log)[before:]

    assert [u.endswith("2.13.0-cuda13.0") for u in fetched(submit(old))] == [True]
    assert [u.endswith("2.14.1-cuda13.0") for u in fetched(submit(new))] == [True]  # not the old file
    assert fetched(submit(old)) == []  # its own file, still there
    assert len([p for p in work.iterdir() if p.suffix in (".sif", ".sqsh")]) == 2


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
def test_an_image_whose_entrypoint_is_not_torchpod_runs_torchpod_on_every_node(scheduler, runtime, tmp_path):
    """An image of the user's own, whose ENTRYPOINT is a banner script that runs its words
    (NGC's nvidia_entrypoint.sh, stubs' ngc-entrypoint): every runtime names torchpod itself
    (apptainer exec, docker/podman --entrypoint, enroot start --rc, pyxis without the
    entrypoint), so each node's launcher starts with the words the job gave it."""
    spec = JobSpec(scheduler=scheduler, runtime=runtime, nodes=len(NODES), image=IMAGE, command=("train.py",),
                   gpus_per_node=4)
    proc, calls, nodefile = run(spec, tmp_path, STUB_IMAGE_ENTRYPOINT="ngc-entrypoint")
    assert proc.returncode == 0 and stubs.ERROR not in {c.name for c in calls}, (proc.returncode, proc.stderr, calls)
    started = [c for c in calls if c.name == "torchpod"]
    assert len(started) == len(NODES) and all(c.args[:2] == ("run", "--") for c in started), calls
    for node, env in enumerate(environments(calls)):
        assert detected(scheduler, env, node, nodefile) == (DETECTOR[scheduler].NAME, node, len(NODES))


def test_the_old_words_would_have_gone_to_a_foreign_entrypoint(tmp_path):
    """The stand-in is as strict as the image: words meant for a torchpod ENTRYPOINT (`run --
    ...`), handed to the banner script, fail. So the test above fails if a runtime left
    torchpod to the image's ENTRYPOINT."""
    bindir, log = tmp_path / "bin", tmp_path / "calls.log"
    stubs.install(bindir, log)
    proc = subprocess.run([str(bindir / "ngc-entrypoint"), "run", "--", "train.py"], capture_output=True, text=True,
                          env={"PATH": str(bindir)}, timeout=HANG_GUARD)
    assert proc.returncode == 127 and "run: command not found" in proc.stderr, proc.stderr
