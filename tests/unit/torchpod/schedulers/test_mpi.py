"""torchpod.schedulers.mpi: mpirun / mpiexec (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMI_RANK, PMIX_RANK). The
checks every detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import mpi

from launcher_cases import DetectorCases


class TestMpi(DetectorCases):
    detector = mpi
    claims = [
        {'OMPI_COMM_WORLD_SIZE': '2'},
        {'PMI_SIZE': '2'},
        {'PMI_RANK': '0'},
        {'PMIX_RANK': '0'},
    ]
    not_claims = [
        {},
        {'OMPI_COMM_WORLD_LOCAL_SIZE': '1'},
        {'MASTER_ADDR': 'm'},
    ]
    refused_later = {
        'mpi_without_master':
            'the rendezvous endpoint is decided after detection (resolve.decide_endpoint)',
    }
