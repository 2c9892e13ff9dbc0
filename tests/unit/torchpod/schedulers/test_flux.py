"""torchpod.schedulers.flux: Flux (FLUX_JOB_ID, FLUX_JOB_NNODES, FLUX_TASK_RANK). The checks every
detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import flux

from launcher_cases import DetectorCases


class TestFlux(DetectorCases):
    detector = flux
    claims = [
        {'FLUX_JOB_ID': 'f1'},
        {'FLUX_JOB_NNODES': '2'},
        {'FLUX_TASK_RANK': '0'},
    ]
    not_claims = [
        {},
        {'FLUX_URI': 'local:///tmp/f'},
        {'FLUX_TASK_LOCAL_ID': '0'},
    ]
    refused_later = {
        'flux_without_an_endpoint': "resolve's decide_endpoint, with flux.ENDPOINT_HINT",
    }
