"""torchpod_toolkit.manifests.resources: every kind asks for CPUs and memory for each node's
launcher and workers, the whole node by default where the job holds it alone, and a size is
refused in one line unless it is a whole number of Mi, Gi or Ti."""

from __future__ import annotations

import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, podtemplate, resources
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import KUBE, JobSpec, check

from manifest_cases import IMAGE


@pytest.mark.parametrize("text, mi", [("256Mi", 256), ("1536Mi", 1536), ("64Gi", 65536), ("2Ti", 2 * 1024 * 1024),
                                      ("64Ti", 64 * 1024 * 1024)])
def test_a_size_is_a_whole_number_of_a_binary_unit(text, mi):
    assert resources.parse_memory("--memory-per-node", text) == mi


@pytest.mark.parametrize("text", ["8G", "8GB", "8gi", "1.5Gi", "0Gi", "08Gi", "-1Gi", "8 Gi", "8Gi\n", "\uff18Gi",
                                  "255Mi", "65Ti", "", "Gi", "9" * 40 + "Gi", 8, None])
def test_any_other_size_is_one_line_naming_the_option(text):
    with pytest.raises(InputError) as exc:
        resources.parse_memory("--memory-per-node", text)
    message = str(exc.value)
    assert message.startswith("--memory-per-node=") and "Mi, Gi or Ti" in message and message.isprintable()


@pytest.mark.parametrize("mi, kube_q, slurm, pbs, lsf, sky", [
    (1536, "1536Mi", "1536M", "1536mb", "1536MB", "1.5+"),
    (65536, "64Gi", "64G", "64gb", "64GB", "64+"),
    (2 * 1024 * 1024, "2Ti", "2T", "2tb", "2TB", "2048+"),
])
def test_each_target_spells_the_same_size_in_its_own_units(mi, kube_q, slurm, pbs, lsf, sky):
    assert (resources.kube_quantity(mi), resources.slurm_size(mi), resources.pbs_size(mi), resources.lsf_size(mi),
            resources.skypilot_gb(mi)) == (kube_q, slurm, pbs, lsf, sky)


@pytest.mark.parametrize("gpus, cpus, memory, want", [
    (8, 0, "", (64, 256 * 1024, True)),
    (0, 0, "", (4, 16 * 1024, True)),
    (4, 24, "", (24, 128 * 1024, False)),
    (4, 0, "96Gi", (32, 96 * 1024, True)),
])
def test_defaults_are_sized_from_the_gpus(gpus, cpus, memory, want):
    node = resources.per_node(gpus, cpus, memory)
    assert (node.cpus, node.memory_mi, node.whole_node) == want


def _text(**fields) -> str:
    (out, *_) = render(JobSpec(fields.pop("scheduler"), 2, IMAGE, ("train.py",), **fields))
    return out.text


def test_slurm_holds_the_whole_node_by_default_and_its_step_gets_every_cpu():
    text = _text(scheduler="slurm", gpus_per_node=8)
    assert "#SBATCH --exclusive\n#SBATCH --mem=0\n" in text
    assert "--cpus-per-task" not in text  # a step without --exact gets all the job's CPUs on each node


def test_slurm_cpus_given_are_asked_for_by_the_job_and_again_by_its_step():
    text = _text(scheduler="slurm", gpus_per_node=8, cpus_per_node=48, memory_per_node="400Gi")
    assert "#SBATCH --cpus-per-task=48\n#SBATCH --mem=400G\n" in text and "--exclusive" not in text
    assert "\nsrun --ntasks-per-node=1 --kill-on-bad-exit=1 --cpus-per-task=48 " in text
    # CPUs without memory: the memory is sized from the GPUs, not the node's whole
    assert "#SBATCH --mem=256G\n" in _text(scheduler="slurm", gpus_per_node=8, cpus_per_node=48)
    assert "#SBATCH --exclusive\n#SBATCH --mem=1T\n" in _text(scheduler="slurm", memory_per_node="1Ti")


