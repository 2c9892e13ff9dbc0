"""manifests/kinds/pbs_pals.py: a qsub script whose Cray PALS mpiexec starts one launcher per node."""

from __future__ import annotations

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import pbs_pals

from manifest_cases import job_file


def test_it_starts_one_launcher_per_node_with_mpiexec():
    assert jobs.kind("pbs-pals") is pbs_pals.KIND and pbs_pals.KIND.node_file == "PBS_NODEFILE"
    text = job_file("pbs-pals", 2, queue="workq")
    assert 'mpiexec -n "$NNODES" --ppn 1' in text and "#PBS -q workq" in text and "pbsdsh" not in text
