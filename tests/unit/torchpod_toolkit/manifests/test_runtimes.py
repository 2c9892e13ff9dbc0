"""torchpod_toolkit.manifests.runtimes: one record per container runtime, in the order the
`--runtime` option lists them; each fetches the image once and runs torchpod on one node as
one argv of quoted words, with exactly the variables it must hand a cleared environment."""

from __future__ import annotations

import pytest

from torchpod_toolkit.manifests import jobs, runtimes
from torchpod_toolkit.manifests.jobspec import JobSpec
from torchpod_toolkit.manifests.shellwords import WORKDIR
from torchpod_toolkit.manifests.spec import check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def _spec(scheduler: str = "slurm", image: str = IMAGE, **change) -> JobSpec:
    return check(JobSpec(scheduler, 2, image, ("train.py", "--lr", "0.1"), **change))


def test_one_record_per_runtime_name_in_its_order():
    assert tuple(runtimes.RUNTIMES) == jobs.RUNTIMES
    assert [r.name for r in runtimes.RUNTIMES.values()] == list(jobs.RUNTIMES)
    assert [name for name, r in runtimes.RUNTIMES.items() if r.pyxis] == ["enroot"]


def test_apptainer_runs_torchpod_in_the_pulled_image_with_the_submit_directory_bound():
    spec = _spec(runtime="apptainer", gpus_per_node=4)
    argv = runtimes.container_command(spec, runtimes.forwarded(spec))
    assert argv[:3] == ["apptainer", "exec", "--nv"]
    assert ["--bind", f'"$PWD:{WORKDIR}"'] == [argv[3], str(argv[4])]
    assert argv[-4:] == ["--", "train.py", "--lr", "0.1"] and "torchpod" in argv


def test_a_runtime_that_clears_the_environment_is_handed_every_name_it_needs():
    spec = _spec("pbs", runtime="podman", gpus_per_node=2, env=("WANDB_MODE=offline",))
    argv = runtimes.container_command(spec, runtimes.forwarded(spec))
    assert argv[:2] == ["env", "WANDB_MODE=offline"]  # the value set on the node, the name handed over
    handed = {argv[i + 1] for i, word in enumerate(argv) if word == "--env"}
    assert {"PBS_NODEFILE", "CUDA_VISIBLE_DEVICES", "WANDB_MODE"} <= handed
    assert set(runtimes.forwarded(spec)) <= handed


def test_docker_under_slurm_takes_the_steps_gpus_and_elsewhere_every_gpu():
    slurm = _spec(runtime="docker", gpus_per_node=4)
    assert runtimes.container_command(slurm, ())[2] == runtimes.DOCKER_STEP_GPUS
    lsf = _spec("lsf", runtime="docker", gpus_per_node=4)
    argv = runtimes.container_command(lsf, ())
    assert argv[2] == runtimes.DOCKER_TASK and ["--gpus", "all"] == argv[argv.index("--gpus"):argv.index("--gpus") + 2]


def test_torchpod_on_the_node_itself_hides_the_gpus_of_a_job_that_holds_none():
    assert runtimes.bare(_spec(runtime="none", gpus_per_node=0), ())[:2] == ["env", "CUDA_VISIBLE_DEVICES="]
    assert runtimes.bare(_spec(runtime="none", gpus_per_node=1), ())[:2] == ["torchpod", "run"]


def test_the_image_is_fetched_once_after_the_bind_guard():
    lines = runtimes.prepare(_spec(runtime="apptainer"), ["srun"])
    assert lines[0].startswith("# every host path bound") and any("apptainer pull" in ln for ln in lines)
    assert runtimes.prepare(_spec(runtime="none"), ["srun"]) == []
    assert any("enroot-rc" in ln for ln in runtimes.prepare(_spec("pbs", runtime="enroot"), ["pbsdsh", "--"]))
    assert not any("enroot-rc" in ln for ln in runtimes.prepare(_spec(runtime="enroot"), ["srun"], pyxis=True))


def test_the_image_file_carries_the_image():
    one, other = _spec(), _spec(image=IMAGE.replace("2.13.0", "2.14.0"))
    assert runtimes.image_file(one, "sif") != runtimes.image_file(other, "sif")
    assert runtimes.image_file(one, "sif").startswith("train-") and runtimes.image_file(one, "sif").endswith(".sif")


def test_the_node_file_is_bound_read_only_where_the_launcher_reads_it():
    spec = _spec("pbs", runtime="apptainer")
    assert runtimes.bound_at_run_time(spec) == ("PWD", "PBS_NODEFILE")
    assert '"$PBS_NODEFILE:$PBS_NODEFILE:ro"' in [str(b) for b in runtimes.binds(spec)]
    assert '"$PBS_NODEFILE:$PBS_NODEFILE"' in [str(b) for b in runtimes.binds(spec, flags=False)]


def test_a_bind_path_that_would_split_the_bind_is_refused(monkeypatch):
    spec = _spec(runtime="apptainer")
    monkeypatch.setattr(JobSpec, "fabric_binds", lambda self: (("/opt/a,b", "/opt/x"),))
    with pytest.raises(ValueError, match=r"bind path '/opt/a,b' -> '/opt/x' reached hpc.py unchecked"):
        runtimes.binds(spec)