@pytest.mark.parametrize("scheduler", ["pbs", "pbs-pals"])
def test_pbs_chunks_ask_for_cpus_and_memory_never_one_cpu_and_no_mem(scheduler):
    assert "#PBS -l select=2:ncpus=64:mem=256gb:mpiprocs=1:ngpus=8\n" in _text(scheduler=scheduler)
    assert "#PBS -l select=2:ncpus=4:mem=16gb:mpiprocs=1\n" in _text(scheduler=scheduler, gpus_per_node=0)
    assert "#PBS -l select=2:ncpus=72:mem=1536mb:mpiprocs=1:ngpus=1\n" in _text(
        scheduler=scheduler, gpus_per_node=1, cpus_per_node=72, memory_per_node="1536Mi")


def test_lsf_holds_whole_hosts_by_default_else_binds_the_cores_and_reserves_the_memory():
    assert '#BSUB -R "span[ptile=1]"\n#BSUB -x\n' in _text(scheduler="lsf")
    assert '#BSUB -R "span[ptile=1] rusage[mem=300GB]"\n#BSUB -x\n' in _text(scheduler="lsf", memory_per_node="300Gi")
    text = _text(scheduler="lsf", cpus_per_node=16)
    assert '#BSUB -R "span[ptile=1] affinity[core(16)] rusage[mem=256GB]"\n' in text and "#BSUB -x" not in text


def test_skypilot_asks_for_at_least_the_cpus_and_memory():
    task = yaml.safe_load(_text(scheduler="skypilot", runtime="none", gpus_per_node=0, cpus_per_node=6))
    assert (task["resources"]["cpus"], task["resources"]["memory"]) == ("6+", "16+")


@pytest.mark.parametrize("scheduler", KUBE)
@pytest.mark.parametrize("gpus", [0, 8])
def test_every_pod_requests_and_is_limited_to_cpus_and_memory_never_best_effort(scheduler, gpus):
    spec = check(JobSpec(scheduler, 2, IMAGE, ("train.py",), gpus_per_node=gpus))
    asked = podtemplate.container(spec)["resources"]
    want = {"cpu": str(max(gpus * 8, 4)), "memory": f"{max(gpus * 32, 16)}Gi"}
    assert asked["requests"] == asked["limits"] and {k: asked["requests"][k] for k in want} == want


def test_runai_cli_asks_for_the_same_cpus_and_memory_as_its_pytorchjob():
    argv = kube.runai_command(check(JobSpec("runai", 2, IMAGE, ("t.py",), cpus_per_node=12, memory_per_node="96Gi")))
    i = argv.index("--cpu-core-request")
    assert argv[i:i + 8] == ["--cpu-core-request", "12", "--cpu-core-limit", "12", "--cpu-memory-request", "96Gi",
                             "--cpu-memory-limit", "96Gi"]


@pytest.mark.parametrize("gpus, memory, shm", [(8, "64Gi", "64Gi"), (0, "1Gi", "2Gi")])
def test_a_pod_memory_at_or_under_its_memory_backed_shm_is_refused(gpus, memory, shm):
    with pytest.raises(InputError, match=rf"^--memory-per-node={memory} with a {shm} /dev/shm: .*expected more than"):
        check(JobSpec("volcano", 2, IMAGE, ("t.py",), gpus_per_node=gpus, memory_per_node=memory))
    # an HPC job mounts no memory-backed /dev/shm of its own: the same size is taken there
    assert check(JobSpec("slurm", 2, IMAGE, ("t.py",), gpus_per_node=gpus, memory_per_node=memory))


@pytest.mark.parametrize("cpus", ["-1", "4097", "2.5", "1e3", "\uff12", "four"])
def test_cpus_per_node_outside_its_range_is_one_line(cpus):
    with pytest.raises(InputError, match=r"^--cpus-per-node="):
        check(JobSpec("slurm", 2, IMAGE, ("t.py",), cpus_per_node=cpus))  # type: ignore[arg-type]
