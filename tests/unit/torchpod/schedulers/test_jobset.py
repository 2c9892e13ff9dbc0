"""torchpod.schedulers.jobset: JobSet used directly (its labels passed by the downward API,
JOB_COMPLETION_INDEX). The checks every detector runs (launcher_cases.DetectorCases) take this
file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import jobset

from launcher_cases import DetectorCases


class TestJobset(DetectorCases):
    detector = jobset
    claims = [
        {'JOBSET_NAME': 'js'},
        {'GLOBAL_REPLICAS': '2'},
        {'JOB_GLOBAL_INDEX': '0'},
        {'JOB_COMPLETION_INDEX': '0'},
    ]
    not_claims = [
        {},
        # an Indexed Job described by the env:// variables stays with the env convention
        {'JOB_COMPLETION_INDEX': '1', 'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '1'},
        {'REPLICA_INDEX': '0'},
    ]
