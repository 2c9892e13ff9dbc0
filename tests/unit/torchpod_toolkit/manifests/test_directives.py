"""torchpod_toolkit.manifests.directives: the #SBATCH, #PBS and #BSUB lines of a batch script,
and the user's own --directive lines, refused in one line where one would set what the
script already sets."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import directives
from torchpod_toolkit.manifests.spec import JobSpec, check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def _spec(scheduler: str, **change) -> JobSpec:
    return check(JobSpec(scheduler, 2, IMAGE, ("train.py",), **change))


def test_slurm_takes_whole_nodes_by_default_and_the_cpus_asked_for_otherwise():
    lines = directives.slurm(_spec("slurm", gpus_per_node=4))
    assert lines[:4] == ["#SBATCH --job-name=train", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                         "#SBATCH --exclusive"]
    assert "#SBATCH --mem=0" in lines and "#SBATCH --gpus-per-node=4" in lines
    assert "#SBATCH --cpus-per-task=12" in directives.slurm(_spec("slurm", cpus_per_node=12))


def test_pbs_asks_one_chunk_per_node_and_scatters_them():
    lines = directives.pbs(_spec("pbs", gpus_per_node=4))
    assert lines[0] == "#PBS -N train" and lines[1].startswith("#PBS -l select=2:ncpus=")
    assert lines[1].endswith(":mpiprocs=1:ngpus=4") and "#PBS -l place=scatter:excl" in lines


@pytest.mark.parametrize("walltime, minutes", [("01:00:00", "1:00"), ("00:59:01", "1:00"), ("00:00:01", "0:01")])
def test_lsf_rounds_the_time_limit_up_to_a_minute(walltime, minutes):
    assert f"#BSUB -W {minutes}" in directives.lsf(_spec("lsf", walltime=walltime))


def test_a_users_directive_is_added_after_torchpods_own():
    lines = directives.slurm(_spec("slurm", directive=("--mail-type=END",)))
    assert lines[-1] == "#SBATCH --mail-type=END"
    assert directives.pbs(_spec("pbs", directive=("-l filesystems=home",)))[-1] == "#PBS -l filesystems=home"


@pytest.mark.parametrize("scheduler, directive, needle", [
    ("slurm", "-t 60", "sets --time, which this script sets itself"),
    ("slurm", "--nodes=4", "sets --nodes, which this script sets itself"),
    ("pbs", "-l walltime=1:00:00", "sets -l walltime, which this script sets itself"),
    ("lsf", "-n 4", "sets -n, which this script sets itself"),
])
def test_a_directive_that_fights_the_scripts_own_is_one_line(scheduler, directive, needle):
    with pytest.raises(InputError) as err:
        directives.passthrough(_spec(scheduler, directive=(directive,)), *{
            "slurm": ("#SBATCH", directives.slurm(_spec(scheduler)), directives.SBATCH_SHORT),
            "pbs": ("#PBS", directives.pbs(_spec(scheduler)), {}, directives.PBS_OWN_RESOURCES),
            "lsf": ("#BSUB", directives.lsf(_spec(scheduler)), {})}[scheduler])
    assert needle in str(err.value) and "\n" not in str(err.value)
